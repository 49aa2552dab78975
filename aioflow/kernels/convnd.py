"""N-d convolution and pooling kernels (channels-first: ``(N, C, *spatial)`` data,
``(O, C/groups, *kernel)`` weights), written once against ``xp`` for every backend.

They serve the 3-d ops (``conv3d``, ``max_pool3d``, ``avg_pool3d``); the 2-d ops keep
their tuned kernels (kernels/conv.py, kernels/pool.py). Each pass loops over the kernel
window's offsets: for one offset the window of every output position is a strided slice
of the padded input, so a convolution is a sum of one channel GEMM per offset and a
pooling a running max/sum -- no index arithmetic, the same code for any rank. Outputs are
floor mode, ``(in + pads - ((k - 1) * dilation + 1)) // stride + 1``; pads are
non-negative ``(before, after)`` pairs, one per spatial axis.
"""
from __future__ import annotations

import itertools
import math

__all__ = ["output_shape", "conv_forward", "conv_backward_data", "conv_backward_filter",
           "max_pool_forward", "max_pool_backward", "avg_pool_forward", "avg_pool_backward"]


def output_shape(spatial, ksize, strides, pads, dilations=None):
    dilations = dilations or (1,) * len(spatial)
    return tuple((n + b + a - ((k - 1) * d + 1)) // s + 1 for n, k, s, (b, a), d in
                 zip(spatial, ksize, strides, pads, dilations))


def _window(offset, strides, dilations, out):
    """The strided slices selecting, for one kernel offset, the input element of every
    output position (in padded coordinates)."""
    return tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                 for o, s, d, n in zip(offset, strides, dilations, out))


def _offsets(ksize):
    return itertools.product(*(range(k) for k in ksize))


def _pad(xp, x, pads, value=0):
    widths = ((0, 0), (0, 0)) + tuple(tuple(p) for p in pads)
    if not any(b or a for b, a in pads):
        return x
    return xp.pad(x, widths, constant_values=value)


def _crop(padded, pads, spatial):
    index = (slice(None), slice(None)) + tuple(slice(b, b + n) for (b, _), n in
                                               zip(pads, spatial))
    return padded[index]


# -- convolution ----------------------------------------------------------------------------


def conv_forward(xp, x, w, strides, pads, dilations, groups):
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ksize = w.shape[2:]
    out = output_shape(x.shape[2:], ksize, strides, pads, dilations)
    og, size = o // groups, math.prod(out)
    padded = _pad(xp, x, pads).reshape((n, groups, cg) + tuple(
        s + b + a for s, (b, a) in zip(x.shape[2:], pads)))
    wg = w.reshape((groups, og, cg) + tuple(ksize))
    y = xp.zeros((n, groups, og, size), dtype=x.dtype)
    for offset in _offsets(ksize):
        window = padded[(Ellipsis,) + _window(offset, strides, dilations, out)]
        y += xp.matmul(wg[(Ellipsis,) + offset], window.reshape(n, groups, cg, size))
    return y.reshape((n, o) + out)


def conv_backward_data(xp, dy, w, x_shape, strides, pads, dilations, groups):
    n, c = x_shape[:2]
    o, cg = w.shape[:2]
    ksize, out = w.shape[2:], dy.shape[2:]
    og, size = o // groups, math.prod(out)
    padded_spatial = tuple(s + b + a for s, (b, a) in zip(x_shape[2:], pads))
    padded = xp.zeros((n, groups, cg) + padded_spatial, dtype=dy.dtype)
    wg = w.reshape((groups, og, cg) + tuple(ksize))
    dyg = dy.reshape(n, groups, og, size)
    for offset in _offsets(ksize):
        w_t = xp.swapaxes(wg[(Ellipsis,) + offset], -1, -2)          # (G, Cg, Og)
        contribution = xp.matmul(w_t, dyg).reshape((n, groups, cg) + tuple(out))
        padded[(Ellipsis,) + _window(offset, strides, dilations, out)] += contribution
    return xp.ascontiguousarray(_crop(padded.reshape((n, c) + padded_spatial), pads,
                                      x_shape[2:]))


