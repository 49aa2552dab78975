"""2-D max and average pooling kernels (NCHW) with their backward passes.

Pure functions over arrays; the output dtype is the input dtype (no float64 temporaries
from float32 inputs). Output sizes are floor mode: ``(in + pads - k) // stride + 1``.

Both poolings are computed separably -- first over the kernel columns (kw strided
ufunc calls on an (N, C, rows, OW) array), then over the kernel rows (kh calls on the
(N, C, OH, OW) output) -- so a 2x2 window costs two elementwise passes, not three, and
the same code serves overlapping and non-overlapping windows. In the backward passes the
non-overlapping case (stride >= window, e.g. 2x2 stride 2) writes each window slot with a
plain strided assignment; overlapping windows accumulate with shifted adds (never
``np.add.at``). All of it runs per batch chunk of about ``_CHUNK_BYTES`` (2 MiB) of input
so the intermediates stay in cache.

Max pooling pads with -inf (the dtype's minimum for integers), so padding never wins.
The ``argmax`` returned by :func:`max_pool2d_forward` has the shape of ``y`` and, for
floating inputs, the dtype of ``x``; it holds the window-local row-major flat index
``i*kw + j`` of the chosen element (the *first* maximum in row-major order, as in
TensorFlow/PyTorch), so the gradient goes to exactly one element per window. Average
pooling divides by the number of real (non-padding) elements of each window
(TensorFlow/OneFlow "SAME" semantics) unless ``count_include_pad=True``.
"""
from __future__ import annotations

import numpy as np

from . import parallel
from .conv import _array_module, _pads, _pair, conv_output_size

__all__ = [
    "max_pool2d_forward", "max_pool2d_backward", "avg_pool2d_forward", "avg_pool2d_backward",
]

# Batch chunk size: each chunk's slice of the input takes about this many bytes.
_CHUNK_BYTES = 2 << 20


class _PoolGeom:
    __slots__ = ("N", "C", "H", "W", "kh", "kw", "sh", "sw", "pt", "pb", "pl", "pr", "OH",
                 "OW", "Hu", "Wu")

    def __init__(self, x_shape, ksize, strides, pads, name):
        if len(x_shape) != 4:
            raise ValueError(f"{name}: input must be 4-d NCHW, got shape {tuple(x_shape)}")
        self.N, self.C, self.H, self.W = (int(s) for s in x_shape)
        self.kh, self.kw = _pair(ksize, "ksize")
        self.sh, self.sw = _pair(strides, "strides")
        if min(self.kh, self.kw, self.sh, self.sw) < 1:
            raise ValueError(f"{name}: ksize and strides must be >= 1")
        (self.pt, self.pb), (self.pl, self.pr) = _pads(pads)
        self.OH = conv_output_size(self.H, self.kh, self.sh, 1, self.pt, self.pb)
        self.OW = conv_output_size(self.W, self.kw, self.sw, 1, self.pl, self.pr)
        if self.OH < 1 or self.OW < 1:
            raise ValueError(f"{name}: window {self.kh}x{self.kw} does not fit input "
                             f"{self.H}x{self.W} with pads {pads}")
        # rows / columns of the padded input that some window reads
        self.Hu = (self.OH - 1) * self.sh + self.kh
        self.Wu = (self.OW - 1) * self.sw + self.kw

    @property
    def padded(self):
        return bool(self.pt or self.pb or self.pl or self.pr)

    @property
    def overlapping(self):
        return self.sh < self.kh or self.sw < self.kw

    def tiles(self):
        """Windows cover every padded element exactly once."""
        return (self.sh == self.kh and self.sw == self.kw
                and self.Hu == self.H + self.pt + self.pb
                and self.Wu == self.W + self.pl + self.pr)


