"""Errors, callbacks that fail, deadlock refusal, backpressure, cancellation, exit."""
import asyncio
import signal
import subprocess
import sys
import textwrap
import time

import anyio
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from .jobs import (X, Y, interrupt_when_ready, make_predict, make_slow, make_train,
                   refusals_inside_a_callback)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    try:
        flow.clear_default_session()
    except Exception:  # a test may leave a reported error behind on purpose
        flow.clear_default_session()


def _bad_labels():
    return np.array([0, 1, 2, 99], np.int32)  # out of range: the step raises


def test_step_error_reaches_blocking_caller_and_changes_nothing():
    train = make_train()
    train(X, Y)
    before = flow.get_all_variables()
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 5\)"):
        train(X, _bad_labels())
    after = flow.get_all_variables()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])
    train(X, Y)  # the job keeps working


def test_labels_from_a_placeholder_are_refused_at_the_call_naming_the_argument():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)),
              labels: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 5, name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss

    train(X, Y)
    before = flow.get_all_variables()
    with pytest.raises(ValueError, match=r"argument 'labels'.*labels must lie in \[0, 5\), "
                                         r"got values from -1 to 3"):
        train(X, np.array([0, 1, -1, 3], np.int32))
    after = flow.get_all_variables()
    assert all(np.array_equal(before[k], after[k]) for k in before)   # no step ran
    train(X, Y)


@pytest.mark.anyio
async def test_step_error_reaches_awaiting_caller():
    train = make_train()
    with pytest.raises(ValueError, match="labels must lie"):
        await train(X, _bad_labels())
    assert (await train(X, Y)).shape == (4,)


def test_callback_step_error_is_raised_at_sync_with_cause_and_later_steps_run():
    train = make_train(tp.Callback[tp.Numpy])
    seen = []
    train(X, Y)(lambda _: seen.append("a"))
    train(X, _bad_labels())(lambda _: seen.append("never"))
    train(X, Y)(lambda _: seen.append("c"))
    with pytest.raises(ValueError, match="labels must lie"):
        flow.sync_default_session()
    assert seen == ["a", "c"]
    flow.sync_default_session()  # reported once


def test_exception_in_callback_is_reported_and_others_still_run():
    train = make_train(tp.Callback[tp.Numpy])
    seen = []

    def boom(_):
        raise KeyError("user bug")

    train(X, Y)(boom)
    train(X, Y)(lambda _: seen.append(1))
    with pytest.raises(KeyError, match="user bug"):
        flow.sync_default_session()
    assert seen == [1]


def test_blocking_inside_a_callback_raises_instead_of_deadlocking():
    train = make_train(tp.Callback[tp.Numpy])
    predict = make_predict()
    errors = refusals_inside_a_callback(train(X, Y), lambda: predict(X),
                                        flow.sync_default_session)
    assert len(errors) == 2 and all("deadlock" in e for e in errors)


def test_backpressure_bounds_in_flight_steps():
    slow, eye = make_slow(0.05, tp.Callback[tp.Numpy])
    flow.sync_default_session()
    slow(eye)(lambda _: None)  # compile and warm up
    flow.sync_default_session()
    from aioflow.engine.session import default_session
    pipeline = default_session().pipeline
    peak, delivered, seen_at_return = 0, [], []
    for _ in range(6):
        slow(eye)(delivered.append)
        peak = max(peak, pipeline.admission.in_use)
        seen_at_return.append(len(delivered))
    flow.sync_default_session()
    assert peak <= 2 and len(delivered) == 6
    # The producer waited for places instead of queueing all 6: a step keeps its place
    # until its callback ran, so when call k returned (k+1 admitted), at least k-1
    # callbacks had run.
    assert all(seen >= k - 1 for k, seen in enumerate(seen_at_return)), seen_at_return


