"""Checkpoints under faults: leftovers of interrupted saves, full disks, corrupted bytes."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import uuid

import numpy as np
import pytest

from aioflow.checkpoint import io as checkpoint_io, recovery as checkpoint_recovery
from aioflow.checkpoint import swap as checkpoint_swap
from aioflow.checkpoint.io import (CheckpointError, CheckpointNotFoundError,
                                   CheckpointWarning, read_arrays, save_arrays)


def _hidden(parent) -> list[str]:
    return sorted(e for e in os.listdir(parent) if e.startswith("."))


def _interrupted_overwrite(tmp_path, name="c"):
    """What a save killed between the two renames of an overwrite leaves: no ``c``, the
    previous checkpoint as ``.c.old-*`` and the new one, complete, as ``.c.tmp-*``."""
    root = tmp_path / name
    save_arrays(root, {"w": np.ones(3, np.float32)})
    os.rename(root, tmp_path / f".{name}.old-0000beef")
    save_arrays(tmp_path / "new", {"w": np.zeros(3, np.float32)})
    os.rename(tmp_path / "new", tmp_path / f".{name}.tmp-0000cafe")
    return root


# ----------------------------------------------------------------- leftovers
def test_a_save_removes_the_leftovers_of_interrupted_saves(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(3, np.float32)})
    for stray in (".c.tmp-0123abcd", ".c.old-89abcdef"):
        shutil.copytree(root, tmp_path / stray)
    os.mkdir(tmp_path / ".c.tmp-deadbeef")             # killed before writing anything
    keep = [".cc.tmp-01234567", ".c.tmp-notahex", ".other"]  # not leftovers of this path
    for entry in keep:
        os.mkdir(tmp_path / entry)
    save_arrays(root, {"w": np.full(3, 2, np.float32)}, overwrite=True)
    assert _hidden(tmp_path) == sorted(keep)
    assert read_arrays(root)["w"].tolist() == [2, 2, 2]


def test_a_load_removes_leftovers_too(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(3, np.float32)})
    shutil.copytree(root, tmp_path / ".c.tmp-0123abcd")
    assert read_arrays(root)["w"].tolist() == [1, 1, 1]
    assert _hidden(tmp_path) == []


def test_an_interrupted_swap_is_recovered_from_the_old_copy_by_load(tmp_path):
    root = _interrupted_overwrite(tmp_path)
    with pytest.warns(CheckpointWarning, match=r"restored the previous checkpoint.*\.c\.old-0000beef"):
        back = read_arrays(root)
    # The last checkpoint a save confirmed, not the unconfirmed new one.
    assert back["w"].tolist() == [1, 1, 1]
    assert sorted(os.listdir(tmp_path)) == ["c"]


def test_an_interrupted_swap_is_recovered_by_the_next_save(tmp_path):
    root = _interrupted_overwrite(tmp_path)
    with pytest.warns(CheckpointWarning, match="restored"):
        with pytest.raises(checkpoint_io.CheckpointExistsError):
            save_arrays(root, {"w": np.zeros(3, np.float32)})   # no overwrite: refused
    assert sorted(os.listdir(tmp_path)) == ["c"]
    assert read_arrays(root)["w"].tolist() == [1, 1, 1]


def test_an_unrecoverable_old_copy_is_named_by_load(tmp_path, monkeypatch):
    root = _interrupted_overwrite(tmp_path)

    def read_only(src, dst):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(checkpoint_recovery.os, "rename", read_only)
    with pytest.raises(CheckpointNotFoundError, match=r"previous checkpoint in '.*\.c\.old-0000beef'"):
        read_arrays(root)


def test_leftovers_of_a_running_save_are_left_alone(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(3, np.float32)})
    running = tmp_path / ".c.tmp-0123abcd"
    os.mkdir(running)
    lock = checkpoint_recovery.DirLock(str(running))   # as a save in progress holds it
    try:
        save_arrays(root, {"w": np.zeros(3, np.float32)}, overwrite=True)
        assert _hidden(tmp_path) == [".c.tmp-0123abcd"]
    finally:
        lock.release()
    read_arrays(root)
    assert _hidden(tmp_path) == []


# ----------------------------------------------------------------- write errors
def test_parent_path_that_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "runs").write_text("not a folder")
    for target in (tmp_path / "runs" / "model", tmp_path / "runs" / "deeper" / "model"):
        with pytest.raises(CheckpointError, match=r"'.*runs' is a file, not a folder"):
            save_arrays(target, {"w": np.ones(2)})
    assert (tmp_path / "runs").read_text() == "not a folder"


def _disk_fills_after(monkeypatch, budget: int):
    """A writer that runs out of space once ``budget`` bytes are written (ENOSPC)."""
    real = checkpoint_io._write_bytes
    left = {"bytes": budget}

    def limited(path, data):
        size = memoryview(data).nbytes
        if size > left["bytes"]:
            real(path, bytes(memoryview(data).cast("B")[: left["bytes"]]))
            raise OSError(errno.ENOSPC, "No space left on device")
        left["bytes"] -= size
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "_write_bytes", limited)


@pytest.mark.parametrize("budget", [0, 100, 4000, 4300])
def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch, budget):
    root = tmp_path / "c"
    save_arrays(root, {"a": np.ones(500, np.float32), "b": np.ones(500, np.float32)})
    _disk_fills_after(monkeypatch, budget)
    with pytest.raises(CheckpointError, match="no space left on device") as info:
        save_arrays(root, {"a": np.zeros(500, np.float32), "b": np.zeros(500, np.float32)},
                    overwrite=True)
    assert "previous checkpoint at" in "".join(getattr(info.value, "__notes__", []))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c"]
    back = read_arrays(root)
    assert back["a"].tolist() == [1] * 500 and back["b"].tolist() == [1] * 500


def _mount_tmpfs(path, size: str) -> bool:
    os.makedirs(path)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def test_full_tmpfs_keeps_the_previous_checkpoint(tmp_path):
    mount = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    if not _mount_tmpfs(mount, "256k"):
        pytest.skip("cannot mount a tmpfs here (needs root); the size-limited writer "
                    "test covers the same path")
    try:
        root = mount / "c"
        save_arrays(root, {"w": np.ones(20_000, np.float32)})          # 80 kB of 256 kB
        with pytest.raises(CheckpointError, match="no space left on device"):
            save_arrays(root, {"w": np.zeros(60_000, np.float32)}, overwrite=True)  # 240 kB
        assert os.listdir(mount) == ["c"]
        assert read_arrays(root)["w"].tolist() == [1] * 20_000
        save_arrays(root, {"w": np.full(20_000, 2, np.float32)}, overwrite=True)  # fits again
        assert read_arrays(root)["w"][0] == 2 and os.listdir(mount) == ["c"]
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, timeout=10)


def _read_only(monkeypatch):
    """os.mkdir as on a read-only file system, for the checkpoint modules."""
    def refuse(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(checkpoint_swap.os, "mkdir", refuse)


def test_saving_into_a_read_only_folder_names_the_target(tmp_path, monkeypatch):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(3, np.float32)})
    _read_only(monkeypatch)
    with pytest.raises(CheckpointError, match=rf"cannot save checkpoint to '{root}': cannot "
                       rf"create a folder in '{tmp_path}': .*Read-only file system") as info:
        save_arrays(root, {"w": np.zeros(3, np.float32)}, overwrite=True)
    assert ".c.tmp" not in str(info.value)      # not the hidden folder the user never chose
    assert info.value.__notes__ == [f"the previous checkpoint at '{root}' is unchanged"]
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c"] and read_arrays(root)["w"].tolist() == [1, 1, 1]


def test_saving_to_a_read_only_mount_keeps_the_checkpoint(tmp_path):
    mount = tmp_path / f"ro-{uuid.uuid4().hex[:6]}"
    if not _mount_tmpfs(mount, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root); the EROFS test covers it")
    try:
        save_arrays(mount / "c", {"w": np.ones(3, np.float32)})
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, timeout=10)
        with pytest.raises(CheckpointError, match="cannot save checkpoint to .*Read-only") as info:
            save_arrays(mount / "c", {"w": np.zeros(3, np.float32)}, overwrite=True)
        assert "is unchanged" in info.value.__notes__[0]
        assert read_arrays(mount / "c")["w"].tolist() == [1, 1, 1]
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, timeout=10)


# ----------------------------------------------------------------- integrity
def test_garbage_of_the_same_size_is_refused_naming_the_variable(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"fc-weight": np.ones((4, 4), np.float32), "fc-bias": np.ones(4)})
    out = root / "fc-weight" / "out"
    out.write_bytes(np.random.default_rng(0).bytes(64))
    with pytest.raises(CheckpointError, match=r"'fc-weight': data file .* does not match its "
                                              r"checksum.*corrupt") as info:
        read_arrays(root)
    assert "fc-bias" not in str(info.value)


def test_one_flipped_bit_is_refused(tmp_path):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.arange(1000, dtype=np.float64)})
    data = bytearray((root / "w" / "out").read_bytes())
    data[4321] ^= 0x10
    (root / "w" / "out").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="'w'.*checksum"):
        read_arrays(root)


def test_a_meta_edited_consistently_is_refused(tmp_path):
    # shape (2, 3) -> (3, 2): the size still matches, only the checksum sees it
    root = tmp_path / "c"
    save_arrays(root, {"w": np.arange(6, dtype=np.float32).reshape(2, 3)})
    meta = root / "w" / "meta"
    meta.write_text(meta.read_text().replace("dim: 2\n  dim: 3", "dim: 3\n  dim: 2"))
    with pytest.raises(CheckpointError, match="'w': meta file .* does not match its checksum"):
        read_arrays(root)


@pytest.mark.parametrize("text", ["", "zz  out\n", "ab" * 32 + "  meta\n",
                                  "ab" * 32 + "  out\n" + "ab" * 32 + "  out\n",
                                  "ab" * 32 + "  secret\n"])
def test_malformed_checksum_files_are_refused(tmp_path, text):
    root = tmp_path / "c"
    save_arrays(root, {"w": np.ones(2)})
    (root / "w" / "sha256sum").write_text(text)
    with pytest.raises(CheckpointError, match="'w': bad checksum file"):
        read_arrays(root)


def test_checkpoints_without_checksums_load(tmp_path):
    # OneFlow's own writers never wrote one.
    root = tmp_path / "c"
    save_arrays(root, {"w": np.arange(4, dtype=np.float32)})
    os.remove(root / "w" / "sha256sum")
    assert read_arrays(root)["w"].tolist() == [0, 1, 2, 3]


def test_sha256sum_tool_agrees(tmp_path):
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum tool")
    root = tmp_path / "c"
    save_arrays(root, {"w": np.arange(4, dtype=np.float32)})
    done = subprocess.run(["sha256sum", "-c", "sha256sum"], cwd=root / "w",
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stdout + done.stderr
