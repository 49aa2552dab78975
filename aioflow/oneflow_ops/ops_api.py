"""Top-level tensor ops of the ``flow`` namespace: matmul, reshape, transpose, concat...

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
...     return flow.concat([flow.transpose(x), flow.constant(1.0, shape=(3, 1))], axis=1)
>>> job(np.arange(6, dtype=np.float32).reshape(2, 3)).tolist()
[[0.0, 3.0, 1.0], [1.0, 4.0, 1.0], [2.0, 5.0, 1.0]]
"""
from __future__ import annotations

import builtins

import numpy as np

from .._core import dtypes
from ..ir import Blob, current_graph
from ..ir.blob import bind_operators
from ..ops import elementwise as _ew
from ..ops import linalg as _linalg
from ..ops import shape as _shape
from ..ops.registry import normalize_axis


__all__ = [
    "matmul",
    "reshape",
    "reshape_like",
    "flatten",
    "transpose",
    "concat",
    "squeeze",
    "expand_dims",
    "getitem",
    "slice",
    "constant",
    "constant_like",
    "zeros_like",
    "ones_like",
    "cast",
    "identity",
]


def _require_blob(value, op_name, arg):
    if not isinstance(value, Blob):
        raise TypeError(f"{op_name}: {arg} must be a Blob, got {type(value).__name__}")


def matmul(a, b, transpose_a=False, transpose_b=False, alpha=1.0, name=None):
    """``op(a) @ op(b)`` for 2-d or batched (broadcast leading axes) Blobs."""
    if not isinstance(a, Blob) and isinstance(b, Blob):
        a = _ew.to_blob(np.asarray(a), b, "matmul")
    if not isinstance(b, Blob) and isinstance(a, Blob):
        b = _ew.to_blob(np.asarray(b), a, "matmul")
    out = _linalg.matmul_op(a, b, transpose_a=bool(transpose_a),
                            transpose_b=bool(transpose_b), name=name)
    return out if alpha == 1.0 else _ew.multiply_op(out, _ew.scalar_like(alpha, out))


def reshape(x, shape, name=None):
    """Reshape (one ``-1`` allowed)."""
    _require_blob(x, "reshape", "x")
    new_shape = _shape.resolve_shape("reshape", x.shape, shape)
    if new_shape == x.shape:
        return x
    return _shape.reshape(x, shape=new_shape, name=name)


def reshape_like(x, like, name=None):
    return reshape(x, like.shape, name=name)


def flatten(input, start_dim=0, end_dim=-1, name=None):  # noqa: A002 - OneFlow's name
    """Merge the axes from ``start_dim`` to ``end_dim`` (inclusive) into one."""
    _require_blob(input, "flatten", "input")
    start = normalize_axis("flatten", start_dim, input.ndim)
    end = normalize_axis("flatten", end_dim, input.ndim)
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} is after end_dim {end_dim}")
    merged = int(np.prod(input.shape[start:end + 1], dtype=np.int64))
    return reshape(input, input.shape[:start] + (merged,) + input.shape[end + 1:], name=name)


def transpose(a, perm=None, conjugate=False, batch_axis_non_change=False, name=None):
    """Permute axes (reverse them when ``perm`` is None)."""
    _require_blob(a, "transpose", "a")
    if perm is None:
        perm = tuple(reversed(range(a.ndim)))
    perm = tuple(int(p) % max(a.ndim, 1) for p in perm)
    if sorted(perm) != list(range(a.ndim)):
        raise ValueError(f"transpose: perm {perm} is not a permutation of {a.ndim} axes")
    return _shape.transpose(a, perm=perm, name=name)


def concat(inputs=None, axis=0, max_dim_size=None, name=None, values=None):
    """Concatenate Blobs along ``axis``."""
    inputs = list(values if inputs is None else inputs)
    if not inputs:
        raise ValueError("concat: expected at least one Blob")
    for i, blob in enumerate(inputs):
        _require_blob(blob, "concat", f"inputs[{i}]")
    if len(inputs) == 1:
        return inputs[0]
    return _shape.concat(*inputs, axis=normalize_axis("concat", axis, inputs[0].ndim),
                         name=name)


def squeeze(input, axis=None, name=None):  # noqa: A002
    """``input`` without its size-1 axes ``axis`` (all of them by default). Squeezing every
    axis leaves shape ``(1,)``, not a 0-d blob: OneFlow's squeeze op never makes one."""
    axes = _shape.squeeze_axes(input, axis)
    shape = tuple(d for i, d in enumerate(input.shape) if i not in axes)
    return reshape(input, shape or (1,), name)


def expand_dims(input, axis, name=None):  # noqa: A002
    axis = normalize_axis("expand_dims", axis, input.ndim + 1)
    return reshape(input, input.shape[:axis] + (1,) + input.shape[axis:], name=name)


def getitem(x, key):
    """Basic indexing (ints, slices, None, ...), differentiable."""
    key = _shape.normalize_index(x, key)
    return _shape.slice_op(x, index=key)


def slice(x, begin, size, name=None):  # noqa: A001 - OneFlow's name
    """``x[begin[i] : begin[i] + size[i]]`` per axis (size None or -1: to the end)."""
    if len(begin) != x.ndim or len(size) != x.ndim:
        raise ValueError(f"slice: begin and size need {x.ndim} entries, got {begin}, {size}")
    index = tuple(builtins.slice(b or 0, None if s in (None, -1) else (b or 0) + s)
                  for b, s in zip(begin, size))
    return _shape.slice_op(x, index=index, name=name)


def constant(value, dtype=None, shape=None, name=None):
    """A constant Blob filled with ``value`` (a number, or an array-like)."""
    current_graph()
    if isinstance(value, (np.ndarray, list, tuple)):
        array = np.asarray(value, dtype=dtypes.as_numpy(dtype) if dtype else None)
        if array.dtype == np.float64 and dtype is None:
            array = array.astype(np.float32)
        if shape is not None:
            array = np.broadcast_to(array, tuple(shape)).copy()
        return _ew.constant(value=array, shape=array.shape,
                            dtype=dtypes.from_numpy(array.dtype), name=name)
    dtype = dtypes.convert(dtype) if dtype is not None else (
        dtypes.float32 if isinstance(value, float) else dtypes.int32)
    shape = () if shape is None else tuple(int(d) for d in shape)
    return _ew.constant(value=value, shape=shape, dtype=dtype, name=name)


def constant_like(like, value, dtype=None, name=None):
    return constant(value, dtype=dtype or like.dtype, shape=like.shape, name=name)


def zeros_like(like, name=None):
    return _ew.zeros_like(like, name=name)


def ones_like(like, name=None):
    return _ew.ones_like(like, name=name)


def cast(x, dtype, name=None):
    """Convert to another dtype."""
    dtype = dtypes.convert(dtype)
    return x if x.dtype is dtype else _ew.cast(x, dtype=dtype, name=name)


def identity(x, name=None):
    return _ew.identity(x, name=name)


bind_operators(matmul=matmul, getitem=getitem)   # ``a @ b`` and ``a[key]`` on Blobs
