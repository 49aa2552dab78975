"""Tests for aioflow.checkpoint.io: OneFlow's checkpoint directory format."""
from __future__ import annotations

import doctest
import hashlib
import os

import numpy as np
import pytest

from aioflow.checkpoint import io as checkpoint_io
from aioflow.checkpoint.io import (
    CheckpointError,
    CheckpointExistsError,
    CheckpointNotFoundError,
    CheckpointWarning,
    format_meta,
    parse_meta,
    read_arrays,
    save_arrays,
    write_meta,
)


def _arrays():
    rng = np.random.default_rng(0)
    return {
        "conv1-weight": rng.standard_normal((4, 1, 3, 3)).astype(np.float32),
        "conv1-bias": rng.standard_normal(4).astype(np.float32),
        "dense.f64": rng.standard_normal((2, 3)),
        "half": rng.standard_normal((5,)).astype(np.float16),
        "i8": np.array([-128, 0, 127], np.int8),
        "i32": np.arange(12, dtype=np.int32).reshape(3, 4),
        "u8": np.array([[0, 255]], np.uint8),
        "System-Train-TrainStep-train_job": np.array(7, np.int64),  # scalar
        "empty": np.zeros((0, 3), np.float32),
    }


def _leftovers(parent) -> list[str]:
    return [e for e in os.listdir(parent) if e.startswith(".")]


def _hand_write(root, name, raw: bytes, meta: str | None = None):
    vdir = os.path.join(root, name)
    os.makedirs(vdir)
    with open(os.path.join(vdir, "out"), "wb") as f:
        f.write(raw)
    if meta is not None:
        with open(os.path.join(vdir, "meta"), "w") as f:
            f.write(meta)


def _done(root):
    open(os.path.join(root, "snapshot_done"), "w").close()


# --------------------------------------------------------------------- round trip
def test_round_trip_dtypes_and_shapes(tmp_path):
    arrays = _arrays()
    path = tmp_path / "ckpt"
    save_arrays(path, arrays)
    back = read_arrays(path)
    assert sorted(back) == sorted(arrays)
    for name, arr in arrays.items():
        assert back[name].dtype == arr.dtype, name
        assert back[name].shape == arr.shape, name
        np.testing.assert_array_equal(back[name], arr)
    assert back["System-Train-TrainStep-train_job"].shape == ()
    assert _leftovers(tmp_path) == []


def test_round_trip_with_expected_and_str_path(tmp_path):
    arrays = _arrays()
    path = str(tmp_path / "ckpt")
    save_arrays(path, arrays)
    expected = {n: (a.shape, a.dtype) for n, a in arrays.items()}
    back = read_arrays(path, expected)
    assert list(back) == list(expected)
    for name in arrays:
        np.testing.assert_array_equal(back[name], arrays[name])


def test_big_endian_and_non_contiguous_inputs(tmp_path):
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    arrays = {"be": base.astype(">f4"), "t": base.T, "strided": np.arange(20, dtype=np.int64)[::3]}
    save_arrays(tmp_path / "c", arrays)
    with open(tmp_path / "c" / "be" / "out", "rb") as f:
        assert f.read() == base.astype("<f4").tobytes()
    with open(tmp_path / "c" / "t" / "out", "rb") as f:
        assert f.read() == np.ascontiguousarray(base.T).astype("<f4").tobytes()
    back = read_arrays(tmp_path / "c")
    assert back["be"].dtype == np.dtype(np.float32) and back["be"].dtype.isnative
    np.testing.assert_array_equal(back["be"], base)
    np.testing.assert_array_equal(back["t"], base.T)
    np.testing.assert_array_equal(back["strided"], np.arange(20)[::3])


def test_returned_arrays_are_fresh_writable_native(tmp_path):
    save_arrays(tmp_path / "c", {"w": np.ones((2, 2), np.float32), "s": np.float64(2.5)})
    back = read_arrays(tmp_path / "c")
    for arr in back.values():
        assert arr.flags.writeable and arr.flags.owndata and arr.dtype.isnative
    back["w"][...] = 5
    assert read_arrays(tmp_path / "c")["w"].tolist() == [[1, 1], [1, 1]]
    assert back["s"].shape == () and back["s"][()] == 2.5


def test_unsupported_dtype_refused_before_writing(tmp_path):
    with pytest.raises(CheckpointError, match=r"'flag'.*bool"):
        save_arrays(tmp_path / "c", {"ok": np.zeros(2, np.float32), "flag": np.array([True])})
    assert not (tmp_path / "c").exists() and _leftovers(tmp_path) == []


