"""aioflow.data.onerec: OneRec files (frames with XXH64 digests around FlatBuffers
Examples) written and read back, checked against the layout OneFlow's reader expects."""
import struct

import numpy as np
import pytest

from aioflow.data import onerec
from aioflow.data.onerec_example import ExampleError, parse_example


def test_frame_layout_matches_onerecs_reader():
    framed = onerec.frame(b"abc")
    head = b"^ONEREC$" + struct.pack("<ii", 0, 3)
    assert framed[:16] == head
    assert len(framed) == 24 + 8 + 8   # header, "abc" padded to 8, payload digest
    assert framed[24:32] == b"abc" + b"\0" * 5
    # XXH64 (seed 0) of "abc" is 0x44BC2CF5AD770999 (xxHash's reference test vector),
    # stored big-endian: OneFlow byte-swaps the little-endian word it reads
    assert framed[-8:] == bytes.fromhex("44bc2cf5ad770999")
    assert len(onerec.frame(b"12345678")) == 24 + 8 + 8   # already aligned: no padding
    # the empty payload: XXH64("") = 0xEF46DB3751D8E999, the other reference vector
    assert onerec.frame(b"")[-8:] == bytes.fromhex("ef46db3751d8e999")


def _hand_built_example() -> bytes:
    """Example{features: [Feature{name: "k", tensor: Tensor{shape: [1, 2],
    data: Int32List{values: [7, -9]}}}]}, laid out byte by byte from FlatBuffers' binary
    format (root offset, file identifier, tables with a signed offset to their vtable,
    vtables of uint16 [vtable size, table size, field offsets], vectors and strings led
    by a uint32 length) and the schema's field order: independent of the writer."""
    buf = bytearray(132)

    def put(fmt, offset, *values):
        struct.pack_into("<" + fmt, buf, offset, *values)
    put("I", 0, 16)                          # root: the Example table at 16
    buf[4:8] = b"1REC"
    put("HHH", 8, 6, 8, 4)                   # Example vtable: features at +4
    put("iI", 16, 16 - 8, 24 - 20)           # Example: features -> vector at 24
    put("II", 24, 1, 40 - 28)                # one Feature, at 40
    put("HHHH", 32, 8, 12, 4, 8)             # Feature vtable: name +4, tensor +8
    put("iII", 40, 40 - 32, 52 - 44, 76 - 48)  # Feature: name at 52, tensor at 76
    put("I", 52, 1)
    buf[56:58] = b"k\0"
    put("HHHHH", 60, 10, 16, 4, 12, 8)       # Tensor vtable: shape +4, data_type +12, data +8
    put("iIIB", 76, 76 - 60, 92 - 80, 112 - 84, 3)   # Tensor: data_type 3 = Int32List
    put("Iii", 92, 2, 1, 2)                  # shape [1, 2]
    put("HHH", 104, 6, 8, 4)                 # Int32List vtable: values +4
    put("iI", 112, 112 - 104, 120 - 116)     # Int32List: values at 120
    put("Iii", 120, 2, 7, -9)
    return bytes(buf)


def test_reader_follows_the_flatbuffers_layout():
    (name, tensor), = parse_example(_hand_built_example()).items()
    assert name == "k" and tensor.kind == "Int32List" and tensor.shape == (1, 2)
    assert tensor.values.tolist() == [7, -9]


def test_every_tensor_type_round_trips(tmp_path):
    record = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
              "f64": np.array([0.1, -2e300]), "i8": np.array([-128, 0, 127], np.int8),
              "i16": np.array([[-30000], [3]], np.int16), "i32": np.int32(-5),
              "i64": np.array([2**40, -1], np.int64), "py_int": 7, "py_float": 0.25,
              "text": ["héllo", ""], "raw": [b"\x00\xff", b"abc"]}
    (path,) = onerec.write_onerec(tmp_path, [record])
    (example,) = list(onerec.read_examples(path))
    kinds = {"f32": "Float32List", "f64": "Float64List", "i8": "Int8List",
             "i16": "Int16List", "i32": "Int32List", "i64": "Int64List",
             "py_int": "Int32List", "py_float": "Float32List"}
    for key, kind in kinds.items():
        written = np.asarray(record[key])
        tensor = example[key]
        assert tensor.kind == kind, key
        assert tensor.shape == (written.shape or (1,)), key   # a scalar has shape (1,)
        np.testing.assert_array_equal(tensor.values, written.reshape(-1), err_msg=key)
    assert example["text"] == ("StringList", (2,), ["héllo", ""])
    assert example["raw"] == ("BinaryList", (2,), [b"\x00\xff", b"abc"])
    payload = next(onerec.read_records(path))
    assert payload[4:8] == b"1REC"
    # features are stored sorted by name: OneFlow's decoder binary-searches them
    assert list(parse_example(payload)) == sorted(record)


