"""2-D convolution kernels (NCHW data, OIHW weights) with their backward passes.

Pure functions over arrays; no framework state, no caches. The result dtype is
``np.result_type`` of the inputs, so float32 in gives float32 out and no float64
temporary is ever made from float32 inputs.

Two lowerings to GEMM, chosen per call by the channel count:

* **row-shift** (``C/groups * kw >= _FOLD_BELOW``, the common case): one copy builds
  ``col[c, j, phase, q, n, ow] = x_padded[n, c, q*sh + phase, ow*sw + j*dw]`` -- a
  partial im2col over the kernel *columns* only, kw times the input instead of
  kh*kw times. The kernel rows become kh GEMMs of ``(O, C*kw) @ (C*kw, OH*N*OW)`` whose
  right operands are row-offset *views* of that one buffer (a plain 2-D strided matrix
  BLAS takes without a copy), so the GEMM work is exactly that of full im2col while the
  data movement is 5x smaller for 5x5 kernels. Output columns are ordered (oh, n, ow), so
  the result takes one transposing copy into NCHW.
* **full im2col** (few input channels, e.g. the first layer of a network on 1-channel
  images, where ``C*kw`` would make GEMMs too thin): ``col[n, (c, i, j), (oh, ow)]``
  in one copy from a strided window view, then one batched GEMM that writes NCHW
  directly.

The input gradient for stride 1 is the forward pass of ``dy`` with the flipped,
transposed kernel (so it gets the same lowering); for strides > 1 (or very few input
channels per group, but for depthwise convolutions) it is kh GEMMs ``(C*kw, O) @ dy``
whose outputs are scattered with kh*kw shifted adds into a padded buffer (never
``np.add.at``), except a strided depthwise conv's on the host, summed one output phase at
a time. The filter gradient is kh GEMMs (row-shift) or one batched GEMM (im2col)
against the same column buffer as the forward.

Grouped convolutions: the im2col forward and filter gradient, and the scatter's GEMMs, are
each one GEMM stacked over the groups (numpy's matmul loops over them in C), not a Python
loop over the groups -- a depthwise conv has as many groups as channels (960 in
MobileNet-v2), and a loop of a few small numpy calls per group cost 30-200 ms a layer.

Everything runs per batch chunk whose column buffer is about ``_CHUNK_BYTES`` (4 MiB), so
the buffer a GEMM reads is still in cache (about 10% faster overall on the LeNet shapes
than one whole-batch buffer, and bounded memory for large batches).
"""
from __future__ import annotations

import numpy as np

from . import parallel, winograd

__all__ = [
    "same_padding", "conv_output_size", "conv2d_forward", "conv2d_backward_data",
    "conv2d_backward_filter",
]

# Use full im2col when C/groups * kw is below this (K of the row-shift GEMMs would be
# tiny); measured on the LeNet shapes: C=1, kw=5 -> im2col; C=32, kw=5 -> row-shift.
_FOLD_BELOW = 32
# Batch chunk size: the column buffer of one chunk takes about this many bytes.
_CHUNK_BYTES = 4 << 20
# The stride-1 input gradient runs as a transposed forward conv only when it produces
# at least this many channels per group (its GEMMs have that many rows).
_TCONV_MIN_CHANNELS = 8
# ... and a depthwise conv's (one input channel per group) always: its transposed forward
# is one GEMM stacked over the groups, 4-10x faster than the scatter's kw shifted adds per
# kernel row over every channel (MobileNet-v2's 3x3 layers, batch 8: 8x144x56x56 in 18 ms
# instead of 125, 8x960x7x7 in 5 instead of 38).
_TCONV_DEPTHWISE = True


# ----------------------------------------------------------------------------- helpers

def _array_module(a):
    """The array module of ``a``'s backend: numpy, cupy, or the strict test backend's
    (only what they share is used below)."""
    if isinstance(a, np.ndarray):
        return np
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    namespace = getattr(a, "__array_namespace__", None)
    return namespace() if namespace is not None else np


def _pair(v, name):
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    v = tuple(int(t) for t in v)
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair, got {v!r}")
    return v


