"""The older API of the 001 seed: FixedTensorDef defaults, un-annotated jobs returning
futures (``.get()`` / ``.async_get(cb)``), ``function_config`` training settings with
``flow.losses.add_loss``, ``fixed_placement`` and the positional
``global_function(config)`` form."""
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow import scope
from aioflow.engine import session as session_mod

B = 4
X = np.linspace(-1, 1, B * 6, dtype=np.float32).reshape(B, 1, 2, 3)
Y = np.array([0, 1, 2, 1], np.int32)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def get_train_config(update=None, lr=0.1):
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(lr)
    config.train.model_update_conf(update or {"naive_conf": {}})
    return config


def get_eval_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    return config


def mlp(data):
    """The seed's MLP, smaller: two dense layers without names."""
    reshape = flow.reshape(data, [data.shape[0], -1])
    hidden = flow.layers.dense(reshape, 8, activation=flow.nn.relu,
                               kernel_initializer=flow.random_uniform_initializer(-0.5, 0.5))
    return flow.layers.dense(hidden, 3, kernel_initializer=flow.random_uniform_initializer(-0.5,
                                                                                            0.5))


def softmax_xent(labels, logits):
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(labels)), labels]


# ------------------------------------------------------------------------- placeholders

def test_fixed_tensor_def_defaults():
    spec = flow.FixedTensorDef((B, 3))
    assert (spec.kind, spec.shape, spec.dtype, spec.batch_axis) == ("numpy", (B, 3),
                                                                    flow.float32, 0)
    mirrored = flow.MirroredTensorDef((B,), dtype=flow.int32)
    assert (mirrored.kind, mirrored.dtype) == ("list_numpy", flow.int32)


def test_default_argument_placeholders_are_validated_like_annotations():
    @flow.global_function(get_eval_config())
    def job(images=flow.FixedTensorDef((B, 1, 2, 3), dtype=flow.float),
            labels=flow.FixedTensorDef((B,), dtype=flow.int32)):
        return flow.reshape(images, (B, 6))

    np.testing.assert_array_equal(job(X, Y).get(), X.reshape(B, 6))
    with pytest.raises(ValueError, match=r"'images'.*\(4, 1, 2, 3\).*\(3, 1, 2, 3\)"):
        job(X[:3], Y)
    with pytest.raises(TypeError, match=r"'labels'.*int32.*float32"):
        job(X, Y.astype(np.float32))


def test_plain_default_value_is_not_a_placeholder():
    def job(images=flow.FixedTensorDef((B, 3)), scale=2.0):
        return images

    with pytest.raises(TypeError, match=r"'job'.*'scale'.*annotation"):
        flow.global_function(get_eval_config())(job)


# ------------------------------------------------------------------------- results

def test_get_returns_the_value_and_async_get_calls_back_in_order():
    @flow.global_function(get_eval_config())
    def job(x=flow.FixedTensorDef((B, 1, 2, 3))):
        return x * 2

    result = job(X)
    assert not isinstance(result, np.ndarray)
    value = result.get()
    np.testing.assert_array_equal(value, X * 2)
    np.testing.assert_array_equal(value.ndarray(), X * 2)
    assert type(value.ndarray()) is np.ndarray
    got = []
    for k in range(5):
        job(X * k).async_get(got.append)
    flow.sync_default_session()
    assert len(got) == 5
    for k, arr in enumerate(got):
        np.testing.assert_array_equal(arr, X * k * 2)


def test_async_get_takes_the_result_once():
    @flow.global_function(get_eval_config())
    def job(x=flow.FixedTensorDef((2,))):
        return x + 1

    result = job(np.zeros(2, np.float32))
    result.async_get(lambda r: None)
    with pytest.raises(RuntimeError, match="already taken"):
        result.async_get(lambda r: None)
    with pytest.raises(TypeError, match="callable"):
        job(np.zeros(2, np.float32)).async_get("not a function")
    flow.sync_default_session()


def test_dict_result_values_support_ndarray():
    got = []

    @flow.global_function(get_eval_config())
    def eval_job(images=flow.FixedTensorDef((B, 1, 2, 3), dtype=flow.float),
                 labels=flow.FixedTensorDef((B,), dtype=flow.int32)):
        with flow.fixed_placement("cpu", "0:0"):
            logits = mlp(images)
        return {"labels": labels, "logits": logits}

    eval_job(X, Y).async_get(got.append)
    flow.sync_default_session()
    (result,), = [got]
    assert set(result) == {"labels", "logits"}
    predictions = np.argmax(result["logits"].ndarray(), 1)
    assert predictions.shape == (B,)
    np.testing.assert_array_equal(result["labels"].ndarray(), Y)
    assert int(np.sum(predictions == result["labels"])) == int(np.sum(predictions == Y))
    again = eval_job(X, Y).get()  # .numpy() is the other spelling
    np.testing.assert_array_equal(again["logits"].numpy(), result["logits"].ndarray())


