"""Run a kernel's independent batch chunks on several cores at once.

Why: numpy runs its copies and ufunc loops on one core, so on a 2-core machine half the
machine idles during a pooling pass. Running the pooling kernels' batch chunks on
``workers()`` threads parallelises them (numpy releases the GIL in those loops): max
pooling of a (100, 32, 28, 28) float32 tensor took 6.2 ms serially and 2.9 ms on two
workers (2-core AMD EPYC).

GEMM-heavy kernels (convolutions, large matrix products) split only inside
:class:`single_blas_thread`, which holds the BLAS at one thread for a whole step: switched
per kernel, two one-thread BLAS calls side by side were slower than OpenBLAS's own two
threads (conv2 of the seed LeNet: forward 24 vs 22 ms), because OpenBLAS's second thread
keeps spinning on a core for a while after every 2-thread call. Held for the whole step,
the split LeNet train step ran about 13% faster (``flow.config.kernel_threading``).

Outside such a step, while a parallel region runs, the BLAS libraries threadpoolctl finds
are set to one thread (restored afterwards), so the workers do not oversubscribe the
cores. Only one region runs at a time per process; a region requested while another is
active (another session's step, or a kernel called from inside a worker) runs serially in
its caller, which is always correct. Without threadpoolctl, or with one usable core,
everything runs serially.
"""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

import numpy as np

T = TypeVar("T")

__all__ = ["workers", "run_parallel", "run_chunks", "chunk_count", "split_evenly",
           "set_enabled", "single_blas_thread", "blas_held", "batch_chunks", "map_shares"]

_lock = threading.Lock()           # held while a region uses the pool
_state: dict = {"enabled": True, "workers": None, "pool": None, "blas": None,
                "held": 0, "saved": None}
_hold_lock = threading.Lock()      # guards "held"/"saved" (one count for all threads)


def _set_blas_threads(counts: "int | list[int]") -> None:
    """Set every loaded BLAS to ``counts`` threads (one count for all, or one per library
    as read before), from whichever thread calls.

    Why not threadpoolctl alone: OpenBLAS ignores its process-wide ``set_num_threads``
    when called from a thread other than the main one once the main thread has set a
    count itself (threadpoolctl does; so may the user), and aioflow's steps run on its
    compute thread. The step's hold was then given up there, and a LeNet train step
    awaited or delivered to a callback ran 1.2-1.4x slower than the same step inline on
    the main thread (issue 11). OpenBLAS >= 0.3.27's ``openblas_set_num_threads_local``
    takes effect from any thread (in numpy's OpenBLAS 0.3.31 it changes the count the
    whole process uses, as measured: the main thread's products drop to one core)."""
    controllers = _blas_controller().lib_controllers
    if isinstance(counts, int):
        counts = [counts] * len(controllers)
    for controller, count in zip(controllers, counts):
        controller.set_num_threads(count)
        if controller.num_threads != count:
            setter = getattr(getattr(controller, "dynlib", None),
                             "openblas_set_num_threads_local", None)
            if setter is not None:
                setter.argtypes = (ctypes.c_int,)
                setter(count)


def _blas_controller():
    """threadpoolctl's controller for the loaded BLAS libraries (None if unavailable)."""
    if _state["blas"] is None:
        try:
            from threadpoolctl import ThreadpoolController
            _state["blas"] = ThreadpoolController().select(user_api="blas")
        except Exception:  # noqa: BLE001 - no threadpoolctl or an unknown BLAS: run serially
            _state["blas"] = False
    return _state["blas"] or None


def workers() -> int:
    """How many threads a parallel region uses: the usable cores, capped by the BLAS
    thread count as configured (so ``OPENBLAS_NUM_THREADS=1`` keeps aioflow on one core
    too); 1 when disabled or when the BLAS threads cannot be controlled."""
    if not _state["enabled"]:
        return 1
    if _state["workers"] is None:
        count = 1
        blas = _blas_controller()
        if blas is not None and blas.lib_controllers:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else (os.cpu_count() or 1)
            threads = min(c.num_threads for c in blas.lib_controllers)
            count = max(1, min(cores, threads))
        _state["workers"] = count
    return _state["workers"]


def set_enabled(flag: bool) -> None:
    """Turn chunk parallelism on or off (tests compare both; results are identical up to
    float summation order of the filter-gradient partial sums)."""
    _state["enabled"] = bool(flag)


