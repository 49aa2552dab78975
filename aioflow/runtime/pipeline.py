"""The step pipeline: bounded admission, in-order submission on one worker thread,
in-order completion, and in-order delivery of callbacks.

A step goes through up to three threads: ``aioflow-compute`` submits it to its job's
device (on the CPU that runs it to the end); where the device works asynchronously (a
GPU), ``aioflow-completion`` waits for its events in submission order and completes its
future, while the compute thread already submits the next admitted step. So on a device
the copies of step N+1, the kernels of step N and the fetch of step N-1 overlap, up to
the pipeline depth.

Why threads and not a runtime event loop: every stage here is either compute (numpy
releases the GIL in its kernels; CuPy waits on stream events) or a hand-off, and a
``concurrent.futures.Future`` per step serves all three result forms. Async callers
await it on *their* loop through ``asyncio.wrap_future``; no extra loop hop is needed,
which keeps the blocking call's overhead to two thread hand-offs.

Invariants:
* steps of a session are submitted one at a time, in submission order, and a device
  runs them in that order (step N+1 sees the variables step N updated);
* steps complete (their futures are set) in submission order;
* at most ``depth`` steps are admitted and not yet completed (backpressure); a job with
  its own ``function_config.pipeline_depth`` is admitted only while fewer than that are;
* a step whose future was cancelled before it started is withdrawn (never runs);
* callbacks registered for sync callers run on the delivery thread, in submission order,
  one at a time, each exactly once; an exception in one is recorded for
  ``sync_default_session`` and logged, and never stops the others. The exception: a short
  callback whose step already ran in the registering thread, with no earlier callback
  pending, runs right there (``deliver_here``), as ``Future.add_done_callback`` does for a
  finished future.

Threads, and what each owns (every field shared between threads below says in a comment
which thread owns it or which lock guards it, as trio's ``_core`` does):

* callers: any thread that calls a job (for async code, the thread of its event loop).
  A caller admits its step, numbers it (``new_step``) and queues it, or runs it itself
  when the pipeline is idle (``run_inline``, ``run_step_inline``); it owns a step until
  the step is queued.
* ``aioflow-compute``: submits queued steps one at a time; owns ``_completion_thread`` and
  ``_handed_over``, and a step from the queue until it completes it or hands it on.
* ``aioflow-completion``: waits for handed-on steps in order and completes them; owns
  ``_handed_back``.
* ``aioflow-delivery``: runs plain code's callbacks in order, one at a time (a callback
  run in a caller's thread, ``deliver_here``, holds the same ``_delivering`` lock).

Locks, outermost first where one is taken inside another: ``_delivering`` (around a
callback), the session's lock (:class:`SessionLock`; a step runs under it), ``_idle``,
then ``_steps_finished`` or ``_delivered``. ``Admission._lock`` and ``_seq_lock`` are
innermost: nothing is taken inside them (but the future of a waiter granted a place).
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import queue
import signal
import threading
import time
from concurrent.futures import Future

try:
    import _signal as _raw_signal   # signal's C half: handlers as installed, no enums
except ImportError:  # pragma: no cover - other Pythons
    _raw_signal = signal

log = logging.getLogger("aioflow")

DEFAULT_DEPTH = 2
_STOP = object()
_local = threading.local()
_get_ident = threading.get_ident


def on_runtime_thread() -> str | None:
    """'compute' or 'delivery' when called on one of the runtime's threads, else None."""
    return getattr(_local, "role", None)


