"""OneFlow's OneRec files: how records are framed, and how to write and read them.

A OneRec file is a sequence of frames, one record each, laid out as OneFlow's reader
(``user/data/onerec_dataset.h``) reads them::

    offset  size  field
    0       8     magic "^ONEREC$"
    8       4     reserved: 0 (int32, little-endian)
    12      4     payload size n (int32, little-endian)
    16      8     XXH64 (seed 0) of bytes 0-15, big-endian (XXH64's canonical form)
    24      n     payload: a OneRec Example, a FlatBuffers buffer (``onerec_example``)
    24+n    p     zeros up to the next multiple of 8 (p = 0..7)
    24+n+p  8     XXH64 (seed 0) of the n payload bytes, big-endian

The frame has fixed-size fields only, so the standard library's ``struct`` writes and
reads it; the checksums come from the ``xxhash`` package (bindings to xxHash's reference
C code), the payload from the ``flatbuffers`` package: ``pip install 'aioflow[onerec]'``.
(One version of OneFlow's Spark writer stored the digests little-endian; OneFlow's C++
reader, which ``flow.data.onerec_reader`` follows, compares them byte-swapped, that is
big-endian, and refuses such files, as aioflow does.)

>>> import numpy as np
>>> from aioflow.data import onerec
>>> paths = onerec.write_onerec("onerec_example", [
...     {"label": np.int32(i), "x": np.full(3, i, np.float32)} for i in range(4)], num_files=2)
>>> [p.rsplit("/", 1)[1] for p in paths]
['part-0.onerec', 'part-1.onerec']
>>> [e["label"].values.tolist() for e in onerec.read_examples(paths[1])]
[[2], [3]]
"""
from __future__ import annotations

import itertools
import os
import struct
from typing import Iterable, Iterator

from .onerec_example import ExampleError, Tensor, make_example, parse_example
from .record_files import RecordFileWriter, consecutive_parts, write_file

__all__ = ["MAGIC", "make_example", "parse_example", "Tensor", "ExampleError",
           "OneRecFileError", "frame", "write_records", "read_records", "read_examples",
           "write_onerec", "OneRecWriter"]

MAGIC = b"^ONEREC$"
_HEAD = struct.Struct("<8sii")      # magic, reserved, payload size
_DIGEST = struct.Struct(">Q")
_HEADER_SIZE = _HEAD.size + _DIGEST.size
_ALIGN = 8
_MAX_PAYLOAD = 2**31 - 1


class OneRecFileError(ValueError):
    """A OneRec file that is not what its framing says: names the file and the byte."""


def _xxh64(data) -> int:
    try:
        import xxhash
    except ImportError as err:
        raise ImportError(f"OneRec files need the xxhash package ({err}): "
                          "pip install 'aioflow[onerec]'") from err
    return xxhash.xxh64_intdigest(data, seed=0)


def _as_payload(record) -> bytes:
    if isinstance(record, dict):
        return make_example(record)
    if isinstance(record, (bytes, bytearray, memoryview)):
        return bytes(record)
    raise TypeError(f"OneRec: a record must be a dict of features or Example bytes, got "
                    f"{type(record).__name__}")


def frame(payload: bytes) -> bytes:
    """One record's frame around ``payload`` (the bytes of an Example)."""
    if len(payload) > _MAX_PAYLOAD:
        raise ValueError(f"OneRec: a payload holds at most {_MAX_PAYLOAD} bytes, got "
                         f"{len(payload)}")
    head = _HEAD.pack(MAGIC, 0, len(payload))
    padding = b"\0" * (-len(payload) % _ALIGN)
    return (head + _DIGEST.pack(_xxh64(head)) + payload + padding
            + _DIGEST.pack(_xxh64(payload)))


def write_records(path, records: Iterable) -> int:
    """Write ``records`` (dicts of features for ``make_example``, or Example bytes) to the
    OneRec file ``path``; returns how many. The file appears whole: written to a
    temporary name, then renamed."""
    return write_file(path, records, _encode)


def _encode(record) -> bytes:
    return frame(_as_payload(record))


def read_records(path) -> Iterator[bytes]:
    """The payloads (Example bytes) of the OneRec file ``path``, in order, each checked
    against its frame's magic, reserved field, size and both XXH64 digests.
    OneRecFileError names the file, the byte offset of the broken frame, and what was
    expected and found."""
    path = os.fspath(path)
    with open(path, "rb") as stream:
        file_size = os.fstat(stream.fileno()).st_size
        for index in itertools.count():
            offset = stream.tell()
            header = stream.read(_HEADER_SIZE)
            if not header:
                return
            yield _read_frame(stream, header, path, offset, index, file_size)


