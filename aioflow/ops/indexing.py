"""Index-driven ops: gather, one_hot, pad, sorting (argsort, take_along_axis), tril,
reverse, and the reductions that have no gradient (all, any) or a special one (prod).

Gradients that scatter (gather's, take_along_axis's) accumulate with ``xp.add.at``, so
repeated indices add up; numpy, CuPy and the strict backend all have it (gather's on the
host through :func:`add_rows`, the same additions faster). A compiled plan may keep
gather's gradient table from step to step (:class:`RowsBuffer`,
``aioflow/compiler/gradient_buffers.py``).
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..ir import Blob
from .reduce import reduced_shape
from .row_updates import each_row_once
from .registry import register
from .shape import slice_op

_INDEX_DTYPES = (dtypes.int32, dtypes.int64, dtypes.int8, dtypes.uint8)


def _require_indices(op_name, indices: Blob, arg="indices"):
    if indices.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{op_name}: {arg} must be an integer Blob, got {indices.dtype.name}")


# -- gather -------------------------------------------------------------------------------


def _infer_gather(params, indices, *, axis):
    _require_indices("gather", indices)
    return [(params.shape[:axis] + indices.shape + params.shape[axis + 1:], params.dtype)]


@register("gather", infer=_infer_gather)
def gather_op(ctx, params, indices, *, axis):
    """``params`` indexed by ``indices`` along ``axis``; an index outside [0, n) gives
    zeros, as OneFlow's kernel does (a device cannot raise from inside a step)."""
    xp = ctx.xp
    n = params.shape[axis]
    valid = (indices >= 0) & (indices < n)
    picked = xp.take(params, xp.where(valid, indices, 0), axis=axis)
    view = (1,) * axis + indices.shape + (1,) * (params.ndim - axis - 1)
    return picked * valid.reshape(view).astype(params.dtype)


def _infer_gather_grad(gy, indices, *, axis, shape):
    return [(tuple(shape), gy.dtype)]


class RowsBuffer:
    """A ``gather_grad`` output kept from step to step (axis 0, on the host), so that a step
    does not fill a fresh zero table the size of the variable: the page faults of the new
    array cost the train step of a 1,000,000 x 16 embedding ~6 ms, the rows 0.2 ms.

    ``array``: the table, zero but for ``rows``, the first-axis indices the last step added
    into (repeats allowed; None before the first). The compiled plan gives one to a
    ``gather_grad`` whose output only the updates and the non-finite guard read
    (``aioflow/compiler/gradient_buffers.py``), one per instruction, and steps of a plan
    never overlap; the guard then reads only these rows (``ops/state.py``)."""

    __slots__ = ("array", "rows")

    zero_elsewhere = True   # every element outside ``rows`` is 0 (ScaledRows: when it is)

    def __init__(self):
        self.array = None
        self.rows = None

    def background(self, ndim):
        """The value of every element outside ``rows`` (shaped to broadcast): zero."""
        return np.zeros((1,) * ndim, self.array.dtype)

    def zeroed(self, shape, dtype):
        """The table, all zeros again: only the rows written last step are cleared."""
        array = self.array
        if array is None or array.shape != tuple(shape) or array.dtype != dtype:
            self.array, self.rows = np.zeros(shape, dtype), None
        elif self.rows is not None:
            clear_rows(array, self.rows)
            self.rows = None
        return self.array


def clear_rows(array, rows) -> None:
    """``array[rows] = 0``: every element of the rows (first axis) ``rows`` names."""
    array[rows] = 0