def split_evenly(items: Sequence[T], parts: int) -> list[Sequence[T]]:
    """``items`` cut into at most ``parts`` contiguous, non-empty runs of near-equal
    length."""
    if not items:
        return []
    parts = max(1, min(parts, len(items)))
    bounds = [i * len(items) // parts for i in range(parts + 1)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]


class single_blas_thread:
    """Context manager: hold the BLAS at one thread for a whole step, so that the kernels
    that split their batch over :func:`workers` threads (:func:`blas_held` tells them)
    do all the parallelism themselves.

    Why a whole step: a BLAS call on two threads leaves OpenBLAS's second thread spinning
    on a core for a while after it returns; a parallel region that starts in that window
    shares one core between its two workers. Holding one BLAS thread from the start to the
    end of the step means no BLAS thread ever spins. Nested and concurrent holds (two
    sessions' compute threads) share one count: the first sets one thread, the last
    restores what was there. Does nothing when :func:`workers` is 1.
    """

    def __enter__(self):
        if workers() <= 1:
            self.active = False
            return self
        with _hold_lock:
            if _state["held"] == 0:
                controllers = _blas_controller().lib_controllers
                saved = [c.num_threads for c in controllers]
                _set_blas_threads(1)
                if any(c.num_threads != 1 for c in controllers):
                    # A BLAS that keeps its count whatever it is told: splitting would
                    # oversubscribe the cores, so the kernels run unsplit.
                    _set_blas_threads(saved)
                    self.active = False
                    return self
                _state["saved"] = saved
            _state["held"] += 1
        self.active = True
        return self

    def __exit__(self, *exc_info):
        if not self.active:
            return
        with _hold_lock:
            _state["held"] -= 1
            if _state["held"] == 0:
                _set_blas_threads(_state["saved"])


def blas_held() -> bool:
    """True inside :class:`single_blas_thread` with more than one worker: GEMM-heavy
    kernels should then split their work over :func:`run_chunks` themselves."""
    return _state["held"] > 0


def run_parallel(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run the independent ``tasks`` (one per worker at most, see :func:`workers`) and
    return their results in order. The caller runs the last task itself; the BLAS runs
    one thread per task meanwhile. Serial when there is one task, one worker, or another
    region is already running."""
    if len(tasks) <= 1 or workers() <= 1 or not _lock.acquire(blocking=False):
        return [task() for task in tasks]
    try:
        blas = _blas_controller()
        held = blas_held()  # already one thread for the whole step: nothing to switch
        saved = [c.num_threads for c in blas.lib_controllers]
        if not held:
            _set_blas_threads(1)
        try:
            pool = _state["pool"]
            if pool is None:
                pool = _state["pool"] = ThreadPoolExecutor(
                    max_workers=max(1, workers() - 1), thread_name_prefix="aioflow-kernel")
            futures = [pool.submit(task) for task in tasks[:-1]]
            try:
                last = tasks[-1]()
            finally:
                wait(futures)       # never restore the BLAS threads under a running task
            return [f.result() for f in futures] + [last]
        finally:
            if not held:
                _set_blas_threads(saved)
    finally:
        _lock.release()


def chunk_count(n: int, per_chunk: int) -> int:
    """How many batch chunks to cut ``n`` samples into when a chunk should hold at most
    ``per_chunk`` of them: rounded up to a multiple of :func:`workers` (at most ``n``) so
    every worker gets the same share."""
    per_chunk = max(1, min(n, per_chunk))
    k = -(-n // per_chunk)
    w = workers()
    if w > 1 and n >= w:
        k = min(n, -(-k // w) * w)
    return max(1, k)


def batch_chunks(n: int, per_chunk: int, spread: bool = True) -> list[slice]:
    """Slices of a batch of ``n`` samples, of near-equal sizes, at most ``per_chunk``
    samples each; with ``spread``, as many chunks per worker (:func:`chunk_count`)."""
    if spread:
        k = chunk_count(n, per_chunk)
    else:
        k = -(-n // max(1, min(n, per_chunk)))
    bounds = [i * n // k for i in range(k + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def map_shares(xp, fn: Callable[[Sequence[T]], object], chunks: Sequence[T],
               split: bool = True) -> list:
    """``[fn(share), ...]``: with ``split`` on numpy, one contiguous share of ``chunks``
    per worker, run in parallel (:func:`run_chunks`); otherwise one share, all the chunks,
    in this thread. ``fn`` must only write data its share owns, or return partial
    results for the caller to combine."""
    if xp is not np or not split:
        return [fn(chunks)]
    return run_chunks(fn, chunks)


def run_chunks(fn: Callable[[Sequence[T]], object], chunks: Sequence[T]) -> list:
    """``fn(share)`` for each of up to :func:`workers` contiguous shares of ``chunks``, in
    parallel; returns the results in order. ``fn`` must only write data its share owns
    (e.g. its batch rows) or return partial results for the caller to combine."""
    shares = split_evenly(chunks, workers())
    return run_parallel([lambda share=share: fn(share) for share in shares])