def test_legacy_result_of_a_tuple():
    @flow.global_function(get_eval_config())
    def job(x=flow.FixedTensorDef((2,))):
        return x, (x + 1, [x + 2])

    a, (b, (c,)) = job(np.zeros(2, np.float32)).get()
    np.testing.assert_array_equal(a.ndarray(), [0, 0])
    np.testing.assert_array_equal(b.ndarray(), [1, 1])
    np.testing.assert_array_equal(c.ndarray(), [2, 2])


# ------------------------------------------------------------------------- training

def _legacy_train_job(update=None, lr=0.1):
    @flow.global_function(get_train_config(update, lr))
    def train_job(images=flow.FixedTensorDef((B, 1, 2, 3), dtype=flow.float),
                  labels=flow.FixedTensorDef((B,), dtype=flow.int32)):
        logits = flow.layers.dense(flow.reshape(images, [B, -1]), 3, name="out",
                                   kernel_initializer=flow.constant_initializer(0.1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits,
                                                                name="softmax_loss")
        flow.losses.add_loss(loss)
        return loss
    return train_job


def _numpy_training(steps, lr, beta):
    """Softmax regression trained on the per-sample loss's mean, OneFlow's update."""
    w = np.full((3, 6), 0.1)
    b = np.zeros(3)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    x = X.reshape(B, 6).astype(np.float64)
    losses = []
    for _ in range(steps):
        logits = x @ w.T + b
        losses.append(softmax_xent(Y, logits))
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(B), Y] -= 1
        gl = p / B
        gw, gb = gl.T @ x, gl.sum(0)
        vw = beta * vw - lr * gw
        vb = beta * vb - lr * gb
        w, b = w + vw, b + vb
    return losses, w, b


@pytest.mark.parametrize("update, beta", [
    ({"naive_conf": {}}, 0.0),
    ({"momentum_conf": {"beta": 0.5}}, 0.5),
    ({"momentum_conf": {}}, 0.9),
])
def test_primary_lr_and_model_update_conf_with_add_loss_train(update, beta):
    train_job = _legacy_train_job(update, lr=0.5)
    check_point = flow.train.CheckPoint()
    check_point.init()
    losses = [train_job(X, Y).get() for _ in range(4)]
    want_losses, want_w, want_b = _numpy_training(4, 0.5, beta)
    for got, want in zip(losses, want_losses):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["out-weight"], want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["out-bias"], want_b, rtol=1e-5, atol=1e-6)
    assert values["System-Train-TrainStep-train_job"] == 4


def test_positional_config_form_matches_keyword_form():
    config = get_train_config()

    @flow.global_function(type="train", function_config=config)
    def keyword(x=flow.FixedTensorDef((2,))):
        w = flow.get_variable("kw", shape=(2,), initializer=flow.ones_initializer())
        flow.losses.add_loss(flow.math.reduce_sum(w * x))
        return w

    @flow.global_function(config)
    def positional(x=flow.FixedTensorDef((2,))):
        w = flow.get_variable("pw", shape=(2,), initializer=flow.ones_initializer())
        flow.losses.add_loss(flow.math.reduce_sum(w * x))
        return w

    x = np.array([1.0, 2.0], np.float32)
    for _ in range(2):
        keyword(x).get()
        positional(x).get()
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["kw"], [0.8, 0.6], rtol=1e-6)
    np.testing.assert_allclose(values["pw"], values["kw"])
    assert positional.job_type == "train"
    assert flow.global_function(get_eval_config())(lambda: None).job_type == "predict"


def test_add_loss_without_primary_lr_is_refused():
    config = flow.function_config()
    config.train.model_update_conf({"naive_conf": {}})

    @flow.global_function(type="train", function_config=config)
    def train_job(x=flow.FixedTensorDef((2,))):
        flow.losses.add_loss(flow.math.reduce_sum(x * flow.get_variable("w", shape=(2,))))
        return x

    with pytest.raises(RuntimeError, match="primary_lr"):
        train_job(np.ones(2, np.float32))


def test_add_loss_in_a_predict_job_is_refused():
    @flow.global_function(type="predict")
    def job(x=flow.FixedTensorDef((2,))):
        flow.losses.add_loss(flow.math.reduce_sum(x * flow.get_variable("w", shape=(2,))))
        return x

    with pytest.raises(TypeError, match=r"'job'.*add_loss.*train"):
        job(np.ones(2, np.float32))


