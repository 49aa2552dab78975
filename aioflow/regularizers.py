"""``flow.regularizers``: penalties added to a train job's loss for a layer's variables
(``l1``, ``l2``, ``l1_l2``).

This module only re-exports; the definitions live in
:mod:`aioflow.oneflow_ops.regularizers_api`.
"""

from .oneflow_ops.regularizers_api import (
    Regularizer as Regularizer,
    l1 as l1,
    l2 as l2,
    l1_l2 as l1_l2,
)

__all__ = [
    "Regularizer",
    "l1",
    "l2",
    "l1_l2",
]
