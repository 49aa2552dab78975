"""How far two float computations of the same sums may differ, and the check that uses it.

Why not bit equality: a float sum rounds differently when its terms are added in another
order, and which order a matrix product uses is the BLAS's choice, not aioflow's. OpenBLAS
picks its kernels for the CPU it runs on (or for ``OPENBLAS_CORETYPE``), blocks the inner
dimension by cache size (``OPENBLAS_L2_SIZE``), partitions the work by thread count, and
may round a product of another shape (a batch chunk of one image instead of five, the
fused kernel's reordered columns) differently. So results that are bit-identical on one
machine differ in their last bits on another: the Winograd convolution + pooling run in
one-image chunks on two workers differed from the whole-batch serial run in 823 of 15680
elements, by up to 2.3e-5, with OpenBLAS's Haswell kernels (an AMD EPYC with
``OPENBLAS_CORETYPE=Haswell``), and agreed bit for bit with its SkylakeX, Sandybridge and
Nehalem kernels; with the Haswell kernels, the very same GEMMs on one BLAS thread instead
of two round differently too.

Tests that compare two such computations (split vs serial, fused vs unfused, Winograd vs
GEMM, batch sizes, thread counts) therefore allow the rounding of the sums, and nothing
more. Exact equality stays where it is guaranteed: copies, integer arithmetic, elementwise
ufuncs (each element one IEEE operation, whatever the chunking), the same code on the
same arrays in one process with the same BLAS threads, and checkpoint round trips.

The bound (:func:`summation_tolerance`): two evaluations of a sum of ``n`` terms, each at
most ``s`` in magnitude, that differ only in the order of the additions (and in where
FMAs fuse a multiply) differ by about ``eps * n * s``:

* each addition rounds its partial sum with a relative error of at most ``u = eps / 2``;
  for terms of mixed sign (zero-mean data, as in these tests) the partial sums grow like
  ``sqrt(k)`` times the terms' rms ``sigma`` and the roundings add up like a random walk,
  so one evaluation errs by about ``u * sigma * n / sqrt(6)`` (rms) and two independent
  ones differ by about ``0.3 * eps * sigma * n``; taking the largest term ``s`` for
  ``sigma`` (for the product terms of a GEMM, ``max|a| * max|b|``: 3 to 20 times the rms
  of the products on random data) leaves room for the extreme among many thousands of
  elements, so the default factor is ``c = 1``;
* the strict worst case (every rounding the same way, Higham's ``gamma_n * sum|t|``) is
  about ``n * eps * sum|t| <= n^2 * eps * s``: far above what happens, and too loose to
  test anything for long sums;
* sums of terms of one sign (squares, sums of positive values) have partial sums that
  grow like ``k`` rather than ``sqrt(k)``: their error grows like ``n^1.5``. Pass
  ``c = sqrt(n)`` there. Computations that mix values through exact-in-theory linear
  transforms (Winograd) amplify the rounding: pass their growth factor as ``c``
  (:data:`WINOGRAD_GROWTH`).

The tolerance is still small: ``c * eps * n`` is far below 1 for these sizes, so it is a
small fraction of one term, and a missing, doubled or misplaced term, a wrong row or a
stale buffer still fails the check. :func:`assert_close_to_summation_error` refuses
(as an error of the test itself) a tolerance that is not far below the values compared.
"""
from __future__ import annotations

import numpy as np

__all__ = ["summation_tolerance", "assert_close_to_summation_error", "product_term_scale",
           "WINOGRAD_GROWTH"]

# Winograd F(2x2, 5x5) rounds up to 10x worse than the GEMM lowering of the same
# convolution: its transforms mix values of different sizes (aioflow.kernels.winograd's
# docstring measures about 2e-6 of the output magnitude against 3e-7;
# tests/kernels/test_winograd.py::test_float32_error_stays_close_to_the_gemm_lowering
# holds it to 10x).
WINOGRAD_GROWTH = 10.0

# The largest tolerance, as a fraction of the largest value compared, that still makes a
# meaningful check.
_MAX_RELATIVE_TOLERANCE = 1e-3


def product_term_scale(*factors) -> float:
    """``max|a| * max|b| * ...``: a bound on each term of a sum of products of elements
    of the arrays ``factors`` (the terms of a GEMM or a convolution of them)."""
    scale = 1.0
    for f in factors:
        scale *= float(np.max(np.abs(np.asarray(f, np.float64)), initial=0.0))
    return scale


def summation_tolerance(n_terms, term_scale, dtype=np.float32, c=1.0):
    """``c * eps(dtype) * n_terms * term_scale``: how far two evaluations of a sum of
    ``n_terms`` terms of magnitude up to ``term_scale`` may differ through rounding when
    they add the terms in different orders (see the module docstring)."""
    return float(c * np.finfo(np.dtype(dtype)).eps * n_terms * term_scale)


def assert_close_to_summation_error(actual, expected, n_terms, term_scale, *, c=1.0,
                                    err_msg=""):
    """``actual`` and ``expected`` (same shape and dtype) are two computations of the same
    sums of ``n_terms`` terms of magnitude up to ``term_scale`` that may round
    differently (other GEMM split, BLAS kernel, thread count, summation order): they must
    agree to :func:`summation_tolerance` in their dtype, element by element.

    Raises ValueError (a mistake in the test, not in the code under test) when that
    tolerance is not far below the values compared: the check would then prove nothing.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    dtype = actual.dtype if actual.dtype.kind == "f" else np.dtype(np.float64)
    atol = summation_tolerance(n_terms, term_scale, dtype, c)
    magnitude = float(np.max(np.abs(expected.astype(np.float64)), initial=0.0))
    if atol > _MAX_RELATIVE_TOLERANCE * magnitude:
        raise ValueError(
            f"summation tolerance {atol:.3g} (c={c}, n_terms={n_terms}) is "
            f"not far below the values compared (up to {magnitude:.3g}): the comparison "
            f"would prove nothing")
    np.testing.assert_allclose(
        actual, expected, rtol=0, atol=atol, err_msg=(
            f"{err_msg} (tolerance: float rounding of sums of {n_terms} terms, "
            f"c * eps * n_terms * term_scale with c={c})").strip())
