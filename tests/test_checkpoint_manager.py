"""flow.train.SimpleCheckPointManager: OneFlow's timestamped checkpoint folder."""
import os
import shutil

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _train_job():
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(0.5, momentum=0.9).minimize(loss)
        return loss
    return fit


def test_saves_sort_by_age_and_restore_loads_the_newest(tmp_path):
    fit = _train_job()
    manager = flow.train.SimpleCheckPointManager(str(tmp_path / "ckpts"), prefix="run-")
    assert manager.list_checkpoints() == [] and manager.latest_checkpoint() is None
    manager.initialize_or_restore()                 # initializes, then saves a first one
    saved = []
    for _ in range(3):                              # quick saves: names still increase
        fit(np.ones(2, np.float32))
        manager.save()
        saved.append(flow.get_all_variables())
    names = manager.list_checkpoints()
    assert len(names) == 4 and names == sorted(set(names))
    assert all(n.startswith("run-") for n in names)
    assert manager.latest_checkpoint() == names[-1]

    flow.clear_default_session()
    fit = _train_job()
    flow.train.SimpleCheckPointManager(str(tmp_path / "ckpts"), "run-").initialize_or_restore()
    restored = flow.get_all_variables()
    assert sorted(restored) == sorted(saved[-1])
    for name, value in saved[-1].items():           # weights, momentum and step counter
        np.testing.assert_array_equal(restored[name], value, err_msg=name)
    assert restored["System-Train-TrainStep-fit"] == 3


def test_incomplete_and_foreign_folders_are_not_checkpoints(tmp_path):
    _train_job()
    manager = flow.train.SimpleCheckPointManager(str(tmp_path))
    manager.save()
    (tmp_path / "snapshot_21000101_000000_000000").mkdir()     # no snapshot_done: unfinished
    (tmp_path / "other_20200101_000000_000000").mkdir()
    names = manager.list_checkpoints()
    assert len(names) == 1 and names[0].startswith("snapshot_")
    manager.save()                                  # still named after the unfinished one
    assert manager.latest_checkpoint() > "snapshot_21000101_000000_000000"


def test_bad_arguments(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(NotADirectoryError, match="root_path"):
        flow.train.SimpleCheckPointManager(str(afile))
    with pytest.raises(ValueError, match="prefix"):
        flow.train.SimpleCheckPointManager(str(tmp_path), prefix="")
    flow.train.SimpleCheckPointManager(str(tmp_path / "made" / "here"))
    assert os.path.isdir(tmp_path / "made" / "here")


def test_async_code_awaits_save_and_restore(tmp_path):
    """Called where an event loop runs, save() and initialize_or_restore() return
    awaitables (as CheckPoint.save/load do): the checkpoint is there once awaited, and a
    restore has loaded it before the next step (they used to return None while the work
    ran, unawaited, on a thread: a resumed loop trained on from the wrong weights)."""
    import asyncio
    root = str(tmp_path / "ckpts")

    async def first_life():
        fit = _train_job()
        manager = flow.train.SimpleCheckPointManager(root)
        await manager.initialize_or_restore()       # initializes and saves a first one
        assert len(manager.list_checkpoints()) == 1
        for _ in range(3):
            await fit(np.ones(2, np.float32))
        await manager.save()
        assert len(manager.list_checkpoints()) == 2
        return await flow.get_all_variables()

    async def second_life():
        fit = _train_job()
        await flow.train.SimpleCheckPointManager(root).initialize_or_restore()
        restored = await flow.get_all_variables()
        await fit(np.ones(2, np.float32))            # trains on from the checkpoint
        return restored

    saved = asyncio.run(first_life())
    flow.clear_default_session()
    restored = asyncio.run(second_life())
    assert sorted(restored) == sorted(saved)
    for name, value in saved.items():
        np.testing.assert_array_equal(restored[name], value, err_msg=name)
    assert restored["System-Train-TrainStep-fit"] == 3


def test_leftovers_of_killed_saves_are_removed(tmp_path):
    """A save killed mid-write leaves ``.<name>.tmp-*`` under the root; each save has a
    new name, so the per-path clean-up of CheckPoint.save never meets it again: the
    manager's own save and restore remove those of dead saves (not others' folders)."""
    _train_job()
    manager = flow.train.SimpleCheckPointManager(str(tmp_path))
    manager.save()
    done = manager.latest_checkpoint()
    shutil.copytree(tmp_path / done, tmp_path / f".{done}1.tmp-0123abcd")  # killed saves
    os.mkdir(tmp_path / ".snapshot_20990101_000000_000000.tmp-deadbeef")
    keep = [".other.tmp-01234567", ".snapshot_x.tmp-notahex", ".hidden"]
    for entry in keep:
        os.mkdir(tmp_path / entry)
    manager.initialize_or_restore()
    assert sorted(e for e in os.listdir(tmp_path) if e.startswith(".")) == sorted(keep)
    os.mkdir(tmp_path / ".snapshot_20990101_000000_000001.tmp-deadbeef")
    manager.save()
    assert sorted(e for e in os.listdir(tmp_path) if e.startswith(".")) == sorted(keep)
    assert len(manager.list_checkpoints()) == 2
