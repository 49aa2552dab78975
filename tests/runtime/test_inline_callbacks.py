"""Short Callback and old-API steps called from plain code run in the calling thread
(``flow.config.inline_callback_ms``, ``Pipeline.run_step_inline``): same losses, same
order of callbacks, the same bound on callbacks pending, errors reported as before."""
import threading
import time

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.engine.session import default_session

from .jobs import (X, Y, make_slow, make_train, ran_on, reference_losses,
                   refusals_inside_a_callback)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    before = flow.config.get("inline_callback_ms")
    yield
    flow.config.inline_callback_ms(before)
    flow.clear_default_session()


def _callback_losses(train, steps):
    got = []
    for _ in range(steps):
        train(X, Y)(lambda loss: got.append(float(loss.mean())))
    flow.sync_default_session()
    return got


def test_short_callback_steps_run_in_the_calling_thread_with_the_blocking_losses():
    expected = reference_losses(6)
    train = make_train(tp.Callback[tp.Numpy])
    threads = ran_on(train)
    np.testing.assert_allclose(_callback_losses(train, 6), expected, rtol=1e-6)
    # compiled by ran_on, and tiny: every step runs here (a larger job's first step is
    # queued, its time not known yet)
    assert threads == [threading.current_thread().name] * 6


def test_zero_budget_queues_every_callback_step():
    expected = reference_losses(4)
    flow.config.inline_callback_ms(0)
    train = make_train(tp.Callback[tp.Numpy])
    threads = ran_on(train)
    np.testing.assert_allclose(_callback_losses(train, 4), expected, rtol=1e-6)
    assert threads == ["aioflow-compute"] * 4


