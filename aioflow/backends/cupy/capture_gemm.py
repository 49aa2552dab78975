"""Matrix products straight through cuBLAS while a CUDA graph is being captured.

CuPy refuses every cuBLAS call during stream capture: each of its bindings first sets the
handle's stream, and that check raises ``NotImplementedError: calling cuBLAS API during
stream capture is currently unsupported`` (cupy#6290 tracks lifting it). cuBLAS itself
supports capture (in host pointer mode alpha and beta are read when captured, and baked
into the graph, as they should be). So while
:class:`aioflow.backends.cupy.backend.CupyGraphCapturer` captures a step, products go to
cuBLAS through ``ctypes`` (:class:`_Cublas`: the very library CuPy loaded, found in the
process's memory map), on the handle CuPy created, whose stream is set to the capturing
one before the capture starts and restored after it:

* the ``matmul`` op's 2-d products: one ``cublasSgemm_v2`` / ``cublasDgemm_v2``;
* the convolutions' broadcast batched products (:mod:`aioflow.kernels.matmul_dispatch`):
  ``cublas?gemmStridedBatched`` over the largest batch axis, one call per index of the
  others (:func:`batched_plan`; a broadcast operand has stride 0).

Outside a capture both are the generic kernels. Measured on an H200 (docs/benchmarks.md).

Row-major ``C = op(A) @ op(B)`` is column-major ``C^T = op(B)^T @ op(A)^T``: cuBLAS is
asked for ``op(B) op(A)`` on the row-major buffers read as their column-major transposes
(:func:`gemm_arguments`, checked against a numpy model of column-major GEMM in the tests).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ...ops.linalg import matmul_op
from ...kernels.matmul_dispatch import routed

_OP_N, _OP_T = 0, 1   # CUBLAS_OP_N, CUBLAS_OP_T
_state = threading.local()


class _Cublas:
    """The cuBLAS functions used here, from the library CuPy loaded (``ctypes``)."""

    def __init__(self):
        import ctypes
        path = _loaded_library("libcublas.so")
        if path is None:
            raise RuntimeError("cuBLAS is not loaded in this process (CuPy creates its handle "
                               "first: cupy.cuda.device.get_cublas_handle())")
        lib = ctypes.CDLL(path)
        self._ctypes = ctypes
        p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        self.set_stream = lib.cublasSetStream_v2
        self.set_stream.argtypes = [p, p]
        self.get_stream = lib.cublasGetStream_v2
        self.get_stream.argtypes = [p, ctypes.POINTER(p)]
        self.gemm, self.batched = {}, {}
        for letter, dtype in (("S", np.float32), ("D", np.float64)):
            gemm = getattr(lib, f"cublas{letter}gemm_v2")
            gemm.argtypes = [p, i, i, i, i, i, p, p, i, p, i, p, p, i]
            batched = getattr(lib, f"cublas{letter}gemmStridedBatched")
            batched.argtypes = [p, i, i, i, i, i, p, p, i, ll, p, i, ll, p, p, i, ll, i]
            self.gemm[np.dtype(dtype)], self.batched[np.dtype(dtype)] = gemm, batched
        self.scalars = {np.dtype(np.float32): (ctypes.c_float(1.0), ctypes.c_float(0.0)),
                        np.dtype(np.float64): (ctypes.c_double(1.0), ctypes.c_double(0.0))}

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")

    def stream_of(self, handle: int) -> int:
        stream = self._ctypes.c_void_p()
        self.check(self.get_stream(handle, self._ctypes.byref(stream)), "cublasGetStream")
        return stream.value or 0

    def ones_zeros(self, dtype):
        one, zero = self.scalars[np.dtype(dtype)]
        return self._ctypes.byref(one), self._ctypes.byref(zero)


def _loaded_library(prefix: str) -> str | None:
    """The path of a shared library whose file name starts with ``prefix``, mapped into
    this process (Linux), else None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if path.rsplit("/", 1)[-1].startswith(prefix):
                    return path
    except OSError:
        return None
    return None


_library: list = []


def _cublas() -> _Cublas:
    if not _library:
        _library.append(_Cublas())
    return _library[0]


@contextlib.contextmanager
def capturing(handle: int, stream):
    """Within this block, this thread's products go to cuBLAS ``handle`` on ``stream`` (set
    as the handle's stream now, before the capture begins, and restored afterwards)."""
    lib = _cublas()
    previous = lib.stream_of(handle)
    lib.check(lib.set_stream(handle, stream.ptr), "cublasSetStream")
    _state.active = (handle, lib)
    try:
        with routed(lambda a, b: _batched_product(a, b, handle, lib)):
            yield
    finally:
        _state.active = None
        lib.check(lib.set_stream(handle, previous), "cublasSetStream")


