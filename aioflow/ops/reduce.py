"""Reductions: sum, mean, max, min over axes (OneFlow: a full reduction has shape (1,))."""
from __future__ import annotations

from .._core import dtypes
from ..ir import Blob
from .elementwise import (broadcast_to, cast, divide_op, equal_op, multiply_op, scalar_like,
                          sum_to_shape)
from .registry import normalize_axis, register
from .shape import reshape


def _axes(op_name, x: Blob, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    if isinstance(axis, int):
        axis = (axis,)
    axes = tuple(sorted({normalize_axis(op_name, int(a), x.ndim) for a in axis}))
    return axes


def reduced_shape(shape, axes, keepdims) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return out if out or not shape else (1,)


def _infer_reduce(x, *, axes, keepdims):
    return [(reduced_shape(x.shape, axes, keepdims), x.dtype)]


def _reduce_kernel(method):
    def forward(ctx, x, *, axes, keepdims):
        out = getattr(x, method)(axis=axes, keepdims=keepdims)
        shape = reduced_shape(x.shape, axes, keepdims)
        return ctx.xp.asarray(out, dtype=x.dtype).reshape(shape)
    return forward


reduce_sum_op = register("reduce_sum", infer=_infer_reduce)(_reduce_kernel("sum"))
reduce_mean_op = register("reduce_mean", infer=_infer_reduce)(_reduce_kernel("mean"))
reduce_max_op = register("reduce_max", infer=_infer_reduce)(_reduce_kernel("max"))
reduce_min_op = register("reduce_min", infer=_infer_reduce)(_reduce_kernel("min"))


def _grad_to_input(node, gy) -> Blob:
    """Reshape gy to keepdims form and broadcast it back to the input's shape."""
    x = node.inputs[0]
    kept = reduced_shape(x.shape, node.attrs["axes"], True)
    return broadcast_to(reshape(gy, shape=kept), shape=x.shape)


@reduce_sum_op.grad
def _sum_grad(node, gy):
    return [_grad_to_input(node, gy)]


@reduce_mean_op.grad
def _mean_grad(node, gy):
    x = node.inputs[0]
    count = 1
    for a in node.attrs["axes"]:
        count *= x.shape[a]
    return [divide_op(_grad_to_input(node, gy), scalar_like(count, gy))]


def _extreme_grad(node, gy):
    # The gradient is shared equally among the elements that attain the extreme value.
    x, y = node.inputs[0], node.outputs[0]
    kept = reduced_shape(x.shape, node.attrs["axes"], True)
    mask = cast(equal_op(x, broadcast_to(reshape(y, shape=kept), shape=x.shape)), dtype=x.dtype)
    count = sum_to_shape(mask, kept)
    share = divide_op(reshape(gy, shape=kept), count)
    return [multiply_op(mask, broadcast_to(share, shape=x.shape))]


reduce_max_op.grad(_extreme_grad)
reduce_min_op.grad(_extreme_grad)


def _infer_argmax(x, *, axis):
    return [(tuple(d for i, d in enumerate(x.shape) if i != axis), dtypes.int32)]


@register("argmax", infer=_infer_argmax, differentiable=False)
def argmax_op(ctx, x, *, axis):
    return x.argmax(axis=axis).astype("int32")


def reduce(op, op_name, x, axis, keepdims, name):
    return op(x, axes=_axes(op_name, x, axis), keepdims=bool(keepdims), name=name)
