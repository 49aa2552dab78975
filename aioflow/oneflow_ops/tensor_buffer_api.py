"""``flow.tensor_to_tensor_buffer`` and its kin: OneFlow's tensor buffers and tensor lists.

A tensor buffer Blob (dtype ``flow.tensor_buffer``) holds, per element, one host tensor
of its own shape; a tensor list (a ``tp.ListListNumpy`` argument, or
``tensor_buffer_to_tensor_list``'s result) holds a list of tensors of varying shapes
within a static maximum. Both live on the host (:mod:`aioflow.ops.tensor_buffer`); numeric
ops refuse them, so they are converted to dense tensors first, or returned from the job.
None of these ops has a gradient, as in OneFlow.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def round_trip(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
...     buffers = flow.tensor_to_tensor_buffer(x, instance_dims=2)   # 2 tensors (3, 4)
...     return flow.tensor_buffer_to_tensor(buffers, dtype=flow.float, instance_shape=(3, 4))
>>> x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
>>> bool((round_trip(x) == x).all())
True
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..ir import Blob
from ..ops import tensor_buffer as _tb

__all__ = ["tensor_to_tensor_buffer", "tensor_buffer_to_tensor",
           "tensor_buffer_to_tensor_list", "tensor_list_to_tensor_buffer", "tensor_list_split"]


def tensor_to_tensor_buffer(x, instance_dims: int, name: str | None = None):
    """A tensor buffer of shape ``x.shape[:-instance_dims]`` (all of ``x.shape`` for 0)
    whose elements are the tensors ``x[i, j, ...]`` of the last ``instance_dims`` axes.

    ``instance_dims`` lies in ``[0, x.ndim)``. The buffer holds copies: later changes to
    ``x``'s memory do not reach it."""
    what = "flow.tensor_to_tensor_buffer"
    _require_dense(x, what, "x")
    if isinstance(instance_dims, bool) or not isinstance(instance_dims, (int, np.integer)):
        raise TypeError(f"{what}: instance_dims must be an int, got {instance_dims!r}")
    if not 0 <= instance_dims < x.ndim:
        raise ValueError(f"{what}: instance_dims must lie in [0, {x.ndim}) for x of shape "
                         f"{x.shape}, got {instance_dims}")
    return _tb.tensor_to_tensor_buffer_op(x, instance_dims=int(instance_dims),
                                          name=name)


def tensor_buffer_to_tensor(x, dtype, instance_shape, name: str | None = None):
    """The dense tensor ``x.shape + instance_shape`` of ``dtype`` made of the tensors of
    buffer ``x``: each must have exactly ``instance_shape`` and ``dtype`` (else a
    ValueError naming the element, raised by the step)."""
    what = "flow.tensor_buffer_to_tensor"
    _require_buffer(x, what, "x")
    dtype = _numeric_dtype(dtype, what)
    instance_shape = _shape(instance_shape, what, "instance_shape")
    return _tb.tensor_buffer_to_tensor_op(x, dtype=dtype, instance_shape=instance_shape,
                                          name=name)


def tensor_buffer_to_tensor_list(input, shape, dtype, name: str | None = None):  # noqa: A002
    """A tensor list of static shape ``(input.shape[0],) + shape`` and ``dtype``: one tensor
    of shape ``(1,) + t.shape`` per tensor ``t`` of the 1-d buffer ``input``, its values
    converted to ``dtype``. Each ``t`` needs ``len(shape)`` axes and at most
    ``prod(shape)`` elements (OneFlow's checks, made by the step). Return it as
    ``tp.ListListNumpy``."""
    what = "flow.tensor_buffer_to_tensor_list"
    x = input
    _require_buffer(x, what, "input")
    if x.ndim != 1:
        raise ValueError(f"{what}: input must be a 1-d tensor buffer, got shape {x.shape}")
    dtype = _numeric_dtype(dtype, what)
    shape = _shape(shape, what, "shape")
    out = _tb.tensor_buffer_to_tensor_list_op(x, shape=shape, dtype=dtype,
                                              name=name)
    out.graph.tensor_lists[out.id] = "a tensor list (flow.tensor_buffer_to_tensor_list)"
    return out


