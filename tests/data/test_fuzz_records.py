"""Record files are untrusted input (issue 28): mutations of valid OFRecord, OneRec and COCO
annotation files, from truncations to giant declared sizes and values of the wrong type.

Each reader answers a broken file with a ValueError (or a subclass) that names the file
and the record, never another exception; a declared size beyond the file allocates
nothing; through a job, the loader thread's error reaches the caller, and nothing hangs.

Bounded for CI: a few dozen examples per fuzzer, no example database, a few seconds each.
"""
from __future__ import annotations

import json
import struct
import tracemalloc
from typing import Tuple

import numpy as np
import pytest
import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aioflow as flow
import aioflow.typing as tp
from aioflow.data import onerec, ofrecord
from aioflow.data.coco_annotations import load_index

FUZZ = settings(max_examples=80, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@st.composite
def mutations(draw, size: int):
    """A list of edits to a file of ``size`` bytes: truncate, overwrite bytes, insert
    bytes, or write a (often huge) little-endian length at some offset."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "overwrite", "insert", "length"]))
        at = draw(st.integers(0, max(size - 1, 0)))
        if kind == "truncate":
            edits.append((kind, at, b""))
        elif kind == "length":
            value = draw(st.one_of(st.integers(-2 ** 63, 2 ** 63 - 1),
                                   st.sampled_from([0, -1, 2 ** 31 - 1, 2 ** 32, 4 << 30])))
            width = draw(st.sampled_from([4, 8]))
            edits.append((kind, at, (value % (1 << (8 * width))).to_bytes(width, "little")))
        else:
            edits.append((kind, at, draw(st.binary(min_size=1, max_size=8))))
    return edits


def _mutated(data: bytes, edits) -> bytes:
    data = bytearray(data)
    for kind, at, payload in edits:
        at = min(at, len(data))
        if kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = payload
        else:
            data[at:at + len(payload)] = payload
    return bytes(data)


def _records_of(read, parse, path) -> list:
    """Every record of ``path``, parsed, as a reader reads them; the errors must name the
    file (and the record or its byte)."""
    out = []
    try:
        for index, data in enumerate(read(path)):
            try:
                out.append(parse(data))
            except ValueError as err:
                raise ValueError(f"{path}, record {index}: {err}") from None
    except ValueError as err:
        assert str(path) in str(err) and "record" in str(err), err
        return None
    return out


def _ofrecord_file(path) -> bytes:
    ofrecord.write_records(path, [
        {"label": np.int32(i), "x": np.arange(4, dtype=np.float32) * i, "name": f"r{i}"}
        for i in range(3)])
    return path.read_bytes()


def _onerec_file(path) -> bytes:
    onerec.write_records(path, [
        {"label": np.int32(i), "x": np.arange(4, dtype=np.float32) * i, "name": f"r{i}",
         "ids": np.arange(i + 1, dtype=np.int64)} for i in range(3)])
    return path.read_bytes()


FORMATS = {   # name: (file name, writer of a valid file, its size, reader, parser)
    "ofrecord": ("part-0", _ofrecord_file, 120, ofrecord.read_records,
                 ofrecord.parse_record),
    "onerec": ("part-0.onerec", _onerec_file, 400, onerec.read_records,
               onerec.parse_example),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
@FUZZ
@given(data=st.data())
def test_mutated_record_files_are_refused_naming_the_record(tmp_path, name, data):
    file_name, write, size, read, parse = FORMATS[name]
    path = tmp_path / file_name
    write(path)
    path.write_bytes(_mutated(path.read_bytes(), data.draw(mutations(size=size))))
    _records_of(read, parse, path)


@FUZZ
@given(payload_edits=mutations(size=200))
def test_mutated_onerec_payloads_behind_valid_frames_are_refused(tmp_path, payload_edits):
    # The frame's checksums would catch most payload damage: here the damage is framed
    # anew, as a writer would write a hostile Example, so the FlatBuffers parser sees it.
    source = tmp_path / "source.onerec"
    _onerec_file(source)
    payloads = [_mutated(p, payload_edits) for p in onerec.read_records(source)]
    path = tmp_path / "part-0.onerec"
    path.write_bytes(b"".join(onerec.frame(p) for p in payloads))
    examples = _records_of(onerec.read_records, onerec.parse_example, path)
    for example in examples or []:
        for tensor in example.values():   # whatever parsed is usable, not a lazy trap
            len(tensor.values)


# ---------------------------------------------------------------- giant declared sizes
def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_a_declared_4gb_ofrecord_allocates_nothing(tmp_path):
    path = tmp_path / "part-0"
    path.write_bytes(struct.pack("<q", 4 << 30) + b"x" * 100)

    def read():
        with pytest.raises(ValueError, match=rf"{path}: broken record 0 at byte 0: a length "
                                             r"of 4294967296 bytes, 100 left"):
            list(ofrecord.read_records(path))
    assert _peak_bytes(read) < 1 << 20


def test_a_declared_2gb_onerec_payload_allocates_nothing(tmp_path):
    path = tmp_path / "part-0.onerec"
    head = struct.pack("<8sii", onerec.MAGIC, 0, 2 ** 31 - 1)   # valid header checksum
    path.write_bytes(head + struct.pack(">Q", onerec._xxh64(head)) + b"x" * 100)

    def read():
        with pytest.raises(onerec.OneRecFileError, match=r"broken record 0 at byte 0: a "
                                                         r"payload of 2147483647 bytes"):
            list(onerec.read_records(path))
    assert _peak_bytes(read) < 1 << 20


def test_a_deeply_nested_ofrecord_message_is_refused(tmp_path):
    # Unknown groups nested 100,000 deep: beyond protobuf's recursion limit.
    nested = b"\x7b" * 100_000 + b"\x7c" * 100_000
    path = tmp_path / "part-0"
    path.write_bytes(struct.pack("<q", len(nested)) + nested)
    (data,) = ofrecord.read_records(path)
    with pytest.raises(ValueError, match="not an OFRecord message"):
        ofrecord.parse_record(data)


# ---------------------------------------------------------------- COCO annotations
def _coco() -> dict:
    return {
        "images": [{"id": 1, "file_name": "a.png", "height": 20, "width": 30},
                   {"id": 2, "file_name": "b.png", "height": 10, "width": 10}],
        "categories": [{"id": 7, "name": "digit"}, {"id": 9, "name": "box"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 7, "bbox": [1, 2, 10, 8], "iscrowd": 0,
             "segmentation": [[1, 2, 11, 2, 11, 10, 1, 10]]},
            {"id": 2, "image_id": 2, "category_id": 9, "bbox": [0, 0, 5, 5], "iscrowd": 0,
             "segmentation": [[0, 0, 5, 0, 5, 5, 0, 5]]}]}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats()
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=12)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


@FUZZ
@given(data=st.data())
def test_coco_files_with_values_of_the_wrong_type_are_refused_naming_the_file(tmp_path, data):
    document = _coco()
    paths = list(_paths(document))[1:]
    for _ in range(data.draw(st.integers(1, 3))):
        where, value = data.draw(st.sampled_from(paths)), data.draw(JSON_VALUES)
        try:
            parent = document
            for key in where[:-1]:
                parent = parent[key]
            parent[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            pass   # an earlier edit replaced a container on the way
    text = json.dumps(document)
    if data.draw(st.booleans()):
        text = text[:data.draw(st.integers(0, len(text)))]
    _check_coco(tmp_path, text.encode())


@pytest.mark.parametrize("text", [
    b"[" * 100_000, b'{"images": ' + b"[" * 100_000, b"\xff\xfe{}", b"", b"null", b"[]",
    b'{"images": [], "annotations": [], "categories": 5}'])
def test_hostile_coco_files_are_refused_naming_the_file(tmp_path, text):
    _check_coco(tmp_path, text)


def _check_coco(tmp_path, body: bytes):
    annotations = tmp_path / "annotations.json"
    annotations.write_bytes(body)
    try:
        index = load_index(str(annotations), str(tmp_path), "flow.data.COCOReader")
    except ValueError as err:
        assert str(annotations) in str(err), err
        return
    for image in index.images:   # what loaded must also decode, as the reader will
        index.bboxes(image), index.labels_of(image), index.segmentation(image)


# ---------------------------------------------------------------- through the loader
def _reader_job(data_dir):
    @flow.global_function(type="predict")
    def read() -> Tuple[tp.Numpy]:
        records = flow.data.ofrecord_reader(data_dir, batch_size=2, data_part_num=1)
        return (flow.data.OFRecordRawDecoder(records, "label", shape=(), dtype=flow.int32),)
    return read


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_the_loader_threads_error_reaches_the_awaiting_caller(tmp_path):
    path = tmp_path / "part-0"
    ofrecord.write_records(path, [{"label": np.int32(i)} for i in range(4)])
    data = path.read_bytes()
    record = len(data) // 4
    # the third record's message damaged (its length field intact): a protobuf error
    damaged = data[:2 * record + 8] + b"\xff" * (record - 8) + data[3 * record:]
    path.write_bytes(damaged)
    read = _reader_job(str(tmp_path))
    assert (await read())[0].tolist() == [0, 1]
    with pytest.raises(ValueError, match=rf"{path}, record 2: not an OFRecord message"):
        with anyio.fail_after(30):
            await read()


@pytest.mark.timeout(30)
def test_a_vector_declaring_four_billion_features_is_refused_at_once(tmp_path):
    # The fuzzer's find: a FlatBuffers vector length set to 2**32 - 1 made the parser
    # build four billion offsets (it hung, and its memory grew without bound).
    payload = bytearray(onerec.make_example({"x": np.arange(3, dtype=np.int32)}))
    root = struct.unpack_from("<I", payload, 0)[0]
    vtable = root - struct.unpack_from("<i", payload, root)[0]
    field = root + struct.unpack_from("<H", payload, vtable + 4)[0]
    vector = field + struct.unpack_from("<I", payload, field)[0]
    payload[vector:vector + 4] = struct.pack("<I", 2 ** 32 - 1)
    path = tmp_path / "part-0.onerec"
    path.write_bytes(onerec.frame(bytes(payload)))

    def read():
        with pytest.raises(onerec.ExampleError, match=rf"{path}, record 0: .*a vector of "
                                                      r"4294967295 offsets runs past the end"):
            list(onerec.read_examples(path))
    assert _peak_bytes(read) < 1 << 20
