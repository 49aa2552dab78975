"""OneFlow v0.3.4's mode switches: ``flow.enable_eager_execution`` and
``flow.experimental.enable_typing_check``.

aioflow runs OneFlow's lazy mode, always: a job function is traced once, compiled, then
called. Eager execution (ops running as they are called, outside any job) is not built,
so asking for it is refused at once, naming what to use instead; asking for lazy mode
changes nothing. A job's arguments are always checked against its annotations, so the
typing check needs no switch.

>>> enable_eager_execution(False)
>>> enable_eager_execution(True)
Traceback (most recent call last):
NotImplementedError: flow.enable_eager_execution(True): aioflow runs OneFlow's lazy mode only (a @flow.global_function job is traced, compiled, then called); eager execution is not available
"""
from __future__ import annotations

__all__ = ["enable_eager_execution", "enable_typing_check"]


def _flag(what: str, val) -> bool:
    if not isinstance(val, bool):
        raise TypeError(f"{what}: val must be a bool, got {type(val).__name__}")
    return val


def enable_eager_execution(val: bool = True) -> None:
    """Lazy mode (``val=False``) is what aioflow runs: accepted, nothing changes. Eager
    mode (``val=True``, the default) raises NotImplementedError."""
    if _flag("flow.enable_eager_execution", val):
        raise NotImplementedError(
            "flow.enable_eager_execution(True): aioflow runs OneFlow's lazy mode only (a "
            "@flow.global_function job is traced, compiled, then called); eager execution "
            "is not available")


def enable_typing_check(val: bool = True) -> None:
    """Accepted for OneFlow's programs: aioflow checks every job call's arguments against
    the job's annotations whatever ``val`` says (shapes, dtypes, containers), and refuses
    a bad argument with an error naming it."""
    _flag("flow.experimental.enable_typing_check", val)
