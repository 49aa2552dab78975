"""A convolution and the 2x2, stride-2 max pooling after it, in one kernel.

Why: pooling a convolution's output is a pass over memory that the convolution has just
written in a different order. When the convolution itself lays its output out as the
four phases of the pooling window (output positions (2i + a, 2j + b) for a, b in {0, 1},
each phase a contiguous plane), the pooling is an elementwise max of four planes, and the
full-size output is never stored at all:

* Winograd F(2x2, 5x5) computes each 2x2 output block of a tile together: its tile
  transform's four output planes *are* the phases (:func:`winograd.forward`);
* the full-im2col lowering (few input channels: the first layer of a network) gets them by
  ordering its column buffer's output positions by phase, which costs nothing (it is the
  order of a strided view's axes).

Elsewhere (strided or grouped convolutions, row-shift lowering, odd output sizes, other
array modules) the kernel runs the convolution and then the pooling kernel. The results
are those of :func:`conv.conv2d_forward` followed by :func:`pool.max_pool2d_forward`
with ksize 2, stride 2 and no padding: the same max and the same argmax (the first
maximum of the window in row-major order).
"""
from __future__ import annotations

import numpy as np

from . import conv, pool, winograd

__all__ = ["conv2d_max_pool2x2"]


def conv2d_max_pool2x2(x, w, strides=(1, 1), pads=((0, 0), (0, 0)), dilations=(1, 1),
                       groups=1, algorithm="auto"):
    """``max_pool2d_forward(conv2d_forward(x, w, ...), 2, 2)``: returns ``(y, argmax)``,
    both (N, O, OH // 2, OW // 2), argmax as :func:`pool.max_pool2d_forward` gives it.

    >>> import numpy as np
    >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
    >>> y, argmax = conv2d_max_pool2x2(x, np.ones((1, 1, 1, 1)))
    >>> y[0, 0], argmax[0, 0]
    (array([[ 5.,  7.],
           [13., 15.]]), array([[3., 3.],
           [3., 3.]]))
    """
    xp = conv._array_module(x)
    conv._check_algorithm(algorithm)
    g = conv._Geom(x.shape, w.shape, strides, pads, dilations, groups)
    dtype = np.result_type(x.dtype, w.dtype)
    fused_winograd = (winograd.applicable(xp, g, dtype, algorithm)
                      and winograd._TILE[g.kh] == 2)
    fused_im2col = xp is np and g.fold and g.G == 1
    if g.N == 0 or g.OH % 2 or g.OW % 2 or not (fused_winograd or fused_im2col):
        y = conv.conv2d_forward(x, w, strides, pads, dilations, groups, algorithm=algorithm)
        return pool.max_pool2d_forward(y, (2, 2), (2, 2), ((0, 0), (0, 0)))
    shape = (g.N, g.O, g.OH // 2, g.OW // 2)
    top = np.empty(shape, dtype)
    argmax = np.empty(shape, pool._argmax_dtype(np.dtype(dtype), 4))
    if fused_winograd:
        winograd.forward(x, w, g, dtype, None, pooled=(top, argmax))
        return top, argmax
    w2 = np.ascontiguousarray(w, dtype=dtype).reshape(g.O, g.C * g.kh * g.kw)
    # a chunk's column buffer, its GEMM output and the max's temporaries stay in cache:
    # the seed LeNet's conv1 + pool1 took 3.5-3.8 ms on 2 workers in chunks of about 14
    # images, 5.8-7.6 ms in the 51-image chunks the column buffer alone would allow
    per_sample = (g.C * g.kh * g.kw + 2 * g.O) * g.OH * g.OW * np.dtype(dtype).itemsize

    def run(share):
        for sl in share:
            _im2col_pooled(x[sl], w2, g, dtype, top[sl], argmax[sl])
    conv._each_chunk(np, conv._batch_chunks(g.N, per_sample), run)
    return top, argmax


def _im2col_pooled(x, w2, g, dtype, top, argmax):
    """One batch chunk of the full-im2col lowering with its output positions ordered
    (row phase, column phase, OH/2, OW/2), then the max over the four phases."""
    n = x.shape[0]
    xpad = conv._padded(np, x, g, dtype)
    s = xpad.strides
    ph, pw = g.OH // 2, g.OW // 2
    view = np.lib.stride_tricks.as_strided(
        xpad, (n, g.C, g.kh, g.kw, 2, 2, ph, pw),
        (s[0], s[1], s[2] * g.dh, s[3] * g.dw, s[2] * g.sh, s[3] * g.sw,
         2 * s[2] * g.sh, 2 * s[3] * g.sw))
    col = np.empty(view.shape, dtype)
    col[...] = view
    out = np.matmul(w2, col.reshape(n, g.C * g.kh * g.kw, 4 * ph * pw))
    phases = out.reshape(n, g.O, 4, ph, pw)
    top[...], argmax[...] = winograd.max_of_phases(*(phases[:, :, k] for k in range(4)))
