"""Tensor buffers and tensor lists: OneFlow's containers of tensors of varying shapes.

* A *tensor buffer* Blob (dtype ``flow.tensor_buffer``) has a static shape, e.g.
  ``(batch,)``; each element is one host tensor with its own shape and numeric dtype. Its
  value inside a step is a numpy object array of that shape holding ndarrays.
* A *tensor list* Blob (OneFlow's ``is_tensor_list``) has the static maximum shape
  ``(N, d1, ...)`` and a numeric dtype; its value is a numpy object array of N ndarrays,
  each of shape ``(1, e1, ...)`` with ``e_i <= d_i``: a ``tp.ListListNumpy`` argument
  or ``tensor_buffer_to_tensor_list``'s result. A ``tp.ListListNumpy`` argument given as
  one dense array of the static shape is a list of one tensor, as in OneFlow.

Both are host values, as in OneFlow, whose kernels for these ops are CPU-only: the
kernels read dense inputs through the backend (``to_host``) and hand dense results back
on the backend's device (``xp.asarray``). Other ops refuse these Blobs at trace time
(``host_values`` in :mod:`.registry`). None of these ops has a gradient (nor in OneFlow).
"""
from __future__ import annotations

import math

import numpy as np

from .._core import dtypes
from .registry import MissingKernelError, register

__all__ = ["tensor_to_tensor_buffer_op", "tensor_buffer_to_tensor_op",
           "tensor_buffer_to_tensor_list_op", "tensor_list_to_tensor_buffer_op",
           "tensor_list_split_op", "object_array", "tensors_of", "check_backend"]

# Backends whose devices pass host containers through: the CPU, the strict test backend
# (which stands in for a GPU in CI) and CuPy, whose device stages an object array as it
# is (a tensor buffer stays on the host; the dense tensors made of it go to the device).
_HOST_BACKENDS = ("numpy", "strict", "cupy")


def check_backend(graph, backend) -> None:
    """Refuse, when a job is compiled, a tensor buffer fed to it (a reader's output, such as
    ``flow.data.coco_reader``'s) on a backend whose device stages numeric arrays only."""
    if backend.kernel_set in _HOST_BACKENDS:
        return
    for blob in graph.placeholders:
        if not blob.dtype.is_numeric:
            raise MissingKernelError(
                f"{blob.name}: a {blob.dtype.name} Blob lives on the host, and the "
                f"{backend.name!r} backend stages numeric arrays only; place the job on the "
                "CPU with flow.scope.placement(\"cpu\", \"0:0\")")


