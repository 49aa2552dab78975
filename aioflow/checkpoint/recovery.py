"""The leftovers of interrupted checkpoint saves: recognizing, recovering and removing them.

A save of ``<parent>/<name>`` writes into the hidden sibling ``.<name>.tmp-XXXXXXXX``; an
overwriting save also moves the previous checkpoint aside to ``.<name>.old-XXXXXXXX``
for the moment between its two renames (:func:`aioflow.checkpoint.io.save_arrays`). A
process killed mid-save leaves them behind. :func:`tidy`, run by every save and load of
the path, puts things right:

* the path is missing and a complete ``.old`` copy exists (a kill between the two renames
  of an overwrite): the copy is renamed back to the path -- it is the last checkpoint a
  save confirmed; the interrupted save's ``.tmp`` never returned, so it is not trusted;
* every other leftover of that path is deleted.

A leftover that a running save still uses is never touched: a save holds an exclusive
``flock`` on its temporary directory (and, while replacing, on the copy moved aside)
until it returns, and the kernel drops the lock when its process dies, SIGKILL included.
So "its lock is free" means "its save is over". Where ``flock`` does not exist (Windows),
leftovers are treated as abandoned.

>>> import os, tempfile
>>> parent = tempfile.mkdtemp()
>>> os.makedirs(os.path.join(parent, ".model.old-0123abcd", "w"))
>>> open(os.path.join(parent, ".model.old-0123abcd", "snapshot_done"), "w").close()
>>> os.mkdir(os.path.join(parent, ".model.tmp-89abcdef"))       # a save killed mid-write
>>> tidied = tidy(os.path.join(parent, "model"), "snapshot_done")
>>> os.path.basename(tidied.restored_from), sorted(os.listdir(parent))
('.model.old-0123abcd', ['model'])
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from .locks import DirLock, scanning

__all__ = ["Tidied", "DirLock", "leftovers", "tidy"]


def _pattern(base: str) -> re.Pattern:
    return re.compile(rf"\.{re.escape(base)}\.(tmp|old)-[0-9a-f]{{8}}")


def leftovers(parent: str, base: str) -> list[tuple[str, str]]:
    """``(kind, full path)`` of every ``.base.tmp-*`` / ``.base.old-*`` in ``parent``."""
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    pattern = _pattern(base)
    found = []
    for entry in sorted(entries):
        match = pattern.fullmatch(entry)
        if match:
            found.append((match.group(1), os.path.join(parent, entry)))
    return found


@dataclass
class Tidied:
    """What :func:`tidy` did: the ``.old`` copy it renamed back into place (if any), the
    leftovers a running save still holds, and those it could not remove (or, with the
    path missing, could not rename back: a read-only file system)."""

    restored_from: str | None = None
    in_use: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)


def tidy(target: str, done_filename: str) -> Tidied:
    """Recover ``target`` from an interrupted overwrite and delete stale leftovers."""
    parent, base = os.path.split(target)
    result = Tidied()
    held: list[tuple[str, str, DirLock]] = []
    try:
        # Under the parent's lock: a save creating its folder waits, so every unlocked
        # leftover found here is a dead save's (locks.creating).
        with scanning(parent):
            for kind, path in leftovers(parent, base):
                try:
                    lock = DirLock(path, wait=False)
                except BlockingIOError:
                    result.in_use.append(path)
                    continue
                except OSError:   # vanished meanwhile, or not a directory we can open
                    if os.path.lexists(path) and not os.path.isdir(path):
                        _remove(path, result)
                    continue
                held.append((kind, path, lock))
        if not os.path.lexists(target):
            complete = [(os.path.getmtime(os.path.join(p, done_filename)), p)
                        for kind, p, _ in held
                        if kind == "old" and os.path.isfile(os.path.join(p, done_filename))]
            if complete:
                newest = max(complete)[1]
                try:
                    os.rename(newest, target)
                    result.restored_from = newest
                except OSError:
                    result.stuck.append(newest)
        for _, path, _ in held:
            if path != result.restored_from and path not in result.stuck:
                _remove(path, result)
    finally:
        for _, _, lock in held:
            lock.release()
    return result


def _remove(path: str, result: Tidied) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except FileNotFoundError:
        pass
    except OSError:
        result.stuck.append(path)
