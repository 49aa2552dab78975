"""Running request parsing off the event loop, bounded in threads, queue and time.

A server's event loop must never run work whose cost a client chooses (decoding an
uploaded image, parsing megabytes of JSON): while it runs, every other request waits,
health checks included. :class:`ParsePool` runs such work on a few threads of its own
(not the loop's default executor, which other libraries share) and gives each call a
deadline that really answers: the caller gets :class:`ParseTimeoutError` when it passes,
even though the thread, which cannot be interrupted, finishes its work later. The thread
keeps its slot until then, so runaway parses can never take more than ``threads`` threads
and ``queue`` waiting calls; beyond that a call is refused at once
(:class:`ParseBusyError`) instead of piling up.
"""
import asyncio
import concurrent.futures
import functools


class ParseTimeoutError(TimeoutError):
    """The parse did not finish within its deadline (answer 504)."""

    status_code = 504


class ParseBusyError(RuntimeError):
    """Every parse slot is taken (answer 503 with Retry-After)."""

    status_code = 503


class ParsePool:
    """``await pool.run(fn, *args)``: ``fn(*args)`` on one of ``threads`` threads.

    At most ``threads + queue`` calls hold a slot (running or waiting for a thread); a
    call beyond raises :class:`ParseBusyError` at once. A call whose result is not back
    within ``timeout`` seconds (from when it was queued) raises
    :class:`ParseTimeoutError`; its slot is released when its thread is done. Belongs to
    one event loop; :meth:`close` shuts the threads down without waiting.
    """

    def __init__(self, threads: int = 2, queue: int = 64, timeout=None,
                 name: str = "aioflow-parse"):
        if threads < 1 or queue < 0:
            raise ValueError(f"threads must be >= 1 and queue >= 0, got {threads}, {queue}")
        self.timeout = timeout
        self.slots = threads + queue
        self.in_use = 0
        self._executor = concurrent.futures.ThreadPoolExecutor(threads,
                                                               thread_name_prefix=name)

    async def run(self, fn, *args, timeout=None):
        """``fn(*args)`` off the loop; its result, or its exception re-raised here."""
        timeout = self.timeout if timeout is None else timeout
        if self.in_use >= self.slots:
            raise ParseBusyError(f"the server is busy parsing {self.in_use} requests; "
                                 "retry later")
        loop = asyncio.get_running_loop()
        self.in_use += 1
        try:
            future = loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except BaseException:
            self.in_use -= 1
            raise
        # the slot is freed when the thread is done, not when the caller stops waiting
        future.add_done_callback(self._release)
        try:
            # shield: a timeout or a cancelled request must not mark the thread's future
            # done while the thread still runs (its slot would be freed too early)
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            future.add_done_callback(_retrieve)  # nobody awaits it any more
            raise ParseTimeoutError(f"parsing the request took over {timeout:g} s") from None
        except asyncio.CancelledError:
            future.add_done_callback(_retrieve)
            raise

    def _release(self, _future) -> None:
        self.in_use -= 1

    def close(self) -> None:
        """Stop taking work; queued calls are dropped, running ones finish in background."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _retrieve(future) -> None:
    """Consume an abandoned future's outcome so asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()
