"""A simulated GPU: numpy arithmetic on simulated streams that take modelled time.

The runtime's device pipeline (stage -> launch -> fetch, completion awaited as events,
``backends/device.py``) matters where a device works asynchronously. This backend makes
one out of the CPU, so the pipeline is tested in CI and users can test their async apps'
pipelines without a GPU (``aioflow.testing.simulated_gpu``):

* three streams, each a worker thread running its work in submission order, as a GPU's
  two copy engines and its compute stream do: ``copy_in`` (host -> device), ``compute``
  and ``copy_out`` (device -> host);
* a piece of work starts once its stream is free and the events it depends on are done,
  and completes no sooner than its modelled time (``copy_ms``, ``compute_ms``,
  ``fetch_ms``) after it started; numpy does the arithmetic meanwhile, off the caller's
  thread;
* inputs pass through a ring of host staging buffers (the pinned buffers of a real GPU).
  A buffer is reused only once :meth:`Staged.release` found its copy done; with
  ``poison=True`` a released buffer is filled with NaN (integers with their minimum), so
  a copy that read it after release shows up in the step's results;
* a failure of the arithmetic fails that step's events (``event.error``); after
  :meth:`SimulatedDevice.break_device` every later piece of work fails, like a sticky
  CUDA error, until :meth:`SimulatedDevice.repair`.

Kernels are numpy's (``kernel_set = "numpy"``) and arrays are numpy arrays, so results
equal the CPU backend's.

>>> backend = SimulatedBackend(copy_ms=1, compute_ms=2, fetch_ms=1)
>>> from aioflow.backends.device import run_step
>>> run_step(backend.device, lambda arrays: [arrays[0] * 2], [np.arange(3.0)])
[array([0., 2., 4.])]
>>> backend.close()
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Sequence

import numpy as np

from .device import (Event, Fetched, Launched, RingStaged, Staged, StagingRing,
                              ThreadEvent)
from .base import Backend
from .graph_capture import RecordingCapturer

__all__ = ["SimulatedBackend", "SimulatedDevice", "SimulatedDeviceError"]

_STOP = object()
_IDLE_SECONDS = 2.0   # a stream's thread ends after this long without work


class SimulatedDeviceError(RuntimeError):
    """The simulated device failed (see :meth:`SimulatedDevice.break_device`)."""


class _Stream:
    """A FIFO of work on one worker thread, started at the first piece of work."""

    def __init__(self, name: str, seconds: float, device: "SimulatedDevice"):
        self.name = name
        self.seconds = seconds
        self._device = device
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], None], after: Sequence[Event] = ()) -> ThreadEvent:
        """Run ``work()`` once ``after`` are done and this stream is free; the returned
        event completes no sooner than the stream's modelled time after that."""
        event = ThreadEvent()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"aioflow-sim-{self.name}")
                self._thread.start()
            self._queue.put((work, tuple(after), event))
        return event

    def close(self) -> None:
        """Finish the work submitted so far and end the thread (a later submit restarts)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:       # submit() starts a new thread once this one left
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            if item is _STOP:
                return
            work, after, event = item
            error = None
            for dependency in after:
                dependency.wait()
                error = error or dependency.error
            start = time.perf_counter()
            if error is None and self._device.broken is not None:
                error = SimulatedDeviceError(
                    f"the simulated device failed earlier: {self._device.broken}")
                error.__cause__ = self._device.broken
            if error is None:
                try:
                    work()
                except BaseException as exc:  # the step's failure, reported by its event
                    error = exc
            left = start + self.seconds - time.perf_counter()
            if left > 0:
                time.sleep(left)
            event.set(error)


class SimulatedDevice:
    """stage / launch / fetch (backends/device.py's contract) on simulated streams."""

    name = "gpu"
    xp = np

    def __init__(self, copy_ms: float, compute_ms: float, fetch_ms: float,
                 poison: bool = False):
        self.copy_in = _Stream("copy-in", copy_ms / 1000, self)
        self.compute = _Stream("compute", compute_ms / 1000, self)
        self.copy_out = _Stream("copy-out", fetch_ms / 1000, self)
        self.ring = StagingRing(np.empty, poison)
        self.broken: BaseException | None = None

    def stage(self, host_arrays: Sequence) -> Staged:
        # The host's copy into pinned memory, done now (or already, at the call).
        buffers = [self.ring.claim(host) for host in host_arrays]
        device_arrays = [np.empty_like(buffer) for buffer in buffers]

        def copy() -> None:
            for device_array, buffer in zip(device_arrays, buffers):
                np.copyto(device_array, buffer)
        return RingStaged(device_arrays, self.copy_in.submit(copy), buffers, self.ring)

    def private_copy(self, value: np.ndarray) -> np.ndarray:
        """A call's argument copied now, straight into a staging buffer."""
        return self.ring.lend_copy(value)

    def launch(self, fn: Callable[[list], list], staged: Staged) -> Launched:
        launched = Launched([])

        def compute() -> None:
            launched.outputs[:] = fn(staged.arrays)
        launched.event = self.compute.submit(compute, after=(staged.event,))
        return launched

    def fetch(self, launched: Launched) -> Fetched:
        fetched = Fetched([])

        def copy() -> None:
            fetched.arrays[:] = [np.array(output, copy=True) for output in launched.outputs]
        fetched.event = self.copy_out.submit(copy, after=(launched.event,))
        return fetched

    def synchronize(self) -> None:
        """Wait until the work submitted so far on every stream has finished."""
        for stream in (self.copy_in, self.compute, self.copy_out):
            stream.submit(lambda: None).wait()

    def break_device(self, error: BaseException | None = None) -> None:
        """From now on every piece of work fails with ``error`` (a sticky device error)."""
        self.broken = error or SimulatedDeviceError("the simulated device failed")

    def repair(self) -> None:
        self.broken = None

    def close(self) -> None:
        for stream in (self.copy_in, self.compute, self.copy_out):
            stream.close()

    def __repr__(self) -> str:
        return (f"<SimulatedDevice copy {1000 * self.copy_in.seconds:g} ms, compute "
                f"{1000 * self.compute.seconds:g} ms, fetch {1000 * self.copy_out.seconds:g} ms>")


class SimulatedBackend(Backend):
    """The simulated GPU as a backend: numpy arrays and kernels, a :class:`SimulatedDevice`.

    Variables live in numpy arrays that the compute stream updates; reading or writing
    them from the host first waits for the streams (as ``to_host`` of a GPU array does).
    """

    name = "simulated_gpu"
    kernel_set = "numpy"
    device_tag = "gpu"
    fuses_launches = True
    xp = np

    def __init__(self, copy_ms: float = 0.0, compute_ms: float = 0.0, fetch_ms: float = 0.0,
                 poison: bool = False, graph_capture: bool = False):
        for what, value in (("copy_ms", copy_ms), ("compute_ms", compute_ms),
                            ("fetch_ms", fetch_ms)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"simulated_gpu: {what} must be a number of milliseconds "
                                 f">= 0, got {value!r}")
        self.device = SimulatedDevice(copy_ms, compute_ms, fetch_ms, poison)
        # ``graph_capture``: steps are captured and replayed as the CuPy backend's CUDA
        # graphs are (backends/graph_capture.py), by a capturer that records the op
        # sequence; off by default, so a simulated step is a plain step.
        self._capturer = None
        if graph_capture:
            self._capturer = RecordingCapturer()

    def graph_capturer(self):
        return self._capturer

    def to_host(self, array) -> np.ndarray:
        self.device.synchronize()
        return np.array(array, copy=True)

    def assign(self, target, host_array) -> None:
        self.device.synchronize()
        target[...] = host_array

    def synchronize(self) -> None:
        self.device.synchronize()

    def close(self) -> None:
        self.device.close()

    def __repr__(self) -> str:
        return f"<aioflow backend simulated_gpu {self.device!r}>"
