"""Several devices in one process (``flow.config.cpu_device_num(2)``, ``gpu_device_num(2)``):
each device computes its part of a step, the gradients are averaged as ranks average
them, one set of variables is updated, and results come back as from ranks
(aioflow/distributed/devices.py, docs/distributed.md). ``tests/distributed/test_mpi.py``
compares the same training with two ranks under mpiexec."""
import asyncio
import os

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow._core import settings
from aioflow.engine.session import default_session

LR = 0.1


@pytest.fixture
def devices():
    """``devices(n)``: a fresh session whose jobs run on ``n`` devices per process (CPU
    devices: gpu_device_num(0)); the counts are restored afterwards."""
    saved = settings.get("gpu_device_num"), settings.get("cpu_device_num")

    def use(n, kind="cpu"):
        flow.clear_default_session()
        flow.config.gpu_device_num(n if kind == "gpu" else 0)
        flow.config.cpu_device_num(n if kind == "cpu" else 1)
    yield use
    flow.clear_default_session()
    settings.put("gpu_device_num", saved[0])
    settings.put("cpu_device_num", saved[1])


def _mirrored():
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())
    return config


def _dense(x, name="dense"):
    return flow.layers.dense(x, 5, name=name,
                             kernel_initializer=flow.random_normal_initializer(stddev=0.5),
                             bias_initializer=flow.random_normal_initializer(stddev=0.5))


def _mirrored_train(per_device=4):
    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((per_device, 3)),
              y: tp.ListNumpy.Placeholder((per_device,), dtype=flow.int32)) -> tp.ListNumpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, _dense(x))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]),
                           momentum=0).minimize(loss)
        return loss
    return train


def _data(rows=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 3)).astype(np.float32),
            rng.integers(0, 5, rows).astype(np.int32))


def _reference_step(weight, bias, xs, ys):
    """The data-parallel rule in numpy: each device's loss per sample (its gradient
    scaled by 1/its samples, OneFlow's loss instance count), the devices' gradients
    averaged, one SGD update. Returns the devices' losses and the new variables."""
    losses, grads_w, grads_b = [], [], []
    for x, y in zip(xs, ys):
        logits = x.astype(np.float64) @ weight.T + bias
        shifted = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        losses.append(-np.log(p[np.arange(len(y)), y]))
        diff = p.copy()
        diff[np.arange(len(y)), y] -= 1
        diff /= len(y)
        grads_w.append(diff.T @ x)
        grads_b.append(diff.sum(axis=0))
    devices = len(xs)
    return (losses, weight - LR * sum(grads_w) / devices, bias - LR * sum(grads_b) / devices)


def _variables():
    values = flow.get_all_variables()
    return values["dense-weight"].astype(np.float64), values["dense-bias"].astype(np.float64)


def test_mirrored_training_on_two_devices_follows_the_data_parallel_rule(devices):
    devices(2)
    train = _mirrored_train()
    x, y = _data()
    xs, ys = [x[:4], x[4:]], [y[:4], y[4:]]
    train.graph   # compiled, its variables initialized
    weight, bias = _variables()
    for _ in range(5):
        losses = train(xs, ys)
        want, weight, bias = _reference_step(weight, bias, xs, ys)
        # one array per device, each the device's own loss
        assert isinstance(losses, list) and len(losses) == 2
        for got, expected in zip(losses, want):
            assert got.shape == (4,)
            np.testing.assert_allclose(got, expected, rtol=1e-5)
    got_weight, got_bias = _variables()
    np.testing.assert_allclose(got_weight, weight, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_bias, bias, rtol=1e-5, atol=1e-6)
    # one set of variables: no per-device copies
    assert sorted(flow.get_all_variables()) == ["System-Train-TrainStep-train",
                                                "dense-bias", "dense-weight"]


