"""Awaited job calls inside trio tasks (anyio's trio backend), without a worker thread.

A step's future is a ``concurrent.futures.Future`` completed on the compute or completion
thread. Under asyncio the caller awaits it through ``asyncio.wrap_future``; under trio the
same is done with trio's own primitives: the waiting task parks in
``trio.lowlevel.wait_task_rescheduled`` and the thread that completes the future wakes it
through the run's ``TrioToken.run_sync_soon``, which is thread-safe. One wake-up per call,
no thread hop (``anyio.to_thread`` used to run each blocking call on a worker thread:
260 us per trivial call against 53 us under asyncio, issue 29).

Cancellation keeps asyncio's promise: a cancel scope that fires while the call waits for
admission gives its place in line back and the step never runs; once the step is queued,
cancelling withdraws it if it has not started, else it completes (variables stay
consistent) and its result is dropped. Nothing lost, nothing repeated.

>>> import numpy as np, trio, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def double(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return x * 2
>>> async def main():
...     return await double(np.array([1.0, 2.0], np.float32))
>>> trio.run(main)
array([2., 4.], dtype=float32)
>>> flow.clear_default_session()
"""
from __future__ import annotations

from concurrent.futures import Future

from .pipeline import NOT_RUN
from .results import deliver_result
from .results import in_worker_thread


async def wait_future(future: Future):
    """The result of ``future`` (a ``concurrent.futures.Future``), awaited in a trio task;
    woken by the thread that completes it. On cancellation the task stops waiting; what
    happens to the future is the caller's to decide."""
    import trio

    if future.done():
        await trio.lowlevel.checkpoint()    # every trio await is a checkpoint
        return future.result()
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()
    waiting = [True]

    def wake() -> None:              # on the trio run's thread
        if waiting[0]:
            waiting[0] = False
            trio.lowlevel.reschedule(task)

    def done(_future: Future) -> None:  # on whichever thread completed the future
        try:
            token.run_sync_soon(wake)
        except trio.RunFinishedError:   # the run ended meanwhile: nobody to wake
            pass

    def abort(_raise_cancel):
        waiting[0] = False
        return trio.lowlevel.Abort.SUCCEEDED

    future.add_done_callback(done)
    await trio.lowlevel.wait_task_rescheduled(abort)
    return future.result()


async def await_value(pipeline, compiled, arrays):
    """A value-form job call awaited in a trio task (``arrays`` are private copies made at
    the call, runtime/calls.py). A short step runs right here on the trio loop when the
    pipeline is idle, as under asyncio (``CompiledJob.fits_on_loop``)."""
    import trio

    if compiled.feeds is not None:   # the job's own readers: their batch, off the loop
        arrays = arrays + await in_worker_thread(compiled.feeds.next)
    if compiled.fits_on_loop:
        outputs = pipeline.run_inline(compiled, arrays, on_loop=True)
        if outputs is not NOT_RUN:
            await trio.lowlevel.checkpoint()  # let other tasks run between such steps
            return deliver_result(compiled, outputs)
    admission = pipeline.admission
    waiter = admission.try_or_enqueue(compiled.depth_limit)
    if waiter is not None:
        try:
            await wait_future(waiter)
        except BaseException:   # cancelled in line: leave it (or hand the place back)
            admission.abandon(waiter)
            raise
    step = pipeline.new_step(compiled, arrays)
    pipeline.enqueue(step)
    try:
        outputs = await wait_future(step.future)
    except trio.Cancelled:
        # Withdrawn if it has not started; otherwise it completes and the result is dropped.
        step.future.cancel()
        raise
    return deliver_result(compiled, outputs)
