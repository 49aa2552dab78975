"""The device interface a step runs through: stage, launch, fetch, each with an event.

A step on a device is three ordered pieces of work, each of which may complete later than
the call that started it (on a GPU: on CUDA streams):

* ``device.stage(host_arrays) -> Staged``: start copying the step's inputs to the device.
  ``staged.arrays`` are device arrays that work launched after it may use. ``staged``
  keeps the host arrays (and any pinned staging buffers) alive until ``staged.event`` is
  done; ``staged.release()`` is called only after that, so a buffer is never reused while a
  copy may still read it (the bug of pytorch#127612).
* ``device.launch(fn, staged) -> Launched``: run ``fn(device_arrays)`` -- the compiled plan,
  whose kernels use ``device.xp`` -- ordered after the staging copies. ``launched.outputs``
  are device arrays; ``launched.event`` completes with the compute.
* ``device.fetch(launched) -> Fetched``: start copying the outputs to the host, ordered
  after the launch; ``fetched.arrays`` are valid once ``fetched.event`` is done.

An :class:`Event` says ``done()``, can be waited for in a thread (``wait()``, which on a
GPU releases the GIL in ``Event.synchronize()``), and can be awaited on an event loop
without blocking it (``await event``: the wait runs on a worker thread, never in a CUDA
host callback, whose driver thread would then wait for the GIL).

A device reports a failure of asynchronous work through its event: ``event.error`` is the
exception (None when the work succeeded, or failed in a way only ``wait()`` raises, as a
CUDA error does).

:func:`submit_step` starts one step (stage, launch, fetch) and returns an
:class:`InFlight` at once; ``in_flight.result()`` waits for it, releases the staging
buffers and returns the host outputs (or raises the step's error). The pipeline's
compute thread submits, its completion thread waits (runtime/pipeline.py), so on a device
step N+1 is staged and launched while step N still runs. :func:`run_step` is both at
once, for an inline blocking step. :class:`HostDevice` (numpy) does everything at once:
its events are born complete, and a step costs a few extra function calls.

>>> device = HostDevice()
>>> run_step(device, lambda arrays: [a + 1 for a in arrays], [np.zeros(2)])
[array([1., 1.])]
>>> async def finished(event):
...     return await event
>>> DONE.done(), asyncio.run(finished(DONE))
(True, True)
"""
from __future__ import annotations

import asyncio
import collections
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Event", "ThreadEvent", "DONE", "Staged", "Launched", "Fetched", "HostDevice",
           "InFlight", "StagingRing", "RingStaged", "submit_step", "run_step"]


class Event:
    """Completion of a piece of device work."""

    error: BaseException | None = None   # why the work failed, once done (None: it did not)

    def done(self) -> bool:
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> bool:
        """Block this thread until done (or ``timeout`` seconds); True if done."""
        raise NotImplementedError

    def __await__(self):
        """Wait on the running event loop without blocking it."""
        if not self.done():
            yield from asyncio.get_running_loop().run_in_executor(None, self.wait).__await__()
        return True