def test_two_devices_train_as_one_device_on_the_whole_batch_with_a_mean(devices):
    """The consistent view: the batch of 100 is split over the devices; a per-sample loss
    and its mean train as one device on the whole batch, and the results come back as one
    device gives them (per-sample values concatenated, the mean averaged)."""
    x, y = _data(100, seed=1)

    def run(n):
        devices(n)

        @flow.global_function(type="train")
        def train(x: tp.Numpy.Placeholder((100, 3)),
                  y: tp.Numpy.Placeholder((100,), dtype=flow.int32)
                  ) -> tuple[tp.Numpy, tp.Numpy]:
            assert x.shape == (100 // n, 3)   # each device traces its slice
            per_sample = flow.nn.sparse_softmax_cross_entropy_with_logits(y, _dense(x))
            mean = flow.math.reduce_mean(per_sample)
            flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [LR])
                                ).minimize(mean)
            return per_sample, mean

        flow.random.seed(3)
        results = [train(x, y) for _ in range(4)]
        return results, _variables()

    one, (weight1, bias1) = run(1)
    two, (weight2, bias2) = run(2)
    for (per_sample1, mean1), (per_sample2, mean2) in zip(one, two):
        assert per_sample2.shape == (100,) and mean2.shape == mean1.shape
        np.testing.assert_allclose(per_sample2, per_sample1, rtol=1e-5)
        np.testing.assert_allclose(mean2, mean1, rtol=1e-5)
    np.testing.assert_allclose(weight2, weight1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias2, bias1, rtol=1e-5, atol=1e-6)


def test_a_loss_summed_over_the_batch_is_refused_as_on_ranks(devices):
    # its averaged gradient would be half of one device's: the ranks' rule refuses it
    devices(2)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)),
              y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.math.reduce_sum(flow.nn.sparse_softmax_cross_entropy_with_logits(
            y, _dense(x)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR])
                           ).minimize(loss)
        return loss

    x, y = _data(4)
    with pytest.raises(NotImplementedError, match=r"training loss cannot be split over 2 "
                                                  r"devices \(flow.config.cpu_device_num"
                                                  r"\(2\)\) exactly \(a sum over the batch\)"):
        train(x, y)


def test_a_wrong_number_of_arrays_names_the_argument_and_the_count(devices):
    devices(2)
    train = _mirrored_train()
    x, y = _data()
    train([x[:4], x[4:]], [y[:4], y[4:]])
    before = {k: v.copy() for k, v in flow.get_all_variables().items()}
    with pytest.raises(TypeError, match=r"train\(\) argument 'x': list_numpy placeholder "
                                        r"expects a list with one array per device, 2 "
                                        r"devices \(flow.config.cpu_device_num\(2\)\); got "
                                        r"list of length 3"):
        train([x[:4], x[4:], x[4:]], [y[:4], y[4:]])
    with pytest.raises(TypeError, match=r"argument 'y'.*one array per device, 2 devices "
                                        r".*got int32 array of shape \(8,\)"):
        train([x[:4], x[4:]], y)
    for name, value in flow.get_all_variables().items():   # nothing was lost
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    assert len(train([x[:4], x[4:]], [y[:4], y[4:]])) == 2   # still callable


def test_the_count_follows_the_default_placement_as_in_oneflow(devices):
    # placeholders sit on the GPUs while gpu_device_num > 0: cpu_device_num alone counts
    # only with gpu_device_num(0); the error says so
    devices(1, "gpu")
    flow.config.cpu_device_num(2)
    train = _mirrored_train()
    x, y = _data()
    with pytest.raises(TypeError, match=r"1 device \(flow.config.gpu_device_num\(1\)\); "
                                        r"flow.config.cpu_device_num\(2\) counts only while "
                                        r"gpu_device_num is 0.*got list of length 2"):
        train([x[:4], x[4:]], [y[:4], y[4:]])


def test_oneflows_gpu_sample_runs_on_two_logical_devices(devices):
    """OneFlow's mirrored sample as written: gpu_device_num(2) and a placement naming both
    GPUs (the suite runs on the CPU: both device parts run there)."""
    devices(2, "gpu")

    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((4, 3)),
              y: tp.ListNumpy.Placeholder((4,), dtype=flow.int32)) -> tp.ListNumpy:
        with flow.scope.placement("gpu", "0:0-1"):
            assert flow.current_scope().device_parallel_desc_symbol.parallel_num == 2
            logits = _dense(x)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]),
                           momentum=0).minimize(loss)
        return loss

    x, y = _data()
    losses = train([x[:4], x[4:]], [y[:4], y[4:]])
    assert [loss.shape for loss in losses] == [(4,), (4,)]


