"""Training semantics of train jobs against numpy re-implementations of OneFlow's rules.

Each optimizer runs three steps on ``loss = sum((w * x - 1)^2)`` with a different ``x``
per step; the job returns ``w`` as it was before each step's update, so every
intermediate value is compared, and the final one is read with ``get_all_variables``.
"""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

W0 = np.array([1.0, -2.0, 0.5], np.float32)
XS = [np.array([0.5, 1.0, -1.5], np.float32), np.array([2.0, -0.5, 1.0], np.float32),
      np.array([-1.0, 0.25, 3.0], np.float32)]


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def grad(w, x):
    return 2 * (w * x - 1) * x


def run_aioflow(make_optimizer, steps=3):
    """The values of ``w`` before step 0, 1, ... and after the last step."""
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.constant_initializer(0.0))
        loss = flow.math.reduce_sum(flow.math.square(w * x - 1))
        make_optimizer().minimize(loss)
        return w

    flow.load_variables({"w": W0})
    seen = [train(XS[i % len(XS)]) for i in range(steps)]
    return seen + [flow.get_all_variables()["w"]]


def run_numpy(update, steps=3):
    w = W0.astype(np.float64)
    state = {}
    seen = [w.copy()]
    for t in range(steps):
        w = update(w, grad(w, XS[t % len(XS)].astype(np.float64)), state, t)
        seen.append(w.copy())
    return seen


def assert_same_trajectory(got, expected):
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6, err_msg=f"w after {i} steps")


def sgd_ref(lr, beta):
    def update(w, g, state, t):
        if beta == 0:
            return w - lr * g
        v = state.get("v", np.zeros_like(w))
        v = beta * v - lr * g
        state["v"] = v
        return w + v
    return update


def adam_ref(lr, b1=0.9, b2=0.999, eps=1e-8, bias_correction=False, weight_decay=0.0):
    def update(w, g, state, t):
        m = b1 * state.get("m", 0) + (1 - b1) * g
        v = b2 * state.get("v", 0) + (1 - b2) * g * g
        state.update(m=m, v=v)
        if bias_correction:  # AdamW's decay at OneFlow's corrected rate
            w = w - lr * np.sqrt(1 - b2 ** (t + 1)) / (1 - b1 ** (t + 1)) * weight_decay * w
        else:   # decoupled decay with the plain rate (AdamW)
            w = w - lr * weight_decay * w
        if bias_correction:  # PyTorch's form: epsilon after the correction of sqrt(v)
            m_hat, v_hat = m / (1 - b1 ** (t + 1)), v / (1 - b2 ** (t + 1))
            return w - lr * m_hat / (np.sqrt(v_hat) + eps)
        return w - lr * m / (np.sqrt(v) + eps)
    return update


def rmsprop_ref(lr, decay=0.99, eps=1e-8, centered=False):
    def update(w, g, state, t):
        s = decay * state.get("s", 0) + (1 - decay) * g * g
        state["s"] = s
        denom = s
        if centered:
            mg = decay * state.get("mg", 0) + (1 - decay) * g
            state["mg"] = mg
            denom = s - mg * mg
        return w - lr * g / np.sqrt(denom + eps)
    return update


# ------------------------------------------------------------------------- optimizers

def test_sgd_default_momentum_is_0_9():
    got = run_aioflow(lambda: flow.optimizer.SGD(0.1))
    assert_same_trajectory(got, run_numpy(sgd_ref(0.1, 0.9)))
    plain = run_numpy(sgd_ref(0.1, 0.0))
    assert not np.allclose(got[-1], plain[-1], atol=1e-3)  # the check can tell them apart


def test_sgd_momentum_zero_is_plain_sgd():
    got = run_aioflow(lambda: flow.optimizer.SGD(0.1, momentum=0))
    assert_same_trajectory(got, run_numpy(sgd_ref(0.1, 0.0)))
    assert "w-momentum" not in flow.get_all_variables()


def test_sgd_with_explicit_momentum():
    got = run_aioflow(lambda: flow.optimizer.SGD(0.05, momentum=0.5))
    assert_same_trajectory(got, run_numpy(sgd_ref(0.05, 0.5)))
    assert "w-momentum" in flow.get_all_variables()


def test_adam_without_bias_correction_is_the_default():
    got = run_aioflow(lambda: flow.optimizer.Adam(0.1))
    assert_same_trajectory(got, run_numpy(adam_ref(0.1)))
    corrected = run_numpy(adam_ref(0.1, bias_correction=True))
    assert not np.allclose(got[-1], corrected[-1], atol=1e-3)


def test_adam_with_bias_correction():
    got = run_aioflow(lambda: flow.optimizer.Adam(0.1, beta1=0.8, beta2=0.99, epsilon=1e-6,
                                                  do_bias_correction=True))
    assert_same_trajectory(got, run_numpy(adam_ref(0.1, 0.8, 0.99, 1e-6,
                                                   bias_correction=True)))


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop(centered):
    got = run_aioflow(lambda: flow.optimizer.RMSProp(0.01, decay_rate=0.9, epsilon=1e-6,
                                                     centered=centered))
    assert_same_trajectory(got, run_numpy(rmsprop_ref(0.01, 0.9, 1e-6, centered)))