def gemm_arguments(a_shape, b_shape, transpose_a: bool, transpose_b: bool) -> tuple:
    """``(op_first, op_second, m, n, k, ld_first, ld_second, ldc)`` of the column-major GEMM
    that computes the row-major ``op(A) @ op(B)`` of C-contiguous A and B (first operand:
    B, second: A; ``m``, ``n`` the column-major result's rows and columns)."""
    rows_a, k = (a_shape[1], a_shape[0]) if transpose_a else (a_shape[0], a_shape[1])
    cols_b = b_shape[0] if transpose_b else b_shape[1]
    return (_OP_T if transpose_b else _OP_N, _OP_T if transpose_a else _OP_N,
            cols_b, rows_a, k, b_shape[1], a_shape[1], cols_b)


def batched_plan(a_shape, b_shape) -> tuple:
    """How to compute ``a @ b`` (numpy's broadcasting of the batch axes, C-contiguous
    operands) with strided batched GEMMs: ``(out_shape, calls)``, one call per index of
    the batch axes other than the largest (the one each call strides over), each
    ``(offset_a, offset_b, offset_c, stride_a, stride_b, stride_c, count)`` in elements."""
    m, k = a_shape[-2:]
    n = b_shape[-1]
    if b_shape[-2] != k:
        raise ValueError(f"matmul: shapes {tuple(a_shape)} and {tuple(b_shape)} do not "
                         "align")
    batch = tuple(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))

    def strides(shape, matrix):
        full = (1,) * (len(batch) - (len(shape) - 2)) + tuple(shape[:-2])
        out, step = [], matrix
        for size in reversed(full):
            out.append(step if size != 1 else 0)
            step *= size
        return out[::-1]

    sa, sb, sc = strides(a_shape, m * k), strides(b_shape, k * n), strides(batch + (m, n),
                                                                             m * n)
    if not batch:
        return (m, n), [(0, 0, 0, 0, 0, 0, 1)]
    axis = max(range(len(batch)), key=lambda d: batch[d])
    others = [d for d in range(len(batch)) if d != axis]
    calls = []
    for index in np.ndindex(*[batch[d] for d in others]):
        offsets = [sum(s[d] * i for d, i in zip(others, index)) for s in (sa, sb, sc)]
        calls.append((*offsets, sa[axis], sb[axis], sc[axis], batch[axis]))
    return batch + (m, n), calls


def _already_the_product(out, k: int) -> bool:
    """Whether ``out`` needs no GEMM: it is empty, or a sum of ``k == 0`` terms (zeroed
    here; cuBLAS refuses a zero leading dimension)."""
    if out.size and k == 0:
        out.fill(0)
    return out.size == 0 or k == 0


def _batched_product(a, b, handle, lib):
    """``a @ b`` (broadcast batch axes) by strided batched GEMMs on ``handle``."""
    import cupy
    if a.dtype != b.dtype or a.dtype not in (np.float32, np.float64) or min(a.ndim, b.ndim) < 2:
        raise NotImplementedError(f"a captured product of {a.dtype} {a.shape} and "
                                  f"{b.dtype} {b.shape}")
    a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
    out_shape, calls = batched_plan(a.shape, b.shape)
    out = cupy.empty(out_shape, a.dtype)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if _already_the_product(out, k):
        return out
    one, zero = lib.ones_zeros(a.dtype)
    size = a.dtype.itemsize
    routine = lib.batched[a.dtype]
    for offset_a, offset_b, offset_c, stride_a, stride_b, stride_c, count in calls:
        # column-major C^T (n x m) = B^T (n x k) @ A^T (k x m), per batch element
        lib.check(routine(handle, _OP_N, _OP_N, n, m, k, one,
                          b.data.ptr + offset_b * size, n, stride_b,
                          a.data.ptr + offset_a * size, k, stride_a, zero,
                          out.data.ptr + offset_c * size, n, stride_c, count),
                  "cublasGemmStridedBatched")
    return out


def _gemm(a, b, transpose_a, transpose_b, handle, lib):
    import cupy
    op_b, op_a, m, n, k, ldb, lda, ldc = gemm_arguments(a.shape, b.shape, transpose_a,
                                                        transpose_b)
    a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
    out = cupy.empty((n, m), a.dtype)   # row-major (rows of op(A), columns of op(B))
    if _already_the_product(out, k):
        return out
    one, zero = lib.ones_zeros(a.dtype)
    lib.check(lib.gemm[a.dtype](handle, op_b, op_a, m, n, k, one, b.data.ptr, ldb,
                                a.data.ptr, lda, zero, out.data.ptr, ldc), "cublasGemm")
    return out


@matmul_op.kernel_for("cupy")
def _matmul(ctx, a, b, *, transpose_a=False, transpose_b=False):
    active = getattr(_state, "active", None)
    if active is not None and a.dtype == b.dtype and a.dtype in (np.float32, np.float64):
        if a.ndim == 2 and b.ndim == 2:
            return _gemm(a, b, transpose_a, transpose_b, *active)
        if a.ndim >= 2 and b.ndim >= 2:
            a = a.swapaxes(-1, -2) if transpose_a else a
            b = b.swapaxes(-1, -2) if transpose_b else b
            return _batched_product(a, b, *active)
    return matmul_op.forward(ctx, a, b, transpose_a=transpose_a, transpose_b=transpose_b)