def conv_backward_filter(xp, dy, x, w_shape, strides, pads, dilations, groups):
    n, c = x.shape[:2]
    o, cg = w_shape[:2]
    ksize, out = w_shape[2:], dy.shape[2:]
    og, size = o // groups, math.prod(out)
    padded = _pad(xp, x, pads).reshape((n, groups, cg) + tuple(
        s + b + a for s, (b, a) in zip(x.shape[2:], pads)))
    dyg = dy.reshape(n, groups, og, size)
    dw = xp.zeros((groups, og, cg) + tuple(ksize), dtype=dy.dtype)
    for offset in _offsets(ksize):
        window = padded[(Ellipsis,) + _window(offset, strides, dilations, out)]
        window = window.reshape(n, groups, cg, size)
        dw[(Ellipsis,) + offset] = xp.matmul(dyg, xp.swapaxes(window, -1, -2)).sum(axis=0)
    return dw.reshape(tuple(w_shape))


# -- pooling --------------------------------------------------------------------------------


def max_pool_forward(xp, x, ksize, strides, pads):
    """``(y, argmax)``: argmax holds, in x's dtype, the window-local row-major index of the
    first maximum of each window (padding, at -inf, never wins)."""
    out = output_shape(x.shape[2:], ksize, strides, pads)
    padded = _pad(xp, x, pads, value=-xp.inf)
    ones = (1,) * len(ksize)
    best = argmax = None
    for index, offset in enumerate(_offsets(ksize)):
        window = padded[(Ellipsis,) + _window(offset, strides, ones, out)]
        if best is None:
            best, argmax = window.copy(), xp.zeros(window.shape, dtype=x.dtype)
            continue
        better = window > best
        best = xp.where(better, window, best)
        argmax = xp.where(better, x.dtype.type(index), argmax)
    return best, argmax


def max_pool_backward(xp, dy, argmax, x_shape, ksize, strides, pads):
    ones = (1,) * len(ksize)
    padded = xp.zeros(tuple(x_shape[:2]) + tuple(
        s + b + a for s, (b, a) in zip(x_shape[2:], pads)), dtype=dy.dtype)
    zero = dy.dtype.type(0)
    for index, offset in enumerate(_offsets(ksize)):
        window = _window(offset, strides, ones, dy.shape[2:])
        padded[(Ellipsis,) + window] += xp.where(argmax == index, dy, zero)
    return xp.ascontiguousarray(_crop(padded, pads, x_shape[2:]))


def _window_counts(xp, x_shape, ksize, strides, pads, dtype):
    """How many real (non-padding) elements each output window covers."""
    real = _pad(xp, xp.ones((1, 1) + tuple(x_shape[2:]), dtype=dtype), pads)
    out = output_shape(x_shape[2:], ksize, strides, pads)
    ones = (1,) * len(ksize)
    return sum(real[(Ellipsis,) + _window(offset, strides, ones, out)]
               for offset in _offsets(ksize))


def avg_pool_forward(xp, x, ksize, strides, pads):
    """The mean of each window's real elements (padding is not counted)."""
    out = output_shape(x.shape[2:], ksize, strides, pads)
    padded = _pad(xp, x, pads)
    ones = (1,) * len(ksize)
    total = sum(padded[(Ellipsis,) + _window(offset, strides, ones, out)]
                for offset in _offsets(ksize))
    return (total / _window_counts(xp, x.shape, ksize, strides, pads, x.dtype)).astype(
        x.dtype, copy=False)


def avg_pool_backward(xp, dy, x_shape, ksize, strides, pads):
    ones = (1,) * len(ksize)
    share = dy / _window_counts(xp, x_shape, ksize, strides, pads, dy.dtype)
    padded = xp.zeros(tuple(x_shape[:2]) + tuple(
        s + b + a for s, (b, a) in zip(x_shape[2:], pads)), dtype=dy.dtype)
    for offset in _offsets(ksize):
        padded[(Ellipsis,) + _window(offset, strides, ones, dy.shape[2:])] += share
    return xp.ascontiguousarray(_crop(padded, pads, x_shape[2:]))