class ScaledRows:
    """The output of ``multiply`` or ``divide`` (``ufunc``) of a kept table (a
    :class:`RowsBuffer`'s, or another ``ScaledRows``': ``source``) by a one-element
    operand, kept from step to step too: a per-sample loss's gradient, ``gather_grad(...)
    * (1 / batch)``, and loss scaling's. Outside the source's rows every element is the
    source's background times the operand (``0 * b``: 0, -0 or NaN), so a step computes
    the rows alone, with the same ufunc on the same values (:func:`scaled_rows`), and
    the whole table (into the kept array) when that background changes (an operand whose
    sign or finiteness changed) or the rows are many (:data:`SCALED_ROW_FRACTION`).
    ``rows``: the rows (first axis) where an element may differ from the background."""

    __slots__ = ("source", "ufunc", "array", "rows", "fill")

    def __init__(self, source, ufunc):
        self.source, self.ufunc = source, ufunc
        self.array = self.rows = self.fill = None

    def background(self, ndim):
        return self.fill

    @property
    def zero_elsewhere(self) -> bool:
        """Whether every element outside ``rows`` is 0 (or -0)."""
        return self.fill is not None and not np.any(self.fill)


def scaled_rows(ctx, a, b, out=None, *, rows_scale):
    """The kernel of a ``multiply`` / ``divide`` instruction with a :class:`ScaledRows`
    (``aioflow/compiler/gradient_buffers.py`` swaps it in): ``ufunc(a, b)``, written
    into the kept table where ``a`` is the source's table, else computed as the op does."""
    state = rows_scale
    f = getattr(ctx.xp, state.ufunc)
    source = state.source
    if ctx.xp is not np or a is not source.array or source.rows is None:
        state.array = state.rows = state.fill = None
        return f(a, b, out=out)
    fill = f(source.background(a.ndim), b)
    rows = source.rows
    if state.array is None or state.array.dtype != fill.dtype:
        state.array = f(a, b)                         # the first step: the whole table
    elif state.fill.tobytes() != fill.tobytes() or rows.size > SCALED_ROW_FRACTION * len(a):
        f(a, b, out=state.array)                      # the whole table, in place
    else:
        state.array[state.rows] = fill[0]             # last step's rows: background again
        rows = each_row_once(rows)
        state.array[rows] = f(np.take(a, rows, axis=0), b)
    state.rows, state.fill = rows, fill
    return state.array


# :func:`scaled_rows` computes the rows alone while the source's indices (repeats
# included) are at most this share of the table's rows, else the whole table (into the
# kept array). Measured on this project's 2-core host (numpy 2.4, float32, a multiply):
# the rows cost 40-250 ns per index (more for wider rows), the whole table 0.2-0.45 ns per
# element; the rows won up to 3-5% of 200,000 x 16, 1,000,000 x 16 and 100,000 x 64 and
# lost by under 0.05 ms on 200,000 x 1 at 1-2%.
SCALED_ROW_FRACTION = 0.02


@register("gather_grad", infer=_infer_gather_grad, differentiable=False)
def gather_grad(ctx, gy, indices, *, axis, shape, rows_buffer=None):
    """``rows_buffer``: a :class:`RowsBuffer` that the output is written into, instead of
    a fresh zero table (axis 0, numpy only; the compiled plan passes it)."""
    xp = ctx.xp
    n = shape[axis]
    valid = (indices >= 0) & (indices < n)
    reuse = rows_buffer is not None and axis == 0 and xp is np
    out = rows_buffer.zeroed(shape, gy.dtype) if reuse else xp.zeros(shape, gy.dtype)
    # Move the gathered axes to the front: out[idx] += gy (with idx flattened).
    moved = xp.moveaxis(out, axis, 0)
    lead = gy.ndim - (len(shape) - 1)          # = indices.ndim
    g = xp.moveaxis(gy, tuple(range(axis, axis + lead)), tuple(range(lead)))
    g = g.reshape((-1,) + g.shape[lead:])
    flat = xp.where(valid, indices, 0).reshape(-1)
    mask = valid.reshape((-1,) + (1,) * (g.ndim - 1)).astype(gy.dtype)
    if reuse:   # before the writes: whatever they reach is cleared next step
        rows_buffer.rows = flat
    add_rows(xp, moved, flat, g * mask)
    return out