# ----------------------------------------------------------------------- layout
def test_exact_on_disk_layout(tmp_path):
    w = np.random.default_rng(1).standard_normal((10, 512)).astype(np.float32)
    path = tmp_path / "lenet"
    save_arrays(path, {"dense1-weight": w, "step": np.array(3, np.int64)})
    assert sorted(os.listdir(path)) == ["dense1-weight", "snapshot_done", "step"]
    assert sorted(os.listdir(path / "dense1-weight")) == ["meta", "out", "sha256sum"]
    assert os.path.getsize(path / "snapshot_done") == 0
    # aioflow's addition: sha256sum's own format, so `sha256sum -c` checks it too.
    sums = (path / "dense1-weight" / "sha256sum").read_text().splitlines()
    assert sums == [hashlib.sha256(w.astype("<f4").tobytes()).hexdigest() + "  out",
                    hashlib.sha256((path / "dense1-weight" / "meta").read_bytes()).hexdigest()
                    + "  meta"]
    with open(path / "dense1-weight" / "out", "rb") as f:
        assert f.read() == w.astype("<f4").tobytes()
    # Exactly what protobuf's text_format.MessageToString printed for VariableMetaInfo.
    with open(path / "dense1-weight" / "meta") as f:
        assert f.read() == "shape {\n  dim: 10\n  dim: 512\n}\ndata_type: kFloat\n"
    with open(path / "step" / "meta") as f:
        assert f.read() == "shape {\n}\ndata_type: kInt64\n"
    with open(path / "step" / "out", "rb") as f:
        assert f.read() == np.int64(3).astype("<i8").tobytes()


def test_saved_directory_has_normal_permissions(tmp_path):
    os.mkdir(tmp_path / "reference")
    save_arrays(tmp_path / "c", {"w": np.zeros(1, np.float32)})
    mode = os.stat(tmp_path / "c").st_mode & 0o777
    assert mode == os.stat(tmp_path / "reference").st_mode & 0o777


def test_parent_directories_are_created(tmp_path):
    save_arrays(tmp_path / "a" / "b" / "c", {"w": np.zeros(1, np.float32)})
    assert (tmp_path / "a" / "b" / "c" / "snapshot_done").is_file()


@pytest.mark.parametrize(
    "dtype, enum",
    [(np.float32, "kFloat"), (np.float64, "kDouble"), (np.int8, "kInt8"), (np.int32, "kInt32"),
     (np.int64, "kInt64"), (np.uint8, "kUInt8"), (np.float16, "kFloat16")],
)
def test_meta_enum_names(dtype, enum):
    text = format_meta((2, 3), dtype)
    assert text == f"shape {{\n  dim: 2\n  dim: 3\n}}\ndata_type: {enum}\n"
    assert parse_meta(text) == ((2, 3), np.dtype(dtype))


def test_write_meta_round_trip(tmp_path):
    write_meta(tmp_path / "meta", (), np.float64)
    assert parse_meta((tmp_path / "meta").read_text()) == ((), np.dtype(np.float64))
    write_meta(tmp_path / "meta", [7], "uint8")  # overwrites
    assert parse_meta((tmp_path / "meta").read_text()) == ((7,), np.dtype(np.uint8))


@pytest.mark.parametrize(
    "text, want",
    [
        ("shape { dim: 10 dim: 512 } data_type: kFloat", ((10, 512), np.float32)),
        ("shape: { dim: 1 }\ndata_type: 3\n", ((1,), np.float64)),  # numeric enum
        ("data_type: kInt32", ((), np.int32)),  # empty shape omitted by protobuf
        ("shape {}\ndata_type: kChar", ((), np.int8)),
        ("# comment\nshape < dim: [2, 3] >, data_type: kUInt8;", ((2, 3), np.uint8)),
        ("shape { dim: 2 dim: 3 }\nstride { dim: 3 dim: 1 }\ndata_type: kFloat16",
         ((2, 3), np.float16)),
    ],
)
def test_parse_meta_variants(text, want):
    shape, dtype = parse_meta(text)
    assert shape == want[0] and dtype == np.dtype(want[1])


