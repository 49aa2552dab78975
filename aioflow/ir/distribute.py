"""How a blob or variable is laid out over devices: OneFlow's distribute schemes
(``flow.distribute.split(axis)``, ``broadcast()``, ``auto()``), re-exported by
:mod:`aioflow.distribute`.

>>> split(1)
flow.distribute.split(axis=1)
"""
from __future__ import annotations

__all__ = ["Distribute", "SplitDistribute", "BroadcastDistribute", "AutoDistribute", "split",
           "broadcast", "auto", "assert_is_valid_distribute"]


class Distribute:
    """A distribute scheme (OneFlow's ``oneflow_api.distribute.Distribute``)."""

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((type(self), tuple(vars(self).items())))


class SplitDistribute(Distribute):
    def __init__(self, axis: int):
        self.axis = axis

    def __repr__(self) -> str:
        return f"flow.distribute.split(axis={self.axis})"


class BroadcastDistribute(Distribute):
    def __repr__(self) -> str:
        return "flow.distribute.broadcast()"


class AutoDistribute(Distribute):
    def __repr__(self) -> str:
        return "flow.distribute.auto()"


def split(axis: int) -> SplitDistribute:
    """Split along ``axis`` (an int, as OneFlow asserted)."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"flow.distribute.split: axis must be an int, got {axis!r}")
    return SplitDistribute(axis)


def broadcast() -> BroadcastDistribute:
    """Every device holds the whole value."""
    return BroadcastDistribute()


def auto() -> AutoDistribute:
    """Let the compiler choose (aioflow: whole values, the batch split)."""
    return AutoDistribute()


def assert_is_valid_distribute(distribute, what: str = "distribute") -> None:
    """``TypeError`` unless ``distribute`` came from split, broadcast or auto."""
    if not isinstance(distribute, Distribute):
        raise TypeError(f"{what}: expected flow.distribute.split(axis), broadcast() or "
                        f"auto(), got {distribute!r}")