def add_rows(xp, table, rows, values) -> None:
    """``xp.add.at(table, rows, values)``: ``values[i]`` added to the row (first axis)
    ``rows[i]``, in the order of ``i``. On the host, for a C-contiguous table, the same
    additions in the same order through one flat ``np.add.at`` over element indices:
    numpy's ``add.at`` loops over the index array in order either way, but takes a fast
    path for a 1-D target (4.5x on 13,312 rows of 16 of a 200,000-row table, 2.7x on 512
    rows of 16 or 64; ``benchmarks/gather_grad_rows.py``); each element still receives its
    values in the order of ``i``, so the sums are the same bit for bit. Only for finite
    values: the two paths pass the operands of each addition in opposite orders, which
    decides which NaN a NaN + NaN returns (its sign, its payload); a sum of finite values
    is never NaN (an overflow's infinity only grows in its own direction), and without
    NaN IEEE addition is commutative to the bit, signed zeros included."""
    if xp is not np or not table.flags.c_contiguous or table.ndim < 2 or (
            values.dtype.kind in "fc" and not np.isfinite(values).all()):
        xp.add.at(table, rows, values)
        return
    width = table.size // table.shape[0] if table.shape[0] else 0
    elements = (rows.astype(np.intp).reshape(-1, 1) * width + np.arange(width)).reshape(-1)
    np.add.at(table.reshape(-1), elements, values.reshape(-1))


@gather_op.grad
def _gather_grad(node, gy):
    params, indices = node.inputs
    return [gather_grad(gy, indices, axis=node.attrs["axis"], shape=params.shape), None]


# -- one_hot ------------------------------------------------------------------------------


def _infer_one_hot(indices, *, depth, on_value, off_value, dtype):
    _require_indices("one_hot", indices)
    return [(indices.shape + (depth,), dtype)]


@register("one_hot", infer=_infer_one_hot, differentiable=False)
def one_hot_op(ctx, indices, *, depth, on_value, off_value, dtype):
    xp = ctx.xp
    np_dtype = dtypes.as_numpy(dtype)
    hit = indices[..., None] == xp.arange(depth, dtype=indices.dtype)
    return xp.where(hit, np_dtype.type(on_value), np_dtype.type(off_value)).astype(np_dtype)


# -- pad ----------------------------------------------------------------------------------


def _infer_pad(x, *, paddings, constant_value):
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, paddings))
    return [(shape, x.dtype)]


@register("pad", infer=_infer_pad)
def pad_op(ctx, x, *, paddings, constant_value):
    return ctx.xp.pad(x, paddings, mode="constant",
                      constant_values=x.dtype.type(constant_value))


@pad_op.grad
def _pad_grad(node, gy):
    x = node.inputs[0]
    index = tuple(slice(lo, lo + d) for d, (lo, _) in zip(x.shape, node.attrs["paddings"]))
    return [slice_op(gy, index=index)]


# -- sorting ------------------------------------------------------------------------------


def _infer_argsort(x, *, axis, descending):
    return [(x.shape, dtypes.int32)]


@register("argsort", infer=_infer_argsort, differentiable=False)
def argsort_op(ctx, x, *, axis, descending):
    xp = ctx.xp
    if descending:   # a stable descending order: ties keep their original order
        flipped = xp.flip(x, axis=axis)
        order = xp.argsort(flipped, axis=axis, kind="stable")
        order = x.shape[axis] - 1 - xp.flip(order, axis=axis)
    else:
        order = xp.argsort(x, axis=axis, kind="stable")
    return order.astype(np.int32)


def _infer_take_along(x, indices, *, axis):
    _require_indices("take_along_axis", indices)
    if indices.ndim != x.ndim or any(a != b for i, (a, b) in
                                     enumerate(zip(x.shape, indices.shape)) if i != axis):
        raise ValueError(f"take_along_axis: indices shape {indices.shape} does not match "
                         f"x shape {x.shape} outside axis {axis}")
    return [(indices.shape, x.dtype)]


