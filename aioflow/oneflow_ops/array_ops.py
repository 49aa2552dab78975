"""OneFlow's further top-level tensor ops: gather, one_hot, pad, stack, range, ones/zeros,
sort/argsort, reverse, broadcast_like, masked_fill, ... (re-exported at ``flow.*``).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 3)), i: tp.Numpy.Placeholder((2,), dtype=flow.int32)
...         ) -> tp.Numpy:
...     return flow.concat([flow.gather(x, i, axis=1), flow.sort(x)], axis=1)
>>> job(np.array([[3, 1, 2], [6, 5, 4]], np.float32), np.array([0, 2], np.int32)).tolist()
[[3.0, 2.0, 1.0, 2.0, 3.0], [6.0, 4.0, 4.0, 5.0, 6.0]]
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from .._core import dtypes
from ..ir import Blob, current_graph
from ..ops import elementwise as _ew
from ..ops import indexing as _idx
from ..ops.registry import normalize_axis
from .dynamic_api import where
from .math_api import reduce_sum
from .ops_api import cast, concat, constant, expand_dims, reshape, transpose

__all__ = ["gather", "gather_nd", "dim_gather", "one_hot", "pad", "stack", "range", "ones",
           "zeros", "sort", "argsort", "reverse", "broadcast_like", "masked_fill",
           "identity_n", "constant_scalar", "elem_cnt"]


def _require_blob(value, op_name, arg):
    if not isinstance(value, Blob):
        raise TypeError(f"{op_name}: {arg} must be a Blob, got {type(value).__name__}")


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """``params`` indexed by integer ``indices`` along ``axis`` (default 0): the output's
    shape is ``params.shape[:axis] + indices.shape + params.shape[axis + 1:]``. An index
    outside ``[0, params.shape[axis])`` gives zeros (OneFlow's kernel does the same).
    The gradient adds up over repeated indices.

    ``batch_dims > 0`` is OneFlow's ``batch_gather``: ``axis`` (default ``batch_dims``)
    must equal ``batch_dims``; then the leading ``indices.ndim - 1`` axes of ``params``
    and ``indices`` are batch axes (equal sizes) and ``params`` is indexed along axis
    ``indices.ndim - 1``: ``out[b..., j, r...] = params[b..., indices[b..., j], r...]``.
    BERT's masked-LM head calls ``gather(seq (B, S, H), positions (B, P), axis=2,
    batch_dims=2)`` and gets ``(B, P, H)``, as in OneFlow v0.3.4."""
    _require_blob(params, "gather", "params")
    _require_blob(indices, "gather", "indices")
    if isinstance(batch_dims, bool) or not isinstance(batch_dims, numbers.Integral) \
            or batch_dims < 0:
        raise ValueError(f"gather: batch_dims must be a non-negative int, got {batch_dims!r}")
    if batch_dims > 0:
        axis = batch_dims if axis is None else int(axis)
        if axis < 0:
            axis = normalize_axis("gather", axis, params.ndim)
        if axis > batch_dims:
            raise NotImplementedError(f"gather: axis ({axis}) above batch_dims "
                                      f"({batch_dims}) is not supported, as in OneFlow")
        if axis < batch_dims:   # OneFlow raises AttributeError here
            raise AttributeError(f"gather: axis ({axis}) must not be below batch_dims "
                                 f"({batch_dims})")
        return _idx.batch_gather_op(params, indices, name=name)
    axis = normalize_axis("gather", 0 if axis is None else int(axis), params.ndim)
    return _idx.gather_op(params, indices, axis=axis, name=name)


def gather_nd(params, indices, name=None):
    """``params[indices[..., 0], ..., indices[..., k-1]]`` for an index Blob of shape
    ``(..., k)``: the output's shape is ``indices.shape[:-1] + params.shape[k:]``."""
    _require_blob(params, "gather_nd", "params")
    _require_blob(indices, "gather_nd", "indices")
    k = indices.shape[-1] if indices.ndim else 0
    if not 1 <= k <= params.ndim:
        raise ValueError(f"gather_nd: the last axis of indices ({k}) must be between 1 and "
                         f"params' rank {params.ndim}")
    strides = np.cumprod((params.shape[1:k] + (1,))[::-1])[::-1].astype(np.int64)
    index = reduce_sum(cast(indices, dtypes.int64) *
                       constant(strides, dtype=dtypes.int64), axis=-1)
    if indices.ndim == 1:
        index = reshape(index, ())
    flat = reshape(params, (int(np.prod(params.shape[:k])),) + params.shape[k:])
    return _idx.gather_op(flat, index, axis=0, name=name)