@pytest.mark.parametrize(
    "text, match",
    [
        ("shape { dim: 2 }", "no data_type"),
        ("shape { dim: 2 } data_type: kFoo", "unknown data type 'kFoo'"),
        ("data_type: 99", "unknown data type 99"),
        ("data_type: kBool", "unsupported data type kBool"),
        ("data_type: kOFRecord", "unsupported data type kOFRecord"),
        ("shape { dim: -1 } data_type: kFloat", "negative"),
        ("shape { dim: 2 } data_type: kFloat data_type: kFloat", "twice"),
        ("shape { size: 2 } data_type: kFloat", "unknown field 'size'"),
        ("dims { dim: 2 } data_type: kFloat", "unknown field 'dims'"),
        ("shape { dim: 2 data_type: kFloat", "missing"),
        ("shape { dim: x } data_type: kFloat", "integer"),
        ("shape: [1, 2] data_type: kFloat", "must be a message"),
        ("shape { dim: 1 } data_type: [kFloat]", "enum value"),
        ("shape { dim: 2 } data_type kFloat", "expected ':'"),
        ("shape { dim: 2 } data_type: \"kFloat\"", "unexpected"),
    ],
)
def test_parse_meta_errors(text, match):
    with pytest.raises(CheckpointError, match=match):
        parse_meta(text)


# ------------------------------------------------------- hand-built OneFlow dirs
def test_hand_built_oneflow_v03_layout_with_meta(tmp_path):
    root = tmp_path / "of03"
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    _hand_write(root, "dense1-weight", w.astype("<f4").tobytes(),
                "shape {\n  dim: 2\n  dim: 3\n}\ndata_type: kFloat\n")
    _hand_write(root, "dense1-bias", np.array([1, 2], "<f4").tobytes(),
                "shape { dim: 2 } data_type: kFloat")
    _hand_write(root, "System-Train-TrainStep-train_job", np.array([5], "<i8").tobytes(),
                "shape {\n  dim: 1\n}\ndata_type: kInt64\n")
    os.makedirs(root / "not-a-variable")  # folders without `out` are ignored
    _done(root)
    back = read_arrays(root)
    assert list(back) == ["System-Train-TrainStep-train_job", "dense1-bias", "dense1-weight"]
    np.testing.assert_array_equal(back["dense1-weight"], w)
    assert back["System-Train-TrainStep-train_job"].tolist() == [5]


def test_hand_built_oneflow_v02_layout_without_meta(tmp_path):
    """Like the docs' lenet_models_1: only `out` files; shape/dtype from the caller."""
    root = tmp_path / "lenet_models_1"
    w = np.random.default_rng(2).standard_normal((32, 1, 5, 5)).astype(np.float32)
    _hand_write(root, "conv1-weight", w.astype("<f4").tobytes())
    _hand_write(root, "conv1-bias", np.zeros(32, "<f4").tobytes())
    _hand_write(root, "System-Train-TrainStep-train_job", np.array([1200], "<i8").tobytes())
    _done(root)
    expected = {
        "conv1-weight": ((32, 1, 5, 5), np.float32),
        "conv1-bias": ((32,), np.float32),
        "System-Train-TrainStep-train_job": ((1,), np.int64),
    }
    back = read_arrays(root, expected)
    np.testing.assert_array_equal(back["conv1-weight"], w)
    assert back["System-Train-TrainStep-train_job"].tolist() == [1200]
    # Without `expected` a meta-less variable cannot be read.
    with pytest.raises(CheckpointError, match=r"'conv1-bias': no meta file .*conv1-bias.meta"):
        read_arrays(root)


def test_expected_accepts_aioflow_like_dtype_handles(tmp_path):
    class Handle:  # anything with a numpy dtype in `.numpy`, like aioflow.float32
        numpy = np.dtype(np.float32)

    save_arrays(tmp_path / "c", {"w": np.ones(3, np.float32)})
    assert read_arrays(tmp_path / "c", {"w": ((3,), Handle())})["w"].tolist() == [1, 1, 1]


def test_names_selects_variables(tmp_path):
    save_arrays(tmp_path / "c", _arrays())
    back = read_arrays(tmp_path / "c", names=["i32", "u8"])
    assert list(back) == ["i32", "u8"]
    back = read_arrays(tmp_path / "c", {"i32": ((3, 4), np.int32), "u8": ((1, 2), np.uint8)},
                       names=["u8"])
    assert list(back) == ["u8"]


def test_strict_false_skips_missing_variables(tmp_path):
    save_arrays(tmp_path / "c", {"w": np.ones(2, np.float32)})
    expected = {"w": ((2,), np.float32), "w-momentum": ((2,), np.float32)}
    with pytest.raises(CheckpointError, match="'w-momentum': not found"):
        read_arrays(tmp_path / "c", expected)
    assert list(read_arrays(tmp_path / "c", expected, strict=False)) == ["w"]
    # ...but a present, wrong variable still fails.
    with pytest.raises(CheckpointError, match="'w'.*shape"):
        read_arrays(tmp_path / "c", {"w": ((3,), np.float32)}, strict=False)