def object_array(items, shape=None) -> np.ndarray:
    """A numpy object array holding ``items`` (ndarrays) one per element, never merged into
    a numeric array (``np.array`` would stack arrays of one shape)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out if shape is None else out.reshape(shape)


def _host(ctx, value) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else ctx.backend.to_host(value)


def tensors_of(ctx, value, what: str) -> list:
    """The tensors of a tensor list value: its ndarrays, or one dense array."""
    host = _host(ctx, value)
    if host.dtype != object:
        return [host]
    tensors = list(host.reshape(-1))
    for i, tensor in enumerate(tensors):
        if not isinstance(tensor, np.ndarray):
            raise TypeError(f"{what}: item {i} of the tensor list is a "
                            f"{type(tensor).__name__}, not a numpy array")
    return tensors


def _buffers(ctx, value, what: str) -> np.ndarray:
    """A tensor buffer value, each element checked to be an ndarray."""
    host = _host(ctx, value)
    for index, item in np.ndenumerate(host):
        if not isinstance(item, np.ndarray):
            raise TypeError(f"{what}: element {index} of the tensor buffer is a "
                            f"{type(item).__name__}, not a tensor")
    return host


# -- tensor <-> tensor buffer ------------------------------------------------------------
def _infer_to_buffer(x, *, instance_dims):
    return [(x.shape[:x.ndim - instance_dims], dtypes.tensor_buffer)]


@register("tensor_to_tensor_buffer", infer=_infer_to_buffer, differentiable=False,
          backends=_HOST_BACKENDS)
def tensor_to_tensor_buffer_op(ctx, x, *, instance_dims):
    dense = np.ascontiguousarray(_host(ctx, x))
    outer = dense.shape[:dense.ndim - instance_dims]
    instances = dense.reshape((math.prod(outer),) + dense.shape[len(outer):])
    # np.array: a 0-d instance (instance_dims=0) stays an array, not a numpy scalar
    return object_array([np.array(instance) for instance in instances], outer)


def _infer_appended(x, *, dtype, instance_shape=(), shape=()):
    """``x``'s shape followed by each instance's (``instance_shape``, or a list's ``shape``)."""
    return [(x.shape + tuple(instance_shape or shape), dtype)]


@register("tensor_buffer_to_tensor", infer=_infer_appended, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def tensor_buffer_to_tensor_op(ctx, x, *, dtype, instance_shape):
    what = "flow.tensor_buffer_to_tensor"
    buffers = _buffers(ctx, x, what)
    want = dtypes.as_numpy(dtype)
    dense = np.empty(buffers.shape + tuple(instance_shape), dtype=want)
    for index, item in np.ndenumerate(buffers):
        if item.shape != tuple(instance_shape) or item.dtype != want:
            raise ValueError(f"{what}: element {index} of x holds a {item.dtype} tensor of "
                             f"shape {item.shape}, expected {want} of instance_shape "
                             f"{tuple(instance_shape)}")
        dense[index] = item
    return ctx.xp.asarray(dense)    # a dense tensor lives on the job's device


# -- tensor buffer <-> tensor list -------------------------------------------------------
@register("tensor_buffer_to_tensor_list", infer=_infer_appended, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def tensor_buffer_to_tensor_list_op(ctx, x, *, shape, dtype):
    what = "flow.tensor_buffer_to_tensor_list"
    want = dtypes.as_numpy(dtype)
    capacity = math.prod(shape)
    tensors = []
    for index, item in np.ndenumerate(_buffers(ctx, x, what)):
        # OneFlow's kernel checks these two: the rank, and room in the static shape.
        if item.ndim != len(shape) or item.size > capacity:
            raise ValueError(f"{what}: element {index} of input holds a tensor of shape "
                             f"{item.shape}, which does not fit shape {tuple(shape)} (same "
                             f"number of axes, at most {capacity} elements)")
        if item.dtype.kind not in "biuf":
            raise TypeError(f"{what}: element {index} of input holds {item.dtype} values, "
                            "not numbers")
        tensors.append(item.astype(want).reshape((1,) + item.shape))
    return object_array(tensors)


def _infer_list_to_buffer(x, *, length):
    return [((length,), dtypes.tensor_buffer)]


@register("tensor_list_to_tensor_buffer", infer=_infer_list_to_buffer, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def tensor_list_to_tensor_buffer_op(ctx, x, *, length):
    what = "flow.tensor_list_to_tensor_buffer"
    tensors = _unit_tensors(ctx, x, length, what)
    return object_array([t.reshape(t.shape[1:]).copy() for t in tensors])


def _infer_split(x, *, length):
    return [(x.shape[1:], x.dtype)] * length


@register("tensor_list_split", infer=_infer_split, differentiable=False,
          backends=_HOST_BACKENDS, host_values=True)
def tensor_list_split_op(ctx, x, *, length):
    tensors = _unit_tensors(ctx, x, length, "flow.tensor_list_split")
    # Dense results of their own shapes, on the job's device.
    return tuple(ctx.xp.asarray(np.ascontiguousarray(t[0])) for t in tensors)


def _unit_tensors(ctx, x, length: int, what: str) -> list:
    """The tensors of list ``x``: ``length`` of them, each of leading dimension 1 (what
    OneFlow's kernels for these ops check)."""
    tensors = tensors_of(ctx, x, what)
    if len(tensors) != length:
        raise ValueError(f"{what}: the tensor list holds {len(tensors)} tensors, expected "
                         f"{length} (its static length)")
    for i, tensor in enumerate(tensors):
        if tensor.ndim == 0 or tensor.shape[0] != 1:
            raise ValueError(f"{what}: tensor {i} of the list has shape {tensor.shape}; each "
                             "must have a leading dimension of 1")
    return tensors