def dim_gather(input, dim, index, name=None):  # noqa: A002 - OneFlow's names
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` (for ``dim=0``): PyTorch's gather,
    with ``index`` of ``input``'s shape but along ``dim``."""
    _require_blob(input, "dim_gather", "input")
    dim = normalize_axis("dim_gather", int(dim), input.ndim)
    return _idx.take_along_axis_op(input, index, axis=dim, name=name)


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1, dtype=None, name=None):
    """A new axis of size ``depth`` at ``axis`` with ``on_value`` at each index and
    ``off_value`` elsewhere; ``dtype`` defaults to float32. An index outside
    ``[0, depth)`` gives a row of ``off_value``."""
    _require_blob(indices, "one_hot", "indices")
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth <= 0:
        raise ValueError(f"one_hot: depth must be a positive int, got {depth!r}")
    out_ndim = indices.ndim + 1
    if not -out_ndim <= axis < out_ndim:
        raise ValueError(f"one_hot: axis must lie in [{-out_ndim}, {out_ndim}), got {axis}")
    axis %= out_ndim
    dtype = dtypes.float32 if dtype is None else dtypes.convert(dtype)
    out = _idx.one_hot_op(indices, depth=int(depth), on_value=on_value, off_value=off_value,
                          dtype=dtype, name=name if axis == out_ndim - 1 else None)
    if axis == out_ndim - 1:
        return out
    perm = list(builtins.range(out_ndim - 1))
    perm.insert(axis, out_ndim - 1)
    return transpose(out, perm=perm, name=name)


def pad(x, paddings, constant_value=0, name=None):
    """Pad ``x`` with ``constant_value``: ``paddings`` gives ``(before, after)`` for each
    axis."""
    _require_blob(x, "pad", "x")
    pads = tuple(tuple(int(v) for v in p) for p in paddings)
    if len(pads) != x.ndim or any(len(p) != 2 or min(p) < 0 for p in pads):
        raise ValueError(f"pad: paddings must give a non-negative (before, after) pair for "
                         f"each of the {x.ndim} axes, got {paddings!r}")
    return _idx.pad_op(x, paddings=pads, constant_value=constant_value, name=name)


def stack(inputs, axis=0, name=None):
    """Join Blobs of one shape along a new axis ``axis``."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("stack: expected at least one Blob")
    for i, blob in enumerate(inputs):
        _require_blob(blob, "stack", f"inputs[{i}]")
        if blob.shape != inputs[0].shape:
            raise ValueError(f"stack: inputs[{i}] has shape {blob.shape}, inputs[0] "
                             f"{inputs[0].shape}; all must be equal")
    axis = normalize_axis("stack", axis, inputs[0].ndim + 1)
    return concat([expand_dims(b, axis) for b in inputs], axis=axis, name=name)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    """``[start, start + delta, ...)`` up to ``limit`` (``range(n)`` is ``0..n-1``), as a
    constant Blob; ``dtype`` defaults to int64 for int arguments, else float32."""
    current_graph()
    if limit is None:
        start, limit = 0, start
    if delta == 0:
        raise ValueError("range: delta must not be 0")
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, limit, delta))
        dtype = dtypes.int64 if ints else dtypes.float32
    values = np.arange(start, limit, delta, dtype=dtypes.as_numpy(dtypes.convert(dtype)))
    return constant(values, dtype=dtype, name=None if name == "range" else name)


def ones(shape, dtype=None, name=None):
    """A constant Blob of ones (float32 unless ``dtype``)."""
    return constant(1, dtype=dtype or dtypes.float32, shape=shape, name=name)


def zeros(shape, dtype=None, name=None):
    """A constant Blob of zeros (float32 unless ``dtype``)."""
    return constant(0, dtype=dtype or dtypes.float32, shape=shape, name=name)


def _direction(op_name, direction):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"{op_name}: direction must be 'ASCENDING' or 'DESCENDING', got "
                         f"{direction!r}")
    return direction == "DESCENDING"


def argsort(input, axis=-1, direction="ASCENDING", name=None):  # noqa: A002
    """Indices (int32) that sort ``input`` along ``axis``; ties keep their order."""
    _require_blob(input, "argsort", "input")
    return _idx.argsort_op(input, axis=normalize_axis("argsort", axis, input.ndim),
                           descending=_direction("argsort", direction), name=name)


def sort(input, axis=-1, direction="ASCENDING", name=None):  # noqa: A002
    """``input`` sorted along ``axis``; the gradient goes back to each value's place."""
    order = argsort(input, axis=axis, direction=direction)
    return _idx.take_along_axis_op(input, order, axis=normalize_axis("sort", axis, input.ndim),
                                   name=name)


def reverse(input, axis, name=None):  # noqa: A002
    """``input`` with the order of ``axis`` (an int or a list of them) reversed."""
    _require_blob(input, "reverse", "input")
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    axes = tuple(sorted({normalize_axis("reverse", int(a), input.ndim) for a in axes}))
    return _idx.reverse_op(input, axes=axes, name=name)


def broadcast_like(x, like, broadcast_axes=None, name=None):
    """``x`` broadcast to ``like``'s shape (numpy's rules; ``broadcast_axes`` names the
    axes of ``like`` that ``x`` lacks, when ``x`` has fewer axes)."""
    _require_blob(x, "broadcast_like", "x")
    if broadcast_axes is not None and x.ndim < like.ndim:
        axes = sorted(normalize_axis("broadcast_like", a, like.ndim) for a in broadcast_axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        x = reshape(x, shape)
    return _ew.broadcast_to(x, shape=like.shape, name=name)


def masked_fill(x, mask, value, name=None):
    """``value`` where ``mask`` is nonzero, else ``x``."""
    return where(mask, _ew.to_blob(value, x, "masked_fill"), x, name=name)


def identity_n(inputs, name=None):
    """A list of identities of ``inputs``."""
    return [_ew.identity(b) for b in inputs]


def constant_scalar(value, dtype=None, name=None):
    """A constant of shape (1,), as OneFlow's ``constant_scalar``."""
    return constant(value, dtype=dtype, shape=(1,), name=name)


def elem_cnt(inputs, dtype=None, name=None):
    """The element count of ``inputs`` as a constant Blob of shape (1,) (int32 unless
    ``dtype``): known when the job is traced, since shapes are static here."""
    _require_blob(inputs, "elem_cnt", "inputs")
    return constant(int(np.prod(inputs.shape, dtype=np.int64)),
                    dtype=dtype or dtypes.int32, shape=(1,), name=name)