def test_adamw_decays_weights_decoupled():
    got = run_aioflow(lambda: flow.optimizer.AdamW(0.1, weight_decay=0.5,
                                                   do_bias_correction=True))
    assert_same_trajectory(got, run_numpy(adam_ref(0.1, bias_correction=True,
                                                   weight_decay=0.5)))


def test_adamw_weight_decay_excludes():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        a = flow.get_variable("a-weight", shape=(2,), initializer=flow.ones_initializer())
        b = flow.get_variable("a-bias", shape=(2,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(a * x + b * x)
        flow.optimizer.AdamW(0.1, weight_decay=1.0, weight_decay_excludes=["bias"]).minimize(loss)
        return loss

    train(np.zeros(2, np.float32))  # zero gradient: only weight decay moves anything
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["a-weight"], [0.9, 0.9], rtol=1e-6)
    np.testing.assert_array_equal(values["a-bias"], [1.0, 1.0])


# ------------------------------------------------------------------------- minimize

def test_non_scalar_loss_trains_like_its_mean():
    def make(mean):
        name = "mean" if mean else "vector"

        def train(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
            w = flow.get_variable(f"w_{name}", shape=(3, 1),
                                  initializer=flow.constant_initializer(0.5))
            per_sample = flow.math.square(flow.matmul(x, w) - 1.0)  # shape (4, 1)
            loss = flow.math.reduce_mean(per_sample) if mean else per_sample
            flow.optimizer.SGD(0.1).minimize(loss)
            return w
        train.__name__ = name
        return flow.global_function(type="train")(train)

    vector, mean = make(False), make(True)
    x = np.stack(XS + [XS[0] * 2]).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(vector(x), mean(x), rtol=1e-6)
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["w_vector"], values["w_mean"], rtol=1e-6)
    assert not np.allclose(values["w_vector"], 0.5)


@pytest.mark.parametrize("lr, expected", [
    # value i while step <= boundary i; the first step is step 0
    (lambda: flow.optimizer.PiecewiseConstantScheduler([1, 3], [1.0, 0.1, 0.01]),
     [1.0, 1.0, 0.1, 0.1, 0.01, 0.01]),
    (lambda: flow.optimizer.PiecewiseConstantScheduler([], [0.25]), [0.25] * 6),
    (lambda: 0.5, [0.5] * 6),
])
def test_learning_rate_schedule_follows_the_step_counter(lr, expected):
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(1,), initializer=flow.zeros_initializer())
        flow.optimizer.SGD(lr(), momentum=0).minimize(flow.math.reduce_sum(w * x))
        return w

    one = np.ones(1, np.float32)
    seen = [float(train(one)[0]) for _ in range(6)] + [float(flow.get_all_variables()["w"][0])]
    steps = [a - b for a, b in zip(seen, seen[1:])]  # gradient is 1: each step moves by lr
    np.testing.assert_allclose(steps, expected, rtol=1e-6)
    assert flow.get_all_variables()["System-Train-TrainStep-train"] == 6


def test_train_job_without_minimize_is_refused():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(1,))

    with pytest.raises(RuntimeError, match=r"train job 'train' has no training target.*"
                                           r"minimize"):
        train(np.ones(1, np.float32))


def test_minimize_in_a_predict_job_is_refused():
    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        loss = flow.math.reduce_sum(x * flow.get_variable("w", shape=(1,)))
        flow.optimizer.SGD(0.1).minimize(loss)
        return loss

    with pytest.raises(TypeError, match=r"'predict'.*minimize.*type='train'"):
        predict(np.ones(1, np.float32))


def test_minimize_twice_is_refused():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        loss = flow.math.reduce_sum(x * flow.get_variable("w", shape=(1,)))
        flow.optimizer.SGD(0.1).minimize(loss)
        flow.optimizer.SGD(0.1).minimize(loss)
        return loss

    with pytest.raises(RuntimeError, match="once per job"):
        train(np.ones(1, np.float32))


def test_an_integer_loss_trains_as_in_oneflow():
    # OneFlow differentiates an integer loss (issue 25: test_masked_fill, test_tril); one
    # that no variable feeds leaves the variables as they were.
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1,), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(1,), initializer=flow.constant_initializer(2.0))
        flow.optimizer.SGD(0.1).minimize(x)
        return w

    np.testing.assert_array_equal(train(np.ones(1, np.int32)), [2.0])
    np.testing.assert_array_equal(flow.get_all_variables()["w"], [2.0])


# ------------------------------------------------------------------------- what trains