def test_add_loss_and_minimize_together_train_every_loss_once():
    """OneFlow's minimize() adds its loss to the job's losses, as add_loss() does (the
    BERT classifier calls both on one loss): that loss counts once, another one joins."""
    @flow.global_function(type="train", function_config=get_train_config())
    def train_job(x=flow.FixedTensorDef((2,))):
        w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        v = flow.get_variable("v", shape=(2,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(x * w)
        flow.losses.add_loss(loss)
        flow.losses.add_loss(flow.math.reduce_sum(x * v) * 2.0)
        flow.optimizer.SGD(0.5, momentum=0.0).minimize(loss)
        return x

    train_job(np.ones(2, np.float32)).get()
    variables = flow.get_all_variables()
    np.testing.assert_allclose(variables["w"], [-0.5, -0.5])   # one gradient, not two
    np.testing.assert_allclose(variables["v"], [-1.0, -1.0])   # the SGD of minimize()


def test_model_update_conf_refuses_unknown_rules():
    config = flow.function_config()
    with pytest.raises(ValueError, match="lars_conf"):
        config.train.model_update_conf({"lars_conf": {}})
    with pytest.raises(ValueError, match="primary_lr"):
        config.train.primary_lr(-1)
    with pytest.raises(AttributeError):
        config.no_such_setting(1)


# ------------------------------------------------------------------------- placement, names

def test_fixed_placement_gpu_runs_on_cpu_with_one_warning(monkeypatch):
    if backends.gpu_usable():
        pytest.skip("a GPU is available: no fallback warning")
    monkeypatch.delenv("AIOFLOW_DEVICE", raising=False)   # the CPU, not chosen: warned
    monkeypatch.setattr(session_mod.warn_once, "__defaults__", (set(),))  # as in a new process

    @flow.global_function(get_eval_config())
    def first(x=flow.FixedTensorDef((2,))):
        with flow.fixed_placement("gpu", "0:0"):
            y = x * 2
        with flow.scope.placement("gpu", "0:0"):
            return y + 1

    @flow.global_function(type="predict")
    def second(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with flow.fixed_placement("gpu", "0:0"):
            return x - 1

    with pytest.warns(RuntimeWarning, match="no usable GPU") as record:
        np.testing.assert_array_equal(first(np.ones(2, np.float32)).get(), [3, 3])
        np.testing.assert_array_equal(second(np.ones(2, np.float32)), [0, 0])
    assert len([w for w in record if issubclass(w.category, RuntimeWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flow.clear_default_session()
        second(np.ones(2, np.float32))  # a new session: still no second warning


def test_placement_refuses_bad_device_specs():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with flow.scope.placement("tpu", "0:0"):
            return x

    with pytest.raises(ValueError, match="device_tag"):
        job(np.ones(2, np.float32))


def test_two_unnamed_dense_layers_do_not_collide_and_are_shared_across_jobs():
    @flow.global_function(get_train_config())
    def train_job(images=flow.FixedTensorDef((B, 1, 2, 3), dtype=flow.float),
                  labels=flow.FixedTensorDef((B,), dtype=flow.int32)):
        logits = mlp(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits,
                                                                name="softmax_loss")
        flow.losses.add_loss(loss)
        return loss

    @flow.global_function(get_eval_config())
    def eval_job(images=flow.FixedTensorDef((B, 1, 2, 3), dtype=flow.float),
                 labels=flow.FixedTensorDef((B,), dtype=flow.int32)):
        with flow.fixed_placement("cpu", "0:0"):
            logits = mlp(images)
        return {"labels": labels, "logits": logits}

    flow.train.CheckPoint().init()
    shapes = {k: v.shape for k, v in flow.get_all_variables().items()
              if not k.startswith("System-")}
    assert shapes == {"Dense-weight": (8, 6), "Dense-bias": (8,), "Dense_1-weight": (3, 8),
                      "Dense_1-bias": (3,)}
    first = train_job(X, Y).get().mean()
    for _ in range(30):
        last = train_job(X, Y).get().mean()
    assert last < first
    v = flow.get_all_variables()
    hidden = np.maximum(X.reshape(B, 6) @ v["Dense-weight"].T + v["Dense-bias"], 0)
    logits = hidden @ v["Dense_1-weight"].T + v["Dense_1-bias"]
    np.testing.assert_allclose(eval_job(X, Y).get()["logits"].ndarray(), logits, rtol=1e-5,
                               atol=1e-6)


def test_an_old_api_job_may_return_nothing():
    # OneFlow's own examples have such jobs (one that only creates a summary writer).
    seen = []

    @flow.global_function()
    def side_effect_only(x=flow.FixedTensorDef((2,))):
        flow.watch(x * 2, lambda value: seen.append(value.tolist()))
    assert side_effect_only(np.ones(2, np.float32)).get() is None
    got = []
    side_effect_only(np.full(2, 3, np.float32)).async_get(got.append)
    flow.sync_default_session()
    assert got == [None] and seen == [[2.0, 2.0], [6.0, 6.0]]


def test_add_loss_outside_a_job_is_not_implemented_as_in_oneflow():
    # OneFlow's add_loss has a lazy form (in a train job) and an eager one; outside a job
    # neither applies and its enable_if raises NotImplementedError
    with pytest.raises(NotImplementedError, match="only inside a job function"):
        flow.losses.add_loss(None)
