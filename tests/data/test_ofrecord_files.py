"""aioflow.data.ofrecord: OneFlow's OFRecord files written and read back."""
import struct

import numpy as np
import pytest

from aioflow.data import ofrecord


def test_every_feature_kind_round_trips(tmp_path):
    records = [{"f32": np.array([1.5, -2.0], np.float32), "f64": np.array([0.1], np.float64),
                "i32": np.arange(3, dtype=np.int32), "i64": np.array([2**40], np.int64),
                "u8": np.array([0, 255], np.uint8), "raw": b"\x00\xff", "text": "héllo",
                "py_float": 0.25, "py_int": 7}]
    (path,) = ofrecord.write_ofrecord(tmp_path, records)
    (data,) = list(ofrecord.read_records(path))
    feature = ofrecord.parse_record(data).feature
    assert feature["f32"].WhichOneof("kind") == "float_list"
    assert list(feature["f32"].float_list.value) == [1.5, -2.0]
    assert list(feature["f64"].double_list.value) == [0.1]
    assert list(feature["i32"].int32_list.value) == [0, 1, 2]
    assert list(feature["i64"].int64_list.value) == [2**40]
    assert list(feature["u8"].int32_list.value) == [0, 255]
    assert list(feature["raw"].bytes_list.value) == [b"\x00\xff"]
    assert feature["text"].bytes_list.value[0].decode() == "héllo"
    assert feature["py_float"].WhichOneof("kind") == "float_list"
    assert feature["py_int"].WhichOneof("kind") == "int32_list"


def test_file_layout_is_int64_length_then_message(tmp_path):
    record = ofrecord.make_record({"x": np.array([3], np.int32)})
    path = tmp_path / "part-0"
    ofrecord.write_records(path, [record, record])
    raw = path.read_bytes()
    body = record.SerializeToString()
    assert raw == (struct.pack("<q", len(body)) + body) * 2
    # the wire format is protobuf's: field 1 (map entry), key "x", Feature.int32_list = 4
    assert body.startswith(b"\x0a") and b"x" in body


def test_part_names_and_split(tmp_path):
    paths = ofrecord.write_ofrecord(tmp_path, [{"i": np.int32(i)} for i in range(7)],
                                    data_part_num=3, part_name_suffix_length=5)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["part-00000", "part-00001", "part-00002"]
    sizes = [len(list(ofrecord.read_records(p))) for p in paths]
    assert sum(sizes) == 7 and max(sizes) - min(sizes) <= 1
    values = [ofrecord.parse_record(r).feature["i"].int32_list.value[0]
              for p in paths for r in ofrecord.read_records(p)]
    assert values == list(range(7))


def test_broken_files_and_bad_values_are_refused(tmp_path):
    path = tmp_path / "part-0"
    ofrecord.write_records(path, [{"x": b"abcdef"}])
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(ValueError, match="broken record 0 at byte 0"):
        list(ofrecord.read_records(path))
    with pytest.raises(TypeError, match="feature 'x'"):
        ofrecord.make_record({"x": np.array(["a"], object)})
    with pytest.raises(TypeError, match="non-empty dict"):
        ofrecord.make_record({})
    with pytest.raises(ValueError, match="cannot fill"):
        ofrecord.write_ofrecord(tmp_path, [{"x": 1}], data_part_num=2)
    with pytest.raises(ValueError, match="pixels must be uint8"):
        ofrecord.encode_image(np.zeros((2, 2), np.float32))