@register("take_along_axis", infer=_infer_take_along)
def take_along_axis_op(ctx, x, indices, *, axis):
    return ctx.xp.take_along_axis(x, indices.astype(np.int64), axis=axis)


@register("take_along_axis_grad",
          infer=lambda gy, indices, *, axis, shape: [(tuple(shape), gy.dtype)],
          differentiable=False)
def take_along_axis_grad(ctx, gy, indices, *, axis, shape):
    xp = ctx.xp
    out = xp.zeros(shape, gy.dtype)
    # Open grids (as numpy.indices(sparse=True), spelled out for every array module).
    grids = [xp.arange(d).reshape((1,) * i + (d,) + (1,) * (indices.ndim - i - 1))
             for i, d in enumerate(indices.shape)]
    grids[axis] = indices.astype(np.int64)
    xp.add.at(out, tuple(grids), gy)
    return out


@take_along_axis_op.grad
def _take_along_grad(node, gy):
    x, indices = node.inputs
    return [take_along_axis_grad(gy, indices, axis=node.attrs["axis"], shape=x.shape), None]


# -- batch_gather (OneFlow's gather with batch_dims > 0) --------------------------------


def _infer_batch_gather(params, indices):
    _require_indices("gather", indices)
    k = indices.ndim
    if not 1 <= k <= params.ndim:
        raise ValueError(f"gather: with batch_dims, indices' rank ({k}) must lie between 1 "
                         f"and params' rank ({params.ndim})")
    if params.shape[:k - 1] != indices.shape[:k - 1]:
        raise ValueError(f"gather: with batch_dims, indices' leading axes "
                         f"{indices.shape[:k - 1]} must equal params' {params.shape[:k - 1]}")
    return [(indices.shape + params.shape[k:], params.dtype)]


def _batch_index(xp, indices, n):
    """The valid mask and the index clipped into range, for ``out = in[b..., idx, ...]``."""
    valid = (indices >= 0) & (indices < n)
    return valid, xp.where(valid, indices, 0).astype(np.int64)


@register("batch_gather", infer=_infer_batch_gather)
def batch_gather_op(ctx, params, indices):
    """OneFlow's ``batch_gather``: with ``k = indices.ndim``, the leading ``k - 1`` axes of
    ``params`` and ``indices`` are batch axes and ``params`` is indexed along axis
    ``k - 1``: ``out[b..., j, r...] = params[b..., indices[b..., j], r...]``. An index
    outside the axis gives zeros, as ``gather``'s."""
    xp = ctx.xp
    k = indices.ndim
    rest = params.shape[k:]
    valid, idx = _batch_index(xp, indices, params.shape[k - 1])
    idx = xp.broadcast_to(idx.reshape(indices.shape + (1,) * len(rest)), indices.shape + rest)
    out = xp.take_along_axis(params, idx, axis=k - 1)
    return out * valid.reshape(indices.shape + (1,) * len(rest)).astype(params.dtype)


@register("batch_gather_grad",
          infer=lambda gy, indices, *, shape: [(tuple(shape), gy.dtype)],
          differentiable=False)
def batch_gather_grad(ctx, gy, indices, *, shape):
    """OneFlow's ``unsorted_batch_segment_sum``: each row of ``gy`` added into the row of
    the params' gradient it was gathered from (repeated indices add up)."""
    xp = ctx.xp
    k = indices.ndim
    valid, idx = _batch_index(xp, indices, shape[k - 1])
    out = xp.zeros(shape, gy.dtype)
    grids = [xp.arange(d).reshape((1,) * i + (d,) + (1,) * (gy.ndim - i - 1))
             for i, d in enumerate(gy.shape)]
    grids[k - 1] = idx.reshape(indices.shape + (1,) * (gy.ndim - k))
    mask = valid.reshape(indices.shape + (1,) * (gy.ndim - k)).astype(gy.dtype)
    xp.add.at(out, tuple(grids), gy * mask)
    return out