def _pads(p):
    """((top, bottom), (left, right)) from that form, an int, or (ph, pw)."""
    if isinstance(p, (int, np.integer)):
        return (int(p), int(p)), (int(p), int(p))
    p = list(p)
    if len(p) == 4 and all(isinstance(t, (int, np.integer)) for t in p):
        p = [(p[0], p[1]), (p[2], p[3])]
    if len(p) != 2:
        raise ValueError(f"pads must be ((top, bottom), (left, right)), got {p!r}")
    out = []
    for t in p:
        if isinstance(t, (int, np.integer)):
            out.append((int(t), int(t)))
        else:
            a, b = t
            out.append((int(a), int(b)))
    if min(out[0] + out[1]) < 0:
        raise ValueError(f"pads must be non-negative, got {p!r}")
    return tuple(out)


def _cdiv(a, b):
    return -(-a // b)


def same_padding(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow/OneFlow "SAME": out = ceil(in/stride); total pad =
    max((out-1)*stride + (kernel-1)*dilation + 1 - in, 0); before = total//2,
    after = total - before."""
    out = _cdiv(int(in_size), int(stride))
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - in_size, 0)
    before = total // 2
    return before, total - before


def conv_output_size(in_size, kernel, stride, dilation, pad_before, pad_after) -> int:
    """``(in + pads - ((kernel-1)*dilation + 1)) // stride + 1`` (floor mode; may be <= 0
    when the kernel does not fit)."""
    span = (kernel - 1) * dilation + 1
    return (in_size + pad_before + pad_after - span) // stride + 1


class _Geom:
    """Everything about one conv's spatial layout, checked once."""

    __slots__ = ("N", "C", "H", "W", "O", "Cg", "Og", "G", "kh", "kw", "sh", "sw", "dh",
                 "dw", "pt", "pb", "pl", "pr", "OH", "OW")

    def __init__(self, x_shape, w_shape, strides, pads, dilations, groups):
        if len(x_shape) != 4 or len(w_shape) != 4:
            raise ValueError(f"conv2d: need NCHW input and OIHW weight, got shapes "
                             f"{tuple(x_shape)} and {tuple(w_shape)}")
        self.N, self.C, self.H, self.W = (int(s) for s in x_shape)
        self.O, self.Cg, self.kh, self.kw = (int(s) for s in w_shape)
        self.G = G = int(groups)
        if G < 1 or self.C != self.Cg * G or self.O % G:
            raise ValueError(f"conv2d: input has {self.C} channels and weight {tuple(w_shape)} "
                             f"with groups={groups}")
        self.Og = self.O // G
        self.sh, self.sw = _pair(strides, "strides")
        self.dh, self.dw = _pair(dilations, "dilations")
        if min(self.sh, self.sw, self.dh, self.dw) < 1:
            raise ValueError("conv2d: strides and dilations must be >= 1")
        (self.pt, self.pb), (self.pl, self.pr) = _pads(pads)
        self.OH = conv_output_size(self.H, self.kh, self.sh, self.dh, self.pt, self.pb)
        self.OW = conv_output_size(self.W, self.kw, self.sw, self.dw, self.pl, self.pr)
        if self.OH < 1 or self.OW < 1:
            raise ValueError(f"conv2d: kernel {self.kh}x{self.kw} (dilation "
                             f"{self.dh}x{self.dw}) does not fit input {self.H}x{self.W} "
                             f"with pads {pads}")

    @property
    def fold(self):
        """Full im2col (True) or row-shift (False)."""
        return self.kh == 1 or self.Cg * self.kw < _FOLD_BELOW


# ------------------------------------------------------------------ column builders

def _row_cols_rows(g: _Geom):
    """P*Q of :func:`_row_cols`: padded-input rows it stores per (c, j, n)."""
    offs = [i * g.dh for i in range(g.kh)]
    return len({o % g.sh for o in offs}) * (g.OH + max(o // g.sh for o in offs))


def _row_cols(xp, x, g: _Geom, dtype):
    """Row-shift columns: ``col[c, j, p, q, n, ow] = x_pad[n, c, q*sh + r_p, ow*sw + j*dw]``
    for the row phases ``r_p`` the kernel rows use. Returns (col, starts, Q) where kernel row
    i reads phase ``starts[i][0]`` from row ``q = oh + starts[i][1]``."""
    N, C, H, W = x.shape
    offs = [i * g.dh for i in range(g.kh)]
    phases = sorted({o % g.sh for o in offs})
    index = {r: k for k, r in enumerate(phases)}
    starts = [(index[o % g.sh], o // g.sh) for o in offs]
    Q = g.OH + max(a for _, a in starts)
    OW = g.OW
    if g.pl or g.pr:   # pad columns only; padding rows are zero-filled in col directly
        xw = xp.zeros((N, C, H, W + g.pl + g.pr), dtype)
        xw[:, :, :, g.pl:g.pl + W] = x
    else:
        xw = x
    s = xw.strides
    col = xp.empty((C, g.kw, len(phases), Q, N, OW), dtype)
    for p, r in enumerate(phases):
        r0 = r - g.pt                             # input row read by q = 0
        q0 = min(Q, max(0, _cdiv(-r0, g.sh)))
        q1 = max(q0, min(Q, (H - 1 - r0) // g.sh + 1))
        dst = col[:, :, p]                        # (C, kw, Q, N, OW)
        if q0:
            dst[:, :, :q0] = 0
        if q1 < Q:
            dst[:, :, q1:] = 0
        if q1 > q0:
            src = xp.lib.stride_tricks.as_strided(
                xw[:, :, q0 * g.sh + r0:], (C, g.kw, q1 - q0, N, OW),
                (s[1], s[3] * g.dw, s[2] * g.sh, s[0], s[3] * g.sw))
            dst[:, :, q0:q1] = src
    return col, starts, Q


def _im2col(xp, x, g: _Geom, dtype):
    """Full im2col ``col[n, (c, i, j), (oh, ow)]`` as one copy from a strided window view."""
    N, C, H, W = x.shape
    if (g.kh == g.kw == 1 and g.sh == g.sw == 1 and not (g.pt or g.pb or g.pl or g.pr)
            and x.dtype == dtype):
        return xp.ascontiguousarray(x).reshape(N, C, H * W)   # 1x1: x is its own im2col
    xpad = _padded(xp, x, g, dtype)
    s = xpad.strides
    view = xp.lib.stride_tricks.as_strided(
        xpad, (N, C, g.kh, g.kw, g.OH, g.OW),
        (s[0], s[1], s[2] * g.dh, s[3] * g.dw, s[2] * g.sh, s[3] * g.sw))
    col = xp.empty((N, C, g.kh, g.kw, g.OH, g.OW), dtype)
    col[...] = view
    return col.reshape(N, C * g.kh * g.kw, g.OH * g.OW)


def _padded(xp, x, g: _Geom, dtype):
    """x zero-padded by the geometry's pads (x itself when there are none)."""
    if not (g.pt or g.pb or g.pl or g.pr):
        return x
    N, C, H, W = x.shape
    xpad = xp.zeros((N, C, H + g.pt + g.pb, W + g.pl + g.pr), dtype)
    xpad[:, :, g.pt:g.pt + H, g.pl:g.pl + W] = x
    return xpad


# ------------------------------------------------------------------------- forward

def _batch_chunks(n, per_sample_bytes):
    """Slices of the batch, of near-equal sizes, whose column buffers take about
    ``_CHUNK_BYTES`` each, so the buffer a GEMM reads is still in cache; a multiple of
    the parallel workers when the chunks will be split between them."""
    return parallel.batch_chunks(n, _CHUNK_BYTES // max(1, per_sample_bytes),
                                 spread=parallel.blas_held())


def _each_chunk(xp, chunks, fn) -> list:
    """``[fn(share) for share in shares]``: the chunks cut into one share per parallel
    worker when the step holds the BLAS at one thread (:func:`parallel.blas_held`), so
    each worker runs its GEMMs single-threaded side by side (measured on 2 cores: about
    10% faster than OpenBLAS's own two threads on the LeNet conv2 shapes, and no BLAS
    thread left spinning for the pooling kernels); else one share, in this thread.
    ``fn`` must write only its own chunks' rows, or return partial results."""
    return parallel.map_shares(xp, fn, chunks, split=parallel.blas_held())


def _check_algorithm(algorithm):
    if algorithm not in winograd.ALGORITHMS:
        raise ValueError(f"conv2d: algorithm must be one of {winograd.ALGORITHMS}, got "
                         f"{algorithm!r}")


def conv2d_forward(x, w, strides=(1, 1), pads=((0, 0), (0, 0)), dilations=(1, 1), groups=1,
                   out=None, algorithm="auto"):
    """Cross-correlation ``y[n, o, oh, ow] = sum_{c, i, j} w[o, c, i, j] *
    x_pad[n, g*C/G + c, oh*sh + i*dh, ow*sw + j*dw]`` (o in group g).

    x: (N, C, H, W); w: (O, C/groups, kh, kw); pads: ((top, bottom), (left, right)).
    Returns y: (N, O, OH, OW), dtype ``result_type(x, w)``, written into ``out`` when given
    (any layout, must have the right shape). ``algorithm``: ``"gemm"`` (the lowerings
    above), ``"winograd"`` (:mod:`.winograd` wherever it applies, GEMM elsewhere) or
    ``"auto"`` (Winograd where it pays: see :func:`.winograd.applicable`)."""
    xp = _array_module(x)
    _check_algorithm(algorithm)
    g = _Geom(x.shape, w.shape, strides, pads, dilations, groups)
    dtype = np.result_type(x.dtype, w.dtype)
    shape = (g.N, g.O, g.OH, g.OW)
    if out is not None and tuple(out.shape) != shape:
        raise ValueError(f"conv2d_forward: out has shape {tuple(out.shape)}, need {shape}")
    y = out if out is not None else xp.empty(shape, dtype)
    if g.N == 0:
        return y
    if winograd.applicable(xp, g, dtype, algorithm):
        winograd.forward(x, w, g, dtype, y)
        return y
    isz = np.dtype(dtype).itemsize
    if g.fold:
        w2 = xp.ascontiguousarray(w, dtype=dtype).reshape(g.O, g.Cg * g.kh * g.kw)
        per_sample = g.C * g.kh * g.kw * g.OH * g.OW * isz

        def run(share):
            for sl in share:
                _forward_im2col(xp, x[sl], w2, g, dtype, y[sl])
    else:
        wt = xp.ascontiguousarray(w.transpose(2, 0, 1, 3), dtype=dtype).reshape(
            g.kh, g.O, g.Cg * g.kw)
        per_sample = g.C * g.kw * _row_cols_rows(g) * g.OW * isz

        def run(share):
            for sl in share:
                _forward_rows(xp, x[sl], wt, g, dtype, y[sl])
    _each_chunk(xp, _batch_chunks(g.N, per_sample), run)
    return y


def _forward_im2col(xp, x, w2, g, dtype, y):
    n = x.shape[0]
    col = _im2col(xp, x, g, dtype)                       # (n, C*kh*kw, L)
    K = g.Cg * g.kh * g.kw
    direct = y.flags.c_contiguous and y.dtype == dtype
    target = y if direct else xp.empty(y.shape, dtype)
    L = g.OH * g.OW
    y3 = target.reshape(n, g.O, L)
    if g.G == 1:
        xp.matmul(w2, col, out=y3)
    else:   # one GEMM stacked over (sample, group), not a Python loop over the groups
        xp.matmul(w2.reshape(g.G, g.Og, K), col.reshape(n, g.G, K, L),
                  out=y3.reshape(n, g.G, g.Og, L))
    if not direct:
        y[...] = target


def _forward_rows(xp, x, wt, g, dtype, y):
    n = x.shape[0]
    col, starts, Q = _row_cols(xp, x, g, dtype)
    NW = n * g.OW
    M = g.OH * NW
    plane = Q * NW
    K = g.Cg * g.kw
    cf = col.reshape(g.C * g.kw, -1)
    acc = xp.empty((g.O, M), dtype)
    tmp = xp.empty((g.Og, M), dtype) if g.kh > 1 else None
    for gi in range(g.G):
        o = slice(gi * g.Og, (gi + 1) * g.Og)
        rows = cf[gi * K:(gi + 1) * K]
        ao = acc[o]
        for i, (p, a) in enumerate(starts):
            s = p * plane + a * NW
            if i == 0:
                xp.matmul(wt[i, o], rows[:, s:s + M], out=ao)
            else:
                xp.matmul(wt[i, o], rows[:, s:s + M], out=tmp)
                ao += tmp
    y[...] = acc.reshape(g.O, g.OH, n, g.OW).transpose(2, 0, 1, 3)


# ------------------------------------------------------------------- backward: data

def conv2d_backward_data(dy, w, x_shape, strides=(1, 1), pads=((0, 0), (0, 0)),
                         dilations=(1, 1), groups=1, algorithm="auto"):
    """Gradient of the input: dx (shape ``x_shape``, dtype ``result_type(dy, w)``) for
    y = conv2d_forward(x, w, ...) and upstream gradient dy (N, O, OH, OW); ``algorithm``
    as for :func:`conv2d_forward`."""
    xp = _array_module(dy)
    _check_algorithm(algorithm)
    g = _Geom(x_shape, w.shape, strides, pads, dilations, groups)
    if tuple(dy.shape) != (g.N, g.O, g.OH, g.OW):
        raise ValueError(f"conv2d_backward_data: dy has shape {tuple(dy.shape)}, expected "
                         f"{(g.N, g.O, g.OH, g.OW)}")
    dtype = np.result_type(dy.dtype, w.dtype)
    keh = (g.kh - 1) * g.dh + 1
    kew = (g.kw - 1) * g.dw + 1
    depthwise = _TCONV_DEPTHWISE and g.Cg == 1 < g.G
    if (g.sh == g.sw == 1 and (g.Cg >= _TCONV_MIN_CHANNELS or depthwise)
            and max(g.pt, g.pb) <= keh - 1 and max(g.pl, g.pr) <= kew - 1):
        # stride 1: dx = dy correlated with the flipped kernel, in/out channels swapped
        wt = (w.reshape(g.G, g.Og, g.Cg, g.kh, g.kw)[:, :, :, ::-1, ::-1]
              .transpose(0, 2, 1, 3, 4).reshape(g.C, g.Og, g.kh, g.kw))
        tpads = ((keh - 1 - g.pt, keh - 1 - g.pb), (kew - 1 - g.pl, kew - 1 - g.pr))
        return conv2d_forward(dy, wt, (1, 1), tpads, (g.dh, g.dw), g.G, algorithm=algorithm)
    if xp is np and g.Cg == 1 and g.Og == 1 < g.G:
        return _backward_data_depthwise_phases(dy, w, g, dtype)
    return _backward_data_scatter(xp, dy, w, g, dtype)


def _backward_data_depthwise_phases(dy, w, g, dtype):
    """A strided depthwise conv's input gradient, one output phase at a time (host only).

    With strides (sh, sw), the padded input position ``P = tap offset + stride * output``
    of a kernel tap falls in phase ``P mod stride``; each phase (sh * sw of them) is then a
    stride-1 sum of shifted ``w[c, tap] * dy`` over that phase's taps, accumulated in a
    contiguous buffer and written into its rows and columns of dx in one strided copy. The
    scatter lowering wrote every tap into dx with strided adds, and for a depthwise conv
    its per-tap GEMMs are outer products (K = 1): MobileNet-v2's stride-2 3x3 layers,
    batch 8, took 2.5-3x as long (8x96x112x112: 86-104 ms against 31-41 ms on a busy
    2-core VM). Per batch chunk, as the other lowerings, so its buffers stay in cache."""
    Hp, Wp = g.H + g.pt + g.pb, g.W + g.pl + g.pr
    dx = np.empty((g.N, g.C, g.H, g.W), dtype)
    if g.N == 0:
        return dx
    taps = w.reshape(g.C, g.kh, g.kw).astype(dtype, copy=False)
    phases = {}                     # (row phase, column phase) -> [(i, j, row, column)]
    for i in range(g.kh):
        for j in range(g.kw):
            (a, ri), (b, rj) = divmod(i * g.dh, g.sh), divmod(j * g.dw, g.sw)
            phases.setdefault((ri, rj), []).append((i, j, a, b))
    isz = np.dtype(dtype).itemsize
    per_sample = (2 * g.C * g.OH * g.OW + 2 * g.C * Hp * Wp) * isz

    def chunk(sl):
        n = sl.stop - sl.start
        d = dy[sl].astype(dtype, copy=False)
        product = np.empty(d.shape, dtype)
        # every element is written by its phase's copy; a phase without taps stays zero
        make = np.empty if len(phases) == g.sh * g.sw else np.zeros
        dxp = make((n, g.C, Hp, Wp), dtype)
        for (ri, rj), phase_taps in phases.items():
            rows, cols = len(range(ri, Hp, g.sh)), len(range(rj, Wp, g.sw))
            acc = np.zeros((n, g.C, rows, cols), dtype)
            for i, j, a, b in phase_taps:
                h, wd = min(g.OH, rows - a), min(g.OW, cols - b)
                if h <= 0 or wd <= 0:
                    continue
                np.multiply(d, taps[:, i, j].reshape(1, g.C, 1, 1), out=product)
                acc[:, :, a:a + h, b:b + wd] += product[:, :, :h, :wd]
            dxp[:, :, ri::g.sh, rj::g.sw] = acc
        dx[sl] = dxp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W]

    _each_chunk(np, _batch_chunks(g.N, per_sample),
                lambda share: [chunk(sl) for sl in share])
    return dx


def _backward_data_scatter(xp, dy, w, g, dtype):
    """Per batch chunk: dy transposed to (O, n*OH*OW); kh GEMMs ``(C*kw, O) @ dy`` (one
    per kernel row, all kernel columns at once); kh*kw shifted adds of their outputs into
    a padded (C, n, Hp, Wp) buffer; one transposing copy into dx."""
    Hp, Wp = g.H + g.pt + g.pb, g.W + g.pl + g.pr
    dx = xp.empty((g.N, g.C, g.H, g.W), dtype)
    if g.N == 0:
        return dx
    L = g.OH * g.OW
    # wt[gi, i] = (Cg*kw, Og): rows (c, j)
    wt = xp.ascontiguousarray(
        w.reshape(g.G, g.Og, g.Cg, g.kh, g.kw).transpose(0, 3, 2, 4, 1), dtype=dtype
    ).reshape(g.G, g.kh, g.Cg * g.kw, g.Og)
    isz = np.dtype(dtype).itemsize
    _each_chunk(xp, _batch_chunks(g.N, (g.C * g.kw * L + g.C * Hp * Wp) * isz),
                lambda share: [_backward_data_chunk(xp, dy, wt, g, dtype, dx, sl)
                               for sl in share])
    return dx


def _backward_data_chunk(xp, dy, wt, g, dtype, dx, sl):
    """The scatter lowering of the input gradient for the batch rows ``sl``."""
    Hp, Wp = g.H + g.pt + g.pb, g.W + g.pl + g.pr
    L = g.OH * g.OW
    hs = (g.OH - 1) * g.sh + 1
    ws = (g.OW - 1) * g.sw + 1
    n = sl.stop - sl.start
    dyt = xp.empty((g.O, n, g.OH, g.OW), dtype)
    dyt[...] = dy[sl].transpose(1, 0, 2, 3)
    d3 = dyt.reshape(g.G, g.Og, n * L)
    # All groups at once: per kernel row one GEMM stacked over the groups, then kw shifted
    # adds over every channel (a depthwise conv's 960 groups were 960 x (kh GEMMs + kh*kw
    # adds) of a few thousand elements each: 80-230 ms where this takes a few)
    buf = xp.empty((g.G, g.Cg * g.kw, n * L), dtype)
    bv = buf.reshape(g.C, g.kw, n, g.OH, g.OW)
    dxp = xp.zeros((g.C, n, Hp, Wp), dtype)
    for i in range(g.kh):
        xp.matmul(wt[:, i], d3, out=buf)
        r = i * g.dh
        for j in range(g.kw):
            q = j * g.dw
            dst = dxp[:, :, r:r + hs:g.sh, q:q + ws:g.sw]
            dst += bv[:, j]
    dx[sl] = dxp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W].transpose(1, 0, 2, 3)


# ----------------------------------------------------------------- backward: filter

def conv2d_backward_filter(dy, x, w_shape, strides=(1, 1), pads=((0, 0), (0, 0)),
                           dilations=(1, 1), groups=1, algorithm="auto"):
    """Gradient of the weight: dw (shape ``w_shape``, dtype ``result_type(dy, x)``) for
    y = conv2d_forward(x, w, ...) and upstream gradient dy (N, O, OH, OW); ``algorithm``
    as for :func:`conv2d_forward`."""
    xp = _array_module(dy)
    _check_algorithm(algorithm)
    g = _Geom(x.shape, w_shape, strides, pads, dilations, groups)
    if tuple(dy.shape) != (g.N, g.O, g.OH, g.OW):
        raise ValueError(f"conv2d_backward_filter: dy has shape {tuple(dy.shape)}, expected "
                         f"{(g.N, g.O, g.OH, g.OW)}")
    dtype = np.result_type(dy.dtype, x.dtype)
    if g.N == 0:
        return xp.zeros(tuple(int(s) for s in w_shape), dtype)
    if algorithm == "winograd" and winograd.applicable(xp, g, dtype, algorithm):
        # Only when asked for: "auto" keeps the GEMM filter gradient, whose rounding is
        # relative to each weight's own gradient. Winograd's is relative to the largest,
        # and Adam's m/sqrt(v) magnifies that on weights with small gradients (the seed
        # LeNet's Adam losses drifted from PyTorch's by 5e-3 over 30 steps, 1.6e-5 with
        # only the forward and input gradient by Winograd).
        return winograd.backward_filter(dy, x, g, dtype)
    isz = np.dtype(dtype).itemsize
    # Each share of the chunks sums into its own accumulator; the shares' sums are added
    # in order at the end (one share, and so the serial order, unless split).
    if g.fold:
        per_sample = g.C * g.kh * g.kw * g.OH * g.OW * isz

        def run(share):
            dw = xp.zeros((g.O, g.Cg * g.kh * g.kw), dtype)
            for sl in share:
                _backward_filter_im2col(xp, dy[sl], x[sl], g, dtype, dw)
            return dw
        dw = _sum_in_order(_each_chunk(xp, _batch_chunks(g.N, per_sample), run))
        return dw.reshape(g.O, g.Cg, g.kh, g.kw)
    per_sample = g.C * g.kw * _row_cols_rows(g) * g.OW * isz

    def run_rows(share):
        dwt = xp.zeros((g.kh, g.O, g.Cg * g.kw), dtype)          # [i, o, (c, j)]
        for sl in share:
            _backward_filter_rows(xp, dy[sl], x[sl], g, dtype, dwt)
        return dwt
    dwt = _sum_in_order(_each_chunk(xp, _batch_chunks(g.N, per_sample), run_rows))
    return xp.ascontiguousarray(dwt.reshape(g.kh, g.O, g.Cg, g.kw).transpose(1, 2, 0, 3))


def _sum_in_order(parts):
    total = parts[0]
    for part in parts[1:]:
        total += part
    return total


def _backward_filter_im2col(xp, dy, x, g, dtype, dw):
    n = x.shape[0]
    col = _im2col(xp, x, g, dtype)                       # (n, C*kh*kw, L)
    K = g.Cg * g.kh * g.kw
    L = g.OH * g.OW
    dyf = xp.ascontiguousarray(dy, dtype=dtype).reshape(n, g.G, g.Og, L)
    # one GEMM stacked over (sample, group): (Og, L) @ (L, K) for each
    part = xp.matmul(dyf, col.reshape(n, g.G, K, L).transpose(0, 1, 3, 2))
    dw += part.sum(axis=0).reshape(g.O, K)


def _backward_filter_rows(xp, dy, x, g, dtype, dwt):
    n = x.shape[0]
    col, starts, Q = _row_cols(xp, x, g, dtype)
    NW = n * g.OW
    M = g.OH * NW
    plane = Q * NW
    K = g.Cg * g.kw
    cf = col.reshape(g.C * g.kw, -1)
    # dy laid out (M, O) so each GEMM is ``rows @ dy`` with neither operand transposed:
    # OpenBLAS runs that form 25% faster than ``dy @ rows.T`` (160x4900 @ 4900x64 float32,
    # the seed LeNet's conv2: 0.56 vs 0.76 ms), and the transposing copy of dy is needed
    # either way.
    dyt = xp.empty((g.OH, n, g.OW, g.O), dtype)
    dyt[...] = dy.transpose(2, 0, 3, 1)
    d2t = dyt.reshape(M, g.O)
    tmp = xp.empty((K, g.Og), dtype)
    for gi in range(g.G):
        o = slice(gi * g.Og, (gi + 1) * g.Og)
        rows = cf[gi * K:(gi + 1) * K]
        for i, (p, a) in enumerate(starts):
            s = p * plane + a * NW
            xp.matmul(rows[:, s:s + M], d2t[:, o], out=tmp)
            dwt[i, o] += tmp.T
