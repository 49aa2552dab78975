"""``flow.combined_margin_loss``: the combined angular margin of ArcFace (m2), CosFace
(m3) and SphereFace (m1) on cosine logits.

For each row ``i`` with label ``l``, ``y[i, l] = cos(m1 * acos(x[i, l]) + m2) - m3``; the
other entries are ``x``'s. Feed it the cosines between normalized embeddings and class
weights (values in [-1, 1]) and follow it with a scaled softmax cross entropy.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((1, 3)),
...         label: tp.Numpy.Placeholder((1,), dtype=flow.int32)) -> tp.Numpy:
...     return flow.combined_margin_loss(x, label, m2=0.5)
>>> np.round(job(np.array([[0.5, 0.8, -0.1]], np.float32), np.array([1], np.int32)), 4)
array([[ 0.5   ,  0.4144, -0.1   ]], dtype=float32)
"""
from __future__ import annotations

from .ops_api import _require_blob
from ..ops import margin as _margin

__all__ = ["combined_margin_loss"]


def combined_margin_loss(x, label, m1=1, m2=0, m3=0, name=None):
    """``x`` (batch, classes) with the margin applied at each row's ``label``; the
    gradient is OneFlow's: ``m1 sin(m1 theta + m2) / sin(theta)`` at the label entries
    (so ``x`` must stay inside (-1, 1) there), 1 elsewhere."""
    _require_blob(x, "combined_margin_loss", "x")
    _require_blob(label, "combined_margin_loss", "label")
    y, _theta = _margin.combined_margin_loss_op(x, label, m1=float(m1), m2=float(m2),
                                                m3=float(m3), name=name)
    return y
