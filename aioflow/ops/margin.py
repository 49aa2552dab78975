"""``combined_margin_loss``: ArcFace / CosFace / SphereFace margins on cosine logits.

For each row, the entry of the row's label becomes ``cos(m1 * theta + m2) - m3`` with
``theta = acos(x)``; the other entries pass through. The op also returns ``theta`` per
row (0 for a label outside the row), which its gradient reuses, as OneFlow's kernel does.
"""
from __future__ import annotations

import numpy as np

from .registry import register, require_float
from .scatter import require_indices


def _infer_margin(x, label, *, m1, m2, m3):
    require_float("combined_margin_loss", x)
    require_indices("combined_margin_loss", label, "label")
    if x.ndim < 2 or label.shape != (x.shape[0],):
        raise ValueError(f"combined_margin_loss: x must be (batch, classes, ...) and label "
                         f"(batch,), got x {x.shape} and label {label.shape}")
    return [(x.shape, x.dtype), ((x.shape[0],), x.dtype)]


def _label_mask(xp, x2d, label):
    return xp.arange(x2d.shape[1])[None, :] == label.astype(np.int64)[:, None]


@register("combined_margin_loss", infer=_infer_margin)
def combined_margin_loss_op(ctx, x, label, *, m1, m2, m3):
    xp = ctx.xp
    t = x.dtype.type
    rows = x.reshape((x.shape[0], -1))
    hit = _label_mask(xp, rows, label)
    picked = xp.where(hit, rows, t(0)).sum(axis=1)               # x at the label, per row
    theta = xp.where(hit.any(axis=1), xp.arccos(picked), t(0)).astype(x.dtype)
    margin = (xp.cos(theta * t(m1) + t(m2)) - t(m3)).astype(x.dtype)
    y = xp.where(hit, margin[:, None], rows).astype(x.dtype)
    return y.reshape(x.shape), theta


def _infer_margin_grad(gy, label, theta, *, m1, m2):
    return [(gy.shape, gy.dtype)]


@register("combined_margin_loss_grad", infer=_infer_margin_grad, differentiable=False)
def combined_margin_loss_grad(ctx, gy, label, theta, *, m1, m2):
    xp = ctx.xp
    t = gy.dtype.type
    rows = gy.reshape((gy.shape[0], -1))
    hit = _label_mask(xp, rows, label)
    # d cos(m1 acos(x) + m2) / dx = m1 sin(m1 theta + m2) / sin(theta)
    factor = (xp.sin(theta * t(m1) + t(m2)) * t(m1) / xp.sin(theta)).astype(gy.dtype)
    return xp.where(hit, rows * factor[:, None], rows).astype(gy.dtype).reshape(gy.shape)


@combined_margin_loss_op.grad
def _margin_grad(node, gy, g_theta):
    x, label = node.inputs
    if gy is None:
        return [None, None]
    theta = node.outputs[1]
    return [combined_margin_loss_grad(gy, label, theta, m1=node.attrs["m1"],
                                      m2=node.attrs["m2"]), None]


__all__ = ["combined_margin_loss_op"]
