"""``flow.experimental``'s array ops of OneFlow v0.3.4 that lazy-mode programs use:
``square_sum``, ``logical_slice`` and ``logical_slice_assign``.

In OneFlow the "logical" slices address a consistent blob as a whole, whichever devices
hold its parts; a job here holds every blob whole, so they are ``slice_v2`` and an
assignment of ``slice_update`` to the variable.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def norm2(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
...     return flow.experimental.square_sum(x)
>>> norm2(np.array([[1, 2], [3, 4]], np.float32)).tolist()
[30.0]
>>> flow.clear_default_session()
"""
from __future__ import annotations

from .assign_api import _assign
from .math_api import reduce_sum, square
from .ops_api import _require_blob, reshape
from .scatter_api import slice_update, slice_v2

__all__ = ["square_sum", "logical_slice", "logical_slice_assign"]


def square_sum(x, name=None):
    """The sum of the squares of every element of ``x``, as OneFlow's ``square_sum`` op:
    shape ``(1,)``, ``x``'s dtype."""
    _require_blob(x, "experimental.square_sum", "x")
    return reshape(reduce_sum(square(x)), (1,), name=name)


def logical_slice(x, slice_tup_list, name=None):
    """``x`` sliced by one ``(start, stop, step)`` per axis (as ``flow.slice_v2``)."""
    _require_blob(x, "experimental.logical_slice", "x")
    return slice_v2(x, slice_tup_list, name=name)


def logical_slice_assign(x, value, slice_tup_list, name=None):
    """Set the slice ``slice_tup_list`` of the variable ``x`` to ``value`` at the end of
    the step (the rest of ``x`` unchanged). Returns None, as OneFlow's op has no output."""
    _require_blob(x, "experimental.logical_slice_assign", "x")
    _require_blob(value, "experimental.logical_slice_assign", "value")
    _assign(x, slice_update(x, value, slice_tup_list), "experimental.logical_slice_assign",
            name=name)
