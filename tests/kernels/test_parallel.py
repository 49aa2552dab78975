"""aioflow.kernels.parallel, and the kernels run on parallel workers against the same
kernels run serially: the pool kernels bit for bit (elementwise work on disjoint batch
rows), the GEMM kernels to the rounding of their sums (tests/tolerances.py)."""
import threading

import numpy as np
import pytest

from aioflow.kernels import parallel
from aioflow.kernels import pool as P
from tolerances import assert_close_to_summation_error, product_term_scale


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


# -- the step-wide single BLAS thread, and the kernels that split under it ----------------

def _blas_threads():
    blas = parallel._blas_controller()
    return None if blas is None else [c.num_threads for c in blas.lib_controllers]


_HOLD_SCRIPT = """
import threading
from aioflow.kernels import parallel
parallel.workers = lambda: 2
blas = parallel._blas_controller()
threads = lambda: [c.num_threads for c in blas.lib_controllers]
before = threads()
seen, entered, release, first_in = {}, threading.Barrier(2), threading.Event(), threading.Event()

def step(name, wait_for_release):
    if name == "second":
        first_in.wait(10)
    with parallel.single_blas_thread() as hold:
        first_in.set()
        with parallel.single_blas_thread():       # nested
            seen[name + " nested"] = parallel.blas_held()
        entered.wait(10)
        seen[name] = (hold.active, threads())
        if wait_for_release:
            release.wait(10)
    if not wait_for_release:
        seen[name + " after"] = (parallel.blas_held(), threads())
        release.set()

workers = [threading.Thread(target=step, args=("first", True)),
           threading.Thread(target=step, args=("second", False))]
for t in workers:
    t.start()
for t in workers:
    t.join(10)
one = [1] * len(before)
assert seen["first"] == seen["second"] == (True, one), seen
assert seen["first nested"] and seen["second nested"], seen
assert seen["second after"] == (True, one), seen   # the first still holds it
assert not parallel.blas_held()
assert threads() == before, (threads(), before)
print("ok")
"""

_MAIN_SET_FIRST_SCRIPT = """
import threading
from aioflow.kernels import parallel
parallel.workers = lambda: 2
blas = parallel._blas_controller()
for c in blas.lib_controllers:   # the main thread sets a count first, as numpy users do
    c.set_num_threads(2)
seen = {}

def step():
    with parallel.single_blas_thread() as hold:
        seen["in"] = (hold.active, parallel.blas_held(),
                      [c.num_threads for c in blas.lib_controllers])

compute = threading.Thread(target=step)
compute.start()
compute.join(10)
assert seen["in"] == (True, True, [1] * len(blas.lib_controllers)), seen
assert [c.num_threads for c in blas.lib_controllers] == [2] * len(blas.lib_controllers)
print("ok")
"""


def test_a_compute_thread_holds_the_blas_after_the_main_thread_set_a_count():
    # The root of the compute thread's slower steps (issue 11): OpenBLAS ignores its
    # process-wide set from a non-main thread then (parallel._set_blas_threads).
    if _blas_threads() is None:
        pytest.skip("threadpoolctl found no BLAS")
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", _MAIN_SET_FIRST_SCRIPT],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_single_blas_thread_holds_one_thread_and_restores_nested_and_concurrent():
    # In a fresh process, as in a session: the holds come from two "compute threads",
    # never from the main thread (see single_blas_thread on OpenBLAS and the main thread).
    if _blas_threads() is None:
        pytest.skip("threadpoolctl found no BLAS")
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", _HOLD_SCRIPT], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_hold_the_blas_ignores_is_given_up(two_workers, monkeypatch):
    class Deaf:  # a BLAS that keeps its thread count whatever it is told
        num_threads = 2

        def set_num_threads(self, n):
            pass

    class Controller:
        lib_controllers = [Deaf()]

    monkeypatch.setattr(parallel, "_blas_controller", lambda: Controller())
    with parallel.single_blas_thread() as hold:
        assert not hold.active and not parallel.blas_held()