@pytest.mark.anyio
async def test_loop_keeps_serving_during_heavy_compute():
    slow, eye = make_slow(0.3)
    await slow(eye)  # compile
    worst = 0.0
    stop = False

    async def ticker():
        nonlocal worst
        last = time.perf_counter()
        while not stop:
            await anyio.sleep(0.005)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        for _ in range(3):
            await slow(eye)
        stop = True
    assert worst < 0.15, f"event loop stalled for {worst * 1000:.0f} ms"


_STEP_VAR = "System-Train-TrainStep-train"


async def _slow_and_train_compiled():
    """(slow, its input, train, train's step count): both compiled, one step each."""
    slow, eye = make_slow(0.1)
    train = make_train()
    await slow(eye)
    await train(X, Y)
    return slow, eye, train, (await flow.get_all_variables())[_STEP_VAR]


async def _check_it_never_ran(train, start):
    await flow.sync_default_session()
    assert (await flow.get_all_variables())[_STEP_VAR] == start
    assert (await train(X, Y)).shape == (4,)     # and the job works on


async def test_cancel_before_launch_withdraws_the_step():
    slow, eye, train, start = await _slow_and_train_compiled()
    blocker = asyncio.ensure_future(slow(eye))
    blocker2 = asyncio.ensure_future(slow(eye))
    await asyncio.sleep(0.01)
    victim = asyncio.ensure_future(train(X, Y))
    await asyncio.sleep(0.01)
    victim.cancel()
    await asyncio.gather(blocker, blocker2)
    with pytest.raises(asyncio.CancelledError):
        await victim
    await _check_it_never_ran(train, start)


@pytest.mark.anyio
async def test_a_cancel_scope_withdraws_a_step_not_yet_launched(anyio_backend):
    # trio's (and anyio's) cancellation: the scope around the call, cancelled from outside
    slow, eye, train, start = await _slow_and_train_compiled()
    victim, finished = anyio.CancelScope(), []

    async def run(job, *args):
        await job(*args)

    async def train_in_scope():
        with victim:
            await train(X, Y)
            finished.append(True)

    async with anyio.create_task_group() as group:
        group.start_soon(run, slow, eye)
        group.start_soon(run, slow, eye)
        await anyio.sleep(0.01)
        group.start_soon(train_in_scope)
        await anyio.sleep(0.01)
        victim.cancel()
    assert victim.cancel_called and not finished
    await _check_it_never_ran(train, start)


def test_exit_drains_in_flight_steps_and_runs_callbacks(tmp_path):
    script = textwrap.dedent("""
        import sys, numpy as np, aioflow as flow, aioflow.typing as tp
        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((200, 200))) -> tp.Callback[tp.Numpy]:
            y = x
            for _ in range(20):
                y = flow.matmul(y, x)
            return y
        x = np.eye(200, dtype=np.float32)
        for i in range(5):
            job(x)(lambda r, i=i: sys.stdout.write(f"delivered {i}\\n"))
        sys.stdout.write("end of script\\n")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line for line in lines if line.startswith("delivered")] == [
        f"delivered {i}" for i in range(5)]


@pytest.fixture
def sigint_as_in_a_terminal():
    """Python's own Ctrl-C handler, as in a program started from a terminal, whatever this
    test run inherited: one started as a background job of a script (``pytest &``)
    ignores SIGINT, and so would the processes these tests start."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("form", ["tp.Callback[tp.Numpy]", "tp.Numpy"],
                         ids=["callback (compute thread)", "blocking (inline when idle)"])
