"""The GPU's convolution kernels (aioflow/kernels/conv_gemm.py), run here on numpy arrays
against the CPU kernels, forward and both gradients, in float64 (so the two summation
orders agree to ~1e-13 and a wrong index shows at once)."""
import zlib

import numpy as np
import pytest

from aioflow.kernels import conv as cpu
from aioflow.kernels import conv_gemm

GEOMETRIES = {
    # name: (x shape, w shape, strides, pads, dilations, groups)
    "lenet-conv2-same": ((3, 8, 14, 14), (16, 8, 5, 5), (1, 1), ((2, 2), (2, 2)), (1, 1), 1),
    "stride2-dilated": ((2, 3, 11, 9), (4, 3, 3, 3), (2, 2), ((1, 0), (2, 1)), (2, 1), 1),
    "groups": ((2, 6, 7, 7), (9, 2, 3, 3), (1, 2), ((1, 1), (1, 1)), (1, 1), 3),
    "1x1": ((2, 5, 4, 4), (7, 5, 1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    "valid-rect": ((1, 2, 9, 6), (3, 2, 4, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),
}


@pytest.mark.parametrize("name", GEOMETRIES)
def test_gemm_kernels_match_the_cpu_kernels(name):
    x_shape, w_shape, strides, pads, dilations, groups = GEOMETRIES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    geometry = (strides, pads, dilations, groups)
    want = cpu.conv2d_forward(x, w, *geometry, algorithm="gemm")
    got = conv_gemm.forward(x, w, *geometry)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(want.shape)
    np.testing.assert_allclose(
        conv_gemm.backward_data(dy, w, x_shape, *geometry),
        cpu.conv2d_backward_data(dy, w, x_shape, *geometry, algorithm="gemm"),
        rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        conv_gemm.backward_filter(dy, x, w_shape, *geometry),
        cpu.conv2d_backward_filter(dy, x, w_shape, *geometry, algorithm="gemm"),
        rtol=1e-12, atol=1e-12)
