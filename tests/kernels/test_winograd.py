"""aioflow.kernels.winograd: the transforms, the three conv passes against the float64
direct-loop reference and central differences, when "auto" picks it, its split over
workers, and the compile option that turns it off."""
import numpy as np
import pytest

import aioflow as flow
from aioflow.kernels import conv as K
from aioflow.kernels import parallel
from aioflow.kernels import winograd as WG
from tolerances import WINOGRAD_GROWTH, assert_close_to_summation_error, product_term_scale

from .test_conv_kernels import conv2d_ref


@pytest.mark.parametrize("r", sorted(WG._TILE))
def test_transforms_compute_the_1d_correlation_exactly(r):
    m = WG._TILE[r]
    at, g, bt = WG.transforms(m, r)
    rng = np.random.default_rng(0)
    for _ in range(5):
        d, f = rng.standard_normal(m + r - 1), rng.standard_normal(r)
        want = [sum(f[j] * d[i + j] for j in range(r)) for i in range(m)]
        np.testing.assert_allclose(at @ ((g @ f) * (bt @ d)), want, rtol=0, atol=1e-12)


#   x shape, O, pads: odd output sizes (a last tile half outside), asymmetric and large
#   pads, a batch the chunks do not divide evenly, the seed LeNet's conv2
CASES = {
    "odd-9x11": ((7, 16, 9, 11), 24, ((2, 2), (2, 2))),
    "asymmetric-pads": ((3, 20, 13, 8), 16, ((0, 1), (2, 0))),
    "pads-wider-than-input": ((2, 16, 5, 5), 16, ((4, 4), (4, 4))),
    "lenet-conv2": ((5, 32, 14, 14), 64, ((2, 2), (2, 2))),
}


def _case(name, dtype, seed=0):
    x_shape, o, pads = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((o, x_shape[1], 5, 5)) / np.sqrt(x_shape[1] * 25)
    return x.astype(dtype), w.astype(dtype), pads


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_three_passes_match_the_reference(name, dtype, rtol):
    x, w, pads = _case(name, dtype)
    g = K._Geom(x.shape, w.shape, (1, 1), pads, (1, 1), 1)
    assert WG.applicable(np, g, dtype, "winograd")
    want = conv2d_ref(x, w, (1, 1), pads, (1, 1), 1)
    y = K.conv2d_forward(x, w, pads=pads, algorithm="winograd")
    assert y.dtype == dtype and y.shape == want.shape
    scale = np.abs(want).max()
    np.testing.assert_allclose(y, want, rtol=0, atol=rtol * scale)
    # The gradients against the GEMM lowering in float64 (itself checked against central
    # differences in test_conv_kernels).
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    dx_want = K.conv2d_backward_data(dy64, w64, x.shape, pads=pads, algorithm="gemm")
    dw_want = K.conv2d_backward_filter(dy64, x64, w.shape, pads=pads, algorithm="gemm")
    dx = K.conv2d_backward_data(dy, w, x.shape, pads=pads, algorithm="winograd")
    dw = K.conv2d_backward_filter(dy, x, w.shape, pads=pads, algorithm="winograd")
    assert dx.dtype == dw.dtype == dtype
    np.testing.assert_allclose(dx, dx_want, rtol=0, atol=rtol * np.abs(dx_want).max())
    np.testing.assert_allclose(dw, dw_want, rtol=0, atol=2 * rtol * np.abs(dw_want).max())


def test_filter_gradient_central_differences():
    x, w, pads = _case("odd-9x11", np.float64)
    x, w = x[:2, :16, :6, :7], w[:16]
    rng = np.random.default_rng(3)
    dy = rng.standard_normal(K.conv2d_forward(x, w, pads=pads, algorithm="gemm").shape)
    dw = K.conv2d_backward_filter(dy, x, w.shape, pads=pads, algorithm="winograd")
    eps = 1e-6
    for index in [(0, 0, 0, 0), (3, 7, 2, 4), (15, 15, 4, 1), (8, 2, 1, 3)]:
        wp, wm = w.copy(), w.copy()
        wp[index] += eps
        wm[index] -= eps
        loss = lambda ww: np.sum(dy * K.conv2d_forward(x, ww, pads=pads,  # noqa: E731
                                                        algorithm="winograd"))
        assert abs((loss(wp) - loss(wm)) / (2 * eps) - dw[index]) < 1e-6


def test_float32_error_stays_close_to_the_gemm_lowering():
    """What "auto" costs in accuracy: within 10x of the GEMM lowering's rounding."""
    x, w, pads = _case("lenet-conv2", np.float32)
    want = conv2d_ref(x, w, (1, 1), pads, (1, 1), 1)
    err = {alg: np.abs(K.conv2d_forward(x, w, pads=pads, algorithm=alg) - want).max()
           for alg in ("gemm", "winograd")}
    assert err["winograd"] < 10 * max(err["gemm"], 1e-7) < 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("x_shape,w_shape,kwargs,auto", [
    ((8, 32, 14, 14), (64, 32, 5, 5), {}, True),
    ((2, 1, 28, 28), (32, 1, 5, 5), {}, False),                  # one input channel
    ((2, 32, 14, 14), (8, 32, 5, 5), {}, False),                 # few output channels
    ((2, 32, 14, 14), (64, 32, 3, 3), {}, False),                # no tile size for 3x3
    ((2, 32, 14, 14), (64, 32, 5, 5), {"strides": (2, 2)}, False),
    ((2, 32, 14, 14), (64, 32, 5, 5), {"dilations": (2, 2)}, False),
    ((2, 32, 14, 14), (64, 16, 5, 5), {"groups": 2}, False),
    ((1, 64, 224, 224), (64, 64, 5, 5), {}, False),              # buffers too large
    ((1, 32, 14, 14), (64, 32, 5, 5), {}, False),                # too little work
])
def test_auto_picks_winograd_only_where_it_applies_and_pays(x_shape, w_shape, kwargs, auto):
    geometry = {"strides": (1, 1), "pads": 2, "dilations": (1, 1), "groups": 1, **kwargs}
    g = K._Geom(x_shape, w_shape, geometry["strides"], geometry["pads"],
                geometry["dilations"], geometry["groups"])
    assert WG.applicable(np, g, np.float32, "auto") is auto
    assert WG.applicable(np, g, np.float32, "gemm") is False
    assert WG.applicable(np, g, np.int32, "winograd") is False
    assert WG.applicable(object(), g, np.float32, "winograd") is False   # not numpy


