"""The train step's non-finite guard: one bad batch never destroys a model."""
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
