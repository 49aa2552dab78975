"""``flow.train``: OneFlow's home of ``CheckPoint`` and ``SimpleCheckPointManager``; aioflow
adds the non-finite guard's report (``skipped_steps``, ``NonFiniteStepWarning``)."""
from .checkpoint import CheckPoint
from .checkpoint.manager import SimpleCheckPointManager
from .engine.step_guard import NonFiniteStepWarning, skipped_steps

__all__ = ["CheckPoint", "SimpleCheckPointManager", "NonFiniteStepWarning", "skipped_steps"]
