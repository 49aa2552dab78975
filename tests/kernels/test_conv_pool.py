"""aioflow.kernels.conv_pool against the unfused kernels it replaces, on every path
(Winograd, phase-ordered im2col, fallback): the same max up to the rounding of the
convolution's sums, whose order the BLAS chooses per GEMM shape, CPU and thread count (see
tests/tolerances.py), and an argmax that picks the window's maximum (the same as the
unfused kernels' except where two candidates are closer than that rounding). The fallback
runs the unfused kernels themselves: the same values and argmax, bit for bit."""
import numpy as np
import pytest

from aioflow.kernels import conv as K
from aioflow.kernels import conv_pool as CP
from aioflow.kernels import parallel
from aioflow.kernels import pool as P
from aioflow.kernels import winograd as WG
from tolerances import (WINOGRAD_GROWTH, assert_close_to_summation_error,
                        product_term_scale, summation_tolerance)

CASES = {  # x shape, w shape, pads, strides: which path
    "winograd-lenet-conv2": ((5, 32, 14, 14), (64, 32, 5, 5), 2, 1),
    "winograd-16ch": ((3, 16, 10, 12), (16, 16, 5, 5), ((2, 2), (2, 2)), 1),
    "im2col-lenet-conv1": ((7, 1, 28, 28), (32, 1, 5, 5), 2, 1),
    "im2col-asymmetric-pads": ((3, 3, 9, 9), (4, 3, 3, 3), ((1, 0), (1, 0)), 1),
    "fallback-odd-output": ((2, 3, 7, 7), (4, 3, 3, 3), 1, 1),
    "im2col-strided": ((2, 3, 12, 12), (4, 3, 3, 3), 1, 2),
    "fallback-row-shift": ((2, 16, 8, 8), (8, 16, 3, 3), 1, 1),
}


def _rounding(name, x, w):
    """``(n_terms, term_scale, c)`` of the convolution's sums for
    :func:`tolerances.assert_close_to_summation_error`: C*kh*kw products of an input and a
    weight element each; Winograd's transforms amplify their rounding."""
    c = WINOGRAD_GROWTH if name.startswith("winograd") else 1.0
    return int(np.prod(w.shape[1:])), product_term_scale(x, w), c


def _assert_argmax_picks_the_maximum(argmax, x, w, stride, pads, tol):
    """Each window's ``argmax`` (row-major index 0-3) points at an element of the
    convolution (computed here in float64) within ``2 * tol`` of the window's maximum: the
    first maximum, or a candidate that a rounding of at most ``tol`` per value can make
    the larger. A wrong index (another element, another window) fails."""
    y = K.conv2d_forward(x.astype(np.float64), w.astype(np.float64), (stride, stride), pads,
                         algorithm="gemm")
    n, o, oh, ow = y.shape
    windows = (y[:, :, :oh // 2 * 2, :ow // 2 * 2].reshape(n, o, oh // 2, 2, ow // 2, 2)
               .transpose(0, 1, 2, 4, 3, 5).reshape(n, o, oh // 2, ow // 2, 4))
    assert argmax.shape == windows.shape[:-1]
    index = argmax.astype(np.int64)
    assert index.min() >= 0 and index.max() <= 3
    picked = np.take_along_axis(windows, index[..., None], axis=-1)[..., 0]
    short = windows.max(axis=-1) - picked
    assert short.max() <= 2 * tol, (
        f"{np.count_nonzero(short > 2 * tol)} windows' argmax misses their maximum by more "
        f"than the rounding (up to {short.max():.3g} > {2 * tol:.3g})")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", CASES)
def test_fused_equals_conv_then_pool(name, dtype):
    x_shape, w_shape, pads, stride = CASES[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    y = K.conv2d_forward(x, w, (stride, stride), pads)
    want, want_argmax = P.max_pool2d_forward(y, 2, 2, 0)
    got, got_argmax = CP.conv2d_max_pool2x2(x, w, (stride, stride), pads)
    assert got.dtype == want.dtype and got_argmax.dtype == want_argmax.dtype
    if name.startswith("fallback"):  # the very kernels of the reference, on the same data
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_argmax, want_argmax)
        return
    # other GEMM shapes (the phase-ordered columns) or another chunking: other rounding
    n_terms, term_scale, c = _rounding(name, x, w)
    assert_close_to_summation_error(got, want, n_terms, term_scale, c=c)
    _assert_argmax_picks_the_maximum(got_argmax, x, w, stride, pads,
                                     summation_tolerance(n_terms, term_scale, dtype, c))


def test_ties_keep_the_first_maximum_in_row_major_order():
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 1.0       # window (0, 0): tie between index 1 and 2
    x[0, 0, 3, 2] = x[0, 0, 3, 3] = 2.0       # window (1, 1): tie between index 2 and 3
    top, argmax = CP.conv2d_max_pool2x2(x, np.ones((1, 1, 1, 1), np.float32))
    np.testing.assert_array_equal(top[0, 0], [[1, 0], [0, 2]])
    np.testing.assert_array_equal(argmax[0, 0], [[1, 0], [0, 2]])


def test_max_of_phases_matches_a_stacked_argmax():
    rng = np.random.default_rng(1)
    planes = [rng.integers(0, 3, (50, 7)).astype(np.float32) for _ in range(4)]  # many ties
    top, index = WG.max_of_phases(*planes)
    stacked = np.stack(planes)
    np.testing.assert_array_equal(top, stacked.max(axis=0))
    np.testing.assert_array_equal(index, stacked.argmax(axis=0))   # argmax: first maximum


@pytest.mark.parametrize("name", ["winograd-lenet-conv2", "im2col-lenet-conv1"])
def test_split_over_two_workers_matches_serial(name, monkeypatch):
    x_shape, w_shape, pads, stride = CASES[name]
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    serial = CP.conv2d_max_pool2x2(x, w, 1, pads)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(parallel, "blas_held", lambda: True)
    monkeypatch.setattr(K, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(WG, "_CHUNK_BYTES", 1)
    ran_on = set()
    real = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel", lambda tasks: (
        ran_on.add(len(tasks)), real(tasks))[1])
    split = CP.conv2d_max_pool2x2(x, w, 1, pads)
    assert ran_on == {2}
    # One image per chunk instead of the whole batch: GEMMs of other shapes, run side by
    # side by two workers, whose sums may round differently (tests/tolerances.py; on
    # OpenBLAS's Haswell kernels the Winograd case does); the argmax may then differ
    # where two candidates are that close.
    n_terms, term_scale, c = _rounding(name, x, w)
    assert_close_to_summation_error(split[0], serial[0], n_terms, term_scale, c=c)
    _assert_argmax_picks_the_maximum(split[1], x, w, stride, pads,
                                     summation_tolerance(n_terms, term_scale, np.float32, c))
