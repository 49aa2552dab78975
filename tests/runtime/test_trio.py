"""The async rule under trio (through anyio): awaitables there too, never a blocked trio loop."""
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