def test_forced_winograd_falls_back_to_gemm_where_it_does_not_apply():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 9, 9))
    w = rng.standard_normal((4, 3, 3, 3))
    want = conv2d_ref(x, w, (2, 2), ((1, 1), (1, 1)), (1, 1), 1)
    got = K.conv2d_forward(x, w, (2, 2), 1, algorithm="winograd")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_unknown_algorithm_is_refused_by_name():
    x = np.zeros((1, 16, 6, 6), np.float32)
    w = np.zeros((16, 16, 5, 5), np.float32)
    with pytest.raises(ValueError, match="algorithm must be one of.*'fft'"):
        K.conv2d_forward(x, w, pads=2, algorithm="fft")
    with pytest.raises(ValueError, match="conv_algorithm: name must be one of"):
        flow.config.conv_algorithm("fft")
    assert flow.config.get("conv_algorithm") == "auto"


def test_split_over_two_workers_matches_serial(monkeypatch):
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(WG, "_CHUNK_BYTES", 1)   # one image per chunk: several per worker
    x, w, pads = _case("odd-9x11", np.float32)
    y = K.conv2d_forward(x, w, pads=pads, algorithm="winograd")
    dy = np.random.default_rng(5).standard_normal(y.shape).astype(np.float32)
    serial = (y, K.conv2d_backward_filter(dy, x, w.shape, pads=pads, algorithm="winograd"))
    ran_on = set()
    real = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel", lambda tasks: (
        ran_on.add(len(tasks)), real(tasks))[1])
    monkeypatch.setattr(parallel, "blas_held", lambda: True)
    split = (K.conv2d_forward(x, w, pads=pads, algorithm="winograd"),
             K.conv2d_backward_filter(dy, x, w.shape, pads=pads, algorithm="winograd"))
    assert ran_on == {2}
    # Each worker's chunks write their own batch rows, but their GEMMs run side by side
    # on a BLAS whose kernels and partitioning may depend on the thread count (on
    # OpenBLAS's Haswell kernels they round differently): the forward sums (C*r*r terms)
    # and the filter gradient, whose batch partial sums are also added in another order
    # (N*OH*OW terms per weight), agree to their rounding (tests/tolerances.py).
    (_, ch, kh, kw), (n, _, oh, ow) = w.shape, y.shape
    assert_close_to_summation_error(split[0], serial[0], ch * kh * kw,
                                    product_term_scale(x, w), c=WINOGRAD_GROWTH,
                                    err_msg="forward")
    assert_close_to_summation_error(split[1], serial[1], n * oh * ow,
                                    product_term_scale(dy, x), c=WINOGRAD_GROWTH,
                                    err_msg="filter gradient")


def _train_conv2_job():
    import aioflow.typing as tp
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((16, 16, 8, 8))) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.05, seed=1)
        h = flow.layers.conv2d(x, 16, 5, padding="SAME", name="conv1", kernel_initializer=init)
        y = flow.layers.conv2d(h, 16, 5, padding="SAME", name="conv2", kernel_initializer=init)
        loss = flow.math.reduce_mean(flow.math.square(y))
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss
    return train


def test_compile_option_reaches_the_conv_kernels(monkeypatch):
    used = []
    real_forward, real_filter = WG.forward, WG.backward_filter
    monkeypatch.setattr(WG, "forward",
                        lambda *a: (used.append("forward"), real_forward(*a))[1])
    monkeypatch.setattr(WG, "backward_filter",
                        lambda *a: (used.append("filter"), real_filter(*a))[1])
    x = np.random.default_rng(6).standard_normal((16, 16, 8, 8)).astype(np.float32)
    losses = {}
    try:
        for algorithm in ("gemm", "auto", "winograd"):
            flow.config.conv_algorithm(algorithm)
            train = _train_conv2_job()
            used.clear()
            losses[algorithm] = [float(train(x)[0]) for _ in range(3)]
            # per step: 2 forwards, conv2's input gradient (a forward of the flipped kernel;
            # conv1's is not needed), 2 filter gradients -- by Winograd only when asked
            expected = {"gemm": (0, 0), "auto": (9, 0), "winograd": (9, 6)}[algorithm]
            assert (used.count("forward"), used.count("filter")) == expected
    finally:
        flow.config.conv_algorithm("auto")
        flow.clear_default_session()
    assert losses["gemm"][2] < losses["gemm"][0]
    np.testing.assert_allclose(losses["auto"], losses["gemm"], rtol=1e-5)
    np.testing.assert_allclose(losses["winograd"], losses["gemm"], rtol=1e-5)
