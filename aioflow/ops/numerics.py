"""Counting non-finite values: ``count_not_finite`` over one or several arrays (OneFlow's
``count_not_finite`` / ``multi_count_not_finite``, used to check gradients for NaN and
infinity)."""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .registry import register


def _infer_count(*arrays):
    for i, blob in enumerate(arrays):
        if not blob.dtype.is_floating:
            raise TypeError(f"count_not_finite: x[{i}] must be floating point, got "
                            f"{blob.dtype.name}")
    return [((1,), dtypes.int64)]


@register("count_not_finite", infer=_infer_count, differentiable=False)
def count_not_finite_op(ctx, *arrays):
    """The number of NaN and infinite elements of all ``arrays``, int64 of shape (1,)."""
    xp = ctx.xp
    total = xp.zeros((1,), dtype=np.int64)
    for a in arrays:
        total = total + (~xp.isfinite(a)).sum(dtype=np.int64)
    return total


__all__ = ["count_not_finite_op"]
