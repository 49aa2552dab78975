"""OneFlow v0.3.4's ``flow.experimental.get_interface_blob_value`` and
``set_interface_blob_value``: a variable's value read or written by its op name, after
the steps in flight completed (OneFlow's "interface ops" are a job's variables, inputs
and outputs; the variables are the ones a program can read or set between steps).
Awaitable from async code, as the other variable calls.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return x * flow.get_variable("scale", shape=(2,),
...                                  initializer=flow.constant_initializer(3.0))
>>> flow.experimental.get_interface_blob_value("scale").tolist()
[3.0, 3.0]
>>> flow.experimental.set_interface_blob_value("scale", np.array([1.0, 2.0], np.float32))
>>> job(np.ones(2, np.float32)).tolist()
[1.0, 2.0]
>>> flow.clear_default_session()
"""
from __future__ import annotations

import numpy as np

from . import _checked_value, _ready_session
from .thread import checkpoint_entry

__all__ = ["get_interface_blob_value", "set_interface_blob_value"]


def _record(session, op_name, what: str):
    if not isinstance(op_name, str):
        raise TypeError(f"{what}: op_name must be a str, got {type(op_name).__name__}")
    record = session.variables.get(op_name)
    if record is None:
        names = sorted(session.variables)
        known = ", ".join(names[:8]) or "none yet"
        raise KeyError(f"{what}: no variable named {op_name!r} (interface blobs here are the "
                       f"variables: {known}{', ...' if len(names) > 8 else ''})")
    return record


@checkpoint_entry
def get_interface_blob_value(op_name: str) -> np.ndarray:
    """A copy of the variable ``op_name``'s value once the steps in flight completed."""
    session = _ready_session()
    with session.lock:
        return _record(session, op_name, "flow.experimental.get_interface_blob_value"
                       ).host_value()


@checkpoint_entry
def set_interface_blob_value(op_name: str, ndarray) -> None:
    """Set the variable ``op_name`` to ``ndarray`` (its shape; float64 converts to float32)
    once the steps in flight completed; the next step sees it."""
    what = "flow.experimental.set_interface_blob_value"
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"{what}: ndarray must be a numpy.ndarray, got "
                        f"{type(ndarray).__name__}")
    session = _ready_session()
    with session.lock:
        record = _record(session, op_name, what)
        record.assign_host(_checked_value(record, ndarray))
