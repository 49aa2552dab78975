"""Data types: ``flow.float``, ``flow.int32`` ... and their numpy equivalents.

A :class:`DType` is a small immutable handle that compares equal to itself only;
``flow.float is flow.float32``. Use :func:`as_numpy` / :func:`from_numpy` to cross
the boundary.

>>> import aioflow as flow
>>> flow.float is flow.float32
True
>>> flow.dtypes.as_numpy(flow.int32)
dtype('int32')

Two dtypes are not numbers: ``flow.record`` (OneFlow's kOFRecord: what
``flow.data.ofrecord_reader`` yields) and ``flow.tensor_buffer`` (kTensorBuffer: per
element, a host tensor of its own shape, see ``flow.tensor_to_tensor_buffer``). Their
values are numpy object arrays on the host; numeric ops and placeholders refuse them
(:func:`require_numeric`).

>>> flow.tensor_buffer.is_numeric, flow.float.is_numeric
(False, True)
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "DType", "float16", "float32", "float64", "float", "double", "half",
    "int8", "char", "int32", "int64", "uint8", "as_numpy", "from_numpy", "convert",
    "convert_oneflow_dtype_to_numpy_dtype", "record", "tensor_buffer", "require_numeric",
    "from_proto",
]


class DType:
    """One element type of a Blob or a placeholder."""

    __slots__ = ("name", "numpy")

    def __init__(self, name: str, numpy_dtype=None):
        self.name = name
        # A non-numeric dtype (record, tensor_buffer) holds Python objects per element.
        self.numpy = np.dtype(name if numpy_dtype is None else numpy_dtype)

    def __repr__(self) -> str:
        return f"aioflow.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_floating(self) -> bool:
        return self.numpy.kind == "f"

    @property
    def oneflow_proto_dtype(self) -> int:
        """OneFlow's number of this type in its ``DataType`` enum (``kFloat`` is 2;
        ``aioflow.core.common.data_type_pb2`` holds the names)."""
        return _PROTO_NUMBERS[self.name]

    @property
    def is_numeric(self) -> bool:
        """False for ``record`` and ``tensor_buffer``, whose elements are host objects."""
        return self.numpy.kind != "O"


float16 = half = DType("float16")
float32 = float = DType("float32")  # noqa: A001 - OneFlow's public name
float64 = double = DType("float64")
int8 = DType("int8")
# OneFlow's kChar: one signed byte, which numpy (and OneFlow's own numpy bridge) calls int8.
char = int8
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")

# OneFlow's kOFRecord and kTensorBuffer: one OFRecord, or one host tensor of any shape and
# numeric dtype, per element. Not in _BY_NUMPY: numpy's object dtype stands for both.
record = DType("record", object)
tensor_buffer = DType("tensor_buffer", object)

_BY_NUMPY = {d.numpy: d for d in (float16, float32, float64, int8, int32, int64, uint8)}
_NAMED = {d.name: d for d in (*_BY_NUMPY.values(), record, tensor_buffer)}


# OneFlow's DataType numbers (core/common/data_type.proto); int8 is its kInt8 (and kChar).
_PROTO_NUMBERS = {"int8": 4, "float32": 2, "float64": 3, "int32": 5, "int64": 6, "uint8": 7,
                  "record": 8, "float16": 9, "tensor_buffer": 10}


def from_proto(number: int) -> DType:
    """The dtype of OneFlow's ``DataType`` number (``data_type_pb2.kFloat`` -> ``float32``;
    ``kChar`` -> ``int8``, aioflow's one signed byte type)."""
    for name, known in _PROTO_NUMBERS.items():
        if known == number:
            return _NAMED[name]
    if number == 1:
        return int8
    raise ValueError(f"from_proto: no OneFlow data type numbered {number!r}")


def _by_name(name: str) -> DType:
    return _NAMED[name]


def require_numeric(dtype: DType, what: str, arg: str) -> None:
    """TypeError naming ``what`` and its argument ``arg`` unless ``dtype`` is a number type.

    >>> require_numeric(tensor_buffer, "flow.math.add", "x")
    Traceback (most recent call last):
    ...
    TypeError: flow.math.add: x must be a numeric Blob (float, int...), got a tensor_buffer Blob; convert it with flow.tensor_buffer_to_tensor first
    """
    if dtype.is_numeric:
        return
    hint = ("convert it with flow.tensor_buffer_to_tensor first" if dtype is tensor_buffer
            else "decode it with a decoder of flow.data (e.g. OFRecordRawDecoder) first")
    raise TypeError(f"{what}: {arg} must be a numeric Blob (float, int...), got a "
                    f"{dtype.name} Blob; {hint}")


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
    if not isinstance(oneflow_dtype, DType) or not oneflow_dtype.is_numeric:
        raise TypeError("convert_oneflow_dtype_to_numpy_dtype: expected a numeric flow data "
                        f"type such as flow.float32, got {oneflow_dtype!r}")
    return oneflow_dtype.numpy.type
