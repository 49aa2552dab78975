"""Checkpoints in a world of several ranks: the entry points' rank-aware wrappers.

* Saving (``flow.checkpoint.save``, ``CheckPoint.save``): every rank holds the same
  variables (gradients are averaged), so rank 0 alone writes, atomically as always; then
  every rank learns whether it worked, and a failure (a path error...) raises on every
  rank with rank 0's message. Nobody goes on before the checkpoint is complete.
* Loading (``CheckPoint.load``, ``flow.checkpoint.get``): each rank reads the files
  itself (any rank can load; on several machines the path must exist on each), then
  the ranks compare outcomes: if one failed, all raise, naming the ranks and the error.

:mod:`aioflow.checkpoint` decorates its entry points with :func:`rank0_writes` and
:func:`every_rank_reads` (inside the blocking entry, so an awaited save runs its
collective with the save, on the worker thread); a single process calls straight through.
"""
from __future__ import annotations

import functools

from ..distributed.collectives import allgather_object
from ..distributed.state import world


def _outcomes(ok: bool, error: BaseException | None, what: str) -> None:
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


def rank0_writes(what: str, prepare):
    """Decorator of a saving entry point: in a world of several ranks, every rank runs
    ``prepare()`` (readies its session), rank 0 writes, and every rank learns the
    outcome."""
    def decorate(fn):
        @functools.wraps(fn)
        def save(*args, **kwargs):
            if not world().distributed:
                return fn(*args, **kwargs)
            # Every rank compiles and initializes what the save would (collectives that
            # rank 0 must not run alone), then rank 0 writes.
            prepare()
            if world().rank == 0:
                return _reported(fn, what, *args, **kwargs)
            _outcomes(True, None, what)
            return None
        return save
    return decorate


def every_rank_reads(what: str):
    """Decorator of a loading entry point: in a world of several ranks, each rank reads,
    then all share the outcomes (an error on one raises on each)."""
    def decorate(fn):
        @functools.wraps(fn)
        def load(*args, **kwargs):
            if not world().distributed:
                return fn(*args, **kwargs)
            return _reported(fn, what, *args, **kwargs)
        return load
    return decorate
