"""OneFlow's OFRecord files: what they hold and how to write and read them.

A data set is a folder of part files named ``<prefix><index>`` (``part-0``, ``part-1``,
... or, with ``part_name_suffix_length=5``, ``part-00000``, ...). A part file is a
sequence of records, each an int64 little-endian byte count followed by that many bytes
of a serialized ``oneflow.OFRecord`` protobuf message: a map from feature names to a
``Feature`` holding one of ``bytes_list``, ``float_list``, ``double_list``,
``int32_list`` or ``int64_list`` (OneFlow's ``core/record/record.proto``). The message
types are built here from that schema with the protobuf library.

>>> import numpy as np, os
>>> from aioflow.data import ofrecord
>>> folder = "ofrecord_example"        # a new folder in the current directory
>>> paths = ofrecord.write_ofrecord(folder, [
...     {"label": np.int32(i), "pixels": np.full(4, i, np.float32)} for i in range(6)],
...     data_part_num=2)
>>> [os.path.basename(p) for p in paths]
['part-0', 'part-1']
>>> records = [ofrecord.parse_record(r) for r in ofrecord.read_records(paths[1])]
>>> [list(r.feature["label"].int32_list.value) for r in records]
[[3], [4], [5]]
"""
from __future__ import annotations

import functools
import io
import itertools
import os
import struct
import types
from typing import Iterable, Iterator

import numpy as np

from .record_files import RecordFileWriter, consecutive_parts, write_file

__all__ = ["messages", "make_record", "parse_record", "write_records", "read_records",
           "write_ofrecord", "part_paths", "encode_image", "OFRecordWriter"]

_LENGTH = struct.Struct("<q")
# feature kind -> (field number, element type, packed)
_KINDS = {"bytes_list": (1, "TYPE_BYTES"), "float_list": (2, "TYPE_FLOAT"),
          "double_list": (3, "TYPE_DOUBLE"), "int32_list": (4, "TYPE_INT32"),
          "int64_list": (5, "TYPE_INT64")}


@functools.lru_cache(maxsize=None)
def messages() -> types.SimpleNamespace:
    """The message classes ``OFRecord``, ``Feature``, ``BytesList``, ``FloatList``,
    ``DoubleList``, ``Int32List`` and ``Int64List`` (package ``oneflow``), built from
    OneFlow's record.proto schema in a private descriptor pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    FieldProto = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name="oneflow/core/record/record.proto",
                                                package="oneflow", syntax="proto2")
    for kind, (_, element) in _KINDS.items():
        lst = schema.message_type.add(name=_class_name(kind))
        value = lst.field.add(name="value", number=1, label=FieldProto.LABEL_REPEATED,
                              type=getattr(FieldProto, element))
        if kind != "bytes_list":
            value.options.packed = True
    feature = schema.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for kind, (number, _) in _KINDS.items():
        feature.field.add(name=kind, number=number, label=FieldProto.LABEL_OPTIONAL,
                          type=FieldProto.TYPE_MESSAGE,
                          type_name=f".oneflow.{_class_name(kind)}", oneof_index=0)
    record = schema.message_type.add(name="OFRecord")
    entry = record.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=FieldProto.LABEL_OPTIONAL,
                    type=FieldProto.TYPE_STRING)
    entry.field.add(name="value", number=2, label=FieldProto.LABEL_OPTIONAL,
                    type=FieldProto.TYPE_MESSAGE, type_name=".oneflow.Feature")
    record.field.add(name="feature", number=1, label=FieldProto.LABEL_REPEATED,
                     type=FieldProto.TYPE_MESSAGE, type_name=".oneflow.OFRecord.FeatureEntry")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    names = ["OFRecord", "Feature"] + [_class_name(k) for k in _KINDS]
    return types.SimpleNamespace(**{
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"oneflow.{name}"))
        for name in names})


def _class_name(kind: str) -> str:   # "int32_list" -> "Int32List"
    return "".join(part.capitalize() for part in kind.split("_"))


def _feature_kind(value) -> tuple[str, list]:
    """The Feature kind and values OneFlow's decoders expect for ``value``: bytes and str
    as one bytes value; float32 -> float_list, float64 -> double_list, int64 ->
    int64_list, other integers and bools -> int32_list (Python floats and ints as float32
    and int32 values)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes_list", [bytes(value)]
    if isinstance(value, str):
        return "bytes_list", [value.encode("utf-8")]
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (bytes, bytearray)) for v in value):
        return "bytes_list", [bytes(v) for v in value]
    array = np.asarray(value)
    if array.dtype == np.float64 and not isinstance(value, np.ndarray | np.generic):
        array = array.astype(np.float32)
    if array.dtype == np.int64 and not isinstance(value, np.ndarray | np.generic):
        array = array.astype(np.int32)
    kinds = {"f": {4: "float_list", 8: "double_list", 2: "float_list"}}
    if array.dtype.kind == "f":
        return kinds["f"][array.dtype.itemsize], array.reshape(-1).tolist()
    if array.dtype.kind in "iub":
        kind = "int64_list" if array.dtype in (np.int64, np.uint32, np.uint64) else "int32_list"
        return kind, array.reshape(-1).astype(np.int64).tolist()
    raise TypeError(f"OFRecord feature: expected bytes, str or numbers, got "
                    f"{type(value).__name__} of dtype {array.dtype}")


def make_record(features: dict):
    """An ``OFRecord`` message of ``features`` (name -> bytes, str, number or array; see
    ``write_ofrecord`` for the kinds)."""
    if not isinstance(features, dict) or not features:
        raise TypeError(f"OFRecord: a record must be a non-empty dict of features, got "
                        f"{type(features).__name__}")
    record = messages().OFRecord()
    for name, value in features.items():
        if not isinstance(name, str):
            raise TypeError(f"OFRecord: feature names must be str, got {name!r}")
        try:
            kind, values = _feature_kind(value)
        except TypeError as err:
            raise TypeError(f"OFRecord feature {name!r}: {err}") from None
        getattr(record.feature[name], kind).value.extend(values)
    return record


