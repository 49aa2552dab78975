"""``flow.train``: OneFlow's home of ``CheckPoint``; aioflow adds the non-finite guard's
report (``skipped_steps``, ``NonFiniteStepWarning``)."""
from .checkpoint import CheckPoint
from .step_guard import NonFiniteStepWarning, skipped_steps

__all__ = ["CheckPoint", "NonFiniteStepWarning", "skipped_steps"]