def _read_frame(stream, header: bytes, path: str, offset: int, index: int,
                file_size: int) -> bytes:
    def broken(what: str) -> OneRecFileError:
        return OneRecFileError(f"OneRec file {path}: broken record {index} at byte "
                               f"{offset}: {what}")
    if len(header) < _HEADER_SIZE:
        raise broken(f"the header needs {_HEADER_SIZE} bytes, the file ends after "
                     f"{len(header)} (truncated)")
    magic, reserved, size = _HEAD.unpack_from(header)
    if magic != MAGIC:
        raise broken(f"magic {magic!r}, expected {MAGIC!r} (not a OneRec file, or a "
                     "misaligned frame)")
    if reserved != 0:
        raise broken(f"reserved field {reserved}, expected 0")
    (digest,) = _DIGEST.unpack_from(header, _HEAD.size)
    if digest != _xxh64(header[:_HEAD.size]):
        raise broken(f"header checksum {digest:#018x}, expected "
                     f"{_xxh64(header[:_HEAD.size]):#018x} (corrupt header)")
    if size < 0:
        raise broken(f"payload size {size}, expected 0 or more")
    padded = size + (-size % _ALIGN)
    left = file_size - offset - _HEADER_SIZE
    if padded + _DIGEST.size > left:   # refused before reading: a declared 2 GB allocates nothing
        raise broken(f"a payload of {size} bytes needs {padded + _DIGEST.size} bytes after "
                     f"the header, the file ends after {left} (truncated)")
    body = stream.read(padded + _DIGEST.size)
    if len(body) < padded + _DIGEST.size:
        raise broken(f"a payload of {size} bytes needs {padded + _DIGEST.size} bytes after "
                     f"the header, the file ends after {len(body)} (truncated)")
    payload = body[:size]
    (digest,) = _DIGEST.unpack_from(body, padded)
    if digest != _xxh64(payload):
        raise broken(f"payload checksum {digest:#018x}, expected {_xxh64(payload):#018x} "
                     "(corrupt payload)")
    return payload


def read_examples(path, verify: bool = True) -> Iterator[dict[str, Tensor]]:
    """The examples of the OneRec file ``path``, each a dict name -> ``Tensor`` (kind,
    shape, values); an ExampleError names the file and the record's index."""
    for index, payload in enumerate(read_records(path)):
        try:
            yield parse_example(payload, verify)
        except ExampleError as err:
            raise ExampleError(f"OneRec file {os.fspath(path)}, record {index}: {err}") from None


def write_onerec(data_dir, records: Iterable, num_files: int = 1, prefix: str = "part-",
                 suffix: str = ".onerec") -> list[str]:
    """Write ``records`` into ``num_files`` OneRec files ``<data_dir>/<prefix><i><suffix>``
    of consecutive records (sizes differing by at most one); returns their paths, the
    ``files`` for ``flow.data.onerec_reader``. A record is a dict of feature name ->
    value: numpy arrays (and numpy scalars) of int8, int16, int32, int64, float32 or
    float64 keep their type and shape (a scalar has shape (1,)); Python ints are int32,
    Python floats float32; str / bytes, or lists of them, are a StringList / BinaryList.
    Example bytes (``make_example``) are written as they are."""
    records = list(records)
    parts = consecutive_parts(records, num_files, "write_onerec")
    os.makedirs(os.fspath(data_dir), exist_ok=True)
    paths = [os.path.join(os.fspath(data_dir), f"{prefix}{i}{suffix}")
             for i in range(num_files)]
    for path, part in zip(paths, parts):
        write_records(path, part)
    return paths


class OneRecWriter(RecordFileWriter):
    """Write records one at a time into one OneRec file (a context manager):

    >>> from aioflow.data import onerec
    >>> with onerec.OneRecWriter("writer_example.onerec") as writer:
    ...     writer.write({"ids": [1, 2, 3], "text": "hello"})
    >>> [(e["ids"].values.tolist(), e["text"].values)
    ...  for e in onerec.read_examples("writer_example.onerec")]
    [([1, 2, 3], ['hello'])]
    """

    encode = staticmethod(_encode)
