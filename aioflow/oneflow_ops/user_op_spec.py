"""What an entry of :data:`aioflow.oneflow_ops.user_op_table.USER_OPS` says about one
OneFlow op type: its input, output and attribute names and the function that builds it
from aioflow's ops. The table and the system ops of :mod:`.user_op_system` both use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["UserOpSpec", "REQUIRED"]

# Marks an attribute without a default: the builder must set it.
REQUIRED = object()


@dataclass(frozen=True)
class UserOpSpec:
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    build: Callable
    attrs: dict = field(default_factory=dict)
    # Inputs that take a list of any length (add_n, concat); the others take one Blob.
    list_inputs: tuple[str, ...] = ()