# ------------------------------------------------------------------ error paths
def test_missing_directory_or_file(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="checkpoint directory .*nope.* does not exist"):
        read_arrays(tmp_path / "nope")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CheckpointNotFoundError, match="is not a directory"):
        read_arrays(tmp_path / "afile")
    assert issubclass(CheckpointNotFoundError, FileNotFoundError)


def test_missing_variable_folder_and_out_file(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)})
    os.remove(root / "b" / "out")
    exp = {"a": ((2,), np.float32), "b": ((2,), np.float32), "c": ((1,), np.int32)}
    with pytest.raises(CheckpointError) as info:
        read_arrays(root, exp)
    msg = str(info.value)
    assert "'b': data file" in msg and os.path.join(str(root), "b", "out") in msg
    assert "'c': not found" in msg and os.path.join(str(root), "c") in msg


def test_truncated_out_file(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"conv1-weight": np.ones((4, 4), np.float32)})
    out = root / "conv1-weight" / "out"
    with open(out, "r+b") as f:
        f.truncate(40)
    with pytest.raises(CheckpointError) as info:
        read_arrays(root)
    msg = str(info.value)
    assert "'conv1-weight'" in msg and str(out) in msg
    assert "has 40 bytes, expected 64" in msg and "truncated" in msg
    # Also with an expectation and no meta (OneFlow v0.2 layout: no checksums either).
    os.remove(root / "conv1-weight" / "meta")
    os.remove(root / "conv1-weight" / "sha256sum")
    with pytest.raises(CheckpointError, match="has 40 bytes, expected 64"):
        read_arrays(root, {"conv1-weight": ((4, 4), np.float32)})


def test_oversized_out_file(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(2, np.float32)})
    with open(root / "w" / "out", "ab") as f:
        f.write(b"\0" * 4)
    with pytest.raises(CheckpointError, match="'w'.*has 12 bytes, expected 8"):
        read_arrays(root)


def test_meta_disagrees_with_expected_shape(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"dense-weight": np.ones((10, 512), np.float32)})
    meta = str(root / "dense-weight" / "meta")
    with pytest.raises(CheckpointError) as info:
        read_arrays(root, {"dense-weight": ((512, 10), np.float32)})
    msg = str(info.value)
    assert "'dense-weight'" in msg and meta in msg and "(10, 512)" in msg and "(512, 10)" in msg


def test_meta_disagrees_with_expected_dtype(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(3, np.float64)})
    with pytest.raises(CheckpointError, match=r"'w': meta file .*meta.* data type float64, expected float32"):
        read_arrays(root, {"w": ((3,), np.float32)})


def test_unknown_dtype_in_meta(tmp_path):
    root = tmp_path / "c"
    _hand_write(root, "w", b"\0" * 4, "shape { dim: 2 } data_type: kBFloat16")
    _done(root)
    with pytest.raises(CheckpointError, match=r"'w': bad meta file .*meta.*kBFloat16"):
        read_arrays(root)


def test_all_problems_reported_and_nothing_returned(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"a": np.ones(4, np.float32), "b": np.ones(4, np.float32)})
    with open(root / "b" / "out", "r+b") as f:
        f.truncate(3)
    (root / "a" / "meta").write_text("garbage ???")
    os.remove(root / "a" / "sha256sum")   # as OneFlow wrote it: the meta must parse
    with pytest.raises(CheckpointError) as info:
        read_arrays(root)
    assert "'a': bad meta file" in str(info.value) and "'b': data file" in str(info.value)


def test_bad_expected_spec(tmp_path):
    save_arrays(tmp_path / "c", {"w": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match="'w'.*invalid shape"):
        read_arrays(tmp_path / "c", {"w": ((-3,), np.float32)})
    with pytest.raises(CheckpointError, match="'w'.*unsupported expected data type"):
        read_arrays(tmp_path / "c", {"w": ((3,), np.complex64)})


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../escape", "/abs", "a\\b", "x\0y",
                                  "snapshot_done"])