def test_files_split_records_in_order(tmp_path):
    paths = onerec.write_onerec(tmp_path, [{"i": np.int64(i)} for i in range(7)],
                                num_files=3, prefix="train-", suffix=".rec")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["train-0.rec", "train-1.rec", "train-2.rec"]
    sizes = [len(list(onerec.read_records(p))) for p in paths]
    assert sum(sizes) == 7 and max(sizes) - min(sizes) <= 1
    values = [e["i"].values[0] for p in paths for e in onerec.read_examples(p)]
    assert values == list(range(7))
    with onerec.OneRecWriter(tmp_path / "one.rec") as writer:
        writer.write({"i": np.int64(9)})
        writer.write(onerec.make_example({"i": np.int64(10)}))
    assert [e["i"].values[0] for e in onerec.read_examples(tmp_path / "one.rec")] == [9, 10]


@pytest.mark.parametrize("where, damage, message", [
    (0, b"X", "magic b'X"),
    (8, b"\x01", "reserved field 1, expected 0"),
    (12, b"\x05", "header checksum"),
    (24, b"\x00\x01", "payload checksum"),
])
def test_broken_frames_name_the_file_and_byte(tmp_path, where, damage, message):
    path = tmp_path / "data.onerec"
    onerec.write_records(path, [{"x": np.arange(3, dtype=np.int32)}] * 2)
    data = bytearray(path.read_bytes())
    second = len(data) // 2
    data[second + where:second + where + len(damage)] = damage
    path.write_bytes(bytes(data))
    records = onerec.read_records(path)
    next(records)   # the first frame is intact
    with pytest.raises(onerec.OneRecFileError,
                       match=f"OneRec file {path}: broken record 1 at byte {second}: {message}"):
        next(records)


def test_truncated_files_and_bad_payloads_are_refused(tmp_path):
    path = tmp_path / "data.onerec"
    onerec.write_records(path, [{"x": b"abcdef"}])
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])
    with pytest.raises(ValueError, match="the file ends after .* \\(truncated\\)"):
        list(onerec.read_records(path))
    path.write_bytes(whole[:10])
    with pytest.raises(ValueError, match="header needs 24 bytes, the file ends after 10"):
        list(onerec.read_records(path))
    # a frame whose digests are right but whose payload is not an Example
    onerec.write_records(path, [b"\x08\x00\x00\x00XXXX" + bytes(8)])
    with pytest.raises(ExampleError, match=f"{path}, record 0: .*no b'1REC' identifier"):
        list(onerec.read_examples(path))
    bad_union = bytearray(_hand_built_example())
    bad_union[88] = 9
    with pytest.raises(ExampleError, match="union type 9, expected 1 to 8"):
        parse_example(bytes(bad_union))
    with pytest.raises(ExampleError, match="not a well-formed OneRec Example"):
        parse_example(_hand_built_example()[:100])
    no_identifier = _hand_built_example()[:4] + b"XXXX" + _hand_built_example()[8:]
    assert parse_example(no_identifier, verify=False)["k"].values.tolist() == [7, -9]


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(TypeError, match="feature 'x': .*got uint8"):
        onerec.make_example({"x": np.zeros(2, np.uint8)})
    with pytest.raises(TypeError, match="non-empty dict"):
        onerec.make_example({})
    with pytest.raises(TypeError, match="a record must be a dict of features"):
        onerec.write_records(tmp_path / "x", [3])
    with pytest.raises(ValueError, match="2 records cannot fill 3 part files"):
        onerec.write_onerec(tmp_path, [{"x": 1}, {"x": 2}], num_files=3)
