"""The payload of a OneRec record: a OneRec ``Example``, a FlatBuffers buffer.

OneFlow's schema (namespace ``onerec.example``, file identifier ``"1REC"``), as its
generated reader ``example_generated.h`` defines it::

    union TensorData { Int8List = 1, Int16List, Int32List, Int64List, Float32List,
                       Float64List, StringList, BinaryList }
    table Int8List { values: [byte]; }       ... one table per numeric type
    table StringList { values: [string]; }
    table Binary { buffer: [byte]; }         table BinaryList { values: [Binary]; }
    table Tensor { shape: [int]; data: TensorData; }
    table Feature { name: string (key, required); tensor: Tensor; }
    table Example { features: [Feature]; }   // sorted by name: OneFlow binary-searches it

Buffers are built and read with the ``flatbuffers`` package's builder and table reader
(no generated code: the schema is small, its field slots are spelled out below), so the
bytes are FlatBuffers' own layout and not a home-made imitation of it.

>>> import numpy as np
>>> from aioflow.data import onerec_example
>>> data = onerec_example.make_example({"label": np.int32(3), "x": np.ones((2, 2), np.float32)})
>>> data[4:8]
b'1REC'
>>> tensors = onerec_example.parse_example(data)
>>> tensors["x"].kind, tensors["x"].shape, tensors["label"].values.tolist()
('Float32List', (2, 2), [3])
"""
from __future__ import annotations

import functools
import struct
import types
from typing import NamedTuple

import numpy as np

__all__ = ["IDENTIFIER", "KINDS", "Tensor", "make_example", "parse_example",
           "ExampleError"]

IDENTIFIER = b"1REC"
# union TensorData: kind name -> (union type id, element dtype; None for strings/binary)
KINDS = {"Int8List": (1, np.dtype("<i1")), "Int16List": (2, np.dtype("<i2")),
         "Int32List": (3, np.dtype("<i4")), "Int64List": (4, np.dtype("<i8")),
         "Float32List": (5, np.dtype("<f4")), "Float64List": (6, np.dtype("<f8")),
         "StringList": (7, None), "BinaryList": (8, None)}
_KIND_OF_ID = {type_id: kind for kind, (type_id, _) in KINDS.items()}
_KIND_OF_DTYPE = {dtype: kind for kind, (_, dtype) in KINDS.items() if dtype is not None}
# vtable slots (field index) of each table
_VALUES = 0                                  # XList.values, Binary.buffer, Example.features
_SHAPE, _DATA_TYPE, _DATA = 0, 1, 2          # Tensor
_NAME, _TENSOR = 0, 1                        # Feature


@functools.lru_cache(maxsize=None)
def _fb() -> types.SimpleNamespace:
    """The parts of the ``flatbuffers`` package used here, imported on first use."""
    try:
        import flatbuffers
        from flatbuffers import encode, number_types
        from flatbuffers.table import Table
    except ImportError as err:
        raise ImportError(f"OneRec files need the flatbuffers package ({err}): "
                          "pip install 'aioflow[onerec]'") from err
    return types.SimpleNamespace(Builder=flatbuffers.Builder, encode=encode, N=number_types,
                                 Table=Table)


class ExampleError(ValueError):
    """A payload that is not a OneRec Example."""


class Tensor(NamedTuple):
    """One feature of an Example: its union kind (``"Float32List"``, ...), its shape,
    and its values (a flat numpy array; a list of str for StringList, of bytes for
    BinaryList)."""
    kind: str
    shape: tuple
    values: object


