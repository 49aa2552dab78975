"""The result forms of a job call. All of them are thin shells over one step future.

=====================  ===========================  ===================================
annotation             called from plain code       called where an event loop runs
=====================  ===========================  ===================================
``tp.Numpy`` etc.      blocks, returns the value    returns an awaitable of the value
``None``               blocks until done, None      awaitable of None
``tp.Callback[T]``     registrar; the callback runs registrar; the callback runs on
                       on the delivery thread       the caller's loop
no annotation (old)    ``.get()``/``.async_get()``  the same object
=====================  ===========================  ===================================
"""
from __future__ import annotations

import asyncio
import collections.abc
import functools
import inspect
import sys
import threading
import time
import warnings
from concurrent.futures import Future

from .._core.callsite import outside_aioflow
from .pipeline import on_runtime_thread


class _Blocking(threading.local):
    # A class default, so reading the flag in a thread that never set it costs no
    # AttributeError (running_loop() runs at every job call).
    active = False


_force_blocking = _Blocking()


def running_loop():
    """The event loop running in this thread, unless the caller asked to block."""
    if _force_blocking.active:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def foreign_async_library() -> str | None:
    """``"trio"`` when called from a trio task (where ``running_loop()`` sees no asyncio
    loop), unless the caller asked to block; else None. Cheap when trio was never
    imported, which is every program that does not use it."""
    if "trio" not in sys.modules or _force_blocking.active:
        return None
    import sniffio
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None
    return None if library == "asyncio" else library


async def in_worker_thread(fn, *args, **kwargs):
    """Run a blocking entry point on a worker thread of the running trio (or other
    anyio-supported) loop, in its blocking form. Not cancellable once started, so a step
    is never abandoned half-way."""
    import anyio.to_thread
    return await anyio.to_thread.run_sync(functools.partial(_forced, fn, *args, **kwargs))


def check_may_block(what: str) -> None:
    """Refuse to block where it would deadlock: on a runtime thread or in a callback."""
    role = on_runtime_thread()
    if role is not None:
        place = "inside an aioflow callback" if role == "delivery" else "on aioflow's compute thread"
        raise RuntimeError(f"{what} would block {place} and could deadlock the pipeline; "
                           "do that work after the callback returns (e.g. in the code that "
                           "called the job)")


def blocking(fn, *args, **kwargs):
    """Call an aioflow entry point in its blocking form, even inside a running event loop.

    The loop stalls until the call returns (a RuntimeWarning says so); prefer ``await``.

    >>> import aioflow as flow
    >>> flow.blocking(flow.sync_default_session)
    """
    try:
        asyncio.get_running_loop()
        warnings.warn("flow.blocking(...) inside a running event loop: the loop is stalled "
                      "until the call returns", RuntimeWarning, stacklevel=2)
    except RuntimeError:
        pass
    previous = _force_blocking.active
    _force_blocking.active = True
    try:
        return fn(*args, **kwargs)
    finally:
        _force_blocking.active = previous


def blocking_entry(fn=None, *, executor=None):
    """Decorator for aioflow's blocking entry points (sync, checkpoint save/load...).

    Called where an event loop runs (asyncio's, or trio's through anyio), the function
    runs on a worker thread and the call returns an awaitable; elsewhere it runs now
    (refusing where it would deadlock). The worker thread is the loop's default
    executor's (trio's: anyio's), or, with ``executor`` (a function returning a
    ``concurrent.futures`` executor), one of that executor's.
    """
    if fn is None:
        return functools.partial(blocking_entry, executor=executor)

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        loop = running_loop()
        call = functools.partial(_forced, fn, *args, **kwargs)
        if loop is not None:
            return loop.run_in_executor(executor() if executor else None, call)
        if foreign_async_library() is not None:
            if executor is not None:   # an anyio thread waits for the executor's
                return in_worker_thread(lambda: executor().submit(call).result())
            return in_worker_thread(fn, *args, **kwargs)
        check_may_block(f"{fn.__qualname__}()")
        return fn(*args, **kwargs)

    return entry