def test_bad_names_rejected(tmp_path, name):
    with pytest.raises(CheckpointError, match="invalid name"):
        save_arrays(tmp_path / "c", {name: np.zeros(1, np.float32)})
    assert not (tmp_path / "c").exists() and _leftovers(tmp_path) == []
    save_arrays(tmp_path / "ok", {"w": np.zeros(1, np.float32)})
    with pytest.raises(CheckpointError, match="invalid name"):
        read_arrays(tmp_path / "ok", {name: ((1,), np.float32)})
    with pytest.raises(CheckpointError, match="invalid name"):
        read_arrays(tmp_path / "ok", names=[name])


def test_non_str_and_case_colliding_names(tmp_path):
    with pytest.raises(CheckpointError, match="must be a str"):
        save_arrays(tmp_path / "c", {3: np.zeros(1)})
    with pytest.raises(CheckpointError, match="differ only in case"):
        save_arrays(tmp_path / "c", {"W": np.zeros(1), "w": np.zeros(1)})
    assert not (tmp_path / "c").exists()


def test_oneflow_style_names_accepted(tmp_path):
    names = ["conv1-weight", "dense1.bias", "System-Train-TrainStep-train_job",
             "Dense_1-weight-momentum", ".hidden"]
    save_arrays(tmp_path / "c", {n: np.zeros(1, np.float32) for n in names})
    assert sorted(read_arrays(tmp_path / "c")) == sorted(names)


# --------------------------------------------------------------- snapshot_done
def test_missing_snapshot_done_warns(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(2, np.float32)})
    os.remove(root / "snapshot_done")
    with pytest.warns(CheckpointWarning, match="snapshot_done"):
        back = read_arrays(root)
    assert back["w"].tolist() == [1, 1]
    with pytest.raises(CheckpointError, match="snapshot_done"):
        read_arrays(root, on_incomplete="error")
    assert read_arrays(root, on_incomplete="ignore")["w"].tolist() == [1, 1]
    with pytest.raises(ValueError, match="on_incomplete"):
        read_arrays(root, on_incomplete="maybe")


# --------------------------------------------------------------- existing target
def test_non_empty_target_refused_without_overwrite(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(2, np.float32)})
    with pytest.raises(CheckpointExistsError, match=r"checkpoint directory '.*c' is not empty.*overwrite=True"):
        save_arrays(root, {"w": np.zeros(2, np.float32)})
    assert issubclass(CheckpointExistsError, FileExistsError)
    assert read_arrays(root)["w"].tolist() == [1, 1]
    assert _leftovers(tmp_path) == []


def test_target_is_a_file(tmp_path):
    (tmp_path / "c").write_text("x")
    for overwrite in (False, True):
        with pytest.raises(CheckpointExistsError, match="not a directory"):
            save_arrays(tmp_path / "c", {"w": np.ones(2)}, overwrite=overwrite)
    assert (tmp_path / "c").read_text() == "x"


def test_empty_target_directory_is_used(tmp_path):
    os.mkdir(tmp_path / "c")
    save_arrays(tmp_path / "c", {"w": np.ones(2, np.float32)})
    assert read_arrays(tmp_path / "c")["w"].tolist() == [1, 1]
    assert _leftovers(tmp_path) == []


def test_overwrite_replaces(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"old": np.ones(2, np.float32), "w": np.ones(2, np.float32)})
    save_arrays(root, {"w": np.full(3, 2, np.float32)}, overwrite=True)
    back = read_arrays(root)
    assert list(back) == ["w"] and back["w"].tolist() == [2, 2, 2]
    assert _leftovers(tmp_path) == []


def test_overwrite_refuses_non_checkpoint_directory(tmp_path):
    root = tmp_path / "project"
    os.mkdir(root)
    (root / "notes.txt").write_text("important")
    with pytest.raises(CheckpointError, match="does not look like a checkpoint.*notes.txt"):
        save_arrays(root, {"w": np.ones(2)}, overwrite=True)
    assert (root / "notes.txt").read_text() == "important"
    assert _leftovers(tmp_path) == []


