"""Convolution as whole-batch im2col + one batched GEMM: the device backends' kernels.

On a GPU a kernel launch costs microseconds of host time whatever its size, so the CPU
kernels' habits (batch chunks that fit a cache, one small GEMM per kernel row) turn a
LeNet step into hundreds of launches. Here each pass is a handful of launches over the
whole batch: the strided window view copied once (im2col), one batched matrix product
(cuBLAS on CuPy), and for the input gradient ``kh * kw`` strided adds (col2im). Written
against ``xp`` only; ``tests/kernels/test_conv_gemm.py`` checks them on numpy arrays
against the CPU kernels (numpy itself runs these broadcast batched products slowly).

Layouts: ``col[n, g, (c, i, j), (oh, ow)]`` with ``c`` a channel of group ``g``; weights
``w[g, o, (c, i, j)]``.
"""
from __future__ import annotations

from .conv import _Geom, _im2col, _array_module
from .matmul_dispatch import matmul

__all__ = ["forward", "backward_data", "backward_filter"]


def _columns(xp, x, g: _Geom):
    col = _im2col(xp, x, g, x.dtype)                       # (N, C*kh*kw, L)
    return col.reshape(g.N, g.G, g.Cg * g.kh * g.kw, g.OH * g.OW)


def forward(x, w, strides, pads, dilations, groups):
    xp = _array_module(x)
    g = _Geom(x.shape, w.shape, strides, pads, dilations, groups)
    w3 = xp.ascontiguousarray(w).reshape(g.G, g.Og, g.Cg * g.kh * g.kw)
    y = matmul(xp, w3, _columns(xp, x, g))                 # (N, G, Og, L)
    return y.reshape(g.N, g.O, g.OH, g.OW)


def backward_filter(dy, x, w_shape, strides, pads, dilations, groups):
    xp = _array_module(dy)
    g = _Geom(x.shape, w_shape, strides, pads, dilations, groups)
    dy4 = xp.ascontiguousarray(dy).reshape(g.N, g.G, g.Og, g.OH * g.OW)
    per_image = matmul(xp, dy4, _columns(xp, x, g).transpose(0, 1, 3, 2))  # (N, G, Og, K)
    return per_image.sum(axis=0).reshape(tuple(int(s) for s in w_shape))


def backward_data(dy, w, x_shape, strides, pads, dilations, groups):
    xp = _array_module(dy)
    g = _Geom(x_shape, w.shape, strides, pads, dilations, groups)
    w3 = xp.ascontiguousarray(w).reshape(g.G, g.Og, g.Cg * g.kh * g.kw)
    dy4 = xp.ascontiguousarray(dy).reshape(g.N, g.G, g.Og, g.OH * g.OW)
    dcol = matmul(xp, w3.transpose(0, 2, 1), dy4)         # (N, G, K, L)
    dcol = dcol.reshape(g.N, g.C, g.kh, g.kw, g.OH, g.OW)
    Hp, Wp = g.H + g.pt + g.pb, g.W + g.pl + g.pr
    dxpad = xp.zeros((g.N, g.C, Hp, Wp), dy.dtype)
    for i in range(g.kh):
        r = i * g.dh
        for j in range(g.kw):
            q = j * g.dw
            dxpad[:, :, r:r + g.sh * (g.OH - 1) + 1:g.sh,
                  q:q + g.sw * (g.OW - 1) + 1:g.sw] += dcol[:, :, i, j]
    if g.pt or g.pb or g.pl or g.pr:
        return xp.ascontiguousarray(dxpad[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W])
    return dxpad
