"""Keep the C allocator from handing a step's memory back to the kernel every step.

Why: numpy allocates its arrays with ``malloc``. glibc serves a request of more than
``M_MMAP_THRESHOLD`` bytes (128 KiB at first, rising with use up to 32 MiB) with a fresh
``mmap`` and gives it back with ``munmap`` when freed, and it returns free memory at the
top of a heap to the kernel once more than ``M_TRIM_THRESHOLD`` is free there. A compiled
step frees each intermediate after its last use, and the next step asks for the same sizes
again, so every step paid for fresh pages: on the seed LeNet's train step (2-core AMD
EPYC), about 4,200 page faults and 12-20 ms of kernel time per step; the step ran
57-67 ms instead of 72-88 ms once those two thresholds were raised (same process setup,
runs minutes apart; see docs/benchmarks.md).

:func:`tune` raises both thresholds (``mallopt``) so freed blocks stay in the process for
the next step. Resident memory then stays at the largest step's peak instead of shrinking
between steps; it is still flat over time (``benchmarks/memory.py``). It applies only to
glibc, only once per process, never when the process set either threshold itself through
glibc's environment variables (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``GLIBC_TUNABLES``), and not at all after ``flow.config.tune_malloc(False)``. aioflow calls
it when it compiles a job, not when it is imported.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading

from .._core import settings

__all__ = ["tune", "restore", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

# glibc's mallopt parameter numbers (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap (glibc's own ceiling for its dynamic threshold).
MMAP_THRESHOLD = 32 << 20
# Free memory at the top of a heap kept for reuse, up to this much.
TRIM_THRESHOLD = 256 << 20

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
_lock = threading.Lock()
_state: dict = {"done": False, "applied": False}
# glibc's starting values, restored by ``flow.config.tune_malloc(False)``
_GLIBC_DEFAULT = 128 << 10


def tune() -> bool:
    """Raise glibc's mmap and trim thresholds, once per process; returns whether they
    are raised (False on other C libraries, when the user set their own, or when
    ``flow.config.tune_malloc(False)`` was called first).

    >>> isinstance(tune(), bool)
    True
    """
    if not settings.get("tune_malloc"):
        return _state["applied"]
    with _lock:
        if not _state["done"]:
            _state["done"] = True
            _state["applied"] = _apply()
    return _state["applied"]


def restore() -> None:
    """Put glibc's starting thresholds back if :func:`tune` raised them (its dynamic
    mmap threshold stays off: glibc turns it off at any explicit setting)."""
    with _lock:
        if _state["applied"]:
            _mallopt(_GLIBC_DEFAULT, _GLIBC_DEFAULT)
        _state["applied"] = _state["done"] = False     # the next compile may raise them again


def _apply() -> bool:
    if platform.libc_ver()[0] != "glibc" or any(k in os.environ for k in _USER_SETTINGS):
        return False
    return _mallopt(MMAP_THRESHOLD, TRIM_THRESHOLD)


def _mallopt(mmap_threshold: int, trim_threshold: int) -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success
    return (mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
            and mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1)


settings.on_change("tune_malloc", lambda on: None if on else restore())