# ------------------------------------------------------------------- atomicity
def _fail_on_second_out(monkeypatch):
    real = checkpoint_io._write_bytes
    calls = {"out": 0}

    def flaky(path, data):
        if os.path.basename(path) == "out":
            calls["out"] += 1
            if calls["out"] == 2:
                real(path, data[: len(bytes(data)) // 2])  # a half-written file...
                raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "_write_bytes", flaky)
    return calls


def test_failure_mid_save_leaves_nothing(tmp_path, monkeypatch):
    calls = _fail_on_second_out(monkeypatch)
    arrays = {"a": np.ones(8, np.float32), "b": np.ones(8, np.float32), "c": np.ones(8)}
    with pytest.raises(CheckpointError, match="'b'.*No space left"):
        save_arrays(tmp_path / "c", arrays)
    assert calls["out"] == 2
    assert not (tmp_path / "c").exists()
    assert os.listdir(tmp_path) == []


def test_failure_mid_save_keeps_old_checkpoint(tmp_path, monkeypatch):
    root = tmp_path / "c"
    save_arrays(root, {"a": np.ones(8, np.float32)})
    _fail_on_second_out(monkeypatch)
    with pytest.raises(CheckpointError):
        save_arrays(root, {"a": np.zeros(8, np.float32), "b": np.zeros(8)}, overwrite=True)
    assert os.listdir(tmp_path) == ["c"]
    back = read_arrays(root)
    assert list(back) == ["a"] and back["a"].tolist() == [1] * 8


def test_interrupt_mid_save_cleans_up(tmp_path, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_io, "_write_variable", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_arrays(tmp_path / "c", {"a": np.ones(2)})
    assert os.listdir(tmp_path) == []


def test_failed_final_rename_restores_old_checkpoint(tmp_path, monkeypatch):
    root = tmp_path / "c"
    save_arrays(root, {"a": np.ones(2, np.float32)})
    real_rename = os.rename

    def rename(src, dst):
        if os.path.basename(str(src)).startswith(".c.tmp-"):
            raise OSError(5, "I/O error")
        real_rename(src, dst)

    monkeypatch.setattr(checkpoint_io.os, "rename", rename)
    with pytest.raises(CheckpointError, match="cannot move the checkpoint into place"):
        save_arrays(root, {"a": np.zeros(2, np.float32)}, overwrite=True)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c"]
    assert read_arrays(root)["a"].tolist() == [1, 1]


def test_snapshot_done_written_last(tmp_path, monkeypatch):
    real = checkpoint_io._write_bytes
    order = []

    def spy(path, data):
        order.append(os.path.relpath(path, os.path.dirname(os.path.dirname(path))))
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "_write_bytes", spy)
    save_arrays(tmp_path / "c", {"a": np.ones(1), "b": np.ones(1)})
    assert order[-1].endswith("snapshot_done") and len(order) == 7  # out, meta, sums


# --------------------------------------------------------------------- doctest
def test_module_doctests():
    result = doctest.testmod(checkpoint_io, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0


def test_target_appearing_during_save_is_not_clobbered(tmp_path, monkeypatch):
    root = tmp_path / "c"
    real = checkpoint_io._fsync_dir

    def racing(path):
        if os.path.basename(path).startswith(".c.tmp-"):  # just before the final rename
            os.makedirs(root / "other")
            (root / "other" / "out").write_bytes(b"x")
        real(path)

    monkeypatch.setattr(checkpoint_io, "_fsync_dir", racing)
    with pytest.raises(CheckpointExistsError, match="appeared while saving"):
        save_arrays(root, {"w": np.ones(2)})
    assert os.listdir(root) == ["other"] and _leftovers(tmp_path) == []


def test_the_documented_old_path_is_the_same_module():
    # docs/api documented aioflow.checkpoint_io before the package existed
    import aioflow.checkpoint_io as old_path
    from aioflow.checkpoint_io import CheckpointError as old_error
    assert old_path is checkpoint_io and old_error is CheckpointError


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names fds via /proc")
def test_every_file_and_folder_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    # docs/faults.md, atomic saves: every file, then its folder, is fsynced and
    # snapshot_done written last, all before the folder is renamed into place; the
    # parent is fsynced after the rename
    from aioflow.checkpoint import swap as checkpoint_swap
    synced, real_fsync, real_install = [], os.fsync, checkpoint_swap.install

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def install(tmp, target, overwrite):
        synced.append("<rename>")
        return real_install(tmp, target, overwrite)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(checkpoint_swap, "install", install)
    save_arrays(str(tmp_path / "c"), {"w": np.ones(3, np.float32), "b": np.zeros(2, np.int32)})
    tmp = next(os.path.dirname(p) for p in synced if p.endswith("snapshot_done"))
    relative = [p if p == "<rename>" else os.path.relpath(p, tmp) for p in synced]
    per_variable = lambda v: [f"{v}/out", f"{v}/meta", f"{v}/sha256sum", v]  # noqa: E731
    assert relative == (per_variable("w") + per_variable("b")   # in the dict's order
                        + ["snapshot_done", ".", "<rename>", os.path.relpath(tmp_path, tmp)])
