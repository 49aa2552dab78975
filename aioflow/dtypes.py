"""Data types: ``flow.float``, ``flow.int32`` ... and their numpy equivalents.

A :class:`DType` is a small immutable handle that compares equal to itself only;
``flow.float is flow.float32``. Use :func:`as_numpy` / :func:`from_numpy` to cross
the boundary.

>>> import aioflow as flow
>>> flow.float is flow.float32
True
>>> flow.dtypes.as_numpy(flow.int32)
dtype('int32')
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "DType", "float16", "float32", "float64", "float", "double", "half",
    "int8", "char", "int32", "int64", "uint8", "as_numpy", "from_numpy", "convert",
    "convert_oneflow_dtype_to_numpy_dtype",
]


class DType:
    """One element type of a Blob or a placeholder."""

    __slots__ = ("name", "numpy")

    def __init__(self, name: str):
        self.name = name
        self.numpy = np.dtype(name)

    def __repr__(self) -> str:
        return f"aioflow.{self.name}"

    def __reduce__(self):
        return (from_numpy, (self.numpy,))

    @property
    def is_floating(self) -> bool:
        return self.numpy.kind == "f"


float16 = half = DType("float16")
float32 = float = DType("float32")  # noqa: A001 - OneFlow's public name
float64 = double = DType("float64")
int8 = DType("int8")
# OneFlow's kChar: one signed byte, which numpy (and OneFlow's own numpy bridge) calls int8.
char = int8
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")

_BY_NUMPY = {d.numpy: d for d in (float16, float32, float64, int8, int32, int64, uint8)}


def from_numpy(dtype) -> DType:
    """The aioflow dtype for a numpy dtype (or anything ``np.dtype`` accepts)."""
    if isinstance(dtype, DType):
        return dtype
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(
            f"unsupported data type {dtype!r}; aioflow supports "
            + ", ".join(d.name for d in _BY_NUMPY.values())
        ) from None


def as_numpy(dtype) -> np.dtype:
    """The numpy dtype for an aioflow dtype (numpy dtypes pass through)."""
    return from_numpy(dtype).numpy


def convert(dtype) -> DType:
    """Accept ``flow.float``, ``np.float32`` or ``"float32"`` alike."""
    return from_numpy(dtype)


def convert_oneflow_dtype_to_numpy_dtype(oneflow_dtype) -> type:
    """OneFlow's ``flow.convert_oneflow_dtype_to_numpy_dtype``: the numpy scalar type of a
    data type (``flow.float32`` -> ``numpy.float32``).

    >>> convert_oneflow_dtype_to_numpy_dtype(float32) is np.float32
    True
    """
    if not isinstance(oneflow_dtype, DType):
        raise TypeError("convert_oneflow_dtype_to_numpy_dtype: expected a flow data type "
                        f"such as flow.float32, got {oneflow_dtype!r}")
    return oneflow_dtype.numpy.type
