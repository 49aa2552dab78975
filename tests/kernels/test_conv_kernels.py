"""aioflow.kernels.conv against a naive float64 direct-loop reference.

Every case runs through each lowering (full im2col / row-shift for the forward pass and
the filter gradient; transposed-forward / scatter for the input gradient), forced by
patching the module's selection thresholds.
"""
import functools
import zlib

import numpy as np
import pytest

from aioflow.kernels import conv as K


# ------------------------------------------------------------------ reference

def conv2d_ref(x, w, strides, pads, dilations, groups):
    """Direct loop over output positions, float64."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    (sh, sw), (dh, dw) = strides, dilations
    (pt, pb), (pl, pr) = pads
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    keh, kew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    oh = (h + pt + pb - keh) // sh + 1
    ow = (wd + pl + pr - kew) // sw + 1
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        wg = w[g * og:(g + 1) * og]
        for a in range(oh):
            for b in range(ow):
                win = xp[:, g * cg:(g + 1) * cg, a * sh:a * sh + keh:dh, b * sw:b * sw + kew:dw]
                y[:, g * og:(g + 1) * og, a, b] = np.tensordot(
                    win, wg, axes=([1, 2, 3], [1, 2, 3]))
    return y


# ------------------------------------------------------------------ cases

def _same(hw, k, s, d):
    return tuple(K.same_padding(i, kk, ss, dd) for i, kk, ss, dd in zip(hw, k, s, d))


#   id, x shape, w shape (O, C/groups, kh, kw), strides, pads ("SAME" or explicit),
#   dilations, groups
CASES = [
    ("3x3-same", (2, 3, 7, 7), (4, 3, 3, 3), (1, 1), "SAME", (1, 1), 1),
    ("5x5-same-s2-g2", (2, 4, 9, 8), (6, 2, 5, 5), (2, 2), "SAME", (1, 1), 2),
    ("1x1", (2, 5, 6, 7), (3, 5, 1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    ("1x1-s2-pad", (2, 4, 7, 6), (3, 4, 1, 1), (2, 2), ((1, 0), (0, 1)), (1, 1), 1),
    ("3x3-nonsq-stride-dil-asym-g2", (2, 4, 10, 9), (4, 2, 3, 3), (1, 2), ((1, 2), (0, 1)),
     (2, 1), 2),
    ("3x5-s21-d22", (2, 6, 11, 12), (4, 6, 3, 5), (2, 1), ((2, 1), (3, 0)), (2, 2), 1),
    ("5x5-lenet-c1", (3, 1, 12, 12), (5, 1, 5, 5), (1, 1), "SAME", (1, 1), 1),
    ("5x5-wide-g2", (2, 16, 8, 8), (8, 8, 5, 5), (1, 1), "SAME", (1, 1), 2),
    ("depthwise-1x3", (2, 4, 6, 6), (4, 1, 1, 3), (2, 2), ((0, 0), (1, 1)), (1, 1), 4),
    ("5x1", (2, 3, 9, 5), (2, 3, 5, 1), (1, 1), ((2, 2), (0, 0)), (1, 1), 1),
    ("pads-beyond-kernel", (1, 2, 5, 5), (2, 2, 3, 3), (2, 2), ((3, 3), (3, 3)), (1, 1), 1),
    ("stride-gt-kernel", (2, 9, 8, 9), (4, 9, 2, 3), (3, 3), ((0, 1), (1, 0)), (1, 1), 1),
    ("5x3-same-s3-d2", (2, 3, 13, 11), (2, 3, 5, 3), (3, 2), "SAME", (2, 2), 1),
    ("4x2-same-s1-asym", (2, 3, 7, 6), (4, 3, 4, 2), (1, 1), "SAME", (1, 1), 1),
    ("3x3-s1-d2-asym", (2, 4, 8, 9), (3, 4, 3, 3), (1, 1), ((2, 1), (0, 3)), (2, 2), 1),
    ("valid-s2-dil2-g2", (1, 8, 11, 10), (4, 4, 3, 3), (2, 2), ((0, 0), (0, 0)), (2, 2), 2),
    # MobileNet's depthwise 3x3 (one channel per group), ResNeXt's grouped 3x3
    ("depthwise-3x3-same", (2, 6, 7, 7), (6, 1, 3, 3), (1, 1), "SAME", (1, 1), 6),
    ("depthwise-3x3-same-s2", (2, 5, 8, 7), (5, 1, 3, 3), (2, 2), "SAME", (1, 1), 5),
    ("depthwise-x2-3x3-d2", (2, 4, 9, 8), (8, 1, 3, 3), (1, 1), "SAME", (2, 2), 4),
    # a strided depthwise conv's input gradient goes by output phases: strides that do
    # not divide the dilated taps, asymmetric pads, a stride above the kernel
    ("depthwise-3x3-s23-d21-asym", (2, 4, 11, 10), (4, 1, 3, 3), (2, 3), ((1, 2), (0, 1)),
     (2, 1), 4),
    ("depthwise-2x2-s3", (3, 3, 10, 9), (3, 1, 2, 2), (3, 3), ((0, 1), (1, 0)), (1, 1), 3),
    ("g4-3x3-same", (3, 16, 6, 5), (8, 4, 3, 3), (1, 1), "SAME", (1, 1), 4),
]


def _geometry(case):
    _, xs, ws, s, p, d, g = case
    if p == "SAME":
        p = _same(xs[2:], ws[2:], s, d)
    return xs, ws, s, p, d, g


IDS = [c[0] for c in CASES]


@functools.lru_cache(maxsize=None)
def _data(case_id):
    case = next(c for c in CASES if c[0] == case_id)
    xs, ws, s, p, d, g = _geometry(case)
    rng = np.random.default_rng(zlib.crc32(case_id.encode()))
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    y = conv2d_ref(x, w, s, p, d, g)
    cot = rng.standard_normal(y.shape)
    return x, w, y, cot, (s, p, d, g)


@pytest.fixture(params=["im2col", "rowshift"])
def lowering(request, monkeypatch):
    monkeypatch.setattr(K, "_FOLD_BELOW", 10**9 if request.param == "im2col" else 0)
    return request.param


@pytest.fixture(params=["tconv", "scatter"])
def data_grad_path(request, monkeypatch):
    monkeypatch.setattr(K, "_TCONV_MIN_CHANNELS", 0 if request.param == "tconv" else 10**9)
    monkeypatch.setattr(K, "_TCONV_DEPTHWISE", request.param == "tconv")
    return request.param


# ------------------------------------------------------------------ geometry helpers

@pytest.mark.parametrize("args, expected", [
    ((28, 5, 1), (2, 2)), ((14, 2, 2), (0, 0)), ((5, 2, 2), (0, 1)), ((7, 3, 2), (1, 1)),
    ((6, 3, 2), (0, 1)), ((10, 3, 1, 2), (2, 2)), ((1, 5, 1), (2, 2)), ((4, 1, 3), (0, 0)),
    ((8, 4, 1), (1, 2)), ((11, 3, 3, 2), (1, 2)),
])
def test_same_padding(args, expected):
    assert K.same_padding(*args) == expected


@pytest.mark.parametrize("args, expected", [
    ((28, 5, 1, 1, 2, 2), 28), ((28, 2, 2, 1, 0, 0), 14), ((7, 2, 2, 1, 0, 1), 4),
    ((7, 3, 2, 2, 0, 0), 2), ((5, 3, 2, 1, 3, 3), 5), ((3, 5, 1, 1, 0, 0), -1),
])
def test_conv_output_size(args, expected):
    assert K.conv_output_size(*args) == expected


@pytest.mark.parametrize("in_size, k, s, d", [(28, 5, 1, 1), (13, 5, 3, 2), (7, 2, 2, 1),
                                              (9, 4, 2, 1), (1, 3, 2, 1)])
def test_same_padding_gives_ceil_output(in_size, k, s, d):
    before, after = K.same_padding(in_size, k, s, d)
    assert K.conv_output_size(in_size, k, s, d, before, after) == -(-in_size // s)


# ------------------------------------------------------------------ forward

@pytest.mark.parametrize("case_id", IDS)
def test_forward_matches_reference(case_id, lowering):
    x, w, y_ref, _, (s, p, d, g) = _data(case_id)
    x0, w0 = x.copy(), w.copy()
    y = K.conv2d_forward(x, w, s, p, d, g)
    assert y.dtype == np.float64 and y.shape == y_ref.shape
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(x, x0)          # inputs untouched
    np.testing.assert_array_equal(w, w0)


@pytest.mark.parametrize("case_id", IDS)
def test_float32_stays_float32(case_id, lowering, data_grad_path):
    x, w, y_ref, cot, (s, p, d, g) = _data(case_id)
    x32, w32, cot32 = (a.astype(np.float32) for a in (x, w, cot))
    y = K.conv2d_forward(x32, w32, s, p, d, g)
    dx = K.conv2d_backward_data(cot32, w32, x.shape, s, p, d, g)
    dw = K.conv2d_backward_filter(cot32, x32, w.shape, s, p, d, g)
    assert (y.dtype, dx.dtype, dw.dtype) == (np.float32,) * 3
    scale = np.abs(y_ref).max()
    np.testing.assert_allclose(y, y_ref, atol=1e-5 * scale, rtol=0)
    dx64 = K.conv2d_backward_data(cot, w, x.shape, s, p, d, g)
    dw64 = K.conv2d_backward_filter(cot, x, w.shape, s, p, d, g)
    np.testing.assert_allclose(dx, dx64, atol=1e-5 * np.abs(dx64).max(), rtol=0)
    np.testing.assert_allclose(dw, dw64, atol=1e-5 * np.abs(dw64).max(), rtol=0)


def test_out_argument(lowering):
    x, w, y_ref, _, (s, p, d, g) = _data("5x5-wide-g2")
    out = np.full(y_ref.shape, np.nan)
    y = K.conv2d_forward(x, w, s, p, d, g, out=out)
    assert y is out
    np.testing.assert_allclose(out, y_ref, rtol=1e-12, atol=1e-12)
    # a non-contiguous out (NHWC memory seen as NCHW) is filled too
    base = np.full((y_ref.shape[0], y_ref.shape[2], y_ref.shape[3], y_ref.shape[1]), np.nan)
    view = base.transpose(0, 3, 1, 2)
    assert K.conv2d_forward(x, w, s, p, d, g, out=view) is view
    np.testing.assert_allclose(view, y_ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError):
        K.conv2d_forward(x, w, s, p, d, g, out=np.empty((1, 2, 3, 4)))


def test_lenet_shapes_pick_expected_lowerings():
    # first layer (1 input channel) -> im2col; second (32 channels) -> row-shift
    conv1 = K._Geom((100, 1, 28, 28), (32, 1, 5, 5), (1, 1), ((2, 2), (2, 2)), (1, 1), 1)
    conv2 = K._Geom((100, 32, 14, 14), (64, 32, 5, 5), (1, 1), ((2, 2), (2, 2)), (1, 1), 1)
    assert conv1.fold and not conv2.fold


@pytest.mark.parametrize("xs, ws, kwargs", [
    ((1, 4, 5, 5), (2, 3, 3, 3), {}),                           # channel mismatch
    ((1, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}),                # O not divisible by groups
    ((1, 2, 3, 3), (2, 2, 5, 5), {}),                           # kernel does not fit
    ((1, 2, 5, 5), (2, 2, 3, 3), {"dilations": (3, 3)}),        # dilated kernel does not fit
    ((1, 2, 5, 5), (2, 2, 3, 3), {"strides": (0, 1)}),
    ((2, 5, 5), (2, 2, 3, 3), {}),                              # not 4-d
])
def test_bad_geometry_raises(xs, ws, kwargs):
    with pytest.raises(ValueError):
        K.conv2d_forward(np.zeros(xs), np.zeros(ws), **kwargs)


# ------------------------------------------------------------------ backward

N_PROBES = 24
EPS = 1e-3


def _numeric_grad(f, a, rng):
    """Central differences of scalar f at N_PROBES random coordinates of a."""
    flat = rng.choice(a.size, size=min(N_PROBES, a.size), replace=False)
    out = []
    for k in flat:
        idx = np.unravel_index(k, a.shape)
        orig = a[idx]
        a[idx] = orig + EPS
        fp = f()
        a[idx] = orig - EPS
        fm = f()
        a[idx] = orig
        out.append((fp - fm) / (2 * EPS))
    return [np.unravel_index(k, a.shape) for k in flat], np.array(out)


@functools.lru_cache(maxsize=None)
def _numeric(case_id):
    x, w, _, cot, (s, p, d, g) = _data(case_id)
    x, w = x.copy(), w.copy()
    rng = np.random.default_rng(7)

    def f():
        return float((conv2d_ref(x, w, s, p, d, g) * cot).sum())

    return _numeric_grad(f, x, rng), _numeric_grad(f, w, rng)


@pytest.mark.parametrize("case_id", IDS)
def test_backward_data_central_differences(case_id, data_grad_path):
    x, w, y_ref, cot, (s, p, d, g) = _data(case_id)
    dx = K.conv2d_backward_data(cot, w, x.shape, s, p, d, g)
    assert dx.shape == x.shape and dx.dtype == np.float64
    (idx, num), _ = _numeric(case_id)
    np.testing.assert_allclose([dx[i] for i in idx], num, rtol=1e-7, atol=1e-8)
    # every coordinate at once: <conv(x), cot> == <x, dx> (linearity)
    np.testing.assert_allclose((x * dx).sum(), (y_ref * cot).sum(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case_id", IDS)
def test_backward_filter_central_differences(case_id, lowering):
    x, w, y_ref, cot, (s, p, d, g) = _data(case_id)
    dw = K.conv2d_backward_filter(cot, x, w.shape, s, p, d, g)
    assert dw.shape == w.shape and dw.dtype == np.float64
    _, (idx, num) = _numeric(case_id)
    np.testing.assert_allclose([dw[i] for i in idx], num, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose((w * dw).sum(), (y_ref * cot).sum(), rtol=1e-10, atol=1e-10)


def test_backward_data_with_row_shift_transposed_conv(monkeypatch):
    """The stride-1 input gradient runs as a forward conv; force its inner lowering both
    ways on a case where that conv has many channels."""
    x, w, _, cot, (s, p, d, g) = _data("5x5-wide-g2")
    monkeypatch.setattr(K, "_TCONV_MIN_CHANNELS", 0)
    results = []
    for fold_below in (0, 10**9):
        monkeypatch.setattr(K, "_FOLD_BELOW", fold_below)
        results.append(K.conv2d_backward_data(cot, w, x.shape, s, p, d, g))
    monkeypatch.setattr(K, "_TCONV_MIN_CHANNELS", 10**9)
    scatter = K.conv2d_backward_data(cot, w, x.shape, s, p, d, g)
    for r in results:
        np.testing.assert_allclose(r, scatter, rtol=1e-12, atol=1e-12)


def test_backward_shape_checks():
    x, w, y, cot, (s, p, d, g) = _data("3x3-same")
    with pytest.raises(ValueError):
        K.conv2d_backward_data(cot[:, :, :-1], w, x.shape, s, p, d, g)
    with pytest.raises(ValueError):
        K.conv2d_backward_filter(cot[:1], x, w.shape, s, p, d, g)


# ------------------------------------------------------------------ batch chunking

@pytest.mark.parametrize("n, per_sample, chunk_bytes, sizes", [
    (100, 161280, 4 << 20, [25] * 4),
    (10, 100, 1000, [10]),
    (10, 100, 300, [2, 3, 2, 3]),
    (7, 1000, 1, [1] * 7),
    (5, 10**9, 4 << 20, [1] * 5),
])
def test_batch_chunks_cover_the_batch(monkeypatch, n, per_sample, chunk_bytes, sizes):
    monkeypatch.setattr(K, "_CHUNK_BYTES", chunk_bytes)
    chunks = K._batch_chunks(n, per_sample)
    assert [c.stop - c.start for c in chunks] == sizes
    assert chunks[0].start == 0 and chunks[-1].stop == n
    assert all(a.stop == b.start for a, b in zip(chunks, chunks[1:]))


@pytest.mark.parametrize("case_id", ["5x5-lenet-c1", "5x5-wide-g2", "5x3-same-s3-d2",
                                     "3x3-nonsq-stride-dil-asym-g2", "depthwise-3x3-same",
                                     "depthwise-3x3-same-s2", "g4-3x3-same"])
def test_chunked_batch_matches_whole_batch(case_id, lowering, data_grad_path, monkeypatch):
    x, w, y_ref, cot, (s, p, d, g) = _data(case_id)
    x = np.concatenate([x, x[:1] * 0.5])               # odd batch: uneven chunks
    cot = np.concatenate([cot, cot[:1]])
    whole = (K.conv2d_forward(x, w, s, p, d, g),
             K.conv2d_backward_data(cot, w, x.shape, s, p, d, g),
             K.conv2d_backward_filter(cot, x, w.shape, s, p, d, g))
    per_sample = 2 * x[0].size * w.shape[2] * w.shape[3] * 8
    for chunk_bytes in (1, per_sample):                  # one sample / about two per chunk
        monkeypatch.setattr(K, "_CHUNK_BYTES", chunk_bytes)
        chunked = (K.conv2d_forward(x, w, s, p, d, g),
                   K.conv2d_backward_data(cot, w, x.shape, s, p, d, g),
                   K.conv2d_backward_filter(cot, x, w.shape, s, p, d, g))
        for a, b in zip(chunked, whole):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(whole[0][:-1], y_ref, rtol=1e-12, atol=1e-12)