class Step:
    """One call's step. Owned by one thread at a time, handed on through a queue or the
    future (each hand-off orders the writes before it): the caller until it queues the
    step, then the compute thread, then the completion thread if it got it; after the
    future is set, only the one delivery of its callback touches ``held``."""

    __slots__ = ("compiled", "arrays", "future", "seq", "slot", "held", "ran_in")
    # compiled, seq, future: set at creation, never reassigned (the future is thread-safe)
    # seq: the step's number in its session (1, 2, ...), named in the errors of failed steps
    # arrays: the step's inputs; the thread owning the step drops them once it ran
    # slot: the CallbackSlot of a Callback call from plain code, whose step keeps its
    #   place in the pipeline until its callback ran (``held``), so a loop of such calls
    #   has at most ``depth`` callbacks outstanding when it ends, and a slow callback
    #   slows the producer instead of queueing deliveries without bound. Set by the
    #   caller before the step is queued.
    # held: set by the thread that completes the step, before it sets the future; read
    #   and cleared by the step's one delivery (release_held), after the future is set.
    # ran_in: the thread that ran the step in run_step_inline (else None), set and read by
    #   that thread only: its callback may be delivered there (deliver_here).

    def __init__(self, compiled, arrays, seq: int):
        self.compiled = compiled
        self.arrays = arrays
        self.future: Future = Future()
        self.seq = seq
        self.slot = None
        self.held = False
        self.ran_in = None


class Admission:
    """A counting gate with blocking and awaitable acquisition, FIFO among waiters.

    ``limit``: this acquisition succeeds only while fewer than ``min(depth, limit)``
    places are taken (a job with its own, smaller, pipeline depth)."""

    def __init__(self, depth: int):
        # Guards every field below; any thread takes it (callers, the pipeline's threads).
        self._lock = threading.Lock()
        # The session's pipeline depth: written under _lock (set_depth); places() reads
        # it without, see there.
        self.depth = depth
        # Places taken: admitted steps not completed, plus held ones (under _lock).
        self.in_use = 0
        # Places kept by finished steps until their callbacks ran (Pipeline._complete):
        # no step is admitted and unfinished when in_use == held (under _lock).
        self.held = 0
        # Acquisitions waiting for a place, first come first served (under _lock).
        self._waiters: collections.deque[tuple[Future, int | None]] = collections.deque()

    def places(self, limit: int | None) -> int:
        """How many places an acquisition with ``limit`` may find taken, its own excluded.

        Reads ``depth`` without the lock, on purpose: it is a setting, one int read at
        once, and a caller racing ``set_depth`` gets the old or the new depth, as it
        would calling just before or after it (run_step_inline's bound on callbacks)."""
        return self.depth if limit is None else min(self.depth, limit)

    def _room(self, limit: int | None) -> bool:
        return self.in_use < self.places(limit)

    def _take(self, limit: int | None) -> bool:
        """Take a place if there is room and nobody waits ahead (lock held)."""
        if self._room(limit) and not self._waiters:
            self.in_use += 1
            return True
        return False

    def _try_or_enqueue(self, limit: int | None) -> Future | None:
        with self._lock:
            if self._take(limit):
                return None
            waiter: Future = Future()
            self._waiters.append((waiter, limit))
            return waiter

    def try_acquire_idle(self) -> bool:
        """Take a place only if no other step is admitted (beyond finished ones whose
        callbacks wait to run) or waiting, and there is room: an idle pipeline."""
        with self._lock:
            if self.in_use == self.held and self._room(None) and not self._waiters:
                self.in_use += 1
                return True
            return False

    def hold(self) -> None:
        """A finished step keeps its place until its callback ran (``release_hold``)."""
        with self._lock:
            self.held += 1

    def take_held(self) -> None:
        """A finished step takes a held place back, without waiting (Pipeline.hold_late)."""
        with self._lock:
            self.in_use += 1
            self.held += 1

    def release_hold(self) -> None:
        with self._lock:
            self.held -= 1
        self.release()

    def try_acquire(self, limit: int | None = None) -> bool:
        with self._lock:
            return self._take(limit)

    def acquire(self, limit: int | None = None) -> None:
        waiter = self._try_or_enqueue(limit)
        if waiter is None:
            return
        try:
            waiter.result()
        except BaseException:  # e.g. Ctrl-C while waiting: give up the place in line
            self.abandon(waiter)
            raise

    async def acquire_async(self, limit: int | None = None) -> None:
        waiter = self.try_or_enqueue(limit)
        if waiter is not None:
            await self.wait_async(waiter)

    def try_or_enqueue(self, limit: int | None = None) -> Future | None:
        """Take a place now (None), or join the line: the returned future completes when
        the place is granted (``wait_async``)."""
        return self._try_or_enqueue(limit)

    async def wait_async(self, waiter: Future) -> None:
        """Await a place in line (from ``try_or_enqueue``); cancelled, it leaves the line
        (or gives back the place it was just granted)."""
        try:
            await asyncio.wrap_future(waiter)
        except asyncio.CancelledError:
            self.abandon(waiter)
            raise

    def abandon(self, waiter: Future) -> None:
        """Leave the line (a waiter from ``try_or_enqueue`` whose caller gave up), or give
        back the place it was granted meanwhile."""
        with self._lock:
            for entry in self._waiters:
                if entry[0] is waiter:
                    self._waiters.remove(entry)
                    self._grant()     # a waiter behind it may fit now
                    return
        self.release()    # already granted: hand the place back

    def release(self) -> None:
        with self._lock:
            self.in_use -= 1
            self._grant()

    def set_depth(self, depth: int) -> None:
        with self._lock:
            self.depth = depth
            self._grant()

    def _grant(self) -> None:
        """Admit waiters from the front of the line while there is room (lock held)."""
        while self._waiters and self._room(self._waiters[0][1]):
            waiter, _ = self._waiters.popleft()
            if waiter.set_running_or_notify_cancel():
                self.in_use += 1
                waiter.set_result(None)


