"""The async rule under trio (through anyio): awaitables there too, never a blocked trio loop."""
import importlib
import time

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from .jobs import X, Y, make_predict, make_slow, make_train, reference_losses

trio = pytest.importorskip("trio")  # in the test extra; the feature needs it installed


def test_await_a_job_and_the_entry_points_in_trio(tmp_path):
    expected = reference_losses(3)
    train = make_train()
    predict = make_predict()

    async def main():
        await flow.train.CheckPoint().init()
        losses = [float((await train(X, Y)).mean()) for _ in range(3)]
        await flow.sync_default_session()
        await flow.checkpoint.save(str(tmp_path / "ckpt"))
        return losses, await predict(X)

    losses, predicted = trio.run(main)
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    assert predicted.shape == (4, 5)
    assert (tmp_path / "ckpt" / "fc-weight" / "out").exists()


def test_many_trio_tasks_each_get_their_own_result():
    predict = make_predict()
    flow.train.CheckPoint().init()
    inputs = [X * i for i in range(60)]
    expected = [predict(x) for x in inputs]
    got = [None] * len(inputs)

    async def one(i):
        got[i] = await predict(inputs[i])

    async def main():
        async with trio.open_nursery() as nursery:
            for i in range(len(inputs)):
                nursery.start_soon(one, i)

    trio.run(main)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def test_the_trio_loop_keeps_running_while_a_step_computes():
    slow, eye = make_slow(0.4)
    slow(eye)  # compile and warm up
    ticks = []

    async def heartbeat(stop):
        while not stop.is_set():
            ticks.append(time.perf_counter())
            await trio.sleep(0.01)

    async def main():
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heartbeat, stop)
            await trio.sleep(0.05)
            await slow(eye)
            stop.set()

    trio.run(main)
    gaps = np.diff(ticks)
    assert len(ticks) > 10 and gaps.max() < 0.25, gaps.max()


def test_inputs_are_private_copies_when_the_call_returns_early_in_trio():
    predict = make_predict()
    flow.train.CheckPoint().init()
    expected = predict(X)

    async def main():
        x = X.copy()
        pending = predict(x)  # not awaited yet
        x[...] = 100.0        # the caller reuses its buffer
        return await pending

    np.testing.assert_array_equal(trio.run(main), expected)


# -- the same tests on both of anyio's backends --------------------------------------------
# Written against anyio's API and run by anyio.run on asyncio and on trio. (anyio's pytest
# plugin cannot take them here: pytest-asyncio in auto mode, which the rest of the suite
# uses, converts every `async def` test into an asyncio one, @pytest.mark.anyio included.)

STEP_VAR = "System-Train-TrainStep-train"


@pytest.fixture(params=["asyncio", "trio"])
def run_on(request):
    """``run_on(main)``: ``anyio.run(main)`` on the parametrized backend, in a fresh session."""
    import anyio
    flow.clear_default_session()
    yield lambda main, *args: anyio.run(main, *args, backend=request.param)
    flow.clear_default_session()


async def _step_count() -> int:
    return int(np.asarray((await flow.get_all_variables())[STEP_VAR]).reshape(-1)[0])


def test_awaited_steps_give_the_blocking_results_on_both_backends(run_on):
    expected = reference_losses(3)
    train = make_train()
    flow.train.CheckPoint().init()

    async def main():
        return [float((await train(X, Y)).mean()) for _ in range(3)]

    np.testing.assert_allclose(run_on(main), expected, rtol=1e-6)


def test_a_step_cancelled_in_line_never_runs_on_both_backends(run_on):
    """Cancelled while it waits behind other steps (admission, or queued and not started),
    a call's step never runs; the session goes on."""
    import anyio
    slow, eye = make_slow(0.1)
    train = make_train()
    flow.config.pipeline_depth(2)

    async def main():
        await slow(eye)
        await train(X, Y)
        start = await _step_count()
        async with anyio.create_task_group() as group:
            group.start_soon(slow, eye)          # two slow steps fill the pipeline
            group.start_soon(slow, eye)
            await anyio.sleep(0.02)
            with anyio.move_on_after(0.02) as scope:
                await train(X, Y)                # waits for admission, then cancelled
            assert scope.cancelled_caught
        await flow.sync_default_session()
        assert await _step_count() == start      # never ran
        await train(X, Y)
        assert await _step_count() == start + 1

    run_on(main)


def test_a_step_cancelled_while_it_runs_completes_once_on_both_backends(run_on):
    """Cancelled once started, the step completes (its updates are kept, once) and its
    result is dropped."""
    import anyio
    slow_train = _slow_train_job()

    async def main():
        await slow_train(_BIG)
        start = await _step_count()
        with anyio.move_on_after(0.05) as scope:
            await slow_train(_BIG)                 # cancelled while it computes
        assert scope.cancelled_caught
        await flow.sync_default_session()
        assert await _step_count() == start + 1    # ran, exactly once

    run_on(main)


_BIG = np.eye(512, dtype=np.float32)


def _slow_train_job():
    """A train job (it counts its steps) whose step takes a few hundred ms."""
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((512, 512))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(512, 512), initializer=flow.constant_initializer(0.001))
        y = flow.matmul(x, w)
        for _ in range(60):
            y = flow.matmul(y, x)
        loss = flow.math.reduce_mean(y)
        flow.optimizer.SGD(0.0, momentum=0).minimize(loss)
        return loss
    return train


def test_loaders_serve_async_for_on_both_backends(run_on):
    images = np.arange(40, dtype=np.float32).reshape(10, 4)

    async def main():
        seen = []
        async for (batch,) in flow.data.Loader((images,), batch_size=2, prefetch=1):
            seen.append(batch)
        return np.concatenate(seen)

    np.testing.assert_array_equal(run_on(main), images)


def test_a_trio_caller_is_woken_without_a_worker_thread(monkeypatch):
    """The awaited call's completion reaches the trio task through the run's token, not
    through a worker thread per call (anyio.to_thread, before issue 29): no work is
    handed to trio's worker threads (trio.lowlevel.start_thread_soon) while calls run."""
    slow, eye = make_slow(0.05)
    slow(eye)
    handed = []
    start_thread_soon = trio.lowlevel.start_thread_soon

    def spy(*args, **kwargs):
        handed.append(args)
        return start_thread_soon(*args, **kwargs)
    monkeypatch.setattr(trio.lowlevel, "start_thread_soon", spy)
    monkeypatch.setattr(importlib.import_module("trio._threads"), "start_thread_soon", spy)

    async def main():
        return [await slow(eye) for _ in range(5)]

    assert len(trio.run(main)) == 5
    assert handed == []
    # (the spy sees a worker thread's use: flow.sync_default_session() takes one)
    trio.run(flow.sync_default_session)
    assert len(handed) == 1
