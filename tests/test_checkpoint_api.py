"""CheckPoint / flow.checkpoint / load_variables on real jobs, including directories laid
out by OneFlow itself (raw ``out`` files, with or without ``meta``)."""
import os

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.checkpoint import CheckpointMismatchError
from aioflow.checkpoint.io import CheckpointWarning


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _jobs():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)),
              y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 2, name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(0.1).minimize(loss)  # momentum 0.9: has optimizer state
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="fc")

    return train, predict


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
Y = np.array([0, 1, 1, 0], np.int32)


def _write_oneflow_dir(root, arrays, with_meta):
    os.makedirs(root)
    for name, value in arrays.items():
        os.makedirs(os.path.join(root, name))
        with open(os.path.join(root, name, "out"), "wb") as f:
            f.write(value.astype(value.dtype.newbyteorder("<")).tobytes())
        if with_meta:
            dims = "".join(f"  dim: {d}\n" for d in value.shape)
            kind = {"float32": "kFloat", "int64": "kInt64"}[value.dtype.name]
            with open(os.path.join(root, name, "meta"), "w") as f:
                f.write(f"shape {{\n{dims}}}\ndata_type: {kind}\n")
    open(os.path.join(root, "snapshot_done"), "w").close()


@pytest.mark.parametrize("with_meta", [True, False], ids=["with-meta", "raw-out-only"])
def test_loads_a_oneflow_written_directory(tmp_path, with_meta):
    weight = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    bias = np.array([0.5, -0.5], np.float32)
    root = str(tmp_path / "lenet_models_1")
    _write_oneflow_dir(root, {"fc-weight": weight, "fc-bias": bias,
                              "System-Train-TrainStep-train": np.array(7, np.int64)},
                       with_meta)
    train, predict = _jobs()
    with pytest.raises(CheckpointMismatchError, match="fc-weight-momentum"):
        flow.train.CheckPoint().load(root)        # strict: the momentum has no value
    with pytest.warns(CheckpointWarning, match=r"missing .*\['fc-bias-momentum', "
                                               r"'fc-weight-momentum'\]"):
        flow.train.CheckPoint().load(root, strict=False)
    np.testing.assert_allclose(predict(X), X @ weight.T + bias)
    assert flow.get_all_variables()["System-Train-TrainStep-train"] == 7
    # optimizer state absent from the directory starts at zero
    assert not flow.get_all_variables()["fc-weight-momentum"].any()


@pytest.mark.parametrize("with_meta", [True, False], ids=["with-meta", "raw-out-only"])
def test_an_eval_script_loads_what_training_saved(tmp_path, with_meta):
    # The seeds' pattern: only a predict job, a checkpoint with optimizer state and steps.
    weight = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    root = str(tmp_path / "lenet_models_1")
    _write_oneflow_dir(root, {"fc-weight": weight, "fc-bias": np.zeros(2, np.float32),
                              "fc-weight-momentum": weight, "fc-bias-momentum": weight[0, :2],
                              "System-Train-TrainStep-train_job": np.array(7, np.int64)},
                       with_meta)

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="fc")

    flow.train.CheckPoint().load(root)
    np.testing.assert_allclose(predict(X), X @ weight.T)


def test_save_load_round_trip_restores_training_exactly(tmp_path):
    train, predict = _jobs()
    flow.train.CheckPoint().init()
    for _ in range(3):
        train(X, Y)
    flow.checkpoint.save(tmp_path / "ckpt")
    continued = [float(train(X, Y).mean()) for _ in range(3)]
    flow.train.CheckPoint().load(tmp_path / "ckpt")
    replayed = [float(train(X, Y).mean()) for _ in range(3)]
    assert continued == replayed  # weights, momentum and step counter all restored


def test_bad_checkpoint_changes_nothing_and_names_the_file(tmp_path):
    train, predict = _jobs()
    flow.train.CheckPoint().init()
    before = flow.get_all_variables()
    root = str(tmp_path / "bad")
    _write_oneflow_dir(root, {"fc-weight": np.zeros((2, 3), np.float32),
                              "fc-bias": np.zeros(2, np.float32)}, with_meta=True)
    with open(os.path.join(root, "fc-bias", "out"), "wb") as f:
        f.write(b"\0" * 4)  # truncated: 4 bytes instead of 8
    with pytest.raises(flow.checkpoint.io.CheckpointError, match="fc-bias"):
        flow.train.CheckPoint().load(root)
    after = flow.get_all_variables()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])


def test_missing_model_variable_is_an_error(tmp_path):
    train, predict = _jobs()
    root = str(tmp_path / "partial")
    _write_oneflow_dir(root, {"fc-weight": np.zeros((2, 3), np.float32)}, with_meta=True)
    with pytest.raises(flow.checkpoint.io.CheckpointError, match="fc-bias"):
        flow.train.CheckPoint().load(root)


def test_save_refuses_a_non_empty_directory_and_keeps_it(tmp_path):
    _jobs()
    target = tmp_path / "taken"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        flow.checkpoint.save(target)
    assert (target / "precious.txt").read_text() == "keep me"


