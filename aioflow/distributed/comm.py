"""The communication thread: every MPI call of a rank after start-up goes through it.

Why one thread: MPI needs every rank to start its collectives in the same order, and
MPICH's non-blocking collectives progress only inside MPI calls. Here the compute thread
(a step's collective ops) and the caller's thread (start-up broadcast, checkpoints)
hand work to one FIFO queue; the thread starts each request at once and polls the
pending ones with ``Test`` (every ~0.2 ms while the step computes, continuously while a
step waits for a result) until they complete, so the event loop and the compute thread
never poll MPI.

Why deadlines: a rank that raised, was killed or hangs never joins the next collective,
and the others would wait forever inside MPI. Each request gets
``flow.config.collective_timeout`` seconds; when one runs out, this rank prints which
collective of which step it was waiting for, fails the waiting step with
:class:`CollectiveTimeout`, and after a short grace (for the traceback to be printed)
calls ``MPI.COMM_WORLD.Abort``, which makes the launcher stop every rank.
"""
from __future__ import annotations

import queue
import sys
import threading
import time
from concurrent.futures import Future

from .._core import settings

_POLL_SECONDS = 0.0002
_ABORT_GRACE_SECONDS = 1.0


class CollectiveTimeout(RuntimeError):
    """A collective did not complete within ``flow.config.collective_timeout``."""


class Communicator:
    """Runs ``start()`` callables (returning an mpi4py request, a list of them, or None)
    on one thread and completes each future when its requests are done."""

    def __init__(self, world):
        self.world = world
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting = 0          # threads blocked in wait(): poll without pauses
        self._waiting_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="aioflow-mpi", daemon=True)
        self._thread.start()

    def submit(self, start, finish, what: str) -> Future:
        """Queue ``start()`` (issues the non-blocking MPI call); once its requests complete,
        the future gets ``finish()``. ``what`` names the collective in timeout messages
        (the job and step)."""
        future: Future = Future()
        self._queue.put((start, finish, what, future))
        return future

    def run(self, start, finish, what: str):
        """Submit and wait (the caller's thread blocks; the deadline still applies)."""
        return self.wait(self.submit(start, finish, what))

    def wait(self, future: Future):
        """Wait for a submitted request's result. While someone waits, the thread polls
        without pausing: nothing else is computing then, and MPICH advances a large
        all-reduce one piece per ``Test`` (1.6 MB with 0.2 ms pauses took ~5 ms)."""
        with self._waiting_lock:
            self._waiting += 1
        try:
            return future.result()
        finally:
            with self._waiting_lock:
                self._waiting -= 1

    def _loop(self) -> None:
        pending: list = []   # [requests, finish, what, future, deadline], in start order
        while True:
            try:
                item = self._queue.get(timeout=None if not pending else 0)
            except queue.Empty:
                item = None
            if item is not None:
                start, finish, what, future = item
                try:
                    requests = start()
                except BaseException as exc:   # noqa: BLE001 - handed to the waiter
                    future.set_exception(exc)
                    continue
                requests = [] if requests is None else (
                    list(requests) if isinstance(requests, (list, tuple)) else [requests])
                deadline = time.monotonic() + settings.get("collective_timeout")
                pending.append([requests, finish, what, future, deadline])
                continue     # start everything queued before polling
            self._poll(pending)
            if pending:
                # Pauses while the step computes (the poll must not take its cores);
                # none while a step waits for the result.
                time.sleep(0 if self._waiting else _POLL_SECONDS)

    def _poll(self, pending: list) -> None:
        from mpi4py import MPI
        now = time.monotonic()
        for entry in list(pending):
            requests, finish, what, future, deadline = entry
            if not requests or MPI.Request.Testall(requests):
                pending.remove(entry)
                try:
                    future.set_result(finish())
                except BaseException as exc:   # noqa: BLE001
                    future.set_exception(exc)
            elif now > deadline:
                self._give_up(what, future)

    def _give_up(self, what: str, future: Future) -> None:
        world = self.world
        others = [r for r in range(world.size) if r != world.rank]
        message = (f"aioflow rank {world.rank} of {world.size}: {what} did not complete "
                   f"within flow.config.collective_timeout ({settings.get('collective_timeout')}"
                   f" s); rank(s) {others} did not join it (a rank raised an error, was "
                   "killed or hangs). Aborting every rank.")
        print(message, file=sys.stderr, flush=True)
        future.set_exception(CollectiveTimeout(message))
        time.sleep(_ABORT_GRACE_SECONDS)
        world.comm.Abort(1)