def test_single_blas_thread_does_nothing_with_one_worker(monkeypatch):
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    before = _blas_threads()
    with parallel.single_blas_thread():
        assert not parallel.blas_held()
        assert _blas_threads() == before


CONV_CASES = {  # x shape, w shape, strides, pads: both lowerings, both input-grad paths
    "rows-s1": ((6, 12, 9, 9), (8, 12, 3, 3), (1, 1), ((1, 1), (1, 1))),
    "im2col-s1": ((6, 1, 9, 9), (8, 1, 5, 5), (1, 1), ((2, 2), (2, 2))),
    "rows-s2-scatter": ((6, 12, 9, 9), (8, 12, 3, 3), (2, 2), ((1, 0), (0, 1))),
}


@pytest.mark.parametrize("case", CONV_CASES, ids=list(CONV_CASES))
def test_conv_kernels_split_under_a_held_blas_match_serial(case, two_workers, monkeypatch):
    from aioflow.kernels import conv as C
    monkeypatch.setattr(C, "_CHUNK_BYTES", 1)  # one sample per chunk: several per worker
    x_shape, w_shape, strides, pads = CONV_CASES[case]
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    y = C.conv2d_forward(x, w, strides, pads)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    serial = (y, C.conv2d_backward_data(dy, w, x.shape, strides, pads),
              C.conv2d_backward_filter(dy, x, w.shape, strides, pads))
    ran_on = set()
    real = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel", lambda tasks: (
        ran_on.add(len(tasks)), real(tasks))[1])
    # As inside a step that holds the BLAS at one thread (whether this BLAS obeyed).
    monkeypatch.setattr(parallel, "blas_held", lambda: True)
    split = (C.conv2d_forward(x, w, strides, pads),
             C.conv2d_backward_data(dy, w, x.shape, strides, pads),
             C.conv2d_backward_filter(dy, x, w.shape, strides, pads))
    assert ran_on == {2}  # every kernel did split its chunks over the two workers
    # The chunks write disjoint rows, but their GEMMs run side by side on a BLAS whose
    # kernels and partitioning may depend on the thread count, and the filter gradient
    # adds the workers' partial sums in another order: each result agrees with the serial
    # one to the rounding of its sums (tests/tolerances.py). Terms per sum: C*kh*kw in
    # the forward pass, at most O*kh*kw in the input gradient, N*OH*OW in the filter
    # gradient.
    (o, cg, kh, kw), (n, _, oh, ow) = w.shape, y.shape
    assert_close_to_summation_error(split[0], serial[0], cg * kh * kw,
                                    product_term_scale(x, w), err_msg="forward")
    assert_close_to_summation_error(split[1], serial[1], o * kh * kw,
                                    product_term_scale(dy, w), err_msg="input gradient")
    assert_close_to_summation_error(split[2], serial[2], n * oh * ow,
                                    product_term_scale(dy, x), err_msg="filter gradient")


def test_large_matmuls_split_under_a_held_blas(two_workers, monkeypatch):
    import aioflow as flow
    from aioflow.ops.linalg import matmul_op
    from aioflow.engine.session import default_session
    flow.clear_default_session()
    from aioflow import backends
    ctx = default_session().context_for(backends.named("numpy"))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((100, 400)).astype(np.float32)
    b = rng.standard_normal((300, 400)).astype(np.float32)
    want = a @ b.T
    calls = []
    real = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel", lambda tasks: (
        calls.append(len(tasks)), real(tasks))[1])
    monkeypatch.setattr(parallel, "blas_held", lambda: True)
    got = matmul_op.forward(ctx, a, b, transpose_b=True)
    got_t = matmul_op.forward(ctx, np.ascontiguousarray(a.T), b, transpose_a=True,
                              transpose_b=True)
    tall = matmul_op.forward(ctx, b, a, transpose_b=True)       # more rows than columns
    small = matmul_op.forward(ctx, a[:, :10], b[:10, :10], transpose_b=True)
    assert calls == [2, 2, 2]  # the small product was not split
    np.testing.assert_allclose(tall, b @ a.T, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(small, a[:, :10] @ b[:10, :10].T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got_t, want, rtol=1e-5, atol=1e-4)
    flow.clear_default_session()