# -- writing -------------------------------------------------------------------------------
def _tensor_parts(name: str, value) -> tuple[str, tuple, object]:
    """(kind, shape, flat values) for one feature value: numpy arrays and scalars of
    int8/16/32/64 and float32/64 keep their type; Python ints are int32 and Python floats
    float32 (as aioflow's OFRecord writer); a scalar has shape (1,); str / bytes (or lists
    of them) are a StringList / BinaryList of shape (n,)."""
    if isinstance(value, (str, bytes, bytearray)):
        value = [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return "StringList", (len(value),), list(value)
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (bytes, bytearray)) for v in value):
        return "BinaryList", (len(value),), [bytes(v) for v in value]
    array = np.asarray(value)
    if not isinstance(value, (np.ndarray, np.generic)):
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
        elif array.dtype.kind == "i":
            array = array.astype(np.int32)
    kind = _KIND_OF_DTYPE.get(array.dtype.newbyteorder("<"))
    if kind is None:
        raise TypeError(f"OneRec feature {name!r}: OneRec tensors hold int8, int16, int32, "
                        f"int64, float32 or float64 numbers, str or bytes; got {array.dtype} "
                        "(convert it first, e.g. uint8 pixels to int8 or int32)")
    # a scalar is stored as shape (1,): OneFlow's decoder needs at least one axis
    shape = array.shape or (1,)
    return kind, shape, np.ascontiguousarray(array, KINDS[kind][1]).reshape(-1)


def make_example(features: dict) -> bytes:
    """The FlatBuffers bytes of an ``Example`` holding ``features`` (name -> array, number,
    str or bytes; see ``write_onerec`` for the types)."""
    if not isinstance(features, dict) or not features:
        raise TypeError(f"OneRec: an example must be a non-empty dict of features, got "
                        f"{type(features).__name__}")
    for name in features:
        if not isinstance(name, str) or not name:
            raise TypeError(f"OneRec: feature names must be non-empty str, got {name!r}")
    builder = _fb().Builder(256)
    # sorted by name: OneFlow's decoder finds a key by binary search (LookupByKey)
    offsets = [_build_feature(builder, name, features[name]) for name in sorted(features)]
    vector = _offset_vector(builder, offsets)
    builder.StartObject(1)
    builder.PrependUOffsetTRelativeSlot(_VALUES, vector, 0)
    builder.Finish(builder.EndObject(), file_identifier=IDENTIFIER)
    return bytes(builder.Output())


def _build_feature(builder, name: str, value) -> int:
    kind, shape, values = _tensor_parts(name, value)
    data = _build_values(builder, kind, values)
    shape_vector = builder.CreateNumpyVector(np.asarray(shape, "<i4"))
    builder.StartObject(3)
    builder.PrependUOffsetTRelativeSlot(_SHAPE, shape_vector, 0)
    builder.PrependUint8Slot(_DATA_TYPE, KINDS[kind][0], 0)
    builder.PrependUOffsetTRelativeSlot(_DATA, data, 0)
    tensor = builder.EndObject()
    name_offset = builder.CreateString(name)
    builder.StartObject(2)
    builder.PrependUOffsetTRelativeSlot(_NAME, name_offset, 0)
    builder.PrependUOffsetTRelativeSlot(_TENSOR, tensor, 0)
    return builder.EndObject()


def _build_values(builder, kind: str, values) -> int:
    """The list table (``Int32List``, ..., ``BinaryList``) holding ``values``."""
    if kind == "StringList":
        vector = _offset_vector(builder, [builder.CreateString(s) for s in values])
    elif kind == "BinaryList":
        binaries = []
        for blob in values:
            buffer = builder.CreateNumpyVector(np.frombuffer(blob, np.int8))
            builder.StartObject(1)
            builder.PrependUOffsetTRelativeSlot(_VALUES, buffer, 0)
            binaries.append(builder.EndObject())
        vector = _offset_vector(builder, binaries)
    else:
        vector = builder.CreateNumpyVector(values)
    builder.StartObject(1)
    builder.PrependUOffsetTRelativeSlot(_VALUES, vector, 0)
    return builder.EndObject()


def _offset_vector(builder, offsets: list) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):   # FlatBuffers builds back to front
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


# -- reading -------------------------------------------------------------------------------
def parse_example(data: bytes, verify: bool = True) -> dict[str, Tensor]:
    """The features of the Example in ``data``: name -> ``Tensor``. ``verify`` also
    checks the ``"1REC"`` identifier (OneFlow's ``verify_example``). ExampleError for
    anything that is not a well-formed Example: offsets out of the buffer, a missing
    name or tensor, an unknown union type."""
    if verify and (len(data) < 8 or bytes(data[4:8]) != IDENTIFIER):
        raise ExampleError(f"not a OneRec Example: no {IDENTIFIER!r} identifier at bytes 4-8 "
                           f"(found {bytes(data[4:8])!r})")
    try:
        return _parse(data)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError, TypeError,
            OverflowError) as err:   # TypeError: flatbuffers' own check of a number
        if isinstance(err, ExampleError):
            raise
        raise ExampleError(f"not a well-formed OneRec Example ({err})") from None


