"""3-d convolution and pooling ops (NCDHW data, OIDHW weights) over the N-d kernels of
:mod:`aioflow.kernels.convnd`; NDHWC is a transpose around them (in ``flow.nn``)."""
from __future__ import annotations

from ..kernels import convnd
from .registry import register, require_float


def _infer_conv3d(x, w, *, strides, pads, dilations, groups):
    require_float("conv3d", x, "input")
    if x.ndim != 5 or w.ndim != 5:
        raise ValueError(f"conv3d: input must be 5-d NCDHW and filters 5-d OIDHW, got "
                         f"shapes {x.shape} and {w.shape}")
    if x.dtype is not w.dtype:
        raise TypeError(f"conv3d: filters dtype {w.dtype.name} differs from input dtype "
                        f"{x.dtype.name}")
    c, (o, ci) = x.shape[1], w.shape[:2]
    if o % groups or ci * groups != c:
        raise ValueError(f"conv3d: input has {c} channels, filters expect {ci} per group "
                         f"with groups={groups} (and {o} outputs must divide by groups)")
    out = convnd.output_shape(x.shape[2:], w.shape[2:], strides, pads, dilations)
    if min(out) <= 0:
        raise ValueError(f"conv3d: kernel {w.shape[2:]} does not fit input {x.shape[2:]} "
                         "with these strides/padding")
    return [((x.shape[0], o) + out, x.dtype)]


@register("conv3d", infer=_infer_conv3d)
def conv3d_op(ctx, x, w, *, strides, pads, dilations, groups):
    return convnd.conv_forward(ctx.xp, x, w, strides, pads, dilations, groups)


@register("conv3d_backward_data",
          infer=lambda dy, w, *, x_shape, **kw: [(tuple(x_shape), dy.dtype)],
          differentiable=False)
def conv3d_backward_data(ctx, dy, w, *, x_shape, strides, pads, dilations, groups):
    return convnd.conv_backward_data(ctx.xp, dy, w, x_shape, strides, pads, dilations,
                                     groups)


@register("conv3d_backward_filter",
          infer=lambda dy, x, *, w_shape, **kw: [(tuple(w_shape), dy.dtype)],
          differentiable=False)
def conv3d_backward_filter(ctx, dy, x, *, w_shape, strides, pads, dilations, groups):
    return convnd.conv_backward_filter(ctx.xp, dy, x, w_shape, strides, pads, dilations,
                                       groups)


@conv3d_op.grad
def _conv3d_grad(node, gy):
    x, w = node.inputs
    geometry = {k: node.attrs[k] for k in ("strides", "pads", "dilations", "groups")}
    return [conv3d_backward_data(gy, w, x_shape=x.shape, **geometry),
            conv3d_backward_filter(gy, x, w_shape=w.shape, **geometry)]


def _infer_pool3d(name):
    def infer(x, *, ksize, strides, pads):
        require_float(name, x, "input")
        if x.ndim != 5:
            raise ValueError(f"{name}: input must be 5-d NCDHW, got shape {x.shape}")
        out = convnd.output_shape(x.shape[2:], ksize, strides, pads)
        if min(out) <= 0:
            raise ValueError(f"{name}: window {ksize} does not fit input {x.shape[2:]}")
        return [(x.shape[:2] + out, x.dtype)]
    return infer


def _infer_max_pool3d(x, **geometry):
    (shape, dtype), = _infer_pool3d("max_pool3d")(x, **geometry)
    return [(shape, dtype), (shape, dtype)]  # the second output holds argmax positions


@register("max_pool3d", infer=_infer_max_pool3d)
def max_pool3d_op(ctx, x, *, ksize, strides, pads):
    return convnd.max_pool_forward(ctx.xp, x, ksize, strides, pads)


@register("max_pool3d_grad",
          infer=lambda dy, argmax, *, x_shape, **kw: [(tuple(x_shape), dy.dtype)],
          differentiable=False)
def max_pool3d_grad(ctx, dy, argmax, *, x_shape, ksize, strides, pads):
    return convnd.max_pool_backward(ctx.xp, dy, argmax, x_shape, ksize, strides, pads)


@max_pool3d_op.grad
def _max_pool3d_grad(node, gy, g_argmax):
    geometry = {k: node.attrs[k] for k in ("ksize", "strides", "pads")}
    return [max_pool3d_grad(gy, node.outputs[1], x_shape=node.inputs[0].shape, **geometry)]


@register("avg_pool3d", infer=_infer_pool3d("avg_pool3d"))
def avg_pool3d_op(ctx, x, *, ksize, strides, pads):
    return convnd.avg_pool_forward(ctx.xp, x, ksize, strides, pads)


@register("avg_pool3d_grad",
          infer=lambda dy, *, x_shape, **kw: [(tuple(x_shape), dy.dtype)],
          differentiable=False)
def avg_pool3d_grad(ctx, dy, *, x_shape, ksize, strides, pads):
    return convnd.avg_pool_backward(ctx.xp, dy, x_shape, ksize, strides, pads)


@avg_pool3d_op.grad
def _avg_pool3d_grad(node, gy):
    geometry = {k: node.attrs[k] for k in ("ksize", "strides", "pads")}
    return [avg_pool3d_grad(gy, x_shape=node.inputs[0].shape, **geometry)]
