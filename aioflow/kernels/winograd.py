"""Winograd convolution F(m x m, r x r): stride-1 convolutions with fewer multiplications.

Why: on CPUs whose BLAS already runs near its peak, the only way to make a convolution
much faster is to do less arithmetic. Winograd's minimal filtering algorithm computes an
m x m block of outputs of an r x r filter from an (m+r-1)^2 input tile with (m+r-1)^2
multiplications per channel pair instead of m^2 r^2: for the seed LeNet's 5x5 kernels
with m = 2, 36 instead of 100, a 2.8x cut. The tile and filter transforms are small
matrix products; what remains is (m+r-1)^2 independent GEMMs over (tiles x channels).
The seed LeNet's conv2 forward (100x32x14x14 -> 64 channels, float32) took 31 ms of one
core as row-shift GEMMs and 19 ms this way (2-core AMD EPYC; see docs/benchmarks.md).

The cost is rounding: the transforms mix values of different sizes, so float32 results
differ from the exact convolution by about 2e-6 of their magnitude instead of 3e-7
(tested against a float64 reference). ``flow.config.conv_algorithm("gemm")`` turns it off;
``"auto"`` uses it for the forward pass and the input gradient but not the filter
gradient (see ``conv2d_backward_filter``).

In terms of the standard matrices (Lavin & Gray, 2016): with ``d`` an input tile and
``g`` a filter, one output block is ``A^T [(G g G^T) * (B^T d B)] A``. They come from
Toom-Cook interpolation at the points ``_POINTS`` plus infinity, built exactly with
fractions (:func:`transforms`); the points 0, +-1, 2, -1/2 gave the smallest float32
error of the sets tried for F(2, 5).

Layout, per batch chunk of n images (all buffers reused across a worker's chunks):

1. ``xpad[h, n, w, c]``: the input, zero-padded, rows outermost;
2. the row transform as one (a x a) @ (a x n*Wp*C) GEMM per tile row (overlapping row
   windows are contiguous blocks of ``xpad``);
3. one strided copy gathers the column windows, then a batched GEMM does the column
   transform, giving ``V[k, tile, c]`` for the a*a points k;
4. a*a GEMMs ``V[k] (tiles, C) @ U[k] (C, O)``;
5. one GEMM with ``kron(A^T, A^T)`` maps the a*a products to the m*m outputs of each
   tile, and m*m strided copies write them into NCHW.

The filter gradient runs the same algebra transposed: ``dU[k] = V[k]^T @ dM[k]`` with
``dM = kron(A, A) dY``, summed over the batch, then ``dw = G^T dU G``.
"""
from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from . import parallel

__all__ = ["transforms", "applicable", "forward", "backward_filter", "max_of_phases",
           "ALGORITHMS"]

ALGORITHMS = ("auto", "gemm", "winograd")

# Output block size m per square kernel size r: the kernels Winograd runs for (with
# "auto"). Each (m, r) needs a = m + r - 1 points; a = 6 keeps float32 error ~1e-6.
_TILE = {5: 2}
_POINTS = {6: (0, 1, -1, 2, Fraction(-1, 2))}
# "auto" uses Winograd only when both channel counts are at least this: the a*a GEMMs
# have K = C and N = O, and thin ones lose what the transforms cost.
_MIN_CHANNELS = 16
# Bytes of the per-chunk work buffers (V and the products): small enough to stay in a
# core's cache between the steps that write and read them.
_CHUNK_BYTES = 2 << 20
# "auto" leaves a convolution to the GEMM lowering when one image's work buffers would
# take more than this: a chunk is at least one image, and Winograd's buffers are about
# 6x the GEMM lowering's per image (a 224x224, 64-channel 5x5 layer: 231 MiB per worker).
_MAX_SAMPLE_BYTES = 32 << 20
# ... and when the batch has fewer output positions than this (N * OH * OW): the filter
# transform and the per-call set-up then cost more than the smaller GEMMs save (the
# seed LeNet's batch-1 predict step: 1.08 ms with GEMMs, 1.21 ms with Winograd).
_MIN_OUTPUT_POSITIONS = 1024