def test_load_variables_validates_everything_first():
    train, predict = _jobs()
    before = flow.get_all_variables()
    with pytest.raises(ValueError, match="'fc-bias' has shape"):
        flow.load_variables({"fc-weight": np.ones((2, 3), np.float32),
                             "fc-bias": np.ones(3, np.float32)})
    np.testing.assert_array_equal(flow.get_all_variables()["fc-weight"], before["fc-weight"])
    with pytest.raises(KeyError, match="nope"):
        flow.load_variables({"nope": np.ones(1)}, ignore_mismatch=False)
    flow.load_variables({"nope": np.ones(1), "fc-bias": np.ones(2)})  # float64: converted
    assert flow.get_all_variables()["fc-bias"].dtype == np.float32


@pytest.mark.anyio
async def test_checkpoint_calls_are_awaitable_in_async_code(tmp_path):
    train, predict = _jobs()
    await flow.train.CheckPoint().init()
    await train(X, Y)
    await flow.train.CheckPoint().save(tmp_path / "a")
    await flow.train.CheckPoint().load(tmp_path / "a")
    assert "fc-weight" in await flow.get_all_variables()


def test_overwrite_replaces_an_earlier_checkpoint(tmp_path):
    train, predict = _jobs()
    flow.train.CheckPoint().init()
    flow.train.CheckPoint().save(tmp_path / "c")
    flow.load_variables({"fc-bias": np.array([3.0, 4.0], np.float32)})
    with pytest.raises(FileExistsError, match="overwrite=True"):
        flow.train.CheckPoint().save(tmp_path / "c")
    flow.train.CheckPoint().save(tmp_path / "c", overwrite=True)
    assert flow.checkpoint.get(tmp_path / "c")["fc-bias"].tolist() == [3.0, 4.0]


def _saved(tmp_path, train):
    flow.train.CheckPoint().init()
    train(X, Y)
    flow.train.CheckPoint().save(tmp_path / "full")
    return flow.get_all_variables()


@pytest.mark.parametrize("removed", ["fc-weight", "fc-bias-momentum",
                                     "System-Train-TrainStep-train"])
def test_strict_load_refuses_a_checkpoint_missing_any_variable(tmp_path, removed):
    train, predict = _jobs()
    saved = _saved(tmp_path, train)
    import shutil
    shutil.rmtree(tmp_path / "full" / removed)
    flow.train.CheckPoint().init()
    train(X, Y)
    before = flow.get_all_variables()
    with pytest.raises(CheckpointMismatchError) as info:
        flow.train.CheckPoint().load(tmp_path / "full")
    assert info.value.missing == [removed] and info.value.unexpected == []
    assert f"missing from the checkpoint (1): ['{removed}']" in str(info.value)
    after = flow.get_all_variables()
    assert all(np.array_equal(after[n], before[n]) for n in before)   # nothing changed
    with pytest.warns(CheckpointWarning, match=removed):
        flow.train.CheckPoint().load(tmp_path / "full", strict=False)
    after = flow.get_all_variables()
    for name in saved:
        if name != removed:
            np.testing.assert_array_equal(after[name], saved[name])
    # the missing one keeps its value if it is a model variable, else restarts from 0
    expect = before[removed] if removed == "fc-weight" else np.zeros_like(before[removed])
    np.testing.assert_array_equal(after[removed], expect)


def test_strict_load_lists_missing_and_unexpected_in_one_error(tmp_path):
    train, predict = _jobs()
    _saved(tmp_path, train)
    import shutil
    shutil.rmtree(tmp_path / "full" / "fc-bias")
    shutil.copytree(tmp_path / "full" / "fc-weight", tmp_path / "full" / "extra-weight")
    shutil.copytree(tmp_path / "full" / "System-Train-TrainStep-train",
                    tmp_path / "full" / "System-Train-TrainStep-other")
    before = flow.get_all_variables()
    with pytest.raises(CheckpointMismatchError) as info:
        flow.train.CheckPoint().load(tmp_path / "full")
    assert info.value.missing == ["fc-bias"]
    assert info.value.unexpected == ["System-Train-TrainStep-other", "extra-weight"]
    msg = str(info.value)
    assert "missing" in msg and "unexpected" in msg and "extra-weight" in msg
    after = flow.get_all_variables()
    assert all(np.array_equal(after[n], before[n]) for n in before)


def test_non_strict_load_still_refuses_a_corrupt_variable(tmp_path):
    train, predict = _jobs()
    _saved(tmp_path, train)
    out = tmp_path / "full" / "fc-bias" / "out"
    out.write_bytes(b"\xff" * len(out.read_bytes()))
    flow.train.CheckPoint().init()
    before = flow.get_all_variables()
    for strict in (True, False):
        with pytest.raises(flow.checkpoint.io.CheckpointError, match="'fc-bias'.*checksum"):
            flow.train.CheckPoint().load(tmp_path / "full", strict=strict)
    after = flow.get_all_variables()
    assert all(np.array_equal(after[n], before[n]) for n in before)
