"""Ops with data-dependent shapes: ``argwhere``, ``nonzero``, ``sync_dynamic_resize``,
``cast_to_static_shape`` and ``dynamic_reshape``; and ``where``, which given only a
condition is ``argwhere`` (OneFlow's rule), else an elementwise choice.

OneFlow returns *dynamic* blobs here. aioflow's plans are static, so these return the
static maximum (padded) blob, and a job returning it hands back only its valid part
(:mod:`aioflow.engine.dynamic_shapes`); ops applied to it inside the job see the padding.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
...     return flow.argwhere(x)
>>> job(np.array([[0, 2, 0], [3, 0, 4]], np.float32)).tolist()
[[0, 1], [1, 0], [1, 2]]
"""
from __future__ import annotations

from .._core import dtypes
from ..engine.dynamic_shapes import mark, size_of
from ..ops import dynamic as _dyn
from ..ops import elementwise as _ew
from .ops_api import _require_blob, reshape, transpose

__all__ = ["argwhere", "nonzero", "sync_dynamic_resize", "cast_to_static_shape",
           "dynamic_reshape", "where"]


def argwhere(condition, dtype=None, name=None):
    """The indices of the nonzero elements of ``condition``, one row each in row-major
    order: ``(count, condition.ndim)``, int32 unless ``dtype``. Inside the job the Blob
    has the static maximum shape ``(condition.size, condition.ndim)``, rows past the count
    holding -1 (so ``flow.gather_nd`` over them gives zeros)."""
    _require_blob(condition, "argwhere", "condition")
    dtype = dtypes.int32 if dtype is None else dtypes.convert(dtype)
    if dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"argwhere: dtype must be int32 or int64, got {dtype.name}")
    out, count = _dyn.argwhere_op(condition, dtype=dtype, name=name)
    return sync_dynamic_resize(out, count)


def nonzero(a, name=None):
    """The indices of the nonzero elements of ``a``, one column each:
    ``(a.ndim, count)`` (``argwhere``'s transpose)."""
    indices = argwhere(a, name=None if name is None else name + "_ArgWhere")
    out = transpose(indices, perm=(1, 0), name=None if name is None else name + "_Transpose")
    size, _ = size_of(indices)
    return mark(out, size, axis=1)


def sync_dynamic_resize(inputs, size, name=None):
    """``inputs`` with only its first ``size[0]`` rows valid (``size``: an integer Blob of
    shape (1,)): a job returning it returns those rows."""
    _require_blob(inputs, "sync_dynamic_resize", "inputs")
    _require_blob(size, "sync_dynamic_resize", "size")
    if size.shape != (1,) or size.dtype.is_floating:
        raise TypeError(f"sync_dynamic_resize: size must be an integer Blob of shape (1,), "
                        f"got {size.dtype.name}{list(size.shape)}")
    if inputs.ndim == 0:
        raise ValueError("sync_dynamic_resize: inputs must have at least one axis")
    return mark(_ew.identity(inputs, name=name), size, axis=0)


def cast_to_static_shape(x, name=None):
    """``x`` as its static (maximum) shape: a job returning it returns the padded array."""
    _require_blob(x, "cast_to_static_shape", "x")
    out = _ew.identity(x, name=name)
    out.graph.static_casts.add(out.id)   # is_dynamic ends here
    return out


def dynamic_reshape(x, shape, name=None):
    """``flow.reshape`` (one -1 allowed). In OneFlow the leading axis may be dynamic; here
    every shape is static, so this is a plain reshape of the static shape."""
    _require_blob(x, "dynamic_reshape", "x")
    return reshape(x, shape, name=name)


def where(condition, x=None, y=None, name=None):
    """Pick from ``x`` where ``condition`` is nonzero, else from ``y``; with neither,
    ``flow.argwhere(condition)`` (OneFlow's rule)."""
    if x is None and y is None:
        return argwhere(condition, name=name)
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (then it is "
                         "flow.argwhere(condition)); got only one")
    x, y = _ew.promote(x, y, "where")
    return _ew.where(condition, x, y, name=name)