def _chunks(n, per_sample_bytes):
    """Batch slices of about ``_CHUNK_BYTES`` of input each, of near-equal sizes: the
    intermediates of the separable passes then stay in cache. As many per parallel
    worker (:mod:`aioflow.kernels.parallel`)."""
    return parallel.batch_chunks(n, _CHUNK_BYTES // max(1, per_sample_bytes))


def _each_chunk(xp, chunks, fn):
    """``fn(slice)`` for every batch chunk; chunks write disjoint batch rows, so on numpy
    they run on the parallel workers. On a device the whole batch is one chunk: there the
    cost is per launch, and caches do not come into it."""
    if xp is not np and chunks:
        chunks = [slice(chunks[0].start, chunks[-1].stop)]
    parallel.map_shares(xp, lambda share: [fn(sl) for sl in share], chunks)


def _padded_input(xp, x, g, fill):
    """x padded with ``fill`` to the used region (Hu, Wu) of the padded coordinates, then
    cut to the rows windows read; x itself (a view, no copy) when there is no padding."""
    if not g.padded:
        return x[:, :, :g.Hu]
    out = xp.empty((x.shape[0], g.C, g.Hu, g.Wu), x.dtype)
    h1 = max(0, min(g.H, g.Hu - g.pt))
    w1 = max(0, min(g.W, g.Wu - g.pl))
    if g.pt:
        out[:, :, :g.pt] = fill
    if g.pt + h1 < g.Hu:
        out[:, :, g.pt + h1:] = fill
    if g.pl:
        out[:, :, g.pt:g.pt + h1, :g.pl] = fill
    if g.pl + w1 < g.Wu:
        out[:, :, g.pt:g.pt + h1, g.pl + w1:] = fill
    out[:, :, g.pt:g.pt + h1, g.pl:g.pl + w1] = x[:, :, :h1, :w1]
    return out


def _cols(a, j, g):
    """Columns ow*sw + j of a (N, C, rows, cols) array, for ow < OW."""
    return a[:, :, :, j:j + (g.OW - 1) * g.sw + 1:g.sw]


def _rows(a, i, g):
    """Rows oh*sh + i of a (N, C, rows, OW) array, for oh < OH."""
    return a[:, :, i:i + (g.OH - 1) * g.sh + 1:g.sh]


def _backward_chunks(xp, g, dx, fill_region):
    """Run ``fill_region(sl, region)`` per batch chunk, where region is the (n, C, Hu, Wu)
    used part of a zeroed padded-coordinate gradient buffer (dx itself when unpadded),
    then crop into dx."""
    zero = g.overlapping or not g.tiles()
    Hp, Wp = g.H + g.pt + g.pb, g.W + g.pl + g.pr

    def chunk(sl):
        if g.padded:
            buf = xp.zeros((sl.stop - sl.start, g.C, Hp, Wp), dx.dtype)
        else:
            buf = dx[sl]
            if zero:
                buf[...] = 0
        fill_region(sl, buf[:, :, :g.Hu, :g.Wu])
        if g.padded:
            dx[sl] = buf[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W]

    _each_chunk(xp, _chunks(g.N, g.C * g.H * g.W * dx.dtype.itemsize), chunk)
    return dx


# ---------------------------------------------------------------------------- max

def _argmax_dtype(x_dtype, kk):
    if x_dtype.kind == "f" and kk <= 2 ** np.finfo(x_dtype).nmant:
        return x_dtype
    return np.dtype(np.int32)


def max_pool2d_forward(x, ksize=(2, 2), strides=(2, 2), pads=((0, 0), (0, 0))):
    """Max pooling. Returns ``(y, argmax)``: y (N, C, OH, OW) in x's dtype, and argmax of the
    same shape holding the window-local row-major index ``i*kw + j`` of the first maximum
    (x's dtype for floating x, else int32). Padding is -inf and never wins."""
    xp = _array_module(x)
    g = _PoolGeom(x.shape, ksize, strides, pads, "max_pool2d")
    dtype = x.dtype
    kk = g.kh * g.kw
    y = xp.empty((g.N, g.C, g.OH, g.OW), dtype)
    argmax = xp.empty(y.shape, _argmax_dtype(dtype, kk))

    def chunk(sl):
        y[sl], argmax[sl] = _max_pool_chunk(xp, x[sl], g)

    _each_chunk(xp, _chunks(g.N, g.C * g.H * g.W * dtype.itemsize), chunk)
    return y, argmax


def _max_pool_chunk(xp, x, g):
    dtype = x.dtype
    fill = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    a = _padded_input(xp, x, g, fill)
    kk = g.kh * g.kw
    it = np.dtype(np.uint8 if kk <= 256 else np.uint16 if kk <= 65536 else np.uint32)
    # Columns first (ties keep the earlier column), then rows (ties keep the earlier row):
    # that picks the first maximum in row-major order. Index updates are branch-free
    # modular integer arithmetic, ``idx += better * (new - idx)``.
    cm = _cols(a, 0, g)
    cj = None                                   # chosen column per (row, ow); None: all 0
    for j in range(1, g.kw):
        v = _cols(a, j, g)
        better = v > cm
        if cj is None:
            cj = better.astype(it)
        else:
            cj += better * (it.type(j) - cj)
        cm = xp.maximum(cm, v)
    y = _rows(cm, 0, g)
    idx = _rows(cj, 0, g) if cj is not None else None
    for i in range(1, g.kh):
        v = _rows(cm, i, g)
        better = v > y
        base = it.type(i * g.kw)
        new = base if cj is None else _rows(cj, i, g) + base
        if idx is None:
            idx = better * new if cj is not None else better.astype(it) * base
        else:
            idx = idx + better * (new - idx)
        y = xp.maximum(y, v)
    return y, (0 if idx is None else idx)


def max_pool2d_backward(dy, argmax, x_shape, ksize=(2, 2), strides=(2, 2),
                        pads=((0, 0), (0, 0))):
    """Gradient of max pooling: dy (N, C, OH, OW) goes to the element of each window that
    ``argmax`` (from :func:`max_pool2d_forward`) names; returns dx of ``x_shape``."""
    xp = _array_module(dy)
    g = _PoolGeom(x_shape, ksize, strides, pads, "max_pool2d_backward")
    if tuple(dy.shape) != (g.N, g.C, g.OH, g.OW) or tuple(argmax.shape) != tuple(dy.shape):
        raise ValueError(f"max_pool2d_backward: dy {tuple(dy.shape)} and argmax "
                         f"{tuple(argmax.shape)} must both be {(g.N, g.C, g.OH, g.OW)}")
    dx = xp.empty((g.N, g.C, g.H, g.W), dy.dtype)
    keys = [argmax.dtype.type(k) for k in range(g.kh * g.kw)]

    def fill(sl, region):
        d, am = dy[sl], argmax[sl]
        for i in range(g.kh):
            rows = _rows(region, i, g)
            for j in range(g.kw):
                dst = _cols(rows, j, g)
                hit = am == keys[i * g.kw + j]
                if g.overlapping:
                    dst += d * hit
                else:
                    xp.multiply(d, hit, out=dst)

    return _backward_chunks(xp, g, dx, fill)


# ---------------------------------------------------------------------------- avg

def _inv_counts(g, dtype, count_include_pad):
    """1 / (number of real elements) per output position: (OH, OW) array or a scalar."""
    if count_include_pad or not g.padded:
        return dtype.type(1.0 / (g.kh * g.kw))
    starts_h = np.arange(g.OH) * g.sh - g.pt
    ch = np.minimum(starts_h + g.kh, g.H) - np.maximum(starts_h, 0)
    starts_w = np.arange(g.OW) * g.sw - g.pl
    cw = np.minimum(starts_w + g.kw, g.W) - np.maximum(starts_w, 0)
    cnt = np.maximum(ch, 0)[:, None] * np.maximum(cw, 0)[None, :]
    inv = np.where(cnt > 0, 1.0 / np.maximum(cnt, 1), 0.0)
    return inv.astype(dtype)


# Device copies of the counts, by array module, device and geometry: made at a job's first
# (eager) step, so that a step captured into a CUDA graph later copies nothing from the
# host (a stream being captured refuses host-to-device copies). Never evicted: a captured
# graph reads these arrays by address, so freeing one would leave the graph reading freed
# memory; there is one small (OH, OW) array per pooling geometry a process uses.
_DEVICE_INV_COUNTS: dict = {}


def _inv_counts_on(xp, like, g, dtype, count_include_pad):
    """:func:`_inv_counts` on ``like``'s device (a scalar stays a host scalar)."""
    inv = _inv_counts(g, dtype, count_include_pad)
    if isinstance(inv, np.generic) or xp is np:
        return inv
    key = (xp.__name__, str(getattr(like, "device", "")), g.H, g.W, g.kh, g.kw, g.sh, g.sw,
           g.pt, g.pl, g.OH, g.OW, np.dtype(dtype).str, count_include_pad)
    cached = _DEVICE_INV_COUNTS.get(key)
    if cached is None:
        cached = _DEVICE_INV_COUNTS[key] = xp.asarray(inv)
    return cached


def avg_pool2d_forward(x, ksize=(2, 2), strides=(2, 2), pads=((0, 0), (0, 0)), *,
                       count_include_pad=False):
    """Average pooling: y (N, C, OH, OW) in x's dtype; each window's sum is divided by its
    number of real (non-padding) elements (or by kh*kw with ``count_include_pad``)."""
    xp = _array_module(x)
    g = _PoolGeom(x.shape, ksize, strides, pads, "avg_pool2d")
    dtype = x.dtype
    inv = _inv_counts_on(xp, x, g, dtype, count_include_pad)
    y = xp.empty((g.N, g.C, g.OH, g.OW), dtype)

    def chunk(sl):
        a = _padded_input(xp, x[sl], g, 0)
        if g.kw == 1:
            cs = _cols(a, 0, g)
        else:
            cs = _cols(a, 0, g) + _cols(a, 1, g)
            for j in range(2, g.kw):
                cs += _cols(a, j, g)
        ys = y[sl]
        if g.kh == 1:
            ys[...] = _rows(cs, 0, g)
        else:
            xp.add(_rows(cs, 0, g), _rows(cs, 1, g), out=ys)
            for i in range(2, g.kh):
                ys += _rows(cs, i, g)
        ys *= inv

    _each_chunk(xp, _chunks(g.N, g.C * g.H * g.W * dtype.itemsize), chunk)
    return y


def avg_pool2d_backward(dy, x_shape, ksize=(2, 2), strides=(2, 2), pads=((0, 0), (0, 0)), *,
                        count_include_pad=False):
    """Gradient of average pooling: returns dx of ``x_shape`` (dy's dtype)."""
    xp = _array_module(dy)
    g = _PoolGeom(x_shape, ksize, strides, pads, "avg_pool2d_backward")
    if tuple(dy.shape) != (g.N, g.C, g.OH, g.OW):
        raise ValueError(f"avg_pool2d_backward: dy has shape {tuple(dy.shape)}, expected "
                         f"{(g.N, g.C, g.OH, g.OW)}")
    dtype = dy.dtype
    inv = _inv_counts_on(xp, dy, g, dtype, count_include_pad)
    dx = xp.empty((g.N, g.C, g.H, g.W), dtype)

    def fill(sl, region):
        gy = dy[sl] * inv
        if not g.overlapping:
            # each padded element is in at most one window: fill the first row of every
            # window slot by slot (strided), then copy that row to the window's other
            # rows (contiguous rows; a broadcasting assignment is 2-3x slower)
            first = _rows(region, 0, g)
            for j in range(g.kw):
                _cols(first, j, g)[...] = gy
            for i in range(1, g.kh):
                _rows(region, i, g)[...] = first
        else:
            # spread over the rows into (n, C, Hu, OW), then over the columns
            rs = xp.zeros(region.shape[:3] + (g.OW,), dtype)
            for i in range(g.kh):
                _rows(rs, i, g)[...] += gy
            for j in range(g.kw):
                _cols(region, j, g)[...] += rs

    return _backward_chunks(xp, g, dx, fill)