def test_non_trainable_variables_are_not_updated():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        frozen = flow.get_variable("frozen", shape=(2,), trainable=False,
                                   initializer=flow.constant_initializer(2.0))
        live = flow.get_variable("live", shape=(2,), initializer=flow.constant_initializer(2.0))
        h = flow.layers.dense(x, 2, name="fixed", trainable=False,
                              kernel_initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(h * frozen * live)
        flow.optimizer.SGD(0.1).minimize(loss)
        return loss

    flow.train.CheckPoint().init()
    before = flow.get_all_variables()
    for _ in range(3):
        train(np.ones((2, 2), np.float32))
    after = flow.get_all_variables()
    for name in ("frozen", "fixed-weight", "fixed-bias"):
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
        assert f"{name}-momentum" not in after
    assert not np.allclose(after["live"], before["live"])


def test_grad_clipping_by_global_norm():
    def make(clip_norm):
        @flow.global_function(type="train")
        def train(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
            a = flow.get_variable("a", shape=(2,), initializer=flow.zeros_initializer())
            b = flow.get_variable("b", shape=(1,), initializer=flow.zeros_initializer())
            c = flow.constant(np.array([3.0, 4.0], np.float32).tolist(), dtype=flow.float,
                              shape=(2,))
            loss = flow.math.reduce_sum(a * c) + flow.math.reduce_sum(b * 12.0 * x)
            clip = flow.optimizer.grad_clipping.by_global_norm(clip_norm)
            flow.optimizer.SGD(1.0, momentum=0, grad_clipping=clip).minimize(loss)
            return loss
        return train

    train = make(1.3)  # gradients (3, 4) and (12): global norm 13 -> scaled by 0.1
    train(np.ones(1, np.float32))
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["a"], [-0.3, -0.4], rtol=1e-5)
    np.testing.assert_allclose(values["b"], [-1.2], rtol=1e-5)

    flow.clear_default_session()
    train = make(100.0)  # below the threshold: unchanged
    train(np.ones(1, np.float32))
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["a"], [-3.0, -4.0], rtol=1e-6)
    np.testing.assert_allclose(values["b"], [-12.0], rtol=1e-6)


@pytest.mark.parametrize("how", ["layer", "get_variable"])
def test_l2_regularizer_adds_to_the_training_loss(how):
    """OneFlow adds ``l2 * w`` (``l1 * sign(w)``) to a regularized variable's gradient."""
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1, 2))) -> tp.Numpy:
        two = flow.constant_initializer(2.0)
        if how == "layer":
            out = flow.layers.dense(x, 1, name="fc", kernel_initializer=two,
                                    kernel_regularizer=flow.regularizers.l2(0.1))
        else:
            w = flow.get_variable("fc-weight", shape=(1, 2), initializer=two,
                                  regularizer=flow.regularizers.l2(0.1))
            out = flow.matmul(x, w, transpose_b=True)
        loss = flow.math.reduce_sum(out)
        flow.optimizer.SGD(1.0, momentum=0).minimize(loss)
        return loss

    loss = train(np.zeros((1, 2), np.float32))  # zero data gradient: only the penalty acts
    assert float(np.asarray(loss).reshape(-1)[0]) == 0.0  # the returned loss is the user's
    np.testing.assert_allclose(flow.get_all_variables()["fc-weight"], [[1.8, 1.8]], rtol=1e-6)
    train(np.ones((1, 2), np.float32))  # data gradient 1 plus penalty 0.1 * 1.8
    np.testing.assert_allclose(flow.get_all_variables()["fc-weight"], [[0.62, 0.62]],
                               rtol=1e-5)


def test_l1_regularizer_on_a_bias():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((1, 2))) -> tp.Numpy:
        out = flow.layers.dense(x, 2, name="fc", bias_initializer=flow.constant_initializer(0.5),
                                bias_regularizer=flow.regularizers.l1(0.2))
        flow.optimizer.SGD(1.0, momentum=0).minimize(flow.math.reduce_sum(out * 0.0))
        return out

    train(np.ones((1, 2), np.float32))
    np.testing.assert_allclose(flow.get_all_variables()["fc-bias"], [0.3, 0.3], rtol=1e-6)


def test_regularization_is_not_clipped():
    """OneFlow clips the loss gradient, then adds the penalty in the update rule."""
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), regularizer=flow.regularizers.l2(0.1),
                              initializer=flow.constant_initializer(10.0))
        loss = flow.math.reduce_sum(w * x)
        clip = flow.optimizer.grad_clipping.by_global_norm(1.0)
        flow.optimizer.SGD(1.0, momentum=0, grad_clipping=clip).minimize(loss)
        return loss

    train(np.array([3.0, 4.0], np.float32))  # (3, 4) clipped to (0.6, 0.8), plus 0.1 * 10
    np.testing.assert_allclose(flow.get_all_variables()["w"], [8.4, 8.2], rtol=1e-6)


def test_default_data_type_sets_get_variable_default_dtype():
    config = flow.function_config()
    config.default_data_type(flow.double)

    @flow.global_function(type="predict", function_config=config)
    def job(x: tp.Numpy.Placeholder((2,), dtype=flow.double)) -> tp.Numpy:
        return x * flow.get_variable("w64", shape=(2,), initializer=flow.ones_initializer())

    assert job(np.ones(2)).dtype == np.float64
    assert flow.get_all_variables()["w64"].dtype == np.float64