def _forced(fn, *args, **kwargs):
    _force_blocking.active = True
    try:
        return fn(*args, **kwargs)
    finally:
        _force_blocking.active = False


class CallbackSlot:
    """Where a step's completion meets its callback, whichever arrives first.

    ``deliver(callback, future)`` runs the delivery in the right place (the delivery
    thread, or the caller's event loop). A registration of ``None`` means no callback will
    come (the registrar was dropped, or ``.get()`` took the result).
    """

    __slots__ = ("_lock", "_deliver", "_registered", "_callback", "_done", "taken")

    def __init__(self, deliver):
        self._deliver = deliver   # set here, never reassigned
        # _lock guards _registered, _callback and _done: the caller's thread registers,
        # the thread that completes the step (compute, completion, or the caller running
        # it inline) calls step_done, and whichever comes second delivers. ``registered``
        # and ``has_callback`` read them without it: the registering thread reads its own
        # writes; the completing thread (Pipeline._complete) reading has_callback before a
        # registration lands only leaves that step's place unheld, as a callback
        # registered after the step finished finds it.
        self._lock = threading.Lock()
        self._registered = False
        self._callback = None
        self._done = None
        # Written by the caller's thread (.get() takes the result) before it registers
        # None; read by the delivery, which the registration orders after it.
        self.taken = False

    def register(self, callback) -> None:
        with self._lock:
            if self._registered:
                raise RuntimeError("a callback was already registered for this call")
            self._registered, self._callback = True, callback
            done = self._done
        if done is not None:
            self._deliver(self, callback, done)

    @property
    def registered(self) -> bool:
        return self._registered

    @property
    def has_callback(self) -> bool:
        """A callback (not None) is registered and will be called."""
        return self._registered and self._callback is not None

    def step_done(self, future: Future) -> None:
        """Called on the compute thread when the step finished (or was withdrawn)."""
        with self._lock:
            if not self._registered:
                self._done = future  # delivered when a callback (or None) registers
                return
            callback = self._callback
        self._deliver(self, callback, future)


def deliver_result(compiled, outputs):
    """The job's result from a step's outputs, after its ``flow.watch`` /
    ``flow.watch_diff`` handlers got their values (the outputs after the job's own), in
    the order they were registered."""
    handlers = compiled.watch_handlers
    if handlers:
        first = len(outputs) - len(handlers)
        for handler, value in zip(handlers, outputs[first:]):
            handler(value)
    return compiled.build_result(outputs)


def invoke(slot: CallbackSlot, callback, future: Future, compiled, job_name) -> None:
    """Hand the result to ``callback``; report a failed step nobody else saw."""
    session = compiled.session
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        if not slot.taken:
            session.report_error(exc, f"a step of {job_name}")
        return
    if slot.taken:
        return    # .get() took the result (and ran the watch handlers)
    try:
        result = deliver_result(compiled, future.result())
        if callback is not None:
            callback(result)
    except Exception as cb_exc:  # reported, never stops later deliveries
        # (A KeyboardInterrupt or SystemExit goes on: the delivery thread reports it too;
        # a callback run in the caller's thread hands it to the caller, like its Ctrl-C.)
        session.report_error(cb_exc, "a callback")


class CallbackRegistrar:
    """What a ``-> tp.Callback[T]`` job returns: call it with a function taking ``T``.

    The callback runs exactly once, after the callbacks of earlier calls. In async code
    the registration returns a future that completes when the step was admitted to the
    pipeline: ``await train_job(x, y)(callback)`` gives backpressure.
    """

    def __init__(self, job_name: str, slot: CallbackSlot, admitted=None):
        self._job_name = job_name
        self._slot = slot
        self._admitted = admitted

    def __call__(self, callback):
        if not callable(callback):
            raise TypeError(f"{self._job_name}(...)(callback): expected a callable, got "
                            f"{type(callback).__name__}")
        self._slot.register(callback)
        return self._admitted

    def __del__(self):
        if not self._slot.registered:  # nobody will register: let the delivery finish
            self._slot.register(None)


