"""Turning one job call into a step and handing back the right result form."""
from __future__ import annotations

import asyncio
import time

from . import trio_calls
from .pipeline import NOT_RUN
from .turns import share_of, turn
from .results import (CallbackRegistrar, CallbackSlot, JobCall, LegacyResult,
                      check_may_block, deliver_result, foreign_async_library,
                      in_worker_thread, invoke, running_loop)


def call_job(job, compiled, arrays, copied: bool = False):
    """Submit one step of ``compiled`` with validated ``arrays``; see results.py's table.

    ``copied``: the arrays are private copies already (a Callback call that returns before
    its step read them); else a Callback step from plain code runs here if it is short
    (``CompiledJob.fits_inline``), or gets copies before it is queued."""
    pipeline = compiled.session.pipeline
    spec = job.return_spec
    loop = running_loop()

    if not spec.callback and not spec.is_legacy:
        if loop is not None:
            return JobCall(await_value(lambda: (compiled, arrays)), job.__name__)
        foreign = foreign_async_library()
        if foreign == "trio":   # awaited natively: woken through the run's token
            return JobCall(trio_calls.await_value(pipeline, compiled, arrays), job.__name__)
        if foreign is not None:  # another library: the blocking call on a worker thread
            return in_worker_thread(call_job, job, compiled, arrays)
        check_may_block(f"calling job {job.__name__}")
        arrays = _with_feeds(compiled, arrays)
        outputs = pipeline.run_inline(compiled, arrays)
        if outputs is NOT_RUN:  # another step is in flight: queue behind it
            pipeline.admission.acquire(compiled.depth_limit)
            step = pipeline.new_step(compiled, arrays)
            pipeline.enqueue(step)
            outputs = step.future.result()
        return deliver_result(compiled, outputs)

    arrays = _with_feeds(compiled, arrays)
    step = pipeline.new_step(compiled, arrays)
    slot = CallbackSlot(_delivery(pipeline, loop, compiled, job.__name__, step))
    if loop is None:
        step.slot = slot   # the step keeps its place until its callback ran
    step.future.add_done_callback(slot.step_done)
    if spec.callback and loop is not None:
        admitted = pipeline.admit_and_enqueue_soon(loop, step)
        return CallbackRegistrar(job.__name__, slot, admitted)
    check_may_block(f"calling job {job.__name__}")
    if copied or not pipeline.run_step_inline(step):
        if not copied:
            step.arrays = [compiled.private_copy(a) for a in arrays]
        pipeline.admission.acquire(compiled.depth_limit)
        pipeline.enqueue(step)
    if loop is None:
        compiled.note_call_returned()
    if spec.callback:
        return CallbackRegistrar(job.__name__, slot)
    return LegacyResult(step.future, compiled, job.__name__, slot)


def _with_feeds(compiled, arrays) -> list:
    """The call's arguments and the next batch of the job's own readers (flow.data), which
    fill the placeholders after the parameters. In the callback form inside an event loop
    this waits on the loop when the loader has no batch ready (it prefetches two)."""
    return arrays if compiled.feeds is None else arrays + compiled.feeds.next()


def _delivery(pipeline, loop, compiled, job_name, step):
    """Where callbacks of this call run: the caller's loop; in plain code the delivery
    thread, or right here if the step already ran in this thread and this job's
    callbacks are short (``CompiledJob.delivers_here``, ``Pipeline.deliver_here``)."""
    def deliver(slot, callback, future) -> None:
        if (loop is None and callback is not None and step.ran_in is None
                and not future.cancelled()):
            # A queued step whose callback came after it finished left its place unheld
            # (Pipeline._complete): it takes one now, so the bound on callbacks pending
            # holds however late the registration (no-op for a step already held).
            pipeline.hold_late(step)

        def thunk() -> None:
            start = time.perf_counter()
            try:
                invoke(slot, callback, future, compiled, job_name)
            finally:
                compiled.note_callback_time(time.perf_counter() - start)
                pipeline.release_held(step)
        if loop is not None:
            pipeline.deliver_on_loop(loop, thunk)
        elif not (compiled.delivers_here and pipeline.deliver_here(step, thunk)):
            pipeline.deliver_on_thread(thunk)

    return deliver


async def await_value(prepare):
    """An awaited call's step on an asyncio loop. ``prepare()`` -> ``(compiled, arrays)``
    binds and checks the call's arguments; it runs at the call's turn on the loop
    (runtime/turns.py), with the copies and the admission of a queued step: calls started
    together (a gather of many) take turns, each iteration running at most ~0.25 ms of
    their set-up, so timers and I/O go between. A call reads its arguments then: at once,
    unless it is one of a burst still waiting its turn."""
    # (turns.turn's account, without its context manager's two coroutines per call: a
    # burst's waiting calls all take their first step in one iteration.)
    share = share_of(asyncio.get_running_loop())
    if share.must_wait():
        await share.wait_turn()
    start = time.perf_counter()
    try:
        compiled, arrays = prepare()
        pipeline = compiled.session.pipeline
        queued = compiled.feeds is None and not compiled.fits_on_loop
        if queued:
            arrays, waiter, step = _admit(pipeline, compiled, arrays)
    finally:
        share.charge(time.perf_counter() - start)
    if not queued:
        if compiled.feeds is not None:   # waits for the readers' batch off the loop
            arrays = arrays + await compiled.feeds.next_async()
        if compiled.fits_on_loop:
            # A tiny or lately short step (CompiledJob.fits_on_loop) runs right here on
            # the loop, in order: only when no other step is admitted or running (else it
            # queues behind them).
            outputs = pipeline.run_inline(compiled, arrays, on_loop=True)
            if outputs is not NOT_RUN:
                # Let the loop's other tasks run before this one goes on: a task awaiting
                # such steps back to back would otherwise never yield to them.
                await asyncio.sleep(0)
                return deliver_result(compiled, outputs)
        async with turn():
            arrays, waiter, step = _admit(pipeline, compiled, arrays)
    if waiter is not None:   # the pipeline is full: wait in line, off the turn's account
        await pipeline.admission.wait_async(waiter)
        step = pipeline.new_step(compiled, arrays)
        pipeline.enqueue(step)
    # Cancelling this await cancels step.future: withdrawn if it has not started yet,
    # otherwise it completes (variables stay consistent) and its result is dropped.
    outputs = await asyncio.wrap_future(step.future)
    return deliver_result(compiled, outputs)


def _admit(pipeline, compiled, arrays):
    """``(copies of arrays, None, the queued step)``, or ``(copies, a waiter, None)`` where
    the pipeline is full. Queued, the step reads its inputs after this task yields, while
    other tasks may write to the caller's arrays: it gets copies (what the other forms
    copy at the call)."""
    arrays = [compiled.private_copy(a) for a in arrays]
    waiter = pipeline.admission.try_or_enqueue(compiled.depth_limit)
    if waiter is not None:
        return arrays, waiter, None
    step = pipeline.new_step(compiled, arrays)
    pipeline.enqueue(step)
    return arrays, None, step
