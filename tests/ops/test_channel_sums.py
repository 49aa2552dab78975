"""aioflow.ops.channel_sums: batch normalization's per-channel sums, as contiguous BLAS
products on the host, against float64 references of numpy's reductions."""
import numpy as np
import pytest

from aioflow.ops.channel_sums import channel_dot, channel_sum


def _reference(a, b, axis):
    axes = tuple(i for i in range(a.ndim) if i != axis % a.ndim)
    product = a.astype(np.float64) * (1.0 if b is None else b.astype(np.float64))
    return product.sum(axis=axes)


CASES = [((8, 5, 7, 6), 1), ((8, 7, 6, 5), 3), ((8, 7, 6, 5), -1), ((16, 5), 1),
         ((4, 3, 10), 1), ((4, 10, 3), 2), ((3, 4, 5, 6), 2), ((2, 3, 4, 5, 6), 1)]


@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_equal_numpys_within_rounding(shape, axis, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    got_sum, got_dot = channel_sum(np, a, axis), channel_dot(np, a, b, axis)
    assert got_sum.dtype == dtype and got_dot.dtype == dtype
    channels = shape[axis]
    assert got_sum.shape == (channels,) and got_dot.shape == (channels,)
    scale = np.abs(a).sum() / channels
    np.testing.assert_allclose(got_sum, _reference(a, None, axis), atol=tol * scale)
    np.testing.assert_allclose(got_dot, _reference(a, b, axis), atol=tol * scale * 4)


def test_non_contiguous_and_float16_inputs_take_numpys_reduction():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 4, 5, 3)).astype(np.float32)
    strided = a.transpose(0, 3, 1, 2)                    # channels at 1, not contiguous
    np.testing.assert_allclose(channel_sum(np, strided, 1), _reference(strided, None, 1),
                               rtol=1e-5)
    np.testing.assert_allclose(channel_dot(np, strided, strided, 1),
                               _reference(strided, strided, 1), rtol=1e-5)
    half = a.astype(np.float16)
    assert channel_sum(np, half, 1).dtype == np.float16
    np.testing.assert_allclose(channel_sum(np, half, 1), _reference(half, None, 1), rtol=1e-2)


def test_large_channel_sums_keep_float32_accuracy():
    """401,408 values a channel (batch 32 of 112x112, MobileNet's first layers), of mean 3:
    the float32 sums stay within 1e-5 of the float64 ones, relative."""
    rng = np.random.default_rng(2)
    a = (3.0 + rng.standard_normal((32, 4, 112, 112))).astype(np.float32)
    np.testing.assert_allclose(channel_sum(np, a, 1), _reference(a, None, 1), rtol=1e-5)
    np.testing.assert_allclose(channel_dot(np, a, a, 1), _reference(a, a, 1), rtol=1e-5)