def test_a_placement_naming_other_devices_than_the_jobs_is_refused(devices):
    devices(2, "gpu")

    @flow.global_function(type="predict", function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((2,))) -> tp.ListNumpy:
        with flow.scope.placement("cpu", "0:0"):
            return x * 2

    with pytest.raises(ValueError, match=r"placement\('cpu', '0:0'\) names 1 device, but "
                                         r"job 'job' runs on 2 devices \(flow.config."
                                         r"gpu_device_num\(2\)\): a placement inside it must "
                                         r"name them all \('0:0-1'\)"):
        job([np.ones(2, np.float32)] * 2)


def _mirrored_predict():
    @flow.global_function(type="predict", function_config=_mirrored())
    def predict(x: tp.ListNumpy.Placeholder((4, 3))) -> tp.ListNumpy:
        return flow.nn.softmax(_dense(x))
    return predict


def test_predict_jobs_in_both_views(devices):
    devices(2)
    predict = _mirrored_predict()
    x, _ = _data()
    parts = predict([x[:4], x[4:]])   # each device's own, from the same variables
    assert len(parts) == 2
    weight, bias = _variables()
    for part, rows in zip(parts, (x[:4], x[4:])):
        logits = rows @ weight.T + bias
        expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(part, expected, rtol=1e-5)

    @flow.global_function(type="predict")
    def consistent(x: tp.Numpy.Placeholder((8, 3))) -> tuple[tp.Numpy, tp.Numpy]:
        logits = _dense(x)
        return logits, flow.math.reduce_mean(logits, axis=0)

    logits, mean = consistent(x)
    np.testing.assert_allclose(logits, x @ weight.T + bias, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean, (x @ weight.T + bias).mean(axis=0), rtol=1e-5,
                               atol=1e-6)


def test_a_numpy_result_of_each_devices_own_value_is_refused(devices):
    devices(2)

    @flow.global_function(type="predict", function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((2,))) -> tuple[tp.Numpy, tp.Numpy]:
        weight = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        return weight * 3, x * weight   # the first is the same on every device

    with pytest.raises(TypeError, match=r"result 1 \(multiply_1\) is annotated tp.Numpy, "
                                        r"but in the mirrored view each of the 2 devices "
                                        r"\(flow.config.cpu_device_num\(2\)\) computes a "
                                        r"value of its own; annotate it tp.ListNumpy"):
        job([np.ones(2, np.float32)] * 2)


def test_the_awaited_and_the_callback_forms(devices):
    devices(2)
    predict = _mirrored_predict()
    x, _ = _data()
    blocking = predict([x[:4], x[4:]])

    async def awaited():
        return await predict([x[:4], x[4:]])

    from_loop = asyncio.run(awaited())

    @flow.global_function(type="predict", function_config=_mirrored())
    def with_callback(x: tp.ListNumpy.Placeholder((4, 3))) -> tp.Callback[tp.ListNumpy]:
        return flow.nn.softmax(_dense(x))

    got = []
    with_callback([x[:4], x[4:]])(got.append)
    flow.sync_default_session()
    for result in (from_loop, got[0]):
        assert len(result) == 2
        for part, expected in zip(result, blocking):
            np.testing.assert_array_equal(part, expected)

    train = _mirrored_train()   # an awaited train step updates the variables once
    y = np.zeros(8, np.int32)
    train.graph
    weight, bias = _variables()

    async def step():
        return await train([x[:4], x[4:]], [y[:4], y[4:]])

    losses = asyncio.run(step())
    want, weight, bias = _reference_step(weight, bias, [x[:4], x[4:]], [y[:4], y[4:]])
    for got_loss, expected in zip(losses, want):
        np.testing.assert_allclose(got_loss, expected, rtol=1e-5)
    np.testing.assert_allclose(_variables()[0], weight, rtol=1e-5, atol=1e-6)


