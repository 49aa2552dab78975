"""Convolution and pooling ops (NCHW data, OIHW weights) over the kernels in
:mod:`aioflow.kernels`."""
from __future__ import annotations

from ..kernels import conv as conv_kernels
from ..kernels import conv_gemm
from ..kernels import conv_pool as conv_pool_kernels
from ..kernels import pool as pool_kernels
from .registry import register, require_float


def _infer_conv(x, w, *, strides, pads, dilations, groups):
    require_float("conv2d", x, "input")
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"conv2d: input must be 4-d NCHW and weight 4-d OIHW, got shapes "
                         f"{x.shape} and {w.shape}")
    if x.dtype is not w.dtype:
        raise TypeError(f"conv2d: weight dtype {w.dtype.name} differs from input dtype "
                        f"{x.dtype.name}")
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    if c % groups or o % groups or ci * groups != c:
        raise ValueError(f"conv2d: input has {c} channels, weight expects {ci} per group with "
                         f"groups={groups}")
    oh = conv_kernels.conv_output_size(h, kh, strides[0], dilations[0], *pads[0])
    ow = conv_kernels.conv_output_size(wd, kw, strides[1], dilations[1], *pads[1])
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d: kernel {kh}x{kw} does not fit input {h}x{wd} with these "
                         "strides/padding")
    return [((n, o, oh, ow), x.dtype)]


# The convolution algorithm (flow.config.conv_algorithm) is chosen when a job is compiled.
_ALGORITHM = {"algorithm": "conv_algorithm"}


@register("conv2d", infer=_infer_conv, splits_batch=True, compile_options=_ALGORITHM)
def conv2d_op(ctx, x, w, *, strides, pads, dilations, groups, algorithm="auto"):
    return conv_kernels.conv2d_forward(x, w, strides, pads, dilations, groups,
                                       algorithm=algorithm)


@register("conv2d_backward_data",
          infer=lambda dy, w, *, x_shape, **kw: [(tuple(x_shape), dy.dtype)],
          differentiable=False, splits_batch=True, compile_options=_ALGORITHM)
def conv2d_backward_data(ctx, dy, w, *, x_shape, strides, pads, dilations, groups,
                         algorithm="auto"):
    return conv_kernels.conv2d_backward_data(dy, w, x_shape, strides, pads, dilations, groups,
                                             algorithm=algorithm)


@register("conv2d_backward_filter",
          infer=lambda dy, x, *, w_shape, **kw: [(tuple(w_shape), dy.dtype)],
          differentiable=False, splits_batch=True, compile_options=_ALGORITHM)
def conv2d_backward_filter(ctx, dy, x, *, w_shape, strides, pads, dilations, groups,
                           algorithm="auto"):
    return conv_kernels.conv2d_backward_filter(dy, x, w_shape, strides, pads, dilations,
                                               groups, algorithm=algorithm)


# The GPU's own kernels: whole-batch im2col + one batched GEMM per pass
# (kernels/conv_gemm.py), a few launches each instead of the CPU kernels' many small ones.
# (Not the strict backend's: numpy runs these broadcast batched products 5-20x slower than
# the CPU kernels, which the strict backend runs instead; tests/kernels/test_conv_gemm.py
# checks them against the CPU kernels on numpy arrays.)
for _backend in ("cupy",):
    conv2d_op.kernel_for(_backend)(
        lambda ctx, x, w, *, strides, pads, dilations, groups, algorithm="auto":
        conv_gemm.forward(x, w, strides, pads, dilations, groups))
    conv2d_backward_data.kernel_for(_backend)(
        lambda ctx, dy, w, *, x_shape, strides, pads, dilations, groups, algorithm="auto":
        conv_gemm.backward_data(dy, w, x_shape, strides, pads, dilations, groups))
    conv2d_backward_filter.kernel_for(_backend)(
        lambda ctx, dy, x, *, w_shape, strides, pads, dilations, groups, algorithm="auto":
        conv_gemm.backward_filter(dy, x, w_shape, strides, pads, dilations, groups))


def conv_geometry(node):
    """The geometry attrs of a convolution node (conv2d and the fused ops built on it)."""
    return {k: node.attrs[k] for k in ("strides", "pads", "dilations", "groups")}


def _conv_input_grads(x, w, gy, geometry):
    """[d/dx, d/dw] of ``conv2d(x, w, **geometry)`` for the output gradient ``gy``."""
    return [conv2d_backward_data(gy, w, x_shape=x.shape, **geometry),
            conv2d_backward_filter(gy, x, w_shape=w.shape, **geometry)]


