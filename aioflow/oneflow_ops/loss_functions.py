"""OneFlow v0.3.4's loss functions with PyTorch's names (``flow.nn.MSELoss``, ...), and
``flow.smooth_l1_loss``. Despite the class-like names they are functions applied to Blobs,
as in OneFlow: ``loss = flow.nn.MSELoss(prediction, target, reduction="mean")``.

``reduction`` is ``"none"`` (the elementwise or per-sample loss), ``"mean"`` or ``"sum"``;
built from primitive ops, so every loss is differentiable in its inputs.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 2)), y: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
...     return flow.nn.MSELoss(x, y, reduction="sum")
>>> job(np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32))
array([4.], dtype=float32)
"""
from __future__ import annotations

from ..ir import Blob
from . import math_api as math
from .dynamic_api import where

__all__ = ["MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss",
           "MarginRankingLoss", "TripletMarginLoss", "smooth_l1_loss"]

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction, op_name, name):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op_name}: reduction must be one of {_REDUCTIONS}, got "
                         f"{reduction!r}")
    if reduction == "mean":
        return math.reduce_mean(loss, name=name)
    if reduction == "sum":
        return math.reduce_sum(loss, name=name)
    return loss if name is None else math._identity(loss, name)


def _check(op_name, **blobs):
    shapes = {k: v.shape for k, v in blobs.items() if v is not None}
    for k, v in blobs.items():
        if v is not None and not isinstance(v, Blob):
            raise TypeError(f"{op_name}: {k} must be a Blob, got {type(v).__name__}")
    first = next(iter(shapes.values()))
    if any(s != first for s in shapes.values()):
        raise ValueError(f"{op_name}: inputs must have one shape, got {shapes}")


def MSELoss(input, target, reduction="mean", name=None):  # noqa: N802,A002 - OneFlow's names
    """``(input - target) ** 2``, reduced."""
    _check("MSELoss", input=input, target=target)
    return _reduce(math.square(input - target), reduction, "MSELoss", name)


def L1Loss(input, target, reduction="mean", name=None):  # noqa: N802,A002
    """``|input - target|``, reduced."""
    _check("L1Loss", input=input, target=target)
    return _reduce(math.abs(input - target), reduction, "L1Loss", name)


def _clamped_log(x):
    """``max(log(x), -100)``, and -100 at 0 (log is never taken of 0)."""
    positive = math.greater(x, 0.0)
    logged = math.maximum(math.log(where(positive, x, 1.0)), -100.0)
    return where(positive, logged, -100.0)


def BCELoss(input, target, weight=None, reduction="mean", name=None):  # noqa: N802,A002
    """``-weight * (t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``input``; each
    log is clamped at -100 (as PyTorch) so a probability of exactly 0 or 1 stays finite."""
    _check("BCELoss", input=input, target=target)
    log_x, log_1mx = _clamped_log(input), _clamped_log(1.0 - input)
    loss = -(target * log_x + (1.0 - target) * log_1mx)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "BCELoss", name)


def BCEWithLogitsLoss(input, target, weight=None, pos_weight=None, reduction="mean",  # noqa: N802,A002
                      name=None):
    """``BCELoss(sigmoid(input), target)`` computed from the logits without overflow:
    ``weight * (pos_weight * t * softplus(-x) + (1 - t) * softplus(x))``."""
    _check("BCEWithLogitsLoss", input=input, target=target)
    positive = target if pos_weight is None else target * pos_weight
    loss = positive * math.softplus(-input) + (1.0 - target) * math.softplus(input)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "BCEWithLogitsLoss", name)


def KLDivLoss(input, target, log_target=False, reduction="mean", name=None):  # noqa: N802,A002
    """``target * (log(target) - input)`` for log-probabilities ``input`` (0 where target
    is 0); with ``log_target`` the target is given as log-probabilities too."""
    _check("KLDivLoss", input=input, target=target)
    if log_target:
        loss = math.exp(target) * (target - input)
    else:
        loss = math.xlogy(target, target) - target * input
    return _reduce(loss, reduction, "KLDivLoss", name)


def MarginRankingLoss(input1, input2, target, margin=0.0, reduction="mean",  # noqa: N802
                      name=None):
    """``max(0, -target * (input1 - input2) + margin)`` (``target`` is 1 or -1).

    ``input1`` and ``input2`` have one shape; ``target`` only needs to broadcast against it
    (a ``(batch, 1)`` column of labels, say), as OneFlow's, whose loss has the broadcast
    shape."""
    _check("MarginRankingLoss", input1=input1, input2=input2)
    _check("MarginRankingLoss", target=target)
    loss = math.maximum(-target * (input1 - input2) + float(margin), 0.0)
    return _reduce(loss, reduction, "MarginRankingLoss", name)


def _distance(a, b, p, eps):
    diff = math.abs(a - b + eps)
    return math.pow(math.reduce_sum(math.pow(diff, float(p)), axis=-1), 1.0 / p)


def TripletMarginLoss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,  # noqa: N802
                      swap=False, reduction="mean", name=None):
    """``max(d(a, p) - d(a, n) + margin, 0)`` per sample, ``d`` the ``p``-norm distance
    over the last axis (``eps`` added to the difference, as PyTorch); ``swap`` uses
    ``min(d(a, n), d(p, n))``."""
    _check("TripletMarginLoss", anchor=anchor, positive=positive, negative=negative)
    if not p > 0:
        raise ValueError(f"TripletMarginLoss: p must be positive, got {p!r}")
    d_pos = _distance(anchor, positive, p, eps)
    d_neg = _distance(anchor, negative, p, eps)
    if swap:
        d_neg = math.minimum(d_neg, _distance(positive, negative, p, eps))
    loss = math.maximum(d_pos - d_neg + float(margin), 0.0)
    return _reduce(loss, reduction, "TripletMarginLoss", name)


def smooth_l1_loss(prediction, label, beta=1.0, name=None):
    """Elementwise ``0.5 * d ** 2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``
    (``d = prediction - label``; no reduction, as OneFlow's). ``beta`` may be 0, as in
    OneFlow: then the loss is ``|d|``, the L1 loss."""
    _check("smooth_l1_loss", prediction=prediction, label=label)
    if not beta >= 0:
        raise ValueError(f"smooth_l1_loss: beta must be at least 0, got {beta!r}")
    d = math.abs(prediction - label)
    if beta == 0:   # no quadratic part left (and no division by 0 to build it)
        return d if name is None else math._identity(d, name)
    small = math.less(d, float(beta))
    return where(small, math.square(d) * (0.5 / beta), d - 0.5 * beta, name=name)
