"""2-d matrix products straight through cuBLAS while a CUDA graph is being captured.

CuPy refused CUDA library calls during stream capture when it gained capture support
(cupy#4567), and cupy#6290 tracks allowing them again library by library; cuBLAS itself
supports capture (its pointer mode decides whether alpha and beta are read at capture or
at replay). So while :class:`aioflow.backends.cupy_backend.CupyGraphCapturer` captures a
step, the CuPy backend's ``matmul`` kernel calls the raw ``sgemm``/``dgemm`` binding of
``cupy_backends.cuda.libs.cublas`` on the capturing stream with a handle fetched before
the capture, in host pointer mode (alpha 1 and beta 0 baked into the graph, as they
should be). Outside a capture it is the generic kernel. NOT YET VERIFIED ON A GPU.

Row-major ``C = op(A) @ op(B)`` is column-major ``C^T = op(B)^T @ op(A)^T``: cuBLAS is
asked for ``op(B) op(A)`` on the row-major buffers read as their column-major transposes
(:func:`gemm_arguments`, checked against a numpy model of column-major GEMM in the tests).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from .linalg import matmul_op

_OP_N, _OP_T = 0, 1   # CUBLAS_OP_N, CUBLAS_OP_T
_state = threading.local()


@contextlib.contextmanager
def capturing(handle: int, stream):
    """Within this block, this thread's 2-d products go to cuBLAS ``handle`` on ``stream``."""
    _state.active = (handle, stream)
    try:
        yield
    finally:
        _state.active = None


def gemm_arguments(a_shape, b_shape, transpose_a: bool, transpose_b: bool) -> tuple:
    """``(op_first, op_second, m, n, k, ld_first, ld_second, ldc)`` of the column-major GEMM
    that computes the row-major ``op(A) @ op(B)`` of C-contiguous A and B (first operand:
    B, second: A; ``m``, ``n`` the column-major result's rows and columns)."""
    rows_a, k = (a_shape[1], a_shape[0]) if transpose_a else (a_shape[0], a_shape[1])
    cols_b = b_shape[0] if transpose_b else b_shape[1]
    return (_OP_T if transpose_b else _OP_N, _OP_T if transpose_a else _OP_N,
            cols_b, rows_a, k, b_shape[1], a_shape[1], cols_b)


def _gemm(a, b, transpose_a, transpose_b, handle, stream):
    import cupy
    from cupy_backends.cuda.libs import cublas
    op_b, op_a, m, n, k, ldb, lda, ldc = gemm_arguments(a.shape, b.shape, transpose_a,
                                                        transpose_b)
    a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
    out = cupy.empty((n, m), a.dtype)   # row-major (rows of op(A), columns of op(B))
    if out.size == 0:
        return out
    if k == 0:
        out.fill(0)
        return out
    cublas.setStream(handle, stream.ptr)
    routine = cublas.sgemm if a.dtype == np.float32 else cublas.dgemm
    routine(handle, op_b, op_a, m, n, k, 1.0, b.data.ptr, ldb, a.data.ptr, lda, 0.0,
            out.data.ptr, ldc)
    return out


@matmul_op.kernel_for("cupy")
def _matmul(ctx, a, b, *, transpose_a=False, transpose_b=False):
    active = getattr(_state, "active", None)
    if (active is not None and a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype
            and a.dtype in (np.float32, np.float64)):
        return _gemm(a, b, transpose_a, transpose_b, *active)
    return matmul_op.forward(ctx, a, b, transpose_a=transpose_a, transpose_b=transpose_b)
