"""``flow.util``: OneFlow's small helpers.

>>> a, b = unique_str("Dense_"), unique_str("Dense_")
>>> a != b and a.startswith("Dense_") and b.startswith("Dense_")
True
"""
from __future__ import annotations

import itertools
import threading

__all__ = ["unique_str"]

_counter = itertools.count()
_lock = threading.Lock()


def unique_str(prefix: str) -> str:
    """``prefix`` followed by a number no earlier call in this process returned (OneFlow's
    ``id_util.UniqueStr``, used to name ops)."""
    if not isinstance(prefix, str):
        raise TypeError(f"unique_str: prefix must be a str, got {prefix!r}")
    with _lock:
        return f"{prefix}{next(_counter)}"