def test_a_checkpoint_holds_one_copy_of_the_variables(devices, tmp_path):
    devices(2)
    train = _mirrored_train()
    x, y = _data()
    for _ in range(2):
        train([x[:4], x[4:]], [y[:4], y[4:]])
    trained = {k: v.copy() for k, v in flow.get_all_variables().items()}
    flow.checkpoint.save(str(tmp_path / "model"))
    saved = sorted(p for p in os.listdir(tmp_path / "model") if p != "snapshot_done")
    assert saved == sorted(trained)
    # and a job of one device loads them
    devices(1)
    predict = _mirrored_predict()
    predict.graph
    flow.load_variables(flow.checkpoint.get(str(tmp_path / "model")))
    np.testing.assert_array_equal(_variables()[0], trained["dense-weight"])
    assert len(predict([x[:4]])) == 1


def test_watch_and_state_updates_are_device_zeros(devices):
    """What a device part does beside computing is device 0's, as a rank's own: a watch
    handler sees device 0's value once per step, a flow.assign runs once per step."""
    devices(2)
    seen = []

    @flow.global_function(type="predict", function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((2,))) -> tp.ListNumpy:
        counter = flow.get_variable("counter", shape=(1,), initializer=flow.zeros_initializer())
        flow.assign(counter, counter + 1)
        flow.watch(x, seen.append)
        return x * 2

    result = job([np.ones(2, np.float32), np.full(2, 5, np.float32)])
    assert [r.tolist() for r in result] == [[2, 2], [10, 10]]
    assert len(seen) == 1 and seen[0].tolist() == [1, 1]
    assert flow.get_all_variables()["counter"].tolist() == [1.0]


def test_a_watched_diff_is_device_zeros(devices):
    # the ones-seeded diff of device 0's loss, as a rank's handler sees its own
    devices(2)
    seen = []

    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((4, 3)),
              y: tp.ListNumpy.Placeholder((4,), dtype=flow.int32)) -> tp.ListNumpy:
        logits = _dense(x)
        flow.watch_diff(flow.get_variable("dense-weight", shape=(5, 3)), seen.append)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]),
                           momentum=0).minimize(loss)
        return loss

    x, y = _data()
    train.graph
    weight, bias = _variables()
    train([x[:4], x[4:]], [y[:4], y[4:]])
    logits = x[:4] @ weight.T + bias
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(4), y[:4]] -= 1
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], p.T @ x[:4], rtol=1e-5, atol=1e-6)


def test_device_parts_of_other_shapes(devices):
    """Mirrored placeholders are dynamic: each device may take a smaller array (a variant
    traced for the devices' shapes); the gradient is the average of the devices' own, as
    on ranks."""
    devices(2)
    train = _mirrored_train()
    x, y = _data()
    train.graph
    weight, bias = _variables()
    xs, ys = [x[:4], x[4:7]], [y[:4], y[4:7]]
    losses = train(xs, ys)
    want, weight, bias = _reference_step(weight, bias, xs, ys)
    assert [loss.shape for loss in losses] == [(4,), (3,)]
    for got, expected in zip(losses, want):
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    np.testing.assert_allclose(_variables()[0], weight, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", [
    "strict",                                          # the device path, on the CPU
    pytest.param("cupy", marks=pytest.mark.gpu),       # both device parts on one GPU
])
def test_a_device_backend_runs_the_device_parts(devices, backend):
    """Two device parts on a device backend match numpy's: float32 within 1e-5 on strict
    (numpy underneath), 1e-4 on a GPU (cuBLAS rounds otherwise), 3 steps."""
    x, y = _data()
    results = {}
    for name in ("numpy", backend):
        devices(2)
        with backends.use(name):
            train = _mirrored_train()
            flow.random.seed(5)
            losses = [train([x[:4], x[4:]], [y[:4], y[4:]]) for _ in range(3)]
            assert train.compiled_for(default_session()).backend.name == name
        results[name] = losses, _variables()
    rtol = 1e-5 if backend == "strict" else 1e-4
    (losses1, (w1, b1)), (losses2, (w2, b2)) = results["numpy"], results[backend]
    for step1, step2 in zip(losses1, losses2):
        assert len(step2) == 2
        for a, b in zip(step1, step2):
            np.testing.assert_allclose(b, a, rtol=rtol)
    np.testing.assert_allclose(w2, w1, rtol=rtol, atol=rtol / 10)
    np.testing.assert_allclose(b2, b1, rtol=rtol, atol=rtol / 10)
