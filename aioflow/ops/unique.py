"""OneFlow's experimental ``unique_with_counts`` and ``indexed_slices_reduce_sum``.

Both have outputs of data-dependent length: as in OneFlow, each output keeps the input's
static length and only its first ``num_unique`` entries are valid (the rest are zeros);
``num_unique`` (shape (1,)) says how many. The unique values come in order of first
appearance (OneFlow's order came from its hash table: its tests sort before comparing).
The kernels run on the host, where ``numpy.unique`` does the work.
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .registry import register
from .scatter import require_indices


def _host(ctx, array):
    return array if isinstance(array, np.ndarray) else ctx.backend.to_host(array)


def _first_appearance(flat: np.ndarray):
    """(unique values in order of first appearance, each element's position among them,
    each unique value's count)."""
    values, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                               return_counts=True)
    order = np.argsort(first, kind="stable")
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    return values[order], position[inverse.reshape(-1)], counts[order]


def _infer_unique(x, *, out_idx):
    if x.ndim != 1:
        raise ValueError(f"unique_with_counts: x must be 1-d, got shape {x.shape}")
    if out_idx.numpy.kind not in "iu":
        raise TypeError(f"unique_with_counts: out_idx must be an integer dtype, got "
                        f"{out_idx.name}")
    return [(x.shape, x.dtype), (x.shape, out_idx), (x.shape, out_idx), ((1,), out_idx)]


@register("unique_with_counts", infer=_infer_unique, differentiable=False)
def unique_with_counts_op(ctx, x, *, out_idx):
    """(y, idx, count, num_unique): ``y[idx] == x``; ``count[i]`` occurrences of ``y[i]``."""
    host = _host(ctx, x)
    values, position, counts = _first_appearance(host)
    index_type = out_idx.numpy
    y = np.zeros_like(host)
    y[:values.size] = values
    count = np.zeros(host.shape, index_type)
    count[:values.size] = counts
    xp = ctx.xp
    return (xp.asarray(y), xp.asarray(position.astype(index_type)), xp.asarray(count),
            xp.asarray(np.array([values.size], index_type)))


def _infer_reduce_sum(indices, values):
    require_indices("indexed_slices_reduce_sum", indices, "indices")
    if indices.ndim >= values.ndim or values.shape[:indices.ndim] != indices.shape:
        raise ValueError("indexed_slices_reduce_sum: values must have the shape of indices "
                         f"followed by the slice's, got indices {indices.shape} and values "
                         f"{values.shape}")
    n = indices.size
    width = int(np.prod(values.shape[indices.ndim:], dtype=np.int64))
    return [((n,), indices.dtype), ((n, width), values.dtype), ((1,), dtypes.int64)]


@register("indexed_slices_reduce_sum", infer=_infer_reduce_sum, differentiable=False)
def indexed_slices_reduce_sum_op(ctx, indices, values):
    """(unique indices, the sum of the value slices of each, num_unique)."""
    flat_indices = _host(ctx, indices).reshape(-1)
    slices = _host(ctx, values).reshape(flat_indices.size, -1)
    keys, position, _ = _first_appearance(flat_indices)
    out_indices = np.zeros_like(flat_indices)
    out_indices[:keys.size] = keys
    sums = np.zeros_like(slices)
    np.add.at(sums, position, slices)
    xp = ctx.xp
    return (xp.asarray(out_indices), xp.asarray(sums),
            xp.asarray(np.array([keys.size], np.int64)))


__all__ = ["unique_with_counts_op", "indexed_slices_reduce_sum_op"]