class LegacyResult:
    """What a job without a return annotation returns (OneFlow's older API)."""

    def __init__(self, future: Future, compiled, job_name: str, slot: CallbackSlot):
        self._future = future
        self._compiled = compiled
        self._job_name = job_name
        self._slot = slot

    def get(self):
        """Block until the step finished and return its result."""
        check_may_block(f"{self._job_name}(...).get()")
        if not self._slot.registered:
            self._slot.taken = True
            self._slot.register(None)
        start = time.perf_counter()
        outputs = self._future.result()
        # Waiting for the step is not the caller's own time (CompiledJob.fits_inline).
        self._compiled.note_caller_waited(time.perf_counter() - start)
        return deliver_result(self._compiled, outputs)

    def async_get(self, callback) -> None:
        """Call ``callback(result)`` once the step finished, in call order."""
        if not callable(callback):
            raise TypeError(f"async_get: expected a callable, got {type(callback).__name__}")
        if self._slot.registered:
            raise RuntimeError(f"the result of this {self._job_name} call was already taken")
        self._slot.register(callback)

    def __del__(self):
        if not self._slot.registered:
            self._slot.register(None)


class JobCall(collections.abc.Coroutine):
    """What a job call returns where an event loop runs: await it for the value.

    A coroutine (``asyncio.create_task``, ``gather`` and ``wait_for`` take it), whose step
    is submitted when it is first awaited. Used as a value by mistake -- ``loss.mean()``,
    ``np.asarray(loss)``, ``float(loss)``, ``loss[0]`` -- it raises a TypeError naming the
    job and the fix; dropped without being awaited, it warns at the line of the call that
    its step never ran.
    """

    __slots__ = ("_coro", "_job_name", "_where", "_taken")

    def __init__(self, coro, job_name: str):
        self._coro = coro
        self._job_name = job_name
        self._taken = False    # awaited, or driven by a Task: its step will be submitted
        frame, _ = outside_aioflow(sys._getframe(1))   # the user's line of the call
        self._where = (frame.f_code.co_filename, frame.f_lineno) if frame else None

    # -- the coroutine protocol: all delegated ---------------------------------------------
    def __await__(self):
        self._taken = True   # `await job(x)` drops this object before the step starts
        return self._coro.__await__()

    def send(self, value):
        self._taken = True
        return self._coro.send(value)

    def throw(self, *args):
        return self._coro.throw(*args)

    def close(self):
        return self._coro.close()

    # -- used as a value by mistake ------------------------------------------------------
    def _misused(self, what: str):
        raise TypeError(
            f"{what} on the result of {self._job_name}(...), which is an awaitable: in "
            "async code (an event loop runs in this thread) a job call returns before its "
            f"step ran. Write `result = await {self._job_name}(...)`, or call it from "
            "plain code (or through flow.blocking) to block for the value.")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._misused(f"attribute {name!r} read")

    def __array__(self, *args, **kwargs):
        self._misused("numpy conversion")

    def __getitem__(self, key):
        self._misused("indexing")

    def __iter__(self):
        self._misused("iteration")

    def __len__(self):
        self._misused("len()")

    def __float__(self):
        self._misused("float()")

    def __int__(self):
        self._misused("int()")

    def __bool__(self):
        self._misused("truth testing")

    def __repr__(self) -> str:
        return f"<awaitable result of {self._job_name}(...): await it for the value>"

    def __del__(self):
        coro = getattr(self, "_coro", None)
        if (coro is None or getattr(self, "_taken", True)
                or inspect.getcoroutinestate(coro) != inspect.CORO_CREATED):
            return     # awaited (finished, under way, or about to start)
        coro.close()   # not started: no step was submitted; say so instead of Python
        filename, lineno = self._where or ("<unknown>", 0)
        warnings.warn_explicit(
            f"{self._job_name}(...) was called in async code but never awaited, so its "
            f"step never ran: write `await {self._job_name}(...)`",
            RuntimeWarning, filename, lineno)

