"""The ``flock`` locks that let savers and loaders of one checkpoint path run at once.

Three locks, all advisory ``flock`` locks that the kernel drops when their process dies
(SIGKILL included), so a dead holder never blocks anyone:

* **a save's own folders.** A save holds an exclusive lock on its ``.NAME.tmp-*`` folder
  from the moment it exists, and on the previous checkpoint while it is moved aside as
  ``.NAME.old-*``: the clean-up of leftovers (:mod:`.recovery`) leaves locked ones alone.
* **the parent folder, briefly.** "Create the temporary folder, then lock it" is two
  steps; a clean-up scanning between them would take the fresh folder for a dead save's
  and delete it. So creators hold a shared lock on the parent folder across both steps
  (:func:`creating`) and the clean-up's scan an exclusive one (:func:`scanning`). Both
  last microseconds; neither covers the writing of a checkpoint.
* **the checkpoint itself.** A load holds a shared lock on the checkpoint folder while it
  reads; a save that replaces it takes an exclusive lock on it before moving it aside
  (:func:`lock_current`). So a load reads the old checkpoint or the new one, whole.

Where ``flock`` does not exist (Windows) or the file system refuses it, the locks are
no-ops: one saver at a time is then the caller's business, as before.
"""
from __future__ import annotations

import contextlib
import os

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["DirLock", "creating", "scanning", "lock_current", "SwapInProgress"]


class DirLock:
    """An ``flock`` on a directory, held until :meth:`release` (or process death).

    Exclusive by default, ``shared=True`` for readers. ``DirLock(path, wait=False)``
    raises ``BlockingIOError`` when another holder has it.
    """

    def __init__(self, path: str, wait: bool = True, shared: bool = False):
        self.fd = None
        if fcntl is None:  # pragma: no cover
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
            fcntl.flock(fd, mode | (0 if wait else fcntl.LOCK_NB))
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)   # closing the last descriptor drops the flock
            self.fd = None


@contextlib.contextmanager
def _parent_lock(parent: str, shared: bool):
    try:
        lock = DirLock(parent, shared=shared)
    except OSError:
        # An unreadable parent (mode -wx) or a file system without flock on folders:
        # go on unlocked, as before this lock existed, rather than refuse to save.
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def creating(parent: str):
    """Held (shared) by a save while it creates and locks its temporary folder."""
    return _parent_lock(parent, shared=True)


def scanning(parent: str):
    """Held (exclusive) by the clean-up while it tries the locks of the leftovers."""
    return _parent_lock(parent, shared=False)


class SwapInProgress(Exception):
    """Internal: the path stayed missing while saves kept swapping it (never escapes)."""


def lock_current(target: str, olds, *, shared: bool, attempts: int = 1000) -> DirLock | None:
    """Lock the folder that is at ``target`` now, or return None when nothing is there.

    The folder at a path can change between opening it and locking it (a save swaps in
    a new one, and its lock was on the old one), so the lock is checked to be on the
    folder still at ``target`` and taken again otherwise. While ``target`` is missing
    because a running save is between its two renames, ``olds()`` (the ``.old`` copies
    beside it) shows one locked: wait for that save, then look again.
    """
    for _ in range(attempts):
        try:
            lock = DirLock(target, shared=shared)
        except (FileNotFoundError, NotADirectoryError):
            if _waited_for_a_swap(olds()) or os.path.lexists(target):
                continue
            return None
        try:
            same = (os.path.samestat(os.fstat(lock.fd), os.stat(target))
                    if lock.fd is not None else True)
        except FileNotFoundError:
            same = False
        if same:
            return lock
        lock.release()
    raise SwapInProgress(target)


def _waited_for_a_swap(olds) -> bool:
    """Wait for the saves holding any of ``olds``; whether there was one to wait for."""
    waited = False
    for path in olds:
        try:
            DirLock(path, wait=False, shared=True).release()
        except BlockingIOError:
            with contextlib.suppress(OSError):
                DirLock(path, shared=True).release()   # returns when that save is done
            waited = True
        except OSError:
            continue   # gone already: that save finished
    return waited