def tensor_list_to_tensor_buffer(input, name: str | None = None):  # noqa: A002 - OneFlow's
    """A 1-d tensor buffer of the tensors of tensor list ``input`` (a ``tp.ListListNumpy``
    argument or ``tensor_buffer_to_tensor_list``'s result), each without its leading axis
    of 1. The list must hold as many tensors as its static length ``input.shape[0]``
    (OneFlow's buffer would be dynamic and shorter; aioflow's shapes are static)."""
    what = "flow.tensor_list_to_tensor_buffer"
    _require_list(input, what, "input")
    return _tb.tensor_list_to_tensor_buffer_op(input, length=input.shape[0],
                                               name=name)


def tensor_list_split(input_tensor_list, name: str | None = None):
    """A tuple of ``input_tensor_list.shape[0]`` Blobs, one per tensor of the list (each
    without its leading axis of 1), for a job to return (``Tuple[tp.ListNumpy, ...]``).

    Their shapes vary from call to call (OneFlow's dynamic blobs): the static shape
    ``input_tensor_list.shape[1:]`` is only their maximum, so other ops refuse them."""
    what = "flow.tensor_list_split"
    _require_list(input_tensor_list, what, "input_tensor_list")
    if input_tensor_list.ndim < 2:
        raise ValueError(f"{what}: input_tensor_list must have at least 2 axes, got shape "
                         f"{input_tensor_list.shape}")
    length = input_tensor_list.shape[0]
    outs = _tb.tensor_list_split_op(input_tensor_list, length=length,
                                    name=name)
    outs = (outs,) if isinstance(outs, Blob) else tuple(outs)
    for blob in outs:
        blob.graph.tensor_lists[blob.id] = ("a tensor of data-dependent shape "
                                            "(flow.tensor_list_split)")
    return outs


# -- checks ---------------------------------------------------------------------------------
def _require_blob(value, what: str, arg: str) -> None:
    if not isinstance(value, Blob):
        raise TypeError(f"{what}: {arg} must be a Blob, got {type(value).__name__}")


def _require_dense(value, what: str, arg: str) -> None:
    _require_blob(value, what, arg)
    dtypes.require_numeric(value.dtype, what, arg)
    kind = value.graph.tensor_lists.get(value.id)
    if kind is not None:
        raise TypeError(f"{what}: {arg} must be a dense tensor, got {kind}")


def _require_buffer(value, what: str, arg: str) -> None:
    _require_blob(value, what, arg)
    if value.dtype is not dtypes.tensor_buffer:
        raise TypeError(f"{what}: {arg} must be a tensor_buffer Blob (from "
                        f"flow.tensor_to_tensor_buffer, ...), got a {value.dtype.name} Blob")


def _require_list(value, what: str, arg: str) -> None:
    _require_blob(value, what, arg)
    if value.id in value.graph.tensor_list_inputs:
        return
    if value.graph.tensor_lists.get(value.id, "").startswith("a tensor list"):
        return
    raise TypeError(f"{what}: {arg} must be a tensor list (a tp.ListListNumpy parameter or "
                    f"flow.tensor_buffer_to_tensor_list's result), got {value.name!r} "
                    f"({value.dtype.name}{list(value.shape)})")


def _numeric_dtype(dtype, what: str):
    try:
        dtype = dtypes.convert(dtype)
    except TypeError as exc:
        raise TypeError(f"{what}: dtype: {exc}") from None
    if not dtype.is_numeric:
        raise TypeError(f"{what}: dtype must be a numeric data type such as flow.float32, "
                        f"got flow.{dtype.name}")
    return dtype


def _shape(shape, what: str, arg: str) -> tuple:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
            for d in shape):
        raise ValueError(f"{what}: {arg} must be a tuple of ints >= 0, got {shape!r}")
    return tuple(int(d) for d in shape)
