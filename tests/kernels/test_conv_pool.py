"""aioflow.kernels.conv_pool against the unfused kernels it replaces: the same max and
the same argmax on every path (Winograd, phase-ordered im2col, fallback); the same
values bit for bit, except that a GEMM of another shape may round differently."""
import numpy as np
import pytest

from aioflow.kernels import conv as K
from aioflow.kernels import conv_pool as CP
from aioflow.kernels import parallel
from aioflow.kernels import pool as P
from aioflow.kernels import winograd as WG

CASES = {  # x shape, w shape, pads, strides: which path
    "winograd-lenet-conv2": ((5, 32, 14, 14), (64, 32, 5, 5), 2, 1),
    "winograd-16ch": ((3, 16, 10, 12), (16, 16, 5, 5), ((2, 2), (2, 2)), 1),
    "im2col-lenet-conv1": ((7, 1, 28, 28), (32, 1, 5, 5), 2, 1),
    "im2col-asymmetric-pads": ((3, 3, 9, 9), (4, 3, 3, 3), ((1, 0), (1, 0)), 1),
    "fallback-odd-output": ((2, 3, 7, 7), (4, 3, 3, 3), 1, 1),
    "im2col-strided": ((2, 3, 12, 12), (4, 3, 3, 3), 1, 2),
    "fallback-row-shift": ((2, 16, 8, 8), (8, 16, 3, 3), 1, 1),
}


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
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(dtype).eps * abs(want).max())
    np.testing.assert_array_equal(got_argmax, want_argmax)


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
    np.testing.assert_array_equal(split[0], serial[0])
    np.testing.assert_array_equal(split[1], serial[1])
