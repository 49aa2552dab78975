"""Awaited calls of a short job on a device (the simulated GPU here; the H200 in
docs/benchmarks.md): a call made after the job's previous awaited step delivered runs its
step from the caller's loop, with no thread hand-off, once the job's steps proved short;
calls made together still queue, so their steps overlap on the device."""
import asyncio

import numpy as np

import aioflow as flow
from aioflow.engine.session import default_session

from .test_device_pipeline import fresh_session  # noqa: F401 - autouse fixture
from .test_loop_turns import X, _predict_on_simulated_gpu


def _spy_on_queue(monkeypatch) -> list:
    pipeline = default_session().pipeline
    queued, enqueue = [], pipeline.enqueue

    def spy(step):
        queued.append(step.seq)
        enqueue(step)
    monkeypatch.setattr(pipeline, "enqueue", spy)
    return queued


async def test_awaits_one_after_another_run_from_the_loop_once_steps_proved_short(monkeypatch):
    predict = _predict_on_simulated_gpu(copy_ms=0.1, compute_ms=0.5, fetch_ms=0.1)
    queued = _spy_on_queue(monkeypatch)
    first = await predict(X)        # no step time measured yet: queued
    assert len(queued) == 1
    for _ in range(4):              # the median of the job's recent steps settles
        await predict(X)
    queued.clear()
    results = [await predict(X * n) for n in range(20)]
    assert queued == [], "steps awaited one after another went through the queue"
    np.testing.assert_allclose(first, X @ np.full((32, 32), 0.5, np.float32))
    for n, result in enumerate(results):
        np.testing.assert_allclose(result, n * first, rtol=1e-6)


async def test_calls_made_together_still_queue_and_overlap(monkeypatch):
    flow.config.pipeline_depth(4)
    predict = _predict_on_simulated_gpu(copy_ms=0.1, compute_ms=0.5, fetch_ms=0.1)
    for _ in range(5):
        await predict(X)            # the job's steps are short now
    queued = _spy_on_queue(monkeypatch)
    results = await asyncio.gather(*(predict(X * n) for n in range(10)))
    # The first of the ten may run from the loop (made after the last step delivered);
    # the nine made before it finished queue behind it.
    assert len(queued) >= 9
    for n, result in enumerate(results):
        np.testing.assert_allclose(result, n * results[1], rtol=1e-6)


async def test_await_on_loop_ms_0_keeps_every_device_step_queued(monkeypatch):
    before = flow.config.get("await_on_loop_ms")
    flow.config.await_on_loop_ms(0)
    try:
        predict = _predict_on_simulated_gpu(copy_ms=0.1, compute_ms=0.5, fetch_ms=0.1)
        queued = _spy_on_queue(monkeypatch)
        for _ in range(5):
            await predict(X)
    finally:
        flow.config.await_on_loop_ms(before)
    assert len(queued) == 5
