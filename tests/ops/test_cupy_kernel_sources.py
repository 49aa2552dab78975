"""What of the CuPy backend's unverified kernels can be checked without a GPU: the argument
mapping of the captured GEMM against a numpy model of column-major GEMM, and the generated
multi-tensor update sources compiled by the host's C++ compiler (with a stub for CUDA's
thread indices) and run over every index against the generic update ops."""
import ctypes
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

from aioflow.ops import fused
from aioflow.backends.cupy.capture_gemm import gemm_arguments
from aioflow.backends.cupy.fused_kernels import multi_update_source
from aioflow.ops.state import adam_update, momentum_update, sgd_update


def _column_major_gemm(op_a, op_b, m, n, k, a, lda, b, ldb, ldc):
    """cuBLAS's ``C = op(A) op(B)`` on flat buffers read column-major; returns C's buffer."""
    def matrix(buffer, rows, cols, ld):
        return np.array([[buffer[i + j * ld] for j in range(cols)] for i in range(rows)])
    left = matrix(a, k, m, lda).T if op_a else matrix(a, m, k, lda)
    right = matrix(b, n, k, ldb).T if op_b else matrix(b, k, n, ldb)
    c = left @ right
    out = np.zeros(ldc * n)
    for j in range(n):
        out[j * ldc:j * ldc + m] = c[:, j]
    return out


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_the_captured_gemm_arguments_compute_the_row_major_product(transpose_a, transpose_b):
    rng = np.random.default_rng(0)
    rows, inner, cols = 3, 4, 5
    a = rng.standard_normal((inner, rows) if transpose_a else (rows, inner))
    b = rng.standard_normal((cols, inner) if transpose_b else (inner, cols))
    op_b, op_a, m, n, k, ldb, lda, ldc = gemm_arguments(a.shape, b.shape, transpose_a,
                                                        transpose_b)
    # cuBLAS is handed B first, then A, both as their row-major buffers
    flat = _column_major_gemm(op_b, op_a, m, n, k, b.ravel(), ldb, a.ravel(), lda, ldc)
    expected = (a.T if transpose_a else a) @ (b.T if transpose_b else b)
    np.testing.assert_allclose(flat.reshape(rows, cols), expected, rtol=1e-12)


_CUDA_STUB = """
#include <cmath>
#define __global__
struct aioflow_dim3 { unsigned x; };
static aioflow_dim3 blockIdx, blockDim, threadIdx;
using std::sqrt;
"""


def _host_library(source: str, tmp_path):
    """The kernel compiled for the host, with ``run_all(total, ...)`` calling it once per
    index as a grid of one-thread blocks would."""
    signature = re.search(r"void (\w+)\((.*?)\)", source)
    name, params = signature.group(1), signature.group(2)
    names = [p.split()[-1].lstrip("*") for p in params.split(", ")]
    wrapper = (f'extern "C" void run_all(long long total, {params}) {{\n'
               "  blockDim.x = 1; threadIdx.x = 0;\n"
               f"  for (long long t = 0; t < total; ++t) {{ blockIdx.x = (unsigned)t; "
               f"{name}({', '.join(names)}); }}\n}}\n")
    path = tmp_path / "kernel.cpp"
    path.write_text(_CUDA_STUB + source + "\n" + wrapper)
    library = tmp_path / "kernel.so"
    subprocess.run(["g++", "-O0", "-shared", "-fPIC", "-o", str(library), str(path)],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))


