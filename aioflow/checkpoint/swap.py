"""Putting a written checkpoint in place, and reading one, while others do the same.

:func:`aioflow.checkpoint.io.save_arrays` writes a checkpoint into a locked temporary
sibling (:func:`create_tmp`) and then swaps it in (:func:`install`); its loaders read
under :func:`reading`. Several processes may save and load the same path at once (a
trainer saving while an evaluator loads, two savers): see docs/faults.md, "Several
processes". The rules, with the locks of :mod:`.locks`:

* the clean-up of dead saves' leftovers (:func:`tidy`) never deletes a running save's
  temporary folder: the folder is created and locked under the parent's lock;
* a load holds a shared lock on the checkpoint folder while it reads, and a replacing save
  an exclusive one on it while it moves it aside: a load reads the old checkpoint or the
  new one, whole; a load that finds the path missing because a save is between its two
  renames waits for that save;
* the last save to swap wins; a save without ``overwrite`` that finds a checkpoint put in
  place meanwhile is refused (:class:`CheckpointExistsError`).
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import warnings

from . import locks as _locks, recovery as _recovery
from .base import (DATA_FILENAME, DONE_FILENAME, META_FILENAME, SUM_FILENAME,
                   CheckpointError, CheckpointExistsError, CheckpointNotFoundError,
                   CheckpointWarning, write_error)
from .._core.callsite import user_stacklevel

__all__ = ["tidy", "create_tmp", "check_target", "install", "reading", "unchanged"]


def tidy(target: str, on_missing: str) -> None:
    """Recover ``target`` from the ``.old`` copy of an interrupted overwrite, and delete
    the leftovers of interrupted saves of it (checkpoint.recovery). A load (``on_missing
    ="load"``) of a missing target that could not be recovered names the leftovers."""
    tidied = _recovery.tidy(target, DONE_FILENAME)
    if tidied.restored_from is not None:
        warnings.warn(
            f"checkpoint {target!r} was missing: a save that replaced it was interrupted "
            f"between its two renames; restored the previous checkpoint from "
            f"{tidied.restored_from!r}", CheckpointWarning, stacklevel=user_stacklevel())
    if on_missing == "load" and not os.path.lexists(target):
        olds = [p for p in tidied.stuck
                if os.path.basename(p).startswith(f".{os.path.basename(target)}.old-")]
        if olds:
            raise CheckpointNotFoundError(
                f"checkpoint directory {target!r} does not exist; an interrupted save left "
                f"the previous checkpoint in {olds[0]!r} (it could not be renamed back: "
                "load that path, or rename it yourself)")


def _lock_target(target: str, *, shared: bool) -> _locks.DirLock | None:
    """The lock on the folder at ``target`` (None: nothing there), waiting for a save
    that is between its two renames."""
    parent, base = os.path.split(target)

    def olds():
        return [path for kind, path in _recovery.leftovers(parent, base) if kind == "old"]

    try:
        return _locks.lock_current(target, olds, shared=shared)
    except _locks.SwapInProgress:
        raise CheckpointError(
            f"checkpoint {target!r} kept being replaced by other saves while this "
            "process tried to lock it; try again") from None


@contextlib.contextmanager
def reading(root: str):
    """Held while a load reads ``root``: no save can move it away meanwhile."""
    tidy(root, on_missing="load")
    held = _lock_target(root, shared=True)
    if held is None:
        # Missing: perhaps a save died between its renames after tidy() looked.
        tidy(root, on_missing="load")
        held = _lock_target(root, shared=True)
    try:
        yield
    finally:
        if held is not None:
            held.release()


def create_tmp(parent: str, base: str, target: str) -> tuple[str, _locks.DirLock]:
    """Create the save's hidden sibling ``.BASE.tmp-XXXXXXXX`` and lock it, as one step
    for any clean-up (:func:`aioflow.checkpoint.locks.creating`)."""
    with _locks.creating(parent):
        for _ in range(100):
            tmp = os.path.join(parent, f".{base}.tmp-{secrets.token_hex(4)}")
            try:
                os.mkdir(tmp)
            except FileExistsError:
                continue
            except OSError as e:
                # Not the hidden folder's name: the user chose ``target``, not it.
                error = write_error(f"cannot save checkpoint to {target!r}: cannot create "
                                    f"a folder in {parent!r}", OSError(e.errno, e.strerror))
                raise unchanged(error, target) from e
            try:
                return tmp, _locks.DirLock(tmp)
            except BaseException:
                os.rmdir(tmp)
                raise
    raise CheckpointError(f"cannot create a temporary directory in {parent!r}")


def unchanged(error: CheckpointError, target: str) -> CheckpointError:
    """``error`` with a note saying the checkpoint at ``target``, if any, is unchanged."""
    if os.path.isdir(target) and not isinstance(error, CheckpointExistsError):
        error.add_note(f"the previous checkpoint at {target!r} is unchanged")
    return error


def check_target(target: str, overwrite: bool) -> None:
    """Refuse, before anything is written, a save that :func:`install` would refuse."""
    held = _lock_target(target, shared=True)
    try:
        if held is not None:
            _replaceable(target, overwrite)
    finally:
        if held is not None:
            held.release()


def _replaceable(target: str, overwrite: bool, late: bool = False) -> bool:
    """Whether the folder at ``target`` must be moved aside (False: it is empty); raises
    when it is not a folder, or holds something a save must not replace (``late``: found
    only after writing, so another save or process put it there meanwhile)."""
    if not os.path.isdir(target):
        raise CheckpointExistsError(
            f"cannot save checkpoint to {target!r}: it exists and is not a directory")
    entries = os.listdir(target)
    if entries and not overwrite:
        raise CheckpointExistsError(
            f"checkpoint directory {target!r} "
            f"{'appeared while saving and ' if late else ''}is not empty; pass overwrite=True to "
            "replace it (OneFlow refused to save into a non-empty folder)")
    for entry in entries:
        full = os.path.join(target, entry)
        if entry == DONE_FILENAME and os.path.isfile(full) and not os.path.islink(full):
            continue
        if (os.path.isdir(full) and not os.path.islink(full)
                and set(os.listdir(full)) <= {DATA_FILENAME, META_FILENAME, SUM_FILENAME}):
            continue
        raise CheckpointError(
            f"refusing to overwrite {target!r}: it does not look like a checkpoint directory "
            f"(unexpected entry {full!r}); remove it yourself or choose another path")
    return bool(entries)


def install(tmp: str, target: str, overwrite: bool) -> None:
    """Rename the written checkpoint ``tmp`` into place at ``target``.

    A checkpoint already there is locked (readers finish first), checked again (another
    save may have put it there since :func:`check_target`), moved aside to ``.old``,
    replaced, and deleted. The ``.old`` copy stays locked (the lock follows the folder)
    until it is gone, so no clean-up restores it meanwhile.
    """
    parent, base = os.path.split(target)
    for _ in range(100):
        held = _lock_target(target, shared=False)
        try:
            if held is None or not _replaceable(target, overwrite, late=True):
                try:
                    os.rename(tmp, target)   # POSIX: atomically replaces an empty folder
                    return
                except OSError as e:
                    if not os.path.lexists(target):
                        raise _move_error(target, e) from e
                    # Another save put a checkpoint there (look again), or this system
                    # cannot rename over an empty folder (Windows: remove it first).
                    with contextlib.suppress(OSError):
                        os.rmdir(target)
                    continue
            _swap(tmp, target, parent, base)
            return
        finally:
            if held is not None:
                held.release()
    raise CheckpointError(f"checkpoint {target!r} kept changing while this save tried to "
                          "put its own in place")


def _swap(tmp: str, target: str, parent: str, base: str) -> None:
    while True:
        old = os.path.join(parent, f".{base}.old-{secrets.token_hex(4)}")
        if not os.path.lexists(old):
            break
    try:
        os.rename(target, old)
    except OSError as e:
        raise _move_error(target, e) from e
    try:
        os.rename(tmp, target)
    except BaseException as e:
        os.rename(old, target)
        if isinstance(e, OSError):
            raise _move_error(target, e) from e
        raise
    try:
        shutil.rmtree(old)
    except OSError as e:
        warnings.warn(
            f"saved checkpoint {target!r}, but could not delete the previous one moved "
            f"aside to {old!r}: {e}", CheckpointWarning, stacklevel=user_stacklevel())


def _move_error(target: str, e: OSError) -> CheckpointError:
    return CheckpointError(f"cannot move the checkpoint into place at {target!r}: {e}")
