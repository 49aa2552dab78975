"""Scattering ops: scatter_nd, tensor_scatter_nd_add/update, unsorted_segment_sum and
slice_update, each with its gradient (a gather of the output's gradient).

As OneFlow's kernels do, every scatter *adds* at repeated indices, ``tensor_scatter_nd_update``
included (it zeroes the indexed slices of ``params``, then adds the updates into them).
An index outside the output (a segment id outside ``[0, num_segments)``, an nd-index out
of range) is dropped: a device cannot raise from inside a step.
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..ir import Blob
from .registry import register
from .elementwise import zeros_like
from .indexing import gather_op
from .shape import slice_op

_INDEX_DTYPES = (dtypes.int32, dtypes.int64, dtypes.int8, dtypes.uint8)


def require_indices(op_name: str, blob: Blob, arg: str) -> None:
    if blob.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{op_name}: {arg} must be an integer Blob, got {blob.dtype.name}")


def check_nd_updates(op_name: str, out_shape, indices: Blob, updates: Blob) -> None:
    """``updates`` must be shaped ``indices.shape[:-1] + out_shape[k:]``, k = indices'
    last axis."""
    require_indices(op_name, indices, "indices")
    k = indices.shape[-1] if indices.ndim else 0
    if not 1 <= k <= len(out_shape):
        raise ValueError(f"{op_name}: the last axis of indices ({k}) must be between 1 and "
                         f"the rank of the output ({len(out_shape)})")
    want = indices.shape[:-1] + tuple(out_shape[k:])
    if updates.shape != want:
        raise ValueError(f"{op_name}: updates must have shape {want} (indices.shape[:-1] + "
                         f"shape[{k}:]), got {updates.shape}")


def _rows(xp, indices, dims):
    """Linear positions (int64) of ``indices[..., :]`` among the rows of ``dims``, and
    which of them lie inside."""
    k = len(dims)
    idx = indices.reshape(-1, k).astype(np.int64)
    # Column by column with Python ints, not against arrays of the dims and strides: a
    # device would copy those from the host at every step, which a CUDA graph's capture
    # refuses.
    strides = np.cumprod((tuple(dims[1:]) + (1,))[::-1])[::-1]
    valid = xp.ones(idx.shape[0], dtype=bool)
    linear = xp.zeros(idx.shape[0], dtype=np.int64)
    for column, (dim, stride) in enumerate(zip(dims, strides)):
        valid &= (idx[:, column] >= 0) & (idx[:, column] < int(dim))
        linear += idx[:, column] * int(stride)
    return linear, valid


def _scatter_add(xp, base, indices, updates, *, zero_first=False):
    """``base`` (a fresh array, changed in place) with ``updates`` added at ``indices``."""
    k = indices.shape[-1]
    rows = base.reshape((int(np.prod(base.shape[:k], dtype=np.int64)), -1))
    flat, valid = _rows(xp, indices, base.shape[:k])
    flat = flat[valid]
    values = updates.reshape((-1, rows.shape[1]))[valid]
    if zero_first:
        rows[flat] = 0
    xp.add.at(rows, flat, values)
    return base


def _infer_gather_rows(source, indices):
    k = indices.shape[-1]
    return [(indices.shape[:-1] + source.shape[k:], source.dtype)]


@register("gather_nd_rows", infer=_infer_gather_rows, differentiable=False)
def gather_nd_rows(ctx, source, indices):
    """``source[indices[..., :]]``, zeros for an index outside ``source``: the adjoint
    of the scatters above (an update that was dropped gets no gradient)."""
    xp = ctx.xp
    k = indices.shape[-1]
    rows = source.reshape((int(np.prod(source.shape[:k], dtype=np.int64)), -1))
    flat, valid = _rows(xp, indices, source.shape[:k])
    picked = rows[xp.where(valid, flat, 0)] * valid[:, None].astype(source.dtype)
    return picked.reshape(indices.shape[:-1] + source.shape[k:])


# -- scatter_nd ---------------------------------------------------------------------------


def _infer_scatter_nd(indices, updates, *, shape):
    check_nd_updates("scatter_nd", shape, indices, updates)
    return [(tuple(shape), updates.dtype)]


@register("scatter_nd", infer=_infer_scatter_nd)
def scatter_nd_op(ctx, indices, updates, *, shape):
    return _scatter_add(ctx.xp, ctx.xp.zeros(shape, updates.dtype), indices, updates)


@scatter_nd_op.grad
def _scatter_nd_grad(node, gy):
    return [None, gather_nd_rows(gy, node.inputs[0])]


def _infer_tensor_scatter(op_name):
    def infer(params, indices, updates):
        check_nd_updates(op_name, params.shape, indices, updates)
        if updates.dtype is not params.dtype:
            raise TypeError(f"{op_name}: updates ({updates.dtype.name}) must have params' "
                            f"dtype ({params.dtype.name})")
        return [(params.shape, params.dtype)]
    return infer


@register("tensor_scatter_nd_add", infer=_infer_tensor_scatter("tensor_scatter_nd_add"))
def tensor_scatter_nd_add_op(ctx, params, indices, updates):
    return _scatter_add(ctx.xp, params.copy(), indices, updates)


@tensor_scatter_nd_add_op.grad
def _tensor_scatter_add_grad(node, gy):
    return [gy, None, gather_nd_rows(gy, node.inputs[1])]


@register("tensor_scatter_nd_update", infer=_infer_tensor_scatter("tensor_scatter_nd_update"))
def tensor_scatter_nd_update_op(ctx, params, indices, updates):
    return _scatter_add(ctx.xp, params.copy(), indices, updates, zero_first=True)


@tensor_scatter_nd_update_op.grad
def _tensor_scatter_update_grad(node, gy):
    # The replaced slices of params get no gradient; each update gets the output's.
    params, indices, updates = node.inputs
    return [tensor_scatter_nd_update_op(gy, indices, zeros_like(updates)), None,
            gather_nd_rows(gy, indices)]


# -- unsorted_segment_sum -----------------------------------------------------------------


def _infer_segment_sum(data, segment_ids, *, axis, num_segments):
    require_indices("unsorted_segment_sum", segment_ids, "segment_ids")
    span = data.shape[axis:axis + segment_ids.ndim]
    if span != segment_ids.shape:
        raise ValueError(f"unsorted_segment_sum: segment_ids of shape {segment_ids.shape} "
                         f"must match data's axes from {axis} on, got data {data.shape}")
    tail = data.shape[axis + segment_ids.ndim:]
    return [(data.shape[:axis] + (num_segments,) + tail, data.dtype)]


@register("unsorted_segment_sum", infer=_infer_segment_sum)
def unsorted_segment_sum_op(ctx, data, segment_ids, *, axis, num_segments):
    """``out[..., s, ...]`` = the sum of the slices of ``data`` whose id is ``s``."""
    xp = ctx.xp
    lead, n = data.shape[:axis], segment_ids.size
    rows = xp.moveaxis(data.reshape(lead + (n, -1)), axis, 0)     # (n, *lead, rest)
    ids = segment_ids.reshape(-1).astype(np.int64)
    valid = (ids >= 0) & (ids < num_segments)
    out = xp.zeros((num_segments,) + rows.shape[1:], data.dtype)
    xp.add.at(out, ids[valid], rows[valid])
    tail = data.shape[axis + segment_ids.ndim:]
    return xp.ascontiguousarray(xp.moveaxis(out, 0, axis)).reshape(
        lead + (num_segments,) + tail)


@unsorted_segment_sum_op.grad
def _segment_sum_grad(node, gy):
    # Each slice of data received exactly its segment's gradient (zeros if dropped).
    return [gather_op(gy, node.inputs[1], axis=node.attrs["axis"]), None]


# -- slice_update -------------------------------------------------------------------------


def _infer_slice_update(x, update, *, index):
    want = np.empty(x.shape, dtype=np.bool_)[index].shape
    if update.shape != want:
        raise ValueError(f"slice_update: update must have the slice's shape {want}, got "
                         f"{update.shape}")
    if update.dtype is not x.dtype:
        raise TypeError(f"slice_update: update ({update.dtype.name}) must have x's dtype "
                        f"({x.dtype.name})")
    return [(x.shape, x.dtype)]


@register("slice_update", infer=_infer_slice_update)
def slice_update_op(ctx, x, update, *, index):
    out = x.copy()
    out[index] = update
    return out


@slice_update_op.grad
def _slice_update_grad(node, gy):
    index = node.attrs["index"]
    return [slice_update_op(gy, zeros_like(node.inputs[1]), index=index),
            slice_op(gy, index=index)]


__all__ = ["scatter_nd_op", "tensor_scatter_nd_add_op", "tensor_scatter_nd_update_op",
           "unsorted_segment_sum_op", "slice_update_op"]