@functools.lru_cache(maxsize=None)
def transforms(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T, G, B^T)`` of F(m, r) in float64, shapes (m, a), (a, r), (a, a).

    >>> import numpy as np
    >>> AT, G, BT = transforms(2, 5)
    >>> d, g = np.arange(6.0), np.array([1.0, 0, 2, 0, -1])
    >>> (AT @ ((G @ g) * (BT @ d))).round(12)   # the 1-d correlation of d with g
    array([0., 2.])
    """
    a = m + r - 1
    points = [Fraction(p) for p in _POINTS[a]]

    def poly(roots):          # coefficients, lowest first, of prod (x - root)
        coef = [Fraction(1)]
        for root in roots:
            coef = [Fraction(0)] + coef
            for i in range(len(coef) - 1):
                coef[i] -= root * coef[i + 1]
        return coef

    at = [[p ** i for p in points] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = []
    bt = []
    for k, p in enumerate(points):
        others = points[:k] + points[k + 1:]
        scale = np.prod([p - q for q in others])
        g.append([p ** j / scale for j in range(r)])
        bt.append(poly(others) + [Fraction(0)])
    g.append([Fraction(int(j == r - 1)) for j in range(r)])
    bt.append(poly(points))
    return tuple(np.array(v, dtype=np.float64) for v in (at, g, bt))


def applicable(xp, g, dtype, algorithm: str = "auto") -> bool:
    """Whether to run the convolution of geometry ``g`` (``conv._Geom``) this way:
    numpy arrays of float32/float64, one group, stride 1, no dilation, a square kernel
    size in ``_TILE``, and (unless ``algorithm == "winograd"``) enough channels, enough
    output positions in the batch, and images small enough that one's work buffers stay
    under ``_MAX_SAMPLE_BYTES``."""
    if algorithm == "gemm" or xp is not np:
        return False
    if np.dtype(dtype) not in (np.float32, np.float64):
        return False
    if (g.G != 1 or (g.sh, g.sw, g.dh, g.dw) != (1, 1, 1, 1) or g.kh != g.kw
            or g.kh not in _TILE):
        return False
    if algorithm == "winograd":
        return True
    return (min(g.C, g.O) >= _MIN_CHANNELS
            and g.N * g.OH * g.OW >= _MIN_OUTPUT_POSITIONS
            and _Tiles.per_sample_bytes(g, dtype) <= _MAX_SAMPLE_BYTES)


class _Tiles:
    """The tiling of one geometry and the work buffers for chunks of ``n`` images."""

    def __init__(self, g, n: int, dtype, channels_out: int):
        self.g = g
        r = g.kh
        self.m = m = _TILE[r]
        self.a = a = m + r - 1
        self.th, self.tw = -(-g.OH // m), -(-g.OW // m)
        self.Hp, self.Wp = self.th * m + r - 1, self.tw * m + r - 1
        self.tiles = self.th * n * self.tw
        at, _, bt = transforms(m, r)
        self.bt = bt.astype(dtype)
        self.aa = np.kron(at, at).astype(dtype)              # (m*m, a*a)
        self.xpad = np.zeros((self.Hp, n, self.Wp, g.C), dtype)
        self.rows = np.empty((self.th, a, n, self.Wp, g.C), dtype)
        self.cols = np.empty((a, a, self.th, n, self.tw, g.C), dtype)
        self.v = np.empty((a, a, self.tiles * g.C), dtype)
        self.prod = np.empty((a * a, self.tiles, channels_out), dtype)
        # outputs by position in the tile; zero past OH, OW (read by the filter gradient)
        self.out = np.zeros((m, m, self.th, n, self.tw, channels_out), dtype)

    @staticmethod
    def per_sample_bytes(g, dtype) -> int:
        m = _TILE[g.kh]
        a = m + g.kh - 1
        tiles = -(-g.OH // m) * -(-g.OW // m)
        return a * a * tiles * (g.C + g.O) * np.dtype(dtype).itemsize

    def input_transform(self, x) -> np.ndarray:
        """``V[k, tile, c]`` (a*a, tiles, C) of the images ``x`` (n, C, H, W)."""
        g, m, a = self.g, self.m, self.a
        self.xpad[g.pt:g.pt + g.H, :, g.pl:g.pl + g.W] = x.transpose(2, 0, 3, 1)
        for ty in range(self.th):       # rows: overlapping windows are contiguous blocks
            np.matmul(self.bt, self.xpad[m * ty:m * ty + a].reshape(a, -1),
                      out=self.rows[ty].reshape(a, -1))
        s = self.rows.strides
        self.cols[...] = np.lib.stride_tricks.as_strided(
            self.rows, self.cols.shape, (s[1], s[3], s[0], s[2], s[3] * m, s[4]))
        np.matmul(self.bt, self.cols.reshape(a, a, -1), out=self.v)
        return self.v.reshape(a * a, self.tiles, g.C)

    def blocks(self, out):
        """``(i, j, view)``: the m*m strided views of ``out`` (n, O, OH, OW) that the
        tiles' output positions (i, j) fill, each shaped (n, O, rows, cols)."""
        m = self.m
        for i in range(m):
            for j in range(m):
                yield i, j, out[:, :, i::m, j::m]


def max_of_phases(p00, p01, p10, p11):
    """Max over four planes of one shape, the phases of 2x2 pooling windows in row-major
    order, and the index (uint8, 0-3) of the first plane holding it: ties keep the
    earlier plane, as max pooling keeps the first maximum in row-major window order.
    Separable like the pooling kernel (columns, then rows) with byte-sized index
    arithmetic: 0.06 ms for four 10x32x196 float32 planes, against 0.9 ms for a
    ``copyto(..., where=)`` per plane."""
    right0 = (p01 > p00).view(np.uint8)                # second column wins, per row
    right1 = (p11 > p10).view(np.uint8)
    top = np.maximum(p00, p01)
    bottom = np.maximum(p10, p11)
    lower = (bottom > top).view(np.uint8)              # the second row wins
    np.maximum(top, bottom, out=top)
    index = right0 + lower * (np.uint8(2) + right1 - right0)
    return top, index


