"""Transposed 2-d convolution (NCHW data, ``(in_channels, out_channels, kh, kw)`` filters).

The op computes the *full* transposed convolution, ``(in - 1) * stride + (k - 1) *
dilation + 1`` per spatial axis with no padding: exactly the input gradient of a
convolution (the kernels of :func:`conv2d_backward_data`), so it reuses them. OneFlow's
padding and ``output_padding`` are a crop/zero-pad of this result, done in ``flow.nn``
with the ``slice`` and ``pad`` ops.
"""
from __future__ import annotations

from ..kernels import conv as conv_kernels
from ..kernels import conv_gemm
from .conv import conv2d_backward_filter, conv2d_op
from .registry import register, require_float

_NO_PADS = ((0, 0), (0, 0))


def full_size(in_size, kernel, stride, dilation):
    return (in_size - 1) * stride + (kernel - 1) * dilation + 1


def _infer_deconv(x, w, *, strides, dilations):
    require_float("conv2d_transpose", x, "input")
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"conv2d_transpose: input must be 4-d NCHW and filters 4-d "
                         f"(in, out, kh, kw), got shapes {x.shape} and {w.shape}")
    if x.dtype is not w.dtype:
        raise TypeError(f"conv2d_transpose: filters dtype {w.dtype.name} differs from "
                        f"input dtype {x.dtype.name}")
    if w.shape[0] != x.shape[1]:
        raise ValueError(f"conv2d_transpose: filters must have the input's {x.shape[1]} "
                         f"channels on axis 0, got shape {w.shape}")
    n, _, h, wd = x.shape
    _, o, kh, kw = w.shape
    return [((n, o, full_size(h, kh, strides[0], dilations[0]),
              full_size(wd, kw, strides[1], dilations[1])), x.dtype)]


def _full_shape(x, w, strides, dilations):
    return (x.shape[0], w.shape[1]) + tuple(
        full_size(n, k, s, d) for n, k, s, d in zip(x.shape[2:], w.shape[2:], strides,
                                                     dilations))


@register("conv2d_transpose", infer=_infer_deconv, splits_batch=True,
          compile_options={"algorithm": "conv_algorithm"})
def conv2d_transpose_op(ctx, x, w, *, strides, dilations, algorithm="auto"):
    return conv_kernels.conv2d_backward_data(x, w, _full_shape(x, w, strides, dilations),
                                             strides, _NO_PADS, dilations, 1,
                                             algorithm=algorithm)


@conv2d_transpose_op.kernel_for("cupy")
def _conv2d_transpose_gemm(ctx, x, w, *, strides, dilations, algorithm="auto"):
    return conv_gemm.backward_data(x, w, _full_shape(x, w, strides, dilations), strides,
                                   _NO_PADS, dilations, 1)


@conv2d_transpose_op.grad
def _conv2d_transpose_grad(node, gy):
    # y = C^T x for the convolution C with filters w: <C^T x, g> = <x, C g>, so the input
    # gradient is C applied to g and the filter gradient that of C's filters.
    x, w = node.inputs
    geometry = dict(strides=node.attrs["strides"], pads=_NO_PADS,
                    dilations=node.attrs["dilations"], groups=1)
    return [conv2d_op(gy, w, **geometry),
            conv2d_backward_filter(x, gy, w_shape=w.shape, **geometry)]