class _Done(Event):
    def done(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def __repr__(self) -> str:
        return "<Event done>"


DONE = _Done()  # the event of work that completed when it was started


class ThreadEvent(Event):
    """An event set by another thread (a device's worker, or a test double of a stream)."""

    def __init__(self):
        self._flag = threading.Event()
        self.error = None

    def set(self, error: BaseException | None = None) -> None:
        """Mark the work done; ``error``: it failed with this exception."""
        self.error = error
        self._flag.set()

    def done(self) -> bool:
        return self._flag.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._flag.wait(timeout)


@dataclass
class Staged:
    """Inputs on their way to the device; ``keep_alive`` holds host buffers until
    ``event`` is done."""
    arrays: list
    event: Event = DONE
    keep_alive: Sequence[Any] = ()
    released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Drop the host buffers: only once the copies that read them have finished."""
        if not self.event.done():
            raise RuntimeError("staging buffers released before their copies finished")
        self.keep_alive = ()
        self.released = True


@dataclass
class Launched:
    outputs: list
    event: Event = DONE


@dataclass
class Fetched:
    """Outputs on their way to the host; ``arrays`` are valid once ``event`` is done."""
    arrays: list
    event: Event = DONE

    def take(self) -> list:
        """The host outputs, once ``event`` is done: arrays the caller may keep (a device
        with a ring of pinned output buffers copies out of it here and reuses them)."""
        return self.arrays


class StagingRing:
    """Host staging buffers by (shape, dtype), reused once released (a device's pinned
    buffers; ``allocate(shape, dtype)`` makes a new one when none is free).

    A call that returns before its step read its arguments copies them at once
    (``lend_copy``): straight into a staging buffer, which :meth:`claim` then recognises
    when the step is staged, so an input is copied on the host once, not twice.
    ``poison``: released buffers are filled with NaN (integers with their minimum), so a
    buffer reused too early shows in results (tests).
    """

    def __init__(self, allocate: Callable = np.empty, poison: bool = False):
        self._allocate = allocate
        self.poison = poison
        self._free: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self._lent: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.allocated = 0

    def take(self, shape, dtype) -> np.ndarray:
        key = (tuple(shape), np.dtype(dtype))
        with self._lock:
            free = self._free[key]
            if free:
                return free.popleft()
            self.allocated += 1
        return self._allocate(key[0], key[1])

    def lend_copy(self, value: np.ndarray) -> np.ndarray:
        """A staging buffer holding a copy of ``value``, for the step that will stage it."""
        buffer = self.take(value.shape, value.dtype)
        np.copyto(buffer, value)
        with self._lock:
            self._lent[id(buffer)] = buffer
        return buffer

    def claim(self, host: np.ndarray) -> np.ndarray:
        """The staging buffer for ``host``: itself if it was lent (no second copy), else a
        buffer with a copy of it."""
        with self._lock:
            lent = self._lent.pop(id(host), None)
        if lent is host:
            return host
        buffer = self.take(host.shape, host.dtype)
        np.copyto(buffer, host)
        return buffer

    def give_back(self, buffers) -> None:
        for buffer in buffers:
            if self.poison:
                buffer[...] = (np.nan if buffer.dtype.kind in "fc"
                               else np.iinfo(buffer.dtype).min if buffer.dtype.kind in "iu"
                               else 0)
            with self._lock:
                free = self._free[(buffer.shape, buffer.dtype)]
                # Calls awaited by the hundred each lend a buffer; keep only a pipeline's
                # worth afterwards (pinned memory is scarce), the rest goes to the GC.
                if len(free) < self.KEEP:
                    free.append(buffer)

    KEEP = 8   # free buffers kept per (shape, dtype)


class RingStaged(Staged):
    """Staged inputs whose host buffers return to a :class:`StagingRing` on release."""

    def __init__(self, arrays, event, buffers, ring: StagingRing):
        super().__init__(arrays, event, keep_alive=buffers)
        self._ring = ring

    def release(self) -> None:
        buffers = self.keep_alive
        super().release()      # refuses while the copy that reads the buffers may run
        self._ring.give_back(buffers)


class HostDevice:
    """The CPU with numpy: inputs are used where they are, work completes at once."""

    name = "cpu"
    xp = np

    def stage(self, host_arrays: Sequence) -> Staged:
        return Staged(list(host_arrays))

    def launch(self, fn: Callable[[list], list], staged: Staged) -> Launched:
        return Launched(fn(staged.arrays))

    def fetch(self, launched: Launched) -> Fetched:
        return Fetched(launched.outputs)

    def __repr__(self) -> str:
        return "<HostDevice cpu (numpy)>"


class InFlight:
    """One submitted step: its staged inputs and its fetch, until :meth:`result`."""

    __slots__ = ("staged", "fetched")

    def __init__(self, staged: Staged, fetched: Fetched):
        self.staged = staged
        self.fetched = fetched

    def done(self) -> bool:
        return self.fetched.event.done()

    def result(self) -> list:
        """Wait in this thread for the step's outputs on the host (never on an event loop).

        The fetch is ordered after the launch and the launch after the staging copies, so
        once the fetch's event is done the staging buffers may go back for reuse."""
        event = self.fetched.event
        event.wait()
        self.staged.event.wait()
        self.staged.release()
        if event.error is not None:
            raise event.error
        return self.fetched.take()


def submit_step(device, fn: Callable[[list], list], host_arrays: Sequence) -> InFlight:
    """Stage, launch and fetch one step on ``device`` without waiting for it."""
    staged = device.stage(host_arrays)
    try:
        launched = device.launch(fn, staged)
        return InFlight(staged, device.fetch(launched))
    except BaseException:
        staged.event.wait()    # the staging buffers go back once nothing reads them
        staged.release()
        raise


def run_step(device, fn: Callable[[list], list], host_arrays: Sequence) -> list:
    """Stage, launch and fetch one step on ``device``; wait for it in this thread."""
    return submit_step(device, fn, host_arrays).result()