def _shares(g, dtype, fn):
    """Run ``fn(tiles_for, share)`` over the batch chunks, split between the workers when
    the step holds the BLAS at one thread (as the GEMM convolutions do)."""
    chunks = parallel.batch_chunks(
        g.N, max(1, _CHUNK_BYTES // _Tiles.per_sample_bytes(g, dtype)),
        spread=parallel.blas_held())

    def run(share):
        cache: dict[int, _Tiles] = {}

        def tiles_for(n, channels_out):
            if n not in cache:
                cache[n] = _Tiles(g, n, dtype, channels_out)
            return cache[n]
        return fn(tiles_for, share)
    return parallel.map_shares(np, run, chunks, split=parallel.blas_held())


def forward(x, w, g, dtype, y, pooled=None) -> None:
    """``y[...] = conv2d(x, w)`` for a geometry :func:`applicable` accepted.

    With ``pooled = (y_max, argmax)`` instead (and y None), the convolution's 2x2 max
    pooling with stride 2: each tile's 2x2 output block is one pooling window, so its max
    is taken over the four output planes of the tile transform, and the full output is
    never written (:func:`max_of_phases`; needs m = 2 and even OH, OW)."""
    if pooled is not None and (_TILE[g.kh] != 2 or g.OH % 2 or g.OW % 2):
        raise ValueError("winograd.forward: pooling needs 2x2 tiles and an even output size")
    m, r = _TILE[g.kh], g.kh
    a = m + r - 1
    u = _filter_transform(w, transforms(m, r)[1], dtype)

    def run(tiles_for, share):
        for sl in share:
            n = sl.stop - sl.start
            t = tiles_for(n, g.O)
            v = t.input_transform(x[sl])
            np.matmul(v, u, out=t.prod)
            np.matmul(t.aa, t.prod.reshape(a * a, -1), out=t.out.reshape(m * m, -1))
            if pooled is not None:           # planes (th, n, tw, O) in window order
                top, argmax = max_of_phases(t.out[0, 0], t.out[0, 1], t.out[1, 0],
                                            t.out[1, 1])
                pooled[0][sl] = top.transpose(1, 3, 0, 2)
                pooled[1][sl] = argmax.transpose(1, 3, 0, 2)
                continue
            for i, j, view in t.blocks(y[sl]):
                rows, cols = view.shape[2], view.shape[3]
                view[...] = t.out[i, j, :rows, :, :cols].transpose(1, 3, 0, 2)
    _shares(g, dtype, run)


def _filter_transform(w, gm, dtype):
    """``U[k, c, o] = (G w[o, c] G^T)[k]`` (a*a, C, O), computed in float64 and rounded
    once, as two GEMMs over all filters at once: 0.22 ms for the seed LeNet's conv2,
    against 0.46 ms for the same ``einsum`` (it runs on every call)."""
    O, C, r, _ = w.shape
    a = gm.shape[0]
    t = w.astype(np.float64).reshape(-1, r) @ gm.T                      # [o, c, i, b]
    t = np.ascontiguousarray(t.reshape(O, C, r, a).transpose(2, 0, 1, 3)).reshape(r, -1)
    u = (gm @ t).reshape(a, O, C, a)                                    # [a, o, c, b]
    return np.ascontiguousarray(u.transpose(0, 3, 2, 1), dtype=dtype).reshape(a * a, C, O)


def backward_filter(dy, x, g, dtype) -> np.ndarray:
    """The weight gradient (O, C, r, r) of the convolution :func:`forward` computes."""
    m, r = _TILE[g.kh], g.kh
    a = m + r - 1

    def run(tiles_for, share):
        du = np.zeros((a * a, g.C, g.O), dtype)
        for sl in share:
            n = sl.stop - sl.start
            t = tiles_for(n, g.O)
            v = t.input_transform(x[sl])
            for i, j, view in t.blocks(dy[sl]):
                rows, cols = view.shape[2], view.shape[3]
                t.out[i, j, :rows, :, :cols] = view.transpose(2, 0, 3, 1)
            np.matmul(t.aa.T, t.out.reshape(m * m, -1), out=t.prod.reshape(a * a, -1))
            du += np.matmul(v.transpose(0, 2, 1), t.prod)
        return du
    parts = _shares(g, dtype, run)
    du = parts[0].astype(np.float64)
    for part in parts[1:]:
        du += part
    _, gm, _ = transforms(m, r)
    dw = np.einsum("ai,abco,bj->ocij", gm, du.reshape(a, a, g.C, g.O), gm, optimize=True)
    return np.ascontiguousarray(dw, dtype=dtype)
