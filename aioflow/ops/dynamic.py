"""Ops whose result has a data-dependent size: argwhere.

Shapes are static in aioflow's plans (every buffer is sized when the job is compiled), so
such an op returns OneFlow's *static maximum* blob plus the size: ``argwhere`` gives an
``(x.size, x.ndim)`` array whose first ``count`` rows are the indices of the nonzero
elements (row-major order) and whose other rows are -1, and ``count`` as a ``(1,)``
array. :mod:`aioflow.engine.dynamic_shapes` ties the two together so a job returning the blob
hands back only the valid rows, as OneFlow's dynamic blob does.
"""
from __future__ import annotations

from .._core import dtypes
from .registry import register


def _infer_argwhere(x, *, dtype):
    return [((x.size, x.ndim), dtype), ((1,), dtype)]


@register("argwhere", infer=_infer_argwhere, differentiable=False)
def argwhere_op(ctx, x, *, dtype):
    xp = ctx.xp
    np_dtype = dtypes.as_numpy(dtype)
    found = xp.argwhere(x != 0).astype(np_dtype)
    out = xp.full((x.size, x.ndim), -1, dtype=np_dtype)
    out[:found.shape[0]] = found
    return out, xp.asarray([found.shape[0]], dtype=np_dtype)


__all__ = ["argwhere_op"]
