"""``flow.losses.add_loss`` (OneFlow's older API): declare a train job's loss.

This module only re-exports; ``add_loss`` lives in :mod:`aioflow.oneflow_ops.losses_api`.
"""

from .oneflow_ops.losses_api import (
    add_loss as add_loss,
)

__all__ = [
    "add_loss",
]