class SessionLock:
    """The session's lock, re-entrant, which knows the thread holding it.

    A step runs under it (``CompiledJob.submit``), and so does any other change to the
    session's jobs and variables (compiling a job, checkpoints, initialisation).
    ``held_here()`` is what :meth:`Pipeline.run_inline` asks before running an awaited
    step on the caller's loop: whether the calling thread holds it already (a task may
    hold it across an await). ``threading.RLock`` answers that only privately."""

    __slots__ = ("_lock", "_owner", "_depth")

    def __init__(self):
        self._lock = threading.RLock()
        # The holding thread's id (None: not held) and how many times it acquired the
        # lock: written only by that thread, after acquiring _lock and before releasing
        # it. held_here() reads _owner without the lock, see there.
        self._owner: int | None = None
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        self._owner = _get_ident()
        return True

    def release(self, *_exc_info) -> None:
        if self._owner != _get_ident():
            raise RuntimeError("cannot release un-acquired lock")
        self._depth -= 1
        if not self._depth:
            self._owner = None
        self._lock.release()

    # ``with``: the methods themselves, no wrapper calling them (a call more would cost
    # every step on the compute thread about what the RLock itself does)
    __enter__ = acquire
    __exit__ = release

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock. Exact without taking it: only the
        holder writes ``_owner``, so it is this thread's id exactly while this thread
        holds the lock, and never this thread's id otherwise."""
        return self._owner == _get_ident()