def _parse(data: bytes) -> dict[str, Tensor]:
    fb = _fb()
    root = fb.Table(data, fb.encode.Get(fb.N.UOffsetTFlags.packer_type, data, 0))
    features = {}
    for feature in _tables(root, _VALUES):
        name = _string(feature, _NAME)
        if name is None:
            raise ExampleError("not a well-formed OneRec Example (a feature has no name)")
        tensor = _table(feature, _TENSOR)
        if tensor is None:
            raise ExampleError(f"not a well-formed OneRec Example (feature {name!r} has no "
                               "tensor)")
        features[name] = _tensor(tensor, name)
    return features


def _tensor(table, name: str) -> Tensor:
    fb = _fb()
    o = table.Offset(4 + 2 * _SHAPE)
    shape = tuple(int(d) for d in table.GetVectorAsNumpy(fb.N.Int32Flags, o)) if o else ()
    type_id = table.GetSlot(4 + 2 * _DATA_TYPE, 0, fb.N.Uint8Flags)
    kind = _KIND_OF_ID.get(type_id)
    o = table.Offset(4 + 2 * _DATA)
    if kind is None or not o:
        raise ExampleError(f"not a well-formed OneRec Example (feature {name!r}: tensor data "
                           f"of union type {type_id}, expected 1 to 8)")
    values_table = fb.Table(table.Bytes, 0)
    table.Union(values_table, o)
    if kind == "StringList":
        values = [s.decode("utf-8") for s in _strings(values_table, _VALUES)]
    elif kind == "BinaryList":
        values = [_bytes(b, _VALUES) for b in _tables(values_table, _VALUES)]
    else:
        o = values_table.Offset(4 + 2 * _VALUES)
        dtype = KINDS[kind][1]
        values = (values_table.GetVectorAsNumpy(_flags(dtype), o) if o
                  else np.zeros(0, dtype))
    return Tensor(kind, shape, values)


def _flags(dtype: np.dtype):
    N = _fb().N  # noqa: N806 - flatbuffers' own short name
    return {"i1": N.Int8Flags, "i2": N.Int16Flags, "i4": N.Int32Flags, "i8": N.Int64Flags,
            "f4": N.Float32Flags, "f8": N.Float64Flags}[dtype.str[1:]]


def _vector_positions(table, slot: int) -> list[int]:
    o = table.Offset(4 + 2 * slot)
    if not o:
        return []
    start = table.Vector(o)
    count = table.VectorLen(o)
    # Checked before the list is built: a hostile length field (up to 2**32 - 1) would
    # otherwise build billions of positions, minutes of work and gigabytes of memory.
    if start + 4 * count > len(table.Bytes):
        raise ExampleError(f"not a well-formed OneRec Example (a vector of {count} offsets "
                           f"runs past the end of its {len(table.Bytes)} bytes)")
    return [start + 4 * i for i in range(count)]


def _tables(table, slot: int) -> list:
    return [_fb().Table(table.Bytes, table.Indirect(p))
            for p in _vector_positions(table, slot)]


def _table(table, slot: int):
    o = table.Offset(4 + 2 * slot)
    return _fb().Table(table.Bytes, table.Indirect(table.Pos + o)) if o else None


def _string(table, slot: int) -> str | None:
    o = table.Offset(4 + 2 * slot)
    return _checked_string(table, table.Pos + o).decode("utf-8") if o else None


def _strings(table, slot: int) -> list[bytes]:
    return [_checked_string(table, p) for p in _vector_positions(table, slot)]


def _checked_string(table, position: int) -> bytes:
    value = table.String(position)
    start = table.Indirect(position)
    if len(value) != struct.unpack_from("<I", table.Bytes, start)[0]:
        raise ExampleError("not a well-formed OneRec Example (a string runs past the end)")
    return value


def _bytes(table, slot: int) -> bytes:
    o = table.Offset(4 + 2 * slot)
    return table.GetVectorAsNumpy(_fb().N.Int8Flags, o).tobytes() if o else b""
