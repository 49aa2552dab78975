"""Where the user's code called into aioflow: the innermost frame outside aioflow's own
files (and contextlib's, so a ``with`` block's manager points at the user's ``with``).

Warnings use it to point at the user's line (``stacklevel``), and a job call dropped
without ``await`` to say where it was made.

>>> import sys
>>> frame, skipped = outside_aioflow(sys._getframe())
>>> skipped   # this doctest's own frame is not aioflow's
0
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys

__all__ = ["outside_aioflow", "user_stacklevel"]

# The aioflow package's folder (this file lives in aioflow/_core/).
_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
             os.path.abspath(contextlib.__file__))


@functools.lru_cache(maxsize=512)
def _internal(filename: str) -> bool:
    # Cached: a job call in async code looks up its caller's file at every call.
    return os.path.abspath(filename).startswith(_INTERNAL)


def outside_aioflow(frame):
    """(the first frame from ``frame`` outward that is not aioflow's or contextlib's, or
    None, and how many frames were skipped to reach it)."""
    skipped = 0
    while frame is not None and _internal(frame.f_code.co_filename):
        frame, skipped = frame.f_back, skipped + 1
    return frame, skipped


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` made by our caller point at the
    user's line (level 1 being our caller itself)."""
    _, skipped = outside_aioflow(sys._getframe(2))
    return 2 + skipped