def test_ctrl_c_stops_training_promptly_and_leaves_variables_usable(form,
                                                                    sigint_as_in_a_terminal):
    call = "train(x)(lambda loss: None)" if "Callback" in form else "train(x)"
    script = textwrap.dedent("""
        import sys, numpy as np, aioflow as flow, aioflow.typing as tp
        @flow.global_function(type="train")
        def train(x: tp.Numpy.Placeholder((256, 256))) -> FORM:
            w = flow.get_variable("w", shape=(256, 256), initializer=flow.zeros_initializer())
            y = x
            for _ in range(10):
                y = flow.matmul(y, x + w)
            loss = flow.math.reduce_mean(flow.math.square(y)) * 1e-6
            flow.optimizer.SGD(1e-3, momentum=0).minimize(loss)
            return loss
        x = np.eye(256, dtype=np.float32) * 0.5
        print("ready", flush=True)
        calls = 0
        try:
            while True:
                CALL
                calls += 1
        except KeyboardInterrupt:
            flow.sync_default_session()
            variables = flow.get_all_variables()
            w, steps = variables["w"], int(variables["System-Train-TrainStep-train"])
            # every step that started finished all its updates: the interrupted call's
            # step either never started or ran to the end (its result dropped)
            whole = steps in (calls, calls + 1)
            print("interrupted; finite:", bool(np.isfinite(w).all()), "whole:", whole,
                  flush=True)
    """).replace("FORM", form).replace("CALL", call)
    returncode, out, err, took = interrupt_when_ready(script, after=1.0)
    assert took < 5, "did not stop promptly"
    assert returncode == 0, err
    assert "interrupted; finite: True whole: True" in out


def test_a_kept_unregistered_registrar_does_not_hold_up_sync():
    train = make_train(tp.Callback[tp.Numpy])
    kept = train(X, Y)  # no callback yet
    seen = []
    train(X, Y)(lambda _: seen.append("second"))
    flow.sync_default_session()  # must not hang on `kept`
    assert seen == ["second"]
    kept(lambda _: seen.append("late"))
    flow.sync_default_session()
    assert seen == ["second", "late"]


def test_legacy_get_error_is_raised_once_not_again_at_sync():
    @flow.global_function(type="predict")
    def job(x=flow.FixedTensorDef((4,), dtype=flow.int32)):
        return flow.nn.sparse_softmax_cross_entropy_with_logits(
            flow.identity(x), flow.constant(np.zeros((4, 3), np.float32)))

    with pytest.raises(ValueError, match="labels must lie"):
        job(np.array([0, 1, 2, 7], np.int32)).get()
    flow.sync_default_session()  # already seen by .get(): not raised again


async def test_awaiting_a_callback_registration_gives_backpressure():
    slow, eye = make_slow(0.03, tp.Callback[tp.Numpy])
    slow(eye)(lambda _: None)
    await flow.sync_default_session()
    from aioflow.engine.session import default_session
    pipeline = default_session().pipeline
    seen = []
    for i in range(5):
        await slow(eye)(lambda _, i=i: seen.append(i))
        assert pipeline.admission.in_use <= 2
    await flow.sync_default_session()
    assert seen == list(range(5))


def test_callbacks_for_a_closed_loop_still_run_exactly_once():
    train = make_train(tp.Callback[tp.Numpy])
    seen = []

    async def main():
        for i in range(6):
            train(X, Y)(lambda _, i=i: seen.append(i))
        # returns without syncing: asyncio.run closes the loop

    asyncio.run(main())
    flow.sync_default_session()
    assert sorted(seen) == list(range(6))


# -- blocking calls on an idle pipeline run in the calling thread --------------------------

def _pipeline():
    from aioflow.engine.session import default_session
    return default_session().pipeline


def test_blocking_calls_on_an_idle_pipeline_run_inline():
    train = make_train()
    losses = [float(train(X, Y).mean()) for _ in range(3)]
    assert losses[0] > losses[1] > losses[2]       # each step saw the last one's update
    assert _pipeline()._threads == []              # no hand-off: the threads never started


def test_a_blocking_call_queues_behind_a_step_in_flight_and_sees_its_update():
    train = make_train(tp.Callback[tp.Numpy])
    slow, eye = make_slow(0.3, tp.Callback[tp.Numpy])
    predict = make_predict()
    flow.train.CheckPoint().init()
    before = predict(X)
    seen = []
    slow(eye)(lambda _: seen.append("slow"))       # occupies the compute thread
    train(X, Y)(lambda _: seen.append("train"))    # admitted behind it
    after = predict(X)                             # must not overtake either
    assert not np.allclose(after, before)          # it saw the train step's update
    flow.sync_default_session()
    assert seen == ["slow", "train"]


