"""What every checkpoint module shares: the file names of OneFlow's layout and the errors.

Kept apart from :mod:`.io` so that the modules :mod:`.io` uses (:mod:`.swap`) can raise
the same errors without importing it.
"""
from __future__ import annotations

import errno

__all__ = [
    "DATA_FILENAME", "META_FILENAME", "DONE_FILENAME", "SUM_FILENAME",
    "CheckpointError", "CheckpointExistsError", "CheckpointNotFoundError",
    "CheckpointWarning", "write_error",
]

DATA_FILENAME = "out"
META_FILENAME = "meta"
DONE_FILENAME = "snapshot_done"
# aioflow's addition to OneFlow's layout: the sha256 of a variable's ``out`` and ``meta``,
# in ``sha256sum``'s format (so ``cd <var> && sha256sum -c sha256sum`` checks it too).
# OneFlow's readers open a variable's ``out`` and ``meta`` by name, so the extra file
# changes nothing for them; checkpoints without it (OneFlow's own) load unverified.
SUM_FILENAME = "sha256sum"


class CheckpointError(ValueError):
    """A checkpoint cannot be written or read; the message names the variable and file."""


class CheckpointExistsError(CheckpointError, FileExistsError):
    """The save target exists and is not an empty directory (and ``overwrite`` is off)."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """The checkpoint directory does not exist or is not a directory."""


class CheckpointWarning(UserWarning):
    """A checkpoint loads, but something about it is suspicious (no ``snapshot_done``)."""


def write_error(what: str, e: OSError) -> CheckpointError:
    """A CheckpointError for a failed write, saying plainly when the disk is full (the
    caller's except clause adds what became of the previous checkpoint)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return CheckpointError(f"{what}: no space left on device ({e.strerror or e})")
    return CheckpointError(f"{what}: {e}")
