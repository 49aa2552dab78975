"""``flow.assign`` and ``flow.system.assign``: give a variable a value computed in the job.

The variable takes the value at the end of the step, with the other updates (optimizer
steps): every read of it during the step sees the value from before the step, and the
next step sees the new one.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def count(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     total = flow.get_variable("total", shape=(2,), initializer=flow.zeros_initializer())
...     flow.assign(total, total + x)
...     return total
>>> _ = count(np.ones(2, np.float32)); count(np.ones(2, np.float32)).tolist()
[1.0, 1.0]
>>> flow.get_all_variables()["total"].tolist()
[2.0, 2.0]
"""
from __future__ import annotations

from ..ir import Blob
from ..ops import state as _state
from .ops_api import _require_blob

__all__ = ["assign", "system_assign", "variable_name"]


def variable_name(ref, op_name: str) -> str:
    """The name of the variable ``ref`` reads (a Blob from ``flow.get_variable``)."""
    producer = getattr(ref, "producer", None) if isinstance(ref, Blob) else None
    if producer is None or producer.op.name != "variable":
        raise TypeError(f"{op_name}: ref must be a variable's Blob (from flow.get_variable), "
                        f"got {ref!r}")
    return producer.attrs["var"]


def _assign(ref, value, op_name: str, name=None) -> None:
    variable_name(ref, op_name)
    _require_blob(value, op_name, "value")
    if value.shape != ref.shape or value.dtype is not ref.dtype:
        raise ValueError(f"{op_name}: value ({value.dtype.name}{list(value.shape)}) must "
                         f"match the variable ({ref.dtype.name}{list(ref.shape)})")
    _state.assign(ref, value, name=name)


def assign(ref, value, dtype=None, name=None):
    """Set the variable ``ref`` to ``value`` (same shape and dtype) at the end of the
    step. ``dtype`` is accepted and unused, as in OneFlow. Returns None."""
    _assign(ref, value, "assign", name=name)


def system_assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """``flow.system.assign``: as :func:`assign`, returning ``ref`` (whose value in this
    step is still the old one). ``validate_shape`` and ``use_locking`` are accepted and
    have no effect: shapes are always checked, and steps never overlap."""
    _assign(ref, value, "system.assign", name=name)
    return ref
