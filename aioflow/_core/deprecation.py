"""Which of aioflow's OneFlow names OneFlow v0.3.4 marked deprecated (``@oneflow_deprecate``):
``flow.is_deprecated(f)`` answers for them, as OneFlow's did.

>>> def old(): pass
>>> mark_deprecated(old) is old, is_deprecated(old), is_deprecated(print)
(True, True, False)
"""
from __future__ import annotations

import collections.abc

__all__ = ["mark_deprecated", "is_deprecated"]

_DEPRECATED: set = set()


def mark_deprecated(func_or_class):
    """Record ``func_or_class`` as deprecated; returns it (usable as a decorator)."""
    _DEPRECATED.add(func_or_class)
    return func_or_class


def is_deprecated(func_or_class) -> bool:
    """True for a function or class OneFlow v0.3.4 marked deprecated (``flow.name_scope``,
    ``flow.distribute.mirrored_strategy``, ``flow.data.decode_ofrecord``, ...)."""
    return isinstance(func_or_class, collections.abc.Hashable) and func_or_class in _DEPRECATED
