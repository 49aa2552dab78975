"""The one thread on which the checkpoint entry points run when called from async code.

Awaited, a save, a load or ``flow.get_all_variables()`` copies every variable on a worker
thread. glibc gives each thread that allocates its own arena, and an arena keeps the
blocks freed in it for reuse (aioflow raises glibc's thresholds so that a step's memory is
reused by the next step: :mod:`aioflow.runtime.malloc`). On the event loop's default
executor, up to min(32, CPUs + 4) threads, every thread that ever ran one kept a
checkpoint-sized block: a trainer saving every minute grew by one checkpoint's size now and
then, up to one per thread (the issue-28 soak: 4.7 MiB steps; six saves of a 16 MiB
checkpoint at once kept about 100 MiB). Run on this one thread, they keep one such block,
reused by the next save. They are serialized too, which changes nothing they promise: each
already takes the session's lock, or a checkpoint's.

Plain (blocking) calls still run on the caller's thread.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading

from ..runtime.results import blocking_entry

__all__ = ["checkpoint_entry", "executor"]

_lock = threading.Lock()
_executor: list = []


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """The checkpoint thread's executor (started on first use)."""
    with _lock:
        if not _executor:
            _executor.append(concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="aioflow-checkpoint"))
        return _executor[0]


def _forget_after_fork() -> None:
    # a forked child has none of the parent's threads: its first use starts its own
    _executor.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

# ``blocking_entry`` whose awaitable form runs on the checkpoint thread
checkpoint_entry = blocking_entry(executor=executor)
