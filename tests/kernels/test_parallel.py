"""aioflow.kernels.parallel, and the pool kernels run on parallel workers against the same
kernels run serially (identical outputs: the chunks write disjoint batch rows)."""
import threading

import numpy as np
import pytest

from aioflow.kernels import parallel
from aioflow.kernels import pool as P


@pytest.fixture
def two_workers(monkeypatch):
    """Force two workers even on a one-core machine (the test is about correctness)."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)


def test_split_evenly_covers_in_order():
    items = list(range(7))
    assert parallel.split_evenly(items, 2) == [[0, 1, 2], [3, 4, 5, 6]]
    assert parallel.split_evenly(items, 10) == [[i] for i in items]
    assert parallel.split_evenly([], 2) == []


def test_run_parallel_returns_results_in_order_and_uses_another_thread(two_workers):
    threads = []

    def task(i):
        threads.append(threading.get_ident())
        return i * i

    assert parallel.run_parallel([lambda i=i: task(i) for i in range(2)]) == [0, 1]
    if parallel._blas_controller() is not None:
        assert len(set(threads)) == 2


def test_nested_region_runs_serially(two_workers):
    inner = []

    def task():
        inner.append(parallel.run_parallel([lambda: 1, lambda: 2]))
        return 0

    parallel.run_parallel([task, task])
    assert inner == [[1, 2], [1, 2]]


def test_blas_threads_are_restored(two_workers):
    blas = parallel._blas_controller()
    if blas is None:
        pytest.skip("threadpoolctl found no BLAS")
    before = [c.num_threads for c in blas.lib_controllers]
    seen = []
    parallel.run_parallel([lambda: seen.append([c.num_threads for c in blas.lib_controllers])
                           for _ in range(2)])
    assert all(n == 1 for s in seen for n in s)
    assert [c.num_threads for c in blas.lib_controllers] == before


def test_error_in_a_task_propagates_after_all_tasks_finish(two_workers):
    done = threading.Event()

    def slow():
        done.wait(0.05)
        done.set()

    def bad():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        parallel.run_parallel([slow, bad])
    assert done.is_set()


# ------------------------------------------------- kernels: parallel == serial

def _serial_and_parallel(monkeypatch, fn):
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    serial = fn()
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    return serial, fn()


@pytest.mark.parametrize("geometry", [((2, 2), (2, 2), ((0, 0), (0, 0))),
                                      ((3, 3), (2, 2), ((1, 1), (1, 1)))],
                         ids=["2x2", "3x3-s2-pad"])
def test_pool_kernels_parallel_match_serial(geometry, monkeypatch):
    monkeypatch.setattr(P, "_CHUNK_BYTES", 1)
    k, s, p = geometry
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 4, 9, 9)).astype(np.float32)
    (y_ser, am_ser), (y_par, am_par) = _serial_and_parallel(
        monkeypatch, lambda: P.max_pool2d_forward(x, k, s, p))
    np.testing.assert_array_equal(y_par, y_ser)
    np.testing.assert_array_equal(am_par, am_ser)
    dy = rng.standard_normal(y_ser.shape).astype(np.float32)
    for fn in (lambda: P.max_pool2d_backward(dy, am_ser, x.shape, k, s, p),
               lambda: P.avg_pool2d_forward(x, k, s, p),
               lambda: P.avg_pool2d_backward(dy, x.shape, k, s, p)):
        ser, par = _serial_and_parallel(monkeypatch, fn)
        np.testing.assert_array_equal(par, ser)
