"""Checkpoints in a world of several ranks, wrapped around the public entry points.

* Saving (``flow.checkpoint.save``, ``CheckPoint.save``): every rank holds the same
  variables (gradients are averaged), so rank 0 alone writes, atomically as always; then
  every rank learns whether it worked, and a failure (a path error...) raises on every
  rank with rank 0's message. Nobody goes on before the checkpoint is complete.
* Loading (``CheckPoint.load``, ``flow.checkpoint.get``): each rank reads the files
  itself (any rank can load; on several machines the path must exist on each), then
  the ranks compare outcomes: if one failed, all raise, naming the ranks and the error.

The wrappers replace the module's functions when a rank joins a world of several
(:func:`install`); a single process keeps the originals untouched.
"""
from __future__ import annotations

import functools

from .state import world


def _outcomes(ok: bool, error: BaseException | None, what: str) -> None:
    from .collectives import allgather_object
    message = None if ok else f"{type(error).__name__}: {error}"
    messages = allgather_object(message, what)
    failed = [(r, m) for r, m in enumerate(messages) if m is not None]
    if failed and ok:
        details = "; ".join(f"rank {r}: {m}" for r, m in failed)
        raise RuntimeError(f"{what} failed on rank(s) {[r for r, _ in failed]}: {details}")


def _reported(fn, what: str, *args, **kwargs):
    """``fn(*args, **kwargs)``, its outcome shared with every rank (an error raises on
    each)."""
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        _outcomes(False, exc, what)
        raise
    _outcomes(True, None, what)
    return result


def _rank0_writes(fn, what: str):
    @functools.wraps(fn)
    def save(*args, **kwargs):
        # Every rank compiles and initializes what the save would (collectives that
        # rank 0 must not run alone), then rank 0 writes.
        from ..checkpoint import _ready_session
        _ready_session()
        if world().rank == 0:
            return _reported(fn, what, *args, **kwargs)
        _outcomes(True, None, what)
        return None
    return save


def _every_rank_reads(fn, what: str):
    @functools.wraps(fn)
    def load(*args, **kwargs):
        return _reported(fn, what, *args, **kwargs)
    return load


def install() -> None:
    from .. import checkpoint
    from ..runtime.results import blocking_entry
    if getattr(checkpoint.save, "_aioflow_ranks", False):
        return

    def wrap(entry, wrapper, what):
        # Wrap the plain function inside the blocking entry, so that an awaited save
        # still runs its collective with the save, on the worker thread.
        inner = getattr(entry, "__wrapped__", entry)
        wrapped = blocking_entry(wrapper(inner, what))
        wrapped._aioflow_ranks = True
        return wrapped

    checkpoint.save = wrap(checkpoint.save, _rank0_writes, "saving a checkpoint")
    checkpoint.get = wrap(checkpoint.get, _every_rank_reads, "reading a checkpoint")
    checkpoint.CheckPoint.load = wrap(checkpoint.CheckPoint.load, _every_rank_reads,
                                      "loading a checkpoint")
