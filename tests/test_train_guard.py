"""The train step's non-finite guard: one bad batch never destroys a model."""
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    flow.config.check_finite_inputs(False)   # let bad batches reach the step
    yield
    flow.config.check_finite_inputs(True)
    flow.clear_default_session()


def _mlp():
    @flow.global_function(type="train")
    def train_mlp(x: tp.Numpy.Placeholder((8, 4)),
                  y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="h")
        h = flow.layers.batch_normalization(h, axis=1, name="bn")
        logits = flow.layers.dense(h, 3, name="out")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.Adam(0.05, do_bias_correction=True).minimize(loss)
        return loss
    return train_mlp


def _batch(rng):
    x = rng.standard_normal((8, 4)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 1).astype(np.int32)


def test_a_nan_batch_changes_nothing_and_training_goes_on():
    train = _mlp()
    rng = np.random.default_rng(0)
    batches = [_batch(rng) for _ in range(4)]
    first = [float(train(*b).mean()) for b in batches]
    before = flow.get_all_variables()
    assert {"bn-moving_mean", "out-weight-m", "System-Train-TrainStep-train_mlp"} <= set(before)
    bad_x = batches[0][0].copy()
    bad_x[3, 1] = np.nan
    with pytest.warns(flow.train.NonFiniteStepWarning,
                      match=r"train job 'train_mlp'.*step 4; no update applied"):
        loss = train(bad_x, batches[0][1])
    assert np.isnan(loss).any()
    train(np.full((8, 4), np.inf, np.float32), batches[1][1])    # counted, not warned
    after = flow.get_all_variables()
    for name in before:   # weights, Adam's slots, batch norm statistics, the step counter
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert flow.train.skipped_steps(train) == 2 == flow.train.skipped_steps("train_mlp")
    for _ in range(10):
        last = [float(train(*b).mean()) for b in batches]
    assert np.isfinite(last).all() and np.mean(last) < np.mean(first)
    assert flow.get_all_variables()["System-Train-TrainStep-train_mlp"] == 4 + 40


def test_an_infinite_loss_with_finite_gradients_is_skipped_too():
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((3,)), offset: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(w * x) + flow.math.reduce_sum(offset)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss

    x = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.warns(flow.train.NonFiniteStepWarning, match="'fit'"):
        fit(x, np.array([np.inf], np.float32))     # d loss / d w = x: finite
    assert flow.get_all_variables()["w"].tolist() == [1, 1, 1]
    fit(x, np.array([0.0], np.float32))
    np.testing.assert_allclose(flow.get_all_variables()["w"], 1 - 0.1 * x)


def test_predict_jobs_have_no_guard():
    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * 2

    assert "all_finite" not in str(predict.graph)
    assert np.isnan(predict(np.array([np.nan, 1], np.float32))[0])


def test_switched_off_the_step_applies_whatever_comes_out():
    flow.config.skip_nonfinite_steps(False)
    try:
        train = _mlp()
        rng = np.random.default_rng(0)
        x, y = _batch(rng)
        train(x, y)
        assert not any(n.op.name == "all_finite"
                       for n in train.compiled_for(flow.session.default_session()).graph.nodes)
        bad_x = x.copy()
        bad_x[3, 1] = np.nan
        train(bad_x, y)             # no guard: the NaN reaches the weights
        assert np.isnan(flow.get_all_variables()["h-weight"]).any()
        assert flow.get_all_variables()["System-Train-TrainStep-train_mlp"] == 2
    finally:
        flow.config.skip_nonfinite_steps(True)


# A finite float32 batch scaled by 1e30 (issue 28): the loss and gradients are finite, but
# Adam's second moment squared them to infinity, and momentum moved weights to 1e27, after
# which every step overflowed. The guard checks that the gradients' squares are finite,
# so what the step would write is too.
OPTIMIZERS = {
    "adam": lambda: flow.optimizer.Adam(1e-3, do_bias_correction=True),
    "momentum": lambda: flow.optimizer.SGD(0.1, momentum=0.9),
    "sgd": lambda: flow.optimizer.SGD(0.1, momentum=0),
    "rmsprop": lambda: flow.optimizer.RMSProp(1e-3),
}


def _dense_job(make_optimizer):
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((8, 16)),
            y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, 32, activation=flow.nn.relu, name="h")
        logits = flow.layers.dense(h, 3, name="out")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        make_optimizer().minimize(loss)
        return loss
    return fit


@pytest.mark.parametrize("name", ["adam", "momentum"])
def test_a_finite_batch_whose_step_would_overflow_changes_nothing(name):
    fit = _dense_job(OPTIMIZERS[name])
    rng = np.random.default_rng(0)
    x = rng.random((8, 16), dtype=np.float32)
    y = rng.integers(0, 3, 8).astype(np.int32)
    fit(x, y)
    before = flow.get_all_variables()
    with pytest.warns(flow.train.NonFiniteStepWarning,
                      match=r"'fit': the batch of call 2 of this job .*squares overflow.*step 1;"
                            r" no update applied"):
        fit(x * np.float32(1e30), y)
    after = flow.get_all_variables()
    for variable in before:      # weights, slots, the step counter: nothing written
        np.testing.assert_array_equal(after[variable], before[variable], err_msg=variable)
    losses = [float(fit(x, y).mean()) for _ in range(5)]   # training goes on
    assert flow.train.skipped_steps(fit) == 1 and np.isfinite(losses).all()
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_step_the_guard_lets_through_writes_finite_values(name):
    # Batches scaled up to float32's limits: each step is either skipped with nothing
    # written, or everything it wrote (weights and optimizer slots) is finite.
    fit = _dense_job(OPTIMIZERS[name])
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 8).astype(np.int32)
    for scale in [1, 1e5, 1e10, 1e15, 1e18, 1e20, 1e25, 1e30, 1e35, 3e38]:
        x = (rng.random((8, 16)) * scale).astype(np.float32)
        before, skipped = flow.get_all_variables(), flow.train.skipped_steps(fit)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", flow.train.NonFiniteStepWarning)
            fit(x, y)
        after = flow.get_all_variables()
        if flow.train.skipped_steps(fit) > skipped:
            assert all(np.array_equal(after[v], before[v]) for v in before), scale
        else:
            bad = [v for v in after if not np.isfinite(after[v]).all()]
            assert bad == [], f"scale {scale:g}: non-finite {bad}"
