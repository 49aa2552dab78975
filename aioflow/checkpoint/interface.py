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

from ..runtime.results import blocking_entry
from . import get_all_variables, load_variables

__all__ = ["get_interface_blob_value", "set_interface_blob_value"]


def _known(op_name, what: str, names) -> None:
    if not isinstance(op_name, str):
        raise TypeError(f"{what}: op_name must be a str, got {type(op_name).__name__}")
    if op_name not in names:
        known = ", ".join(sorted(names)[:8]) or "none yet"
        raise KeyError(f"{what}: no variable named {op_name!r} (interface blobs here are the "
                       f"variables: {known}{', ...' if len(names) > 8 else ''})")


@blocking_entry
def get_interface_blob_value(op_name: str) -> np.ndarray:
    """A copy of the variable ``op_name``'s value once the steps in flight completed."""
    values = get_all_variables.__wrapped__()
    _known(op_name, "flow.experimental.get_interface_blob_value", values)
    return values[op_name]


@blocking_entry
def set_interface_blob_value(op_name: str, ndarray) -> None:
    """Set the variable ``op_name`` to ``ndarray`` (its shape; float64 converts to float32)
    once the steps in flight completed; the next step sees it."""
    _known(op_name, "flow.experimental.set_interface_blob_value",
           get_all_variables.__wrapped__())
    if not isinstance(ndarray, np.ndarray):
        raise TypeError("flow.experimental.set_interface_blob_value: ndarray must be a "
                        f"numpy.ndarray, got {type(ndarray).__name__}")
    load_variables.__wrapped__({op_name: ndarray}, ignore_mismatch=False)