class Pipeline:
    """One per session: a compute thread and a delivery thread, started lazily."""

    def __init__(self, session, depth: int = DEFAULT_DEPTH):
        # Set here, never reassigned: session, admission (its own lock guards it) and the
        # three queues (thread-safe; each has one consumer, the thread named after it).
        self.session = session
        self.admission = Admission(depth)
        self._compute_queue: queue.SimpleQueue = queue.SimpleQueue()
        self._completion_queue: queue.SimpleQueue = queue.SimpleQueue()
        self._delivery_queue: queue.SimpleQueue = queue.SimpleQueue()

        # Steps handed to the completion thread: each count has one writer, so no lock.
        # Written by the compute thread only:
        self._handed_over = 0
        # Written by the completion thread only, after it completed the step:
        self._handed_back = 0
        # The compute thread reads both (_compute_loop): fewer handed back than over
        # means a step is still ahead on the completion thread.
        # Owned by the compute thread (started there, before the first hand-over):
        self._completion_thread: threading.Thread | None = None

        # The last step number given (new_step; any caller thread), under _seq_lock.
        self._seq = 0
        self._seq_lock = threading.Lock()

        # _idle guards _pending (steps and deliveries not yet finished; wait_idle waits
        # for 0), _threads (the compute and delivery threads, started at the first step
        # or delivery) and _closed (set by close(); no step is queued after it). An RLock:
        # wait_idle holds it while re-routing deliveries, which count themselves in.
        self._idle = threading.Condition(threading.RLock())
        self._pending = 0
        self._threads: list[threading.Thread] = []
        self._closed = False

        # Tasks waiting for admission, kept referenced (admit_and_enqueue_soon). Used by
        # callers' event loop threads only; with loops in several threads, set.add and
        # discard are atomic, and the emptiness check orders the calls of one loop.
        self._admitting: set = set()
        # Steps enqueued and not finished, and thunks queued for the delivery thread and
        # not run: what a Callback step run in the calling thread waits for
        # (run_step_inline). Each under its condition's lock.
        self._unfinished = 0
        self._steps_finished = threading.Condition(threading.Lock())
        self._undelivered = 0
        self._delivered = threading.Condition(threading.Lock())
        # Held while a callback runs, on the delivery thread or in a caller's thread
        # (deliver_here): callbacks of plain code never run two at a time.
        self._delivering = threading.Lock()
        # Deliveries scheduled on callers' event loops: key -> (loop, thunk). No lock:
        # filled by whichever thread hands a callback to a loop (deliver_on_loop), emptied
        # by that loop running it or by wait_idle re-routing it; each entry is taken by
        # one atomic dict.pop, and the thread that took it runs or re-routes it (once).
        self._on_loops: dict = {}

    # -- lifecycle -----------------------------------------------------------------------
    def _start(self) -> None:
        """Start the compute and delivery threads, once (``_idle`` held: two first calls
        in two threads must not start two of each)."""
        if self._threads:
            return
        for role, target in (("compute", self._compute_loop), ("delivery", self._deliver_loop)):
            thread = threading.Thread(target=target, args=(role,), daemon=True,
                                      name=f"aioflow-{role}")
            thread.start()
            self._threads.append(thread)

    def close(self, timeout: float | None = None) -> bool:
        """Drain, then stop the threads. Returns False if draining timed out."""
        drained = self.wait_idle(timeout)
        with self._idle:   # a step enqueued from now on is refused, none queued after _STOP
            self._closed = True
            if self._threads:
                self._compute_queue.put(_STOP)
                self._delivery_queue.put(_STOP)
        return drained

    def _start_completion(self) -> None:
        """Called on the compute thread only, before the first step goes to a device."""
        if self._completion_thread is None:
            self._completion_thread = threading.Thread(
                target=self._completion_loop, args=("completion",), daemon=True,
                name="aioflow-completion")
            self._completion_thread.start()

    # -- submission ----------------------------------------------------------------------
    def _begin(self, n: int = 1) -> None:
        with self._idle:
            self._pending += n

    def _end(self) -> None:
        with self._idle:
            self._pending -= 1
            if self._pending == 0:
                self._idle.notify_all()

    def new_step(self, compiled, arrays) -> Step:
        with self._seq_lock:
            self._seq += 1
            return Step(compiled, arrays, self._seq)

    def enqueue(self, step: Step) -> None:
        """Queue an admitted step for compute (the caller acquired admission)."""
        with self._idle:
            # Checked and queued under the lock close() marks the pipeline closed under:
            # a step queued behind the compute thread's _STOP would never run, and its
            # caller would wait for it forever.
            closed = self._closed
            if not closed:
                self._start()
                self._pending += 1
                with self._steps_finished:
                    self._unfinished += 1
                self._compute_queue.put(step)
        if closed:
            self.admission.release()
            raise RuntimeError("the aioflow runtime is shut down (interpreter exit)")

    def _step_finished(self) -> None:
        with self._steps_finished:
            self._unfinished -= 1
            if not self._unfinished:
                self._steps_finished.notify_all()

    def run_inline(self, compiled, arrays, on_loop: bool = False):
        """Run a blocking call's step in the calling thread if the pipeline is idle.

        Returns the step's outputs, or :data:`NOT_RUN` when another step is admitted or
        running (the caller then queues the step as usual, so order is kept). Why: with
        nothing in flight there is nothing to overlap, and the two thread hand-offs of
        the queued path cost more than a small step itself (~80 us of a trivial job's
        ~110 us here). On the main thread Ctrl-C is held back until the step's updates
        are done, then raised, as with a step on the compute thread: variables are never
        left half-updated. ``on_loop``: a tiny awaited step on the caller's event loop
        (runtime/calls.py), which holds back whatever Python SIGINT handler is installed
        (asyncio's own, under ``asyncio.run``) and calls it once the step is done.
        """
        # _closed read without _idle, on purpose: a step run here needs none of the
        # runtime's threads, so one that starts as close() marks the pipeline closed is
        # like one run just before.
        if self._closed or not (on_loop or _may_run_inline()):
            return NOT_RUN
        lock = self.session.lock
        if on_loop and lock.held_here():
            # This thread holds the session (the lock is re-entrant; a task holds it across
            # an await): a step here would run inside whatever holds it; queued, it waits
            # for the holder instead.
            return NOT_RUN
        if not lock.acquire(blocking=False):
            return NOT_RUN
        try:
            # Holding the session lock first: a step admitted after this one cannot start
            # before it on the compute thread.
            if not self.admission.try_acquire_idle():
                return NOT_RUN
            self._begin()
            try:
                with _interrupts_held(any_handler=on_loop):
                    return compiled.run_locked(arrays)
            finally:
                self.admission.release()
                self._end()
        finally:
            lock.release()

    def run_step_inline(self, step: Step) -> bool:
        """Run a Callback (or old-API) call's step in the calling thread, after the steps
        before it finished; its future then holds the outputs (or the error) and its
        callback is delivered as usual. Returns False if it must be queued after all
        (another thread's step got in first, or a SIGINT handler of yours is installed).

        Only for short steps (``CompiledJob.fits_inline``): waiting for the steps ahead
        costs at most about one step, and running here spares the step the cores that a
        caller preparing the next call takes from it on the compute thread. Before it
        runs, fewer than ``depth`` callbacks may wait for the delivery thread: the bound
        a queued step keeps by holding its place until its callback ran.
        """
        compiled = step.compiled
        with self._steps_finished:
            while self._unfinished:
                self._steps_finished.wait()
        limit = self.admission.places(compiled.depth_limit)
        with self._delivered:
            while self._undelivered >= limit:
                self._delivered.wait()
        try:
            outputs = self.run_inline(compiled, step.arrays)
        except Exception as exc:    # the step failed: reported as a queued step's would be
            step.arrays = None
            step.ran_in = threading.get_ident()
            step.future.set_exception(_naming_the_step(exc, step))
            return True
        if outputs is NOT_RUN:
            return False
        step.arrays = None
        step.ran_in = threading.get_ident()
        step.future.set_result(outputs)
        return True

    def admit_and_enqueue_soon(self, loop, step: Step):
        """From a thread running ``loop``: admit without blocking it, then enqueue.

        Returns an asyncio future on ``loop`` that completes once the step is admitted.
        Waiters are served first-in first-out, so steps keep call order.
        """
        admitted = loop.create_future()
        limit = step.compiled.depth_limit
        if not self._admitting and self.admission.try_acquire(limit):
            self.enqueue(step)
            admitted.set_result(None)
            return admitted
        self._begin()  # sync() waits for steps still queuing for admission
        task = loop.create_task(_admit_then_enqueue(self, step, admitted))
        self._admitting.add(task)
        task.add_done_callback(self._admitting.discard)
        return admitted

    def deliver_on_thread(self, thunk) -> None:
        """Run ``thunk()`` on the delivery thread, after earlier deliveries."""
        with self._idle:
            self._start()
            self._pending += 1
        with self._delivered:
            self._undelivered += 1
        self._delivery_queue.put(thunk)

    def deliver_here(self, step: Step, thunk) -> bool:
        """Run the delivery ``thunk()`` of ``step`` in this thread, now, if the step ran in
        this thread (``run_step_inline``) and no earlier callback waits for the delivery
        thread; returns False where it must go there instead.

        Why: a callback registered after its step already finished in the caller's thread
        would otherwise cost a wake of the delivery thread and two GIL hand-offs (about
        50-100 us here, 10% of the seed MLP's step), with nothing to overlap. It is what
        ``concurrent.futures.Future.add_done_callback`` does for a finished future. Inside
        it this thread counts as the delivery thread, so the same calls are refused
        (a job call, ``sync_default_session``: they would wait for this very callback).
        """
        if step.ran_in != threading.get_ident() or on_runtime_thread() is not None:
            return False
        with self._delivered:
            if self._undelivered:
                return False            # an earlier callback goes first, on its thread
            self._undelivered += 1
        self._begin()
        _local.role = "delivery"
        try:
            with self._delivering:
                thunk()
        finally:
            _local.role = None
            self._delivery_done()
        return True

    def _delivery_done(self) -> None:
        with self._delivered:
            self._undelivered -= 1
            self._delivered.notify_all()
        self._end()

    def deliver_on_loop(self, loop, thunk) -> None:
        """Run ``thunk()`` on ``loop``; if that loop is gone, on the delivery thread."""
        self._begin()
        key = object()

        def run() -> None:
            if self._on_loops.pop(key, None) is None:
                return  # already re-routed to the delivery thread
            try:
                thunk()
            finally:
                self._end()

        self._on_loops[key] = (loop, thunk)
        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # closed loop
            self._reroute(key)

    def _reroute(self, key) -> None:
        entry = self._on_loops.pop(key, None)
        if entry is not None:
            self.deliver_on_thread(entry[1])
            self._end()

    def _reroute_closed_loops(self) -> None:
        """Deliveries scheduled on a loop that closed before running them move to the
        delivery thread, so every callback still runs exactly once."""
        for key, (loop, _) in list(self._on_loops.items()):
            if loop.is_closed():
                self._reroute(key)

    # -- threads -------------------------------------------------------------------------
    def _compute_loop(self, role: str) -> None:
        _local.role = role
        while True:
            step = self._compute_queue.get()
            if step is _STOP:
                if self._completion_thread is not None:
                    self._completion_queue.put(_STOP)
                return
            self._submit(step)
            # Nothing of the step stays bound while this thread waits for the next one:
            # its future's callbacks hold the caller's event loop (a finished loop, never
            # collected while the pipeline idles) and its in-flight buffers.
            del step

    def _submit(self, step: Step) -> None:
        if not step.future.set_running_or_notify_cancel():
            self._retire(step)      # withdrawn before it started: it never runs
            return
        in_flight, error = None, None
        try:
            in_flight = step.compiled.submit(step.arrays)
        except BaseException as exc:  # goes to whoever holds the future
            error = exc
        # _handed_back is the completion thread's, read here without a lock: it only
        # grows, so a stale read can only see a step still ahead (the step is then
        # handed on too, which keeps the order), never miss one.
        if (self._handed_back == self._handed_over
                and (in_flight is None or in_flight.done())):
            self._complete(step, in_flight, error)   # nothing ahead of it in flight
        else:
            self._handed_over += 1
            self._start_completion()
            self._completion_queue.put((step, in_flight, error))

    def _completion_loop(self, role: str) -> None:
        _local.role = role
        while True:
            item = self._completion_queue.get()
            if item is _STOP:
                return
            self._complete(*item)     # waits for the step's events (GIL released)
            self._handed_back += 1
            del item                  # (as in _compute_loop: nothing held while idle)

    def _complete(self, step: Step, in_flight, error) -> None:
        """Wait for a submitted step, then set its future, in submission order."""
        if error is None:
            try:
                outputs = in_flight.result()
            except BaseException as exc:
                error = exc
        step.arrays = None
        # The place goes back before the future is set: the caller it wakes finds the
        # pipeline idle (an awaited step may then run on its loop). The pending count
        # drops after: sync() must not return before the future's callbacks were queued.
        # A step whose callback is registered keeps its place until the callback ran
        # (the delivery calls release_held).
        step.held = step.slot is not None and step.slot.has_callback
        if step.held:
            self.admission.hold()
        else:
            self.admission.release()
        try:
            if error is None:
                step.future.set_result(outputs)
            else:
                step.future.set_exception(_naming_the_step(error, step))
        finally:
            # After the future's callbacks queued this step's delivery: a step run in a
            # caller's thread next (run_step_inline) delivers after it.
            self._step_finished()
            self._end()

    def hold_late(self, step: Step) -> None:
        """A plain-code callback registered after its queued step finished (the caller
        was preempted, or slow, between the call and the registration): the step takes a
        place again until its callback ran, as one registered in time keeps its own. So
        the bound holds however late registrations come; the place is taken without
        waiting (the registration never blocks), so for a moment one more than ``depth``
        may be taken, and the next admission waits for it."""
        if not step.held:
            step.held = True
            self.admission.take_held()

    def release_held(self, step: Step) -> None:
        """After a held step's callback ran: give its place in the pipeline back."""
        if step.held:
            step.held = False
            self.admission.release_hold()

    def _retire(self, step: Step) -> None:
        """A step withdrawn before it started: it gives back its place, never runs."""
        step.arrays = None
        self.admission.release()
        self._step_finished()
        self._end()

    def _deliver_loop(self, role: str) -> None:
        _local.role = role
        while True:
            thunk = self._delivery_queue.get()
            if thunk is _STOP:
                return
            try:
                with self._delivering:
                    thunk()
            except BaseException as exc:  # a failing delivery must not stop the others
                self.session.report_error(exc, "a callback")
            finally:
                self._delivery_done()
            del thunk                 # (as in _compute_loop: nothing held while idle)

    # -- waiting -------------------------------------------------------------------------
    def wait_idle(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._pending:
                self._reroute_closed_loops()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(0.1 if left is None else min(left, 0.1))
            return True


NOT_RUN = object()  # run_inline's answer when the step must be queued instead


def _sigint_handler():
    """The SIGINT handler as installed, read without ``signal.getsignal``'s conversion to
    an enum, which fails (and formats the handler, asyncio's included its task) for
    every Python-level handler: ~50 us per call under ``asyncio.run``."""
    return _raw_signal.getsignal(signal.SIGINT)


def _may_run_inline() -> bool:
    """Inline steps need Ctrl-C held back on the main thread, which is only done over
    Python's own SIGINT handler (or not needed: SIGINT ignored, as in a background job);
    with a handler of yours installed, steps are queued."""
    if threading.current_thread() is not threading.main_thread():
        return True
    handler = _sigint_handler()
    return handler is signal.default_int_handler or handler == signal.SIG_IGN


class _interrupts_held:
    """On the main thread: a Ctrl-C during the block reaches the SIGINT handler when the
    block ends (Python's default handler: KeyboardInterrupt then). Held: Python's own
    handler, or with ``any_handler`` whichever Python-level handler is installed."""

    __slots__ = ("any_handler", "held", "hit")

    def __init__(self, any_handler: bool = False):
        self.any_handler = any_handler

    def __enter__(self):
        self.held = None
        self.hit = False
        if threading.current_thread() is threading.main_thread():
            handler = _sigint_handler()
            if handler is signal.default_int_handler or (self.any_handler
                                                         and callable(handler)):
                self.held = handler
                _raw_signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum, frame) -> None:
        self.hit = True

    def __exit__(self, exc_type, exc, tb):
        if self.held is not None:
            _raw_signal.signal(signal.SIGINT, self.held)
            if self.hit and exc_type is None:
                self.held(signal.SIGINT, None)   # the default handler raises here
        return False


async def _admit_then_enqueue(pipeline: "Pipeline", step: Step, admitted) -> None:
    try:
        try:
            await pipeline.admission.acquire_async(step.compiled.depth_limit)
        except asyncio.CancelledError:
            # Only the loop shutting down cancels this internal task. The call was made, so
            # its step still runs: it queues for admission on the delivery thread, in order.
            pipeline.deliver_on_thread(functools.partial(_admit_blocking, pipeline, step))
            if not admitted.done():
                admitted.cancel()
            raise
        pipeline.enqueue(step)
        if not admitted.done():
            admitted.set_result(None)
    finally:
        pipeline._end()


def _admit_blocking(pipeline: "Pipeline", step: Step) -> None:
    pipeline.admission.acquire(step.compiled.depth_limit)
    pipeline.enqueue(step)


def _naming_the_step(error: BaseException, step: Step) -> BaseException:
    """The error of a failed step, noted with the job and the step's number."""
    job = getattr(getattr(step.compiled, "job", None), "__name__", "?")
    if isinstance(error, Exception):   # never annotate KeyboardInterrupt and the like
        error.add_note(f"(in step {step.seq} of this session, a call of job {job!r})")
    return error