@conv2d_op.grad
def _conv_grad(node, gy):
    return _conv_input_grads(*node.inputs, gy, conv_geometry(node))


def _infer_pool(name):
    def infer(x, *, ksize, strides, pads):
        require_float(name, x, "input")
        if x.ndim != 4:
            raise ValueError(f"{name}: input must be 4-d NCHW, got shape {x.shape}")
        n, c, h, w = x.shape
        oh = conv_kernels.conv_output_size(h, ksize[0], strides[0], 1, *pads[0])
        ow = conv_kernels.conv_output_size(w, ksize[1], strides[1], 1, *pads[1])
        if oh <= 0 or ow <= 0:
            raise ValueError(f"{name}: window {ksize} does not fit input {h}x{w}")
        return [((n, c, oh, ow), x.dtype)]
    return infer


def _infer_max_pool(x, **geometry):
    (shape, dtype), = _infer_pool("max_pool2d")(x, **geometry)
    return [(shape, dtype), (shape, dtype)]  # the second output holds argmax positions


@register("max_pool2d", infer=_infer_max_pool)
def max_pool2d_op(ctx, x, *, ksize, strides, pads):
    return pool_kernels.max_pool2d_forward(x, ksize, strides, pads)


@register("max_pool2d_grad",
          infer=lambda dy, argmax, *, x_shape, **kw: [(tuple(x_shape), dy.dtype)],
          differentiable=False)
def max_pool2d_grad(ctx, dy, argmax, *, x_shape, ksize, strides, pads):
    return pool_kernels.max_pool2d_backward(dy, argmax, x_shape, ksize, strides, pads)


@max_pool2d_op.grad
def _max_pool_grad(node, gy, g_argmax):
    geometry = {k: node.attrs[k] for k in ("ksize", "strides", "pads")}
    return [max_pool2d_grad(gy, node.outputs[1], x_shape=node.inputs[0].shape, **geometry)]


def _infer_conv_max_pool(x, w, **geometry):
    (shape, dtype), = _infer_conv(x, w, **geometry)
    n, o, oh, ow = shape
    if oh < 2 or ow < 2:
        raise ValueError(f"conv2d_max_pool2d: a 2x2 window does not fit the convolution's "
                         f"{oh}x{ow} output")
    pooled = (n, o, oh // 2, ow // 2)
    return [(pooled, dtype), (pooled, dtype)]  # as max_pool2d: values, argmax positions


# A CPU kernel (Winograd tiles and phase-ordered im2col): the compiler fuses convolution
# and pooling only for backends that have a kernel for this op.
@register("conv2d_max_pool2d", infer=_infer_conv_max_pool, splits_batch=True,
          compile_options=_ALGORITHM, backends=("numpy",))
def conv2d_max_pool2d_op(ctx, x, w, *, strides, pads, dilations, groups, algorithm="auto"):
    """conv2d then max_pool2d with ksize 2, stride 2, no padding, in one kernel (the
    compiler's ``fuse_conv_max_pool`` rewrite makes it): the full-size convolution
    output is never stored."""
    return conv_pool_kernels.conv2d_max_pool2x2(x, w, strides, pads, dilations, groups,
                                                algorithm=algorithm)


@conv2d_max_pool2d_op.grad
def _conv_max_pool_grad(node, gy, g_argmax):
    x, w = node.inputs
    geometry = conv_geometry(node)
    (conv_shape, _), = _infer_conv(x, w, **geometry)
    gconv = max_pool2d_grad(gy, node.outputs[1], x_shape=conv_shape, ksize=(2, 2),
                            strides=(2, 2), pads=((0, 0), (0, 0)))
    return _conv_input_grads(x, w, gconv, geometry)


@register("avg_pool2d", infer=_infer_pool("avg_pool2d"))
def avg_pool2d_op(ctx, x, *, ksize, strides, pads):
    return pool_kernels.avg_pool2d_forward(x, ksize, strides, pads)


@register("avg_pool2d_grad",
          infer=lambda dy, *, x_shape, **kw: [(tuple(x_shape), dy.dtype)],
          differentiable=False)
def avg_pool2d_grad(ctx, dy, *, x_shape, ksize, strides, pads):
    return pool_kernels.avg_pool2d_backward(dy, x_shape, ksize, strides, pads)


@avg_pool2d_op.grad
def _avg_pool_grad(node, gy):
    geometry = {k: node.attrs[k] for k in ("ksize", "strides", "pads")}
    return [avg_pool2d_grad(gy, x_shape=node.inputs[0].shape, **geometry)]
