"""Awaited steps small enough to run on the caller's event loop (runtime/calls.py,
``CompiledJob.fits_on_loop``): same results and order as the other forms, never inside a
running step, and Ctrl-C held back until the step's updates are done."""
import asyncio
import signal
import threading

import anyio
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.runtime.pipeline import _interrupts_held
from aioflow.engine.session import default_session

from .jobs import X, Y, make_slow, make_train, ran_on, reference_losses


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@pytest.mark.anyio
async def test_a_small_awaited_train_step_runs_on_the_loop_with_the_same_losses():
    expected = await anyio.to_thread.run_sync(reference_losses, 5)
    train = make_train()
    assert train.compiled_for(default_session()).fits_on_loop
    threads = ran_on(train)
    losses = [float((await train(X, Y)).mean()) for _ in range(5)]
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    assert set(threads) == {threading.current_thread().name}
    assert default_session().pipeline._threads == []   # the compute thread never started


async def test_a_small_step_awaited_behind_a_running_one_queues_in_order():
    slow, eye = make_slow(0.05)
    train = make_train()
    assert not slow.compiled_for(default_session()).fits_on_loop   # 512x512 matmuls
    threads = ran_on(train)
    order = []

    async def run(name, coro):
        await coro
        order.append(name)
    await asyncio.gather(run("slow", slow(eye)), run("train", train(X, Y)))
    assert order == ["slow", "train"]
    assert set(threads) == {"aioflow-compute"}   # the pipeline was busy: it queued


async def test_ctrl_c_on_the_loop_is_handed_to_the_handler_after_the_step():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        with _interrupts_held(any_handler=True):
            signal.raise_signal(signal.SIGINT)
            assert calls == []                 # held while the step runs
        assert calls == [signal.SIGINT]        # then delivered, once
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def loop_budget():
    """Set flow.config.await_on_loop_ms for one test, restored afterwards."""
    before = flow.config.get("await_on_loop_ms")
    yield flow.config.await_on_loop_ms
    flow.config.await_on_loop_ms(before)


def _make_wide():
    """A predict job touching ~0.5 MiB (not tiny) in microseconds of compute."""
    @flow.global_function(type="predict")
    def wide(x: tp.Numpy.Placeholder((256, 256))) -> tp.Numpy:
        return x * 2.0
    return wide, np.arange(256 * 256, dtype=np.float32).reshape(256, 256)


async def test_a_larger_step_runs_on_the_loop_once_its_steps_proved_short(loop_budget):
    loop_budget(1000.0)       # any measured step qualifies
    wide, x = _make_wide()
    compiled = wide.compiled_for(default_session())
    assert not compiled.fits_on_loop        # not tiny, and not measured yet
    threads = ran_on(wide)
    first = await wide(x)
    assert set(threads) == {"aioflow-compute"} and compiled.step_seconds is not None
    assert compiled.fits_on_loop
    second = await wide(x)
    assert set(threads) == {"aioflow-compute", threading.current_thread().name}
    np.testing.assert_array_equal(first, x * 2)
    np.testing.assert_array_equal(second, x * 2)


async def test_a_step_slower_than_the_budget_stays_off_the_loop(loop_budget):
    loop_budget(1e-6)         # no real step is that fast
    wide, x = _make_wide()
    threads = ran_on(wide)
    for _ in range(3):
        await wide(x)
    assert set(threads) == {"aioflow-compute"}


async def test_a_zero_budget_keeps_even_tiny_steps_off_the_loop(loop_budget):
    loop_budget(0)
    train = make_train()
    assert not train.compiled_for(default_session()).fits_on_loop
    threads = ran_on(train)
    await train(X, Y)
    assert set(threads) == {"aioflow-compute"}


def test_the_budget_is_validated():
    for bad in (-1, "2", None, True, float("nan")):
        with pytest.raises(ValueError, match="await_on_loop_ms"):
            flow.config.await_on_loop_ms(bad)


async def test_a_queued_awaited_step_reads_its_arguments_as_they_were_at_the_call():
    slow, eye = make_slow(0.05)
    wide, x = _make_wide()
    expected = x * 2
    busy = asyncio.create_task(slow(eye))
    await asyncio.sleep(0)                  # the slow step is admitted: wide will queue
    pending = asyncio.create_task(wide(x))
    await asyncio.sleep(0)                  # wide's call ran up to its queued step
    x[...] = -1                             # another task reuses the buffer
    np.testing.assert_array_equal(await pending, expected)
    await busy


@pytest.mark.anyio
async def test_steps_awaited_back_to_back_on_the_loop_let_other_tasks_run():
    train = make_train()
    assert train.compiled_for(default_session()).fits_on_loop
    beats = 0

    async def heartbeat():
        nonlocal beats
        while True:
            beats += 1
            await anyio.sleep(0)
    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        for _ in range(20):
            await train(X, Y)
        group.cancel_scope.cancel()
    assert beats >= 19      # the other task ran between the steps