class _Ctx:
    xp = np


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler (g++)")
@pytest.mark.parametrize("single, attrs, ok", [
    (sgd_update, {"weight_decay": 0.01}, 1),
    (sgd_update, {"weight_decay": 0.01}, 0),   # the guard's line is the same in every kind
    (momentum_update, {"beta": 0.9, "weight_decay": 0.01}, 1),
    (adam_update, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
                   "do_bias_correction": True, "weight_decay": 0.01}, 1),
])
def test_the_generated_multi_update_source_matches_the_generic_update(single, attrs, ok,
                                                                      tmp_path):
    from aioflow.backends.cupy import fused_kernels as k
    multi_name, slots, reads_step = fused.MULTI_UPDATES[single.name]
    sizes = (7, 3, 5)
    rng = np.random.default_rng(1)
    params = [rng.standard_normal(n) for n in sizes]
    grads = [rng.standard_normal(n) for n in sizes]
    slot_arrays = [[np.abs(rng.standard_normal(n)) for n in sizes] for _ in range(slots)]
    lr, step = 0.05, np.asarray(4, np.int64)
    flag = np.asarray(ok, np.int8)

    expected = [p.copy() for p in params], [[s.copy() for s in row] for row in slot_arrays]
    for i in range(len(sizes)):
        extra = [row[i] for row in expected[1]] + ([step] if reads_step else [])
        single.forward(_Ctx, expected[0][i], grads[i], np.float64(lr), *extra, flag, **attrs)

    library = _host_library(multi_update_source(multi_name, "double", sizes, slots, True),
                            tmp_path)
    scalars = k._scalars(single.name, lr, step, attrs, np.float64)
    arrays = []
    for i in range(len(sizes)):
        arrays += [params[i], grads[i]] + [row[i] for row in slot_arrays]
    library.run_all(ctypes.c_longlong(sum(sizes)), flag.ctypes.data_as(ctypes.c_void_p),
                    *[ctypes.c_double(float(s)) for s in scalars],
                    *[a.ctypes.data_as(ctypes.c_void_p) for a in arrays])
    for got, want in zip(params, expected[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for got_row, want_row in zip(slot_arrays, expected[1]):
        for got, want in zip(got_row, want_row):
            np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 4), (4, 5)),                      # no batch axis
    ((2, 3, 4, 6), (3, 6, 5)),             # a convolution's forward: (N, G, Og, K) style
    ((3, 4, 6), (2, 3, 6, 5)),             # weights broadcast over the images
    ((2, 1, 4, 6), (1, 3, 6, 5)),          # both broadcast, on different axes
    ((5, 4, 6), (6, 2)),                   # a plain matrix on the right
])
def test_the_captured_batched_products_compute_numpys_matmul(a_shape, b_shape):
    """:func:`batched_plan`'s calls, run by a numpy model of cuBLAS's strided batched GEMM
    (column-major, the operands swapped as the capture path swaps them), give ``a @ b``."""
    from aioflow.backends.cupy.capture_gemm import batched_plan
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    out_shape, calls = batched_plan(a_shape, b_shape)
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    flat_a, flat_b = a.ravel(), b.ravel()
    out = np.full(int(np.prod(out_shape)), np.nan)
    for offset_a, offset_b, offset_c, stride_a, stride_b, stride_c, count in calls:
        for index in range(count):
            start_a, start_b = offset_a + index * stride_a, offset_b + index * stride_b
            start_c = offset_c + index * stride_c
            out[start_c:start_c + m * n] = _column_major_gemm(
                0, 0, n, m, k, flat_b[start_b:start_b + k * n], n,
                flat_a[start_a:start_a + m * k], k, n)
    np.testing.assert_allclose(out.reshape(out_shape), a @ b, rtol=1e-12)


def test_the_cupy_kernel_sources_use_no_host_header_macros():
    """NVRTC compiles CuPy's kernels without the host's headers: ``INFINITY`` in the max-pool
    kernel failed to compile on the H200 (issue 26)."""
    from aioflow.backends.cupy import fused_kernels as cupy_fused_kernels, kernels as cupy_kernels
    for module in (cupy_fused_kernels, cupy_kernels):
        source = pathlib.Path(module.__file__).read_text()
        found = re.findall(r"\b(INFINITY|NAN|HUGE_VALF?|FLT_MAX|DBL_MAX|M_PI)\b", source)
        assert not found, f"{module.__name__} uses {sorted(set(found))}"
