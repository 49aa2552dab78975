"""The pipeline's threading state: the session lock knows its holder, the runtime's
threads start once however many callers arrive together, and a step queued while the
pipeline closes is refused rather than left behind the compute thread's stop."""
import threading

import pytest

from aioflow.runtime.pipeline import Pipeline, SessionLock


class _Session:
    """What a Pipeline reads of its session in these tests."""

    def __init__(self):
        self.lock = SessionLock()
        self.errors = []

    def report_error(self, exc, where):
        self.errors.append((exc, where))


def test_the_session_lock_knows_the_thread_holding_it():
    lock = SessionLock()
    assert not lock.held_here()
    with lock:
        with lock:                                 # re-entrant
            assert lock.held_here()
        assert lock.held_here()                    # still held once
        seen = []
        other = threading.Thread(
            target=lambda: seen.append((lock.held_here(), lock.acquire(blocking=False))))
        other.start()
        other.join()
        assert seen == [(False, False)]            # not another thread's, and taken
    assert not lock.held_here()
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()
    assert lock.acquire(blocking=False) and lock.held_here()
    lock.release()
    assert not lock.held_here()


def test_callers_arriving_together_start_one_compute_and_one_delivery_thread():
    pipeline = Pipeline(_Session())
    callers = 8
    ready = threading.Barrier(callers)
    ran = []

    def first_delivery(n):
        ready.wait()
        pipeline.deliver_on_thread(lambda: ran.append(n))

    threads = [threading.Thread(target=first_delivery, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert pipeline.wait_idle(10)
        assert sorted(ran) == list(range(callers))
        assert [t.name for t in pipeline._threads] == ["aioflow-compute", "aioflow-delivery"]
    finally:
        pipeline.close(10)


def test_a_step_queued_after_close_is_refused_and_gives_its_place_back():
    pipeline = Pipeline(_Session())
    pipeline.deliver_on_thread(lambda: None)       # the threads run
    assert pipeline.close(10)
    assert pipeline.admission.try_acquire()
    step = pipeline.new_step(compiled=None, arrays=[])
    with pytest.raises(RuntimeError, match="shut down"):
        pipeline.enqueue(step)
    assert pipeline.admission.in_use == 0