def test_ctrl_c_during_an_inline_step_is_raised_after_its_updates(monkeypatch,
                                                                  sigint_as_in_a_terminal):
    train = make_train()
    train(X, Y)
    from aioflow.engine.session import default_session
    compiled = train.compiled_for(default_session())
    real_run = compiled.plan.run

    def interrupted_run(ctx, inputs):
        signal.raise_signal(signal.SIGINT)         # Ctrl-C arrives mid-step...
        return real_run(ctx, inputs)               # ...and the step still completes

    monkeypatch.setattr(compiled.plan, "run", interrupted_run)
    weight = flow.get_all_variables()["fc-weight"]
    with pytest.raises(KeyboardInterrupt):
        train(X, Y)
    monkeypatch.setattr(compiled.plan, "run", real_run)
    assert not np.array_equal(flow.get_all_variables()["fc-weight"], weight)
    assert int(flow.get_all_variables()["System-Train-TrainStep-train"]) == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _pipeline()._threads == []              # it did run inline
    train(X, Y)                                    # and the job keeps working


def test_with_a_custom_sigint_handler_blocking_steps_go_through_the_compute_thread():
    import signal
    previous = signal.signal(signal.SIGINT, lambda *a: None)
    try:
        predict = make_predict()
        flow.train.CheckPoint().init()
        predict(X)
        assert len(_pipeline()._threads) == 2
    finally:
        signal.signal(signal.SIGINT, previous)


def test_with_sigint_ignored_blocking_steps_still_run_inline():
    import signal
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background job
    try:
        predict = make_predict()
        flow.train.CheckPoint().init()
        predict(X)
        assert _pipeline()._threads == []
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_slow_callback_slows_the_producer_instead_of_queueing_deliveries():
    fast, eye = make_slow(0.005, tp.Callback[tp.Numpy])
    fast(eye)(lambda _: None)  # compile and warm up
    flow.sync_default_session()
    delivered, seen_at_return = [], []

    def slow_callback(_):
        time.sleep(0.05)       # ten times the step
        delivered.append(1)
    for _ in range(6):
        fast(eye)(slow_callback)
        seen_at_return.append(len(delivered))
    flow.sync_default_session()
    assert len(delivered) == 6
    assert all(seen >= k - 1 for k, seen in enumerate(seen_at_return)), seen_at_return


def test_callbacks_registered_after_their_steps_finished_still_slow_the_producer():
    """The bound above, with each registration late: the caller is away (preempted, or
    busy) between the call and its registration until the queued step has finished, so
    the step's place was not held at completion. It takes one at the registration."""
    before = flow.config.get("inline_callback_ms")
    flow.config.inline_callback_ms(0)          # every step queued
    try:
        fast, eye = make_slow(0.002, tp.Callback[tp.Numpy])
        fast(eye)(lambda _: None)
        flow.sync_default_session()
        pipeline = _pipeline()
        delivered, seen_at_return = [], []

        def slow_callback(_):
            time.sleep(0.05)
            delivered.append(1)
        for _ in range(6):
            register = fast(eye)
            deadline = time.monotonic() + 10
            while pipeline._unfinished and time.monotonic() < deadline:
                time.sleep(0.001)              # the step finishes before the registration
            register(slow_callback)
            seen_at_return.append(len(delivered))
        flow.sync_default_session()
        assert len(delivered) == 6
        assert all(seen >= k - 1 for k, seen in enumerate(seen_at_return)), seen_at_return
        assert (pipeline.admission.in_use, pipeline.admission.held) == (0, 0)
    finally:
        flow.config.inline_callback_ms(before)
