"""flow.math.erf in float32 (a rational approximation, ops/special.py) against math.erf
over its whole range, and in float64 (the series) to float64's precision."""
import math

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

_reference = np.vectorize(math.erf, otypes=[np.float64])


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _erf_job(n, dtype):
    @flow.global_function(type="predict")
    def erf(x: tp.Numpy.Placeholder((n,), dtype=dtype)) -> tp.Numpy:
        return flow.math.erf(x)
    return erf


def test_float32_erf_is_within_two_float32_ulps_everywhere():
    x = np.linspace(-6, 6, 200_001, dtype=np.float32)
    got = _erf_job(x.size, flow.float32)(x).astype(np.float64)
    want = _reference(x.astype(np.float64))
    assert np.abs(got - want).max() < 1.2e-7      # two float32 ulps near 1
    # relative near zero too (no cancellation): erf(x) ~ 2x/sqrt(pi)
    tiny = np.array([1e-30, 1e-20, 1e-10, 1e-5, 1e-3, -1e-7], np.float32)
    small = _erf_job(tiny.size, flow.float32)(tiny).astype(np.float64)
    np.testing.assert_allclose(small, _reference(tiny.astype(np.float64)), rtol=1e-6)
    assert np.all(np.abs(got) <= 1.0)     # never beyond the function's range


def test_float64_erf_keeps_float64_precision():
    x = np.linspace(-7, 7, 20_001)
    got = _erf_job(x.size, flow.float64)(x)
    np.testing.assert_allclose(got, _reference(x), rtol=1e-14, atol=1e-15)
