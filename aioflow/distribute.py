"""``flow.distribute``: OneFlow's distribute schemes and its older names of the views.

``split(axis)``, ``broadcast()`` and ``auto()`` say how a blob or variable is laid out over
the devices of a consistent job (``get_variable(..., distribute=flow.distribute.split(0))``,
``blob.with_distribute(flow.distribute.broadcast())``). aioflow keeps every variable whole
on each device and splits the batch only, so a scheme is checked and recorded, and the
values a job computes are the ones OneFlow's would be.
``mirrored_strategy()`` / ``consistent_strategy()`` are OneFlow's deprecated spellings of
``flow.scope.mirrored_view()`` / ``consistent_view()``: values for
``function_config.default_logical_view`` and context managers alike.

>>> import aioflow as flow
>>> flow.distribute.split(1)
flow.distribute.split(axis=1)
>>> flow.distribute.split("1")
Traceback (most recent call last):
...
TypeError: flow.distribute.split: axis must be an int, got '1'
"""
from __future__ import annotations

import warnings

from ._core.callsite import user_stacklevel
from ._core.deprecation import mark_deprecated
from .ir.distribute import (AutoDistribute as AutoDistribute,
                            BroadcastDistribute as BroadcastDistribute,
                            Distribute as Distribute, SplitDistribute as SplitDistribute,
                            assert_is_valid_distribute as assert_is_valid_distribute,
                            auto as auto, broadcast as broadcast, split as split)
from .scope import consistent_view, consistent_view_enabled, mirrored_view, mirrored_view_enabled

__all__ = ["Distribute", "SplitDistribute", "BroadcastDistribute", "AutoDistribute", "split",
           "broadcast", "auto", "assert_is_valid_distribute", "mirrored_strategy",
           "consistent_strategy", "mirrored_strategy_enabled", "consistent_strategy_enabled"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"flow.distribute.{old} is deprecated: use flow.scope.{new}",
                  DeprecationWarning, stacklevel=user_stacklevel())


@mark_deprecated
def mirrored_strategy():
    """Deprecated: ``flow.scope.mirrored_view()``."""
    _deprecated("mirrored_strategy", "mirrored_view")
    return mirrored_view()


@mark_deprecated
def consistent_strategy():
    """Deprecated: ``flow.scope.consistent_view()``."""
    _deprecated("consistent_strategy", "consistent_view")
    return consistent_view()


@mark_deprecated
def mirrored_strategy_enabled() -> bool:
    """Deprecated: ``flow.scope.mirrored_view_enabled()``."""
    _deprecated("mirrored_strategy_enabled", "mirrored_view_enabled")
    return mirrored_view_enabled()


@mark_deprecated
def consistent_strategy_enabled() -> bool:
    """Deprecated: ``flow.scope.consistent_view_enabled()``."""
    _deprecated("consistent_strategy_enabled", "consistent_view_enabled")
    return consistent_view_enabled()
