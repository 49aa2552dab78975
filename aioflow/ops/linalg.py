"""Matrix multiplication (2-d and batched), with optional transposes as attributes."""
from __future__ import annotations

import numpy as np

from ..kernels import parallel
from .elementwise import sum_to_shape
from .registry import register


def _mat_dims(shape, transpose):
    rows, cols = shape[-2], shape[-1]
    return (cols, rows) if transpose else (rows, cols)


def _infer_matmul(a, b, *, transpose_a=False, transpose_b=False):
    if a.dtype is not b.dtype:
        raise TypeError(f"matmul: operands must have the same dtype, got {a.dtype.name} "
                        f"and {b.dtype.name}")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: operands must be at least 2-d, got shapes {a.shape} and "
                         f"{b.shape}")
    m, k = _mat_dims(a.shape, transpose_a)
    k2, n = _mat_dims(b.shape, transpose_b)
    if k != k2:
        raise ValueError(
            f"matmul: inner dimensions differ: {a.shape}{'^T' if transpose_a else ''} @ "
            f"{b.shape}{'^T' if transpose_b else ''} ({k} vs {k2})")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} "
                         "cannot be broadcast") from None
    return [(tuple(batch) + (m, n), a.dtype)]


def _t(xp, x, flag):
    return xp.swapaxes(x, -1, -2) if flag else x


# Split a 2-d product between the parallel workers (when the step holds the BLAS
# at one thread) from this many multiply-adds on: LeNet's dense1 (100x3136x512) gains,
# a 100x512x10 output layer would lose ~10x to the threads' overhead.
_SPLIT_MIN_MACS = 8_000_000


def _split_matmul(xp, a, b):
    """``a @ b`` cut into one block per parallel worker along the larger dimension of the
    result, each block a single-threaded GEMM (the step holds the BLAS at one thread; see
    :class:`aioflow.kernels.parallel.single_blas_thread`). Why the larger one: each block
    keeps the other dimension whole, and OpenBLAS is slow on thin operands. LeNet's dense1
    on 2 workers, float32: ``x @ w.T`` (100x3136 @ 3136x512) 3.32 ms split by rows, 2.58 ms
    by columns; its input gradient (100x512 @ 512x3136) 3.68 vs 2.37 ms."""
    m, n = a.shape[0], b.shape[1]
    out = xp.empty((m, n), xp.result_type(a, b))
    blocks = parallel.split_evenly(range(max(m, n)), parallel.workers())
    if m >= n:
        tasks = [lambda r=slice(blk.start, blk.stop): xp.matmul(a[r], b, out=out[r])
                 for blk in blocks]
    else:
        tasks = [lambda c=slice(blk.start, blk.stop): xp.matmul(a, b[:, c], out=out[:, c])
                 for blk in blocks]
    parallel.run_parallel(tasks)
    return out


def _split_batched_matmul(xp, a, b):
    """``a @ b`` of stacked matrices with the same batch dimensions, the first batch axis
    cut into one share per parallel worker, each share's products on a one-thread BLAS.

    Why: numpy multiplies a stack one matrix at a time, and with the BLAS on two threads
    each small product (BERT's attention: 96 of 128x64 @ 64x128 per layer) is a
    two-thread region of its own, so every one of them waits for both threads. On a quiet
    2-core host that costs nothing much; on a busy one, a thread descheduled at any of those
    waits stalls the op: the same product took 7 ms at the median but 70 ms-2 s in one
    call of ten (1024x768 @ 768x3072 products between calls, other processes on the
    cores), against 5-12 ms and at most 34 ms split, as here (benchmarks: the BERT-base
    profile in docs/benchmarks.md)."""
    out = xp.empty(a.shape[:-1] + b.shape[-1:], xp.result_type(a, b))

    def share_product(share):
        rows = slice(share[0].start, share[-1].stop)
        xp.matmul(a[rows], b[rows], out=out[rows])
    parallel.run_chunks(share_product, parallel.batch_chunks(a.shape[0], 1))
    return out


def _splits_batched(xp, a, b, transpose_b) -> bool:
    return (xp is np and a.ndim > 2 and a.shape[:-2] == b.shape[:-2]
            and a.shape[0] >= parallel.workers() > 1
            and a.size * _mat_dims(b.shape, transpose_b)[1] >= _SPLIT_MIN_MACS)


@register("matmul", infer=_infer_matmul)
def matmul_op(ctx, a, b, *, transpose_a=False, transpose_b=False):
    xp = ctx.xp
    if (xp is np and a.ndim == 2 and b.ndim == 2 and parallel.blas_held()
            and a.shape[0] * a.shape[1] * _mat_dims(b.shape, transpose_b)[1]
            >= _SPLIT_MIN_MACS):
        return _split_matmul(xp, _t(xp, a, transpose_a), _t(xp, b, transpose_b))
    if _splits_batched(xp, a, b, transpose_b):
        return _split_batched_matmul(xp, _t(xp, a, transpose_a), _t(xp, b, transpose_b))
    if transpose_b and not transpose_a and a.ndim == 2 and b.ndim == 2:
        # A dense layer's ``x @ w.T`` (w stored (out, in)): OpenBLAS runs the same product
        # as ``(w @ x.T).T`` 10-40% faster (100x784 @ 784x512 float32: 0.69 -> 0.49 ms with
        # the SkylakeX kernels, 0.51 -> 0.44 ms with Haswell's). Made C-ordered again
        # (~20 us): left Fortran-ordered, it made every later elementwise op mix layouts,
        # and the MLP's relu_grad alone went from ~20 to ~140 us per step.
        return xp.ascontiguousarray(xp.matmul(b, a.T).T)
    return xp.matmul(_t(xp, a, transpose_a), _t(xp, b, transpose_b))


@matmul_op.grad
def _matmul_grad(node, gy):
    a, b = node.inputs
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    # y = A' B' with A' = op(a), B' = op(b). dA' = gy B'^T, dB' = A'^T gy.
    if ta:
        ga = matmul_op(b, gy, transpose_a=tb, transpose_b=True)
    else:
        ga = matmul_op(gy, b, transpose_a=False, transpose_b=not tb)
    if tb:
        gb = matmul_op(gy, a, transpose_a=True, transpose_b=ta)
    else:
        gb = matmul_op(a, gy, transpose_a=not ta, transpose_b=False)
    return [sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)]