@batch_gather_op.grad
def _batch_gather_grad(node, gy):
    params, indices = node.inputs
    return [batch_gather_grad(gy, indices, shape=params.shape), None]


# -- tril, reverse ------------------------------------------------------------------------


def _infer_tril(x, *, diagonal, fill_value):
    if x.ndim < 2:
        raise ValueError(f"tril: x must be at least 2-d, got shape {x.shape}")
    return [(x.shape, x.dtype)]


@register("tril", infer=_infer_tril)
def tril_op(ctx, x, *, diagonal, fill_value):
    xp = ctx.xp
    rows, cols = x.shape[-2:]
    keep = xp.arange(cols)[None, :] <= xp.arange(rows)[:, None] + diagonal
    return xp.where(keep, x, x.dtype.type(fill_value))


@tril_op.grad
def _tril_grad(node, gy):
    return [tril_op(gy, diagonal=node.attrs["diagonal"], fill_value=0)]


@register("reverse", infer=lambda x, *, axes: [(x.shape, x.dtype)])
def reverse_op(ctx, x, *, axes):
    return ctx.xp.flip(x, axis=axes)


@reverse_op.grad
def _reverse_grad(node, gy):
    return [reverse_op(gy, axes=node.attrs["axes"])]


# -- reductions ---------------------------------------------------------------------------


def _infer_logical_reduce(x, *, axes, keepdims):
    return [(reduced_shape(x.shape, axes, keepdims), dtypes.int8)]


def _logical_reduce(name, method):
    def forward(ctx, x, *, axes, keepdims):
        out = getattr(x != 0, method)(axis=axes, keepdims=keepdims)
        return out.astype(np.int8).reshape(reduced_shape(x.shape, axes, keepdims))
    return register(name, infer=_infer_logical_reduce, differentiable=False)(forward)


reduce_all_op = _logical_reduce("reduce_all", "all")
reduce_any_op = _logical_reduce("reduce_any", "any")


def _infer_prod(x, *, axes, keepdims):
    return [(reduced_shape(x.shape, axes, keepdims), x.dtype)]


@register("reduce_prod", infer=_infer_prod)
def reduce_prod_op(ctx, x, *, axes, keepdims):
    out = x.prod(axis=axes, keepdims=keepdims)
    return ctx.xp.asarray(out, dtype=x.dtype).reshape(reduced_shape(x.shape, axes, keepdims))


@register("reduce_prod_grad", infer=lambda x, gy, *, axes: [(x.shape, x.dtype)],
          differentiable=False)
def reduce_prod_grad(ctx, x, gy, *, axes):
    """d prod / d x_i = the product of the others: products of the elements before and
    after each one (exclusive cumulative products), exact with zeros among them."""
    xp = ctx.xp
    kept = [i for i in range(x.ndim) if i not in axes]
    perm = kept + list(axes)
    moved = xp.transpose(x, perm)
    lead = moved.shape[:len(kept)]
    flat = moved.reshape(lead + (-1,))
    ones = xp.ones(lead + (1,), x.dtype)
    before = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(flat, axis=-1)[..., :-1]],
                                              axis=-1), axis=-1), axis=-1)
    g = gy.reshape(lead + (1,)) * before * after
    return xp.transpose(g.reshape(moved.shape), tuple(int(i) for i in np.argsort(perm)))


@reduce_prod_op.grad
def _prod_grad(node, gy):
    return [reduce_prod_grad(node.inputs[0], gy, axes=node.attrs["axes"])]


__all__ = ["gather_op", "batch_gather_op", "one_hot_op", "pad_op", "argsort_op", "take_along_axis_op",
           "tril_op", "reverse_op", "reduce_all_op", "reduce_any_op", "reduce_prod_op"]