def parse_record(data: bytes):
    """The ``OFRecord`` message serialized in ``data``; ValueError if it is not one."""
    from google.protobuf.message import DecodeError
    record = messages().OFRecord()
    try:
        record.ParseFromString(data)
    except (DecodeError, RecursionError) as err:   # nesting beyond protobuf's limit
        raise ValueError(f"not an OFRecord message ({err or type(err).__name__})") from None
    return record


def write_records(path, records: Iterable) -> int:
    """Write ``records`` (OFRecord messages, or dicts for ``make_record``) to one part file;
    returns how many. The file appears whole: written to a temporary name, then renamed."""
    return write_file(path, records, _encode)


def _encode(record) -> bytes:
    """One record as a part file holds it: int64 byte count, then the message."""
    if isinstance(record, dict):
        record = make_record(record)
    data = record.SerializeToString()
    return _LENGTH.pack(len(data)) + data


def read_records(path) -> Iterator[bytes]:
    """The serialized records of one part file, in order. ValueError naming the file, the
    record and its offset for a truncated file or an impossible length. A length beyond
    the rest of the file is refused before anything is read: a record that declares 4 GB
    allocates nothing."""
    path = os.fspath(path)
    with open(path, "rb") as stream:
        file_size = os.fstat(stream.fileno()).st_size
        for index in itertools.count():
            offset = stream.tell()
            head = stream.read(_LENGTH.size)
            if not head:
                return
            (size,) = _LENGTH.unpack(head) if len(head) == _LENGTH.size else (-1,)
            left = file_size - offset - len(head)
            if size <= 0 or size > left:
                found = (f"a length of {size} bytes, {left} left in the file" if size > 0
                         else "no valid length")
                raise ValueError(f"OFRecord file {path}: broken record {index} at byte "
                                 f"{offset}: {found} (truncated, or not an OFRecord file)")
            data = stream.read(size)
            if len(data) != size:   # the file shrank while being read
                raise ValueError(f"OFRecord file {path}: broken record {index} at byte "
                                 f"{offset}: truncated while reading")
            yield data


def part_paths(data_dir, data_part_num: int = 1, part_name_prefix: str = "part-",
               part_name_suffix_length: int = -1) -> list[str]:
    """The part file names OneFlow's readers open: ``<data_dir>/<prefix><index>``, the index
    zero-padded to ``part_name_suffix_length`` digits (-1: no padding)."""
    if isinstance(data_part_num, bool) or not isinstance(data_part_num, int) or data_part_num < 1:
        raise ValueError(f"data_part_num must be a positive int, got {data_part_num!r}")
    if not isinstance(part_name_suffix_length, int) or isinstance(part_name_suffix_length, bool):
        raise TypeError(f"part_name_suffix_length must be an int, got "
                        f"{part_name_suffix_length!r}")
    width = max(part_name_suffix_length, 0)
    return [os.path.join(os.fspath(data_dir), f"{part_name_prefix}{str(i).zfill(width)}")
            for i in range(data_part_num)]


def write_ofrecord(data_dir, records: Iterable, data_part_num: int = 1,
                   part_name_prefix: str = "part-", part_name_suffix_length: int = -1
                   ) -> list[str]:
    """Write a data set that ``flow.data.ofrecord_reader(data_dir, data_part_num=...,
    part_name_prefix=..., part_name_suffix_length=...)`` reads: ``records`` (dicts of
    feature name -> value, or OFRecord messages) split into ``data_part_num`` part files
    of consecutive records (sizes differing by at most one). Values: bytes or str (one
    bytes value: encoded images, text), float32 arrays or Python floats (float_list),
    float64 arrays (double_list), int64 arrays (int64_list), other integer arrays,
    bools and Python ints (int32_list). Returns the part files' paths."""
    records = list(records)
    paths = part_paths(data_dir, data_part_num, part_name_prefix, part_name_suffix_length)
    parts = consecutive_parts(records, data_part_num, "write_ofrecord")
    os.makedirs(os.fspath(data_dir), exist_ok=True)
    for path, part in zip(paths, parts):
        write_records(path, part)
    return paths


class OFRecordWriter(RecordFileWriter):
    """Write records one at a time into one part file (a context manager):

    >>> from aioflow.data import ofrecord
    >>> path = "writer_example-part-0"
    >>> with ofrecord.OFRecordWriter(path) as writer:
    ...     writer.write({"text": "hello", "ids": [1, 2, 3]})
    >>> [list(ofrecord.parse_record(r).feature["ids"].int32_list.value)
    ...  for r in ofrecord.read_records(path)]
    [[1, 2, 3]]
    """

    encode = staticmethod(_encode)


def encode_image(pixels, format: str = "PNG") -> bytes:  # noqa: A002 - Pillow's word
    """``pixels`` (uint8, ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` in RGB order) encoded by
    Pillow as ``format`` (PNG is lossless, JPEG is not): the bytes to store as an image
    feature for ``flow.data.OFRecordImageDecoder``."""
    from PIL import Image
    pixels = np.asarray(pixels)
    if pixels.dtype != np.uint8 or pixels.ndim not in (2, 3) or (
            pixels.ndim == 3 and pixels.shape[2] not in (1, 3)):
        raise ValueError("encode_image: pixels must be uint8 (H, W), (H, W, 1) or (H, W, 3), "
                         f"got {pixels.dtype} {pixels.shape}")
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=format)
    return buffer.getvalue()
