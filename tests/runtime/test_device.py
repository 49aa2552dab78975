"""The device interface (backends/device.py), driven through a test double of an
asynchronous device: a single worker thread standing in for a CUDA stream, on which
copies and compute complete later than the calls that start them."""
import asyncio
import queue
import threading
import time

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.backends.numpy_backend import NumpyBackend
from aioflow.backends.device import (DONE, Fetched, HostDevice, Launched, Staged, ThreadEvent,
                                    run_step)

from .jobs import X, Y, make_train, reference_losses


class StreamDevice:
    """Work runs in order on one worker thread (the "stream"), a little late, and each
    piece signals a ThreadEvent, as CUDA events would."""

    name = "fake-stream"
    xp = np

    def __init__(self, delay=0.002):
        self.delay = delay
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        self.log = []  # (what, thread name)
        self.stagings = []
        self.worker = threading.Thread(target=self._serve, daemon=True, name="fake-stream")
        self.worker.start()

    def _serve(self):
        while True:
            work, event = self.tasks.get()
            time.sleep(self.delay)
            work()
            event.set()

    def _enqueue(self, what, work):
        event = ThreadEvent()
        self.tasks.put((lambda: (self.log.append((what, threading.current_thread().name)),
                                 work()), event))
        return event

    def stage(self, host_arrays):
        pinned = [np.array(a, copy=True) for a in host_arrays]   # "pinned" host buffers
        device = [np.empty_like(a) for a in pinned]

        def copy():
            for d, p in zip(device, pinned):
                d[...] = p
        staged = Staged(device, self._enqueue("stage", copy), keep_alive=pinned)
        self.stagings.append(staged)
        return staged

    def launch(self, fn, staged):
        outputs = []
        return Launched(outputs, self._enqueue("launch", lambda: outputs.extend(
            fn(staged.arrays))))

    def fetch(self, launched):
        host = []
        return Fetched(host, self._enqueue("fetch", lambda: host.extend(
            np.array(a, copy=True) for a in launched.outputs)))


class StreamBackend(NumpyBackend):
    """The numpy backend with the stand-in asynchronous device under it."""

    name = "numpy"   # its kernels

    def __init__(self, device):
        self.device = device


@pytest.fixture
def stream_device():
    flow.clear_default_session()
    device = StreamDevice()
    with backends.use(StreamBackend(device)):
        yield device
    flow.clear_default_session()


def test_host_device_is_immediate():
    device = HostDevice()
    staged = device.stage([X])
    assert staged.arrays[0] is X and staged.event is DONE
    launched = device.launch(lambda arrays: [arrays[0] * 2], staged)
    np.testing.assert_array_equal(device.fetch(launched).arrays[0], X * 2)


def test_steps_through_an_asynchronous_device_in_every_form(stream_device):
    with backends.use("numpy"):
        expected = reference_losses(6)
    blocking = make_train()
    callback = make_train(tp.Callback[tp.Numpy])
    losses = [float(blocking(X, Y).mean()) for _ in range(2)]
    got = []
    for _ in range(2):
        callback(X, Y)(lambda loss: got.append(float(loss.mean())))
    flow.sync_default_session()
    losses += got

    async def awaited():
        return [float((await blocking(X, Y)).mean()) for _ in range(2)]
    losses += asyncio.run(awaited())

    np.testing.assert_allclose(losses, expected, rtol=1e-6)   # waited for every event
    steps = [what for what, _ in stream_device.log]
    assert steps == ["stage", "launch", "fetch"] * 6
    assert {thread for _, thread in stream_device.log} == {"fake-stream"}
    assert all(s.released and s.event.done() for s in stream_device.stagings)


def test_staging_buffers_are_never_released_before_their_copy():
    staged = Staged([np.zeros(2)], ThreadEvent(), keep_alive=[np.zeros(2)])
    with pytest.raises(RuntimeError, match="released before their copies finished"):
        staged.release()
    staged.event.set()
    staged.release()
    assert staged.keep_alive == () and staged.released


def test_run_step_waits_for_the_fetch():
    device = StreamDevice(delay=0.05)
    out = run_step(device, lambda arrays: [arrays[0] + 1], [np.arange(3.0)])
    np.testing.assert_array_equal(out[0], [1.0, 2.0, 3.0])


def test_an_event_is_awaited_without_blocking_the_loop():
    event = ThreadEvent()
    ticks = []

    async def main():
        async def heartbeat():
            while not event.done():
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.005)
        beat = asyncio.create_task(heartbeat())
        threading.Timer(0.2, event.set).start()
        assert await event is True
        await beat

    asyncio.run(main())
    assert len(ticks) > 10 and np.diff(ticks).max() < 0.1
