"""The names OneFlow gives the variables it creates itself, which checkpoints carry.

>>> train_step_name("fit")
'System-Train-TrainStep-fit'
"""
from __future__ import annotations

__all__ = ["train_step_name"]


def train_step_name(job_name: str) -> str:
    """The step counter of the train job ``job_name`` (OneFlow's ``System-Train-TrainStep``)."""
    return f"System-Train-TrainStep-{job_name}"
