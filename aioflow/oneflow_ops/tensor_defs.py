"""OneFlow's older spellings of the placeholders of job functions, re-exported as
``flow.FixedTensorDef``, ``flow.MirroredTensorDef`` and ``flow.MirroredTensorListDef``:
``flow.typing``'s ``Numpy``, ``ListNumpy`` and ``ListListNumpy.Placeholder``.
"""
from __future__ import annotations

from .._core.dtypes import float32
from ..engine.annotations import ListListNumpy, ListNumpy, Numpy

__all__ = ["FixedTensorDef", "MirroredTensorDef", "MirroredTensorListDef"]


def FixedTensorDef(shape, dtype=float32, batch_axis=0):  # noqa: N802 - OneFlow's name
    """Old API: ``def job(images=flow.FixedTensorDef((100, 784)))``."""
    return Numpy.Placeholder(shape, dtype=dtype, batch_axis=batch_axis)


def MirroredTensorDef(shape, dtype=float32, batch_axis=0):  # noqa: N802
    """Old API: a mirrored (per-device list) placeholder."""
    return ListNumpy.Placeholder(shape, dtype=dtype, batch_axis=batch_axis)


def MirroredTensorListDef(shape, dtype=float32, batch_axis=0):  # noqa: N802
    """Old API: a mirrored placeholder of tensor lists (per device, a list of arrays)."""
    return ListListNumpy.Placeholder(shape, dtype=dtype, batch_axis=batch_axis)