def test_the_old_api_get_runs_short_steps_here_too():
    expected = reference_losses(4)

    @flow.global_function(type="train")
    def train(x=flow.FixedTensorDef((4, 3)), y=flow.FixedTensorDef((4,), dtype=flow.int32)):
        logits = flow.layers.dense(x, 5, name="fc",
                                   kernel_initializer=flow.constant_initializer(0.1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(flow.identity(y), logits)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss
    threads = ran_on(train)
    losses = [float(train(X, Y).get().mean()) for _ in range(4)]
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    assert threads == [threading.current_thread().name] * 4


def test_an_inline_step_waits_for_the_queued_steps_ahead_and_delivers_after_them():
    slow, eye = make_slow(0.05, form=tp.Callback[tp.Numpy])
    train = make_train(tp.Callback[tp.Numpy])
    train(X, Y)(lambda loss: None)       # compiled, its time known
    flow.sync_default_session()
    assert train.compiled_for(default_session()).fits_inline
    assert not slow.compiled_for(default_session()).fits_inline
    order = []
    slow(eye)(lambda y: order.append("slow"))
    train(X, Y)(lambda loss: order.append("train"))
    flow.sync_default_session()
    assert order == ["slow", "train"]


def test_slow_callbacks_slow_the_caller_down_to_depth_pending():
    train = make_train(tp.Callback[tp.Numpy])
    train(X, Y)(lambda loss: None)
    flow.sync_default_session()
    ran = []

    def slow_callback(loss):
        time.sleep(0.02)
        ran.append(loss)
    for _ in range(8):
        train(X, Y)(slow_callback)
    pending = 8 - len(ran)
    flow.sync_default_session()
    depth = flow.config.get("pipeline_depth")
    assert len(ran) == 8 and pending <= depth


def test_a_failing_inline_step_is_reported_with_its_step_number_and_later_steps_run():
    train = make_train(tp.Callback[tp.Numpy])
    got = []
    train(X, Y)(lambda loss: got.append(1))
    flow.sync_default_session()
    bad = np.array([0, 1, 2, 9], np.int32)   # label 9 of 5 classes: the step raises
    train(X, bad)(lambda loss: got.append("bad"))
    train(X, Y)(lambda loss: got.append(3))
    with pytest.raises(ValueError, match="labels") as info:
        flow.sync_default_session()
    assert "(in step 2 of this session, a call of job 'train')" in info.value.__notes__
    assert got == [1, 3]


def test_arguments_reused_after_an_inline_call_do_not_change_its_step():
    expected = reference_losses(3)
    train = make_train(tp.Callback[tp.Numpy])
    x = X.copy()
    got = []
    for _ in range(3):
        train(x, Y)(lambda loss: got.append(float(loss.mean())))
        x[:] = 1e3        # the caller reuses its buffer at once
        x[:] = X
    flow.sync_default_session()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def _larger_job(form):
    """A predict job above the 64 KiB of a tiny plan whose step takes milliseconds (so
    that the caller's few microseconds between back-to-back calls stay far below the
    tenth of a step that fits_inline allows, even on a loaded machine)."""
    n = 256

    def chain(x: tp.Numpy.Placeholder((n, n))):
        y = x
        for _ in range(4):
            y = flow.matmul(y, x) * (1.0 / n)
        return y
    if form is not None:
        chain.__annotations__["return"] = form
    job = flow.global_function(type="predict")(chain)
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    return job, x


def test_a_larger_job_queues_its_first_step_then_runs_back_to_back_steps_here():
    mlp, x = _larger_job(tp.Callback[tp.Numpy])
    got = []
    mlp(x)(got.append)                        # compiles, queued: its time is unknown
    flow.sync_default_session()
    compiled = mlp.compiled_for(default_session())
    assert not compiled._tiny and compiled.step_seconds is not None
    flow.config.inline_callback_ms(1e3)       # whatever this machine's step takes
    threads = ran_on(mlp)
    for _ in range(6):
        mlp(x)(got.append)
    flow.sync_default_session()
    # From the second call on, the caller's time between calls is measured: next to
    # nothing, so its steps run here. (Not asserted for every one: a loaded machine may
    # preempt the caller between two calls for longer than a tenth of a step; the rule
    # itself is pinned by test_the_rule_weighs_the_callers_own_time...)
    assert threading.current_thread().name in threads[1:]
    for value in got[1:]:
        np.testing.assert_allclose(value, got[0], rtol=1e-6)


def test_a_caller_busy_between_calls_keeps_its_steps_queued_to_overlap_them():
    mlp, x = _larger_job(tp.Callback[tp.Numpy])
    mlp(x)(lambda y: None)
    returned = time.perf_counter()
    flow.sync_default_session()
    flow.config.inline_callback_ms(1e3)
    compiled = mlp.compiled_for(default_session())
    threads = ran_on(mlp)
    away, steps = [], []
    for _ in range(4):
        away.append(time.perf_counter() - returned)    # the caller's time since the last
        steps.append(compiled.step_seconds)             # the step time the rule weighs
        mlp(x)(lambda y: None)
        returned = time.perf_counter()
        time.sleep(0.002 + steps[-1])                   # "loading the next batch"
    flow.sync_default_session()
    assert len(threads) == 4
    # A caller away for 20 steps' time counts as a pause, whose next step runs inline (by
    # design). On a loaded host a 3 ms sleep (or the wait in sync, before the first call)
    # can overshoot that far, and the step time the rule weighs moves with each step: only
    # the calls that followed an absence under 10 steps, by the step time of that moment,
    # are asserted.
    after_short = [name for name, gone, step in zip(threads, away, steps)
                   if gone < 10 * step]
    assert after_short == ["aioflow-compute"] * len(after_short), (threads, away, steps)
    assert after_short, (threads, away, steps)   # the host let at least one be judged


def test_waiting_in_get_is_not_counted_as_the_callers_own_time():
    mlp, x = _larger_job(None)               # the old API: .get() waits for the step
    mlp(x).get()
    flow.config.inline_callback_ms(1e3)
    threads = ran_on(mlp)
    values = [mlp(x).get() for _ in range(6)]
    # queued, every step would be waited for in .get(): counted as the caller's time, it
    # would keep every step queued (see the test above for why not all are asserted)
    assert threading.current_thread().name in threads[1:]
    np.testing.assert_allclose(values[-1], values[0], rtol=1e-6)


def test_the_budget_is_validated():
    for bad in (-1, "2", None, True, float("nan")):
        with pytest.raises(ValueError, match=r"inline_callback_ms: expected a number of "
                                             r"milliseconds >= 0, got"):
            flow.config.inline_callback_ms(bad)
    assert flow.config.get("inline_callback_ms") == 10.0


def test_the_rule_weighs_the_callers_own_time_against_a_tenth_of_the_step():
    mlp, x = _larger_job(tp.Callback[tp.Numpy])
    compiled = mlp.compiled_for(default_session())
    flow.config.inline_callback_ms(10.0)
    compiled.step_seconds, compiled.caller_seconds = 0.004, None
    assert not compiled.fits_inline            # the caller's time is not known yet
    compiled.caller_seconds = 0.0004           # a tenth of the step, + 50 us: inline
    assert compiled.fits_inline
    compiled.caller_seconds = 0.0005           # more: a queued step overlaps it
    assert not compiled.fits_inline
    compiled.caller_seconds = 0.004 * 19.9     # under 20 steps: a queued step overlaps
    assert not compiled.fits_inline
    compiled.caller_seconds = 0.004 * 20       # away 20 steps' time (a pause): here again
    assert compiled.fits_inline
    compiled.step_seconds, compiled.caller_seconds = 0.011, 0.0   # over the budget
    assert not compiled.fits_inline


# -- callbacks of steps that ran in the caller's thread (Pipeline.deliver_here) -----------

def _compiled_train():
    """A Callback train job whose first (queued) step ran: later steps run here."""
    train = make_train(tp.Callback[tp.Numpy])
    train(X, Y)(lambda loss: None)
    flow.sync_default_session()
    return train


def test_a_short_callback_of_a_step_run_here_runs_here_before_the_registration_returns():
    expected = reference_losses(5)[1:]
    train = _compiled_train()
    seen = []
    for i in range(4):
        train(X, Y)(lambda loss: seen.append((threading.current_thread().name,
                                              float(loss.mean()))))
        assert len(seen) == i + 1       # it ran during the registration
    flow.sync_default_session()
    assert [name for name, _ in seen] == [threading.current_thread().name] * 4
    np.testing.assert_allclose([v for _, v in seen], expected, rtol=1e-6)


def test_a_callback_waits_its_turn_behind_callbacks_pending_on_the_delivery_thread():
    train = _compiled_train()
    order, release = [], threading.Event()
    slow, eye = make_slow(0.002, form=tp.Callback[tp.Numpy])
    # A queued step (first call) whose callback blocks the delivery thread until released.
    slow(eye)(lambda y: (release.wait(10), order.append(("slow", threading.current_thread().name))))
    train(X, Y)(lambda loss: order.append(("train", threading.current_thread().name)))
    assert order == []                  # not run ahead of the pending callback
    release.set()
    flow.sync_default_session()
    assert order == [("slow", "aioflow-delivery"), ("train", "aioflow-delivery")]


def test_slow_callbacks_go_back_to_the_delivery_thread_where_they_overlap_the_caller():
    train = _compiled_train()
    # Nothing known of this job's callbacks yet: the warm-up's empty callback was timed,
    # and a garbage collection or a preemption inside it would count as its time.
    train.compiled_for(default_session()).callback_seconds = None
    names = []

    def slow_callback(loss):
        names.append(threading.current_thread().name)
        time.sleep(0.01)               # far above a tenth of this tiny step + 50 us
    for _ in range(4):
        train(X, Y)(slow_callback)
    flow.sync_default_session()
    # the first ran here (nothing known of this job's callbacks yet), then it was measured
    assert names[0] == threading.current_thread().name
    assert names[1:] == ["aioflow-delivery"] * 3
    assert not train.compiled_for(default_session()).delivers_here


def test_inside_a_callback_run_here_the_delivery_threads_refusals_hold():
    train = _compiled_train()
    errors = refusals_inside_a_callback(train(X, Y), lambda: train(X, Y),
                                        flow.sync_default_session)
    assert len(errors) == 2 and all("inside an aioflow callback" in e for e in errors)
    # and the job goes on, its callbacks here again
    seen = []
    train(X, Y)(lambda loss: seen.append(threading.current_thread().name))
    assert seen == [threading.current_thread().name]


def test_an_error_in_a_callback_run_here_is_reported_at_sync_and_the_next_ones_run():
    train = _compiled_train()
    seen = []
    train(X, Y)(lambda loss: 1 / 0)
    train(X, Y)(lambda loss: seen.append(float(loss.mean())))
    with pytest.raises(ZeroDivisionError):
        flow.sync_default_session()
    assert len(seen) == 1


def test_ctrl_c_in_a_callback_run_here_reaches_the_caller_and_loses_nothing():
    train = _compiled_train()

    def interrupted(loss):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(X, Y)(interrupted)
    flow.sync_default_session()       # nothing left pending: returns
    seen = []
    train(X, Y)(lambda loss: seen.append(float(loss.mean())))
    flow.sync_default_session()
    np.testing.assert_allclose(seen, reference_losses(3)[2:], rtol=1e-6)


def test_a_callback_registered_from_another_thread_runs_on_the_delivery_thread():
    train = _compiled_train()
    registrar = train(X, Y)
    names = []
    other = threading.Thread(
        target=lambda: registrar(lambda loss: names.append(threading.current_thread().name)))
    other.start()
    other.join()
    flow.sync_default_session()
    assert names == ["aioflow-delivery"]
