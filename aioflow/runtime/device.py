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

:func:`run_step` drives one step through a device and waits for it on the calling thread,
which is aioflow's compute thread or the caller of an inline blocking step, never an
event loop. :class:`HostDevice` (numpy) does everything at once: its events are born
complete, and a step costs three extra function calls.

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
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Event", "ThreadEvent", "DONE", "Staged", "Launched", "Fetched", "HostDevice",
           "run_step"]


class Event:
    """Completion of a piece of device work."""

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

    def set(self) -> None:
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
    arrays: list
    event: Event = DONE


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


def run_step(device, fn: Callable[[list], list], host_arrays: Sequence) -> list:
    """Stage, launch and fetch one step on ``device``; wait for it in this thread."""
    staged = device.stage(host_arrays)
    launched = device.launch(fn, staged)
    fetched = device.fetch(launched)
    fetched.event.wait()   # the fetch is ordered after the launch, the launch after staging
    staged.event.wait()
    staged.release()
    return fetched.arrays
