"""What the op matrix rows cannot express for the OneFlow v0.3.4 names of issue 18: ops
with no Blob input (range, ones, zeros), layers with variables (layer_norm, prelu,
conv1d), and bad arguments refused with a message that names them."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _predict(body, x):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder(x.shape, dtype=flow.float32)) -> tp.Numpy:
        return body(x)
    return job(x)


@pytest.mark.parametrize("make, want", [
    (lambda: flow.range(5), np.arange(5, dtype=np.int64)),
    (lambda: flow.range(2, 11, 3), np.arange(2, 11, 3, dtype=np.int64)),
    (lambda: flow.range(0.5, 2.0, 0.5), np.arange(0.5, 2.0, 0.5, dtype=np.float32)),
    (lambda: flow.range(4, dtype=flow.float64), np.arange(4, dtype=np.float64)),
    (lambda: flow.ones((2, 3)), np.ones((2, 3), np.float32)),
    (lambda: flow.zeros((3,), dtype=flow.int32), np.zeros(3, np.int32)),
    (lambda: flow.constant_scalar(2.5), np.array([2.5], np.float32)),
])
def test_constant_makers(make, want):
    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        return make()
    got = job()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_elem_cnt_and_identity_n():
    x = np.zeros((2, 3, 4), np.float32)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3, 4))) -> tp.Numpy:
        a, b = flow.identity_n([x, x + 1])
        return flow.cast(flow.elem_cnt(a), flow.float32) + flow.math.reduce_sum(b)
    np.testing.assert_array_equal(job(x), [24 + 24])


def test_layer_norm_layer_variables_and_values():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    got = _predict(lambda b: flow.layers.layer_norm(b, begin_norm_axis=1), x)
    axes = (1, 2)
    want = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    variables = flow.get_all_variables()
    assert variables["LayerNorm-gamma"].shape == (4,)
    np.testing.assert_array_equal(variables["LayerNorm-beta"], np.zeros(4, np.float32))


def test_two_unnamed_layer_norms_get_their_own_variables():
    x = np.ones((2, 3), np.float32)
    _predict(lambda b: flow.layers.layer_norm(flow.layers.layer_norm(b)), x)
    assert {"LayerNorm-gamma", "LayerNorm_1-gamma"} <= set(flow.get_all_variables())


def test_layer_norm_layer_trains_gamma_and_beta():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5)).astype(np.float32)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 5))) -> tp.Numpy:
        y = flow.layers.layer_norm(x, name="ln")
        loss = flow.math.reduce_mean(flow.math.square(y - 1.0))
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss
    first = float(train(x)[0])
    for _ in range(20):
        last = float(train(x)[0])
    assert last < first
    assert not np.allclose(flow.get_all_variables()["ln-beta"], 0)


def test_prelu_layer():
    x = np.array([[-2.0, 1.0], [3.0, -4.0]], np.float32)
    got = _predict(lambda b: flow.layers.prelu(
        b, alpha_initializer=flow.constant_initializer(0.25), name="act"), x)
    np.testing.assert_allclose(got, np.where(x > 0, x, 0.25 * x))
    assert flow.get_all_variables()["act-alpha"].shape == (2,)


def test_conv1d_layer_shapes():
    x = np.ones((2, 3, 8), np.float32)
    got = _predict(lambda b: flow.layers.conv1d(b, 5, kernel_size=3, padding="SAME",
                                                name="c1"), x)
    assert got.shape == (2, 5, 8)
    assert flow.get_all_variables()["c1-weight"].shape == (5, 3, 3)


BAD = [
    (lambda x: flow.gather(x, x), TypeError, "gather: indices must be an integer Blob"),
    (lambda x: flow.gather(x, flow.constant([0]), axis=0, batch_dims=1), AttributeError,
     "axis \\(0\\) must not be below batch_dims"),
    (lambda x: flow.one_hot(flow.cast(x, flow.int32), depth=0), ValueError,
     "one_hot: depth must be a positive int"),
    (lambda x: flow.pad(x, [(1, 1)]), ValueError, "pad: paddings must give"),
    (lambda x: flow.sort(x, direction="UP"), ValueError, "sort: direction must be"),
    (lambda x: flow.stack([x, flow.reshape(x, (3, 2))]), ValueError, "stack: inputs\\[1\\]"),
    (lambda x: flow.math.top_k(x, k=0), ValueError, "top_k: k must be a positive int"),
    (lambda x: flow.math.tril(flow.reshape(x, (6,))), ValueError, "tril: x must be at least"),
    (lambda x: flow.nn.layer_norm(x, gamma=flow.constant(1.0, shape=(2,))), ValueError,
     "layer_norm: gamma must have shape"),
    (lambda x: flow.nn.batch_normalization(x, flow.constant(0.0, shape=(4,)),
                                           flow.constant(1.0, shape=(3,))), ValueError,
     "batch_normalization: mean must be"),
    (lambda x: flow.nn.hardtanh(x, 1.0, -1.0), ValueError, "hardtanh: min_val"),
    (lambda x: flow.nn.conv1d(x, x), ValueError, "conv1d: input must be 3-d"),
    (lambda x: flow.math.polyval(2.0, x), TypeError, "polyval: coeffs must be"),
]


@pytest.mark.parametrize("body, exc, match", BAD)
def test_bad_arguments_are_refused(body, exc, match):
    with pytest.raises(exc, match=match):
        _predict(body, np.zeros((2, 3), np.float32))


# -- knobs that have no effect here ---------------------------------------------------------


@pytest.mark.parametrize("knob", ["enable_legacy_model_io", "enable_model_io_v2",
                                  "enable_tensor_float_32_compute"])
def test_no_effect_knobs_warn_once_at_the_users_line(knob, monkeypatch):
    from aioflow.engine import session
    monkeypatch.setattr(session.warn_once, "__defaults__", (set(),))  # as in a new process
    with pytest.warns(RuntimeWarning, match=f"{knob}.*has no effect") as record:
        getattr(flow.config, knob)(True)
    assert record[0].filename == __file__
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(flow.config, knob)(False)                 # once: no second warning
    with pytest.raises(TypeError, match=f"flow.config.{knob}: expected a bool"):
        getattr(flow.config, knob)("yes")


def test_legacy_model_io_enabled_reports_what_was_recorded(monkeypatch):
    from aioflow.engine import session
    monkeypatch.setattr(session.warn_once, "__defaults__", ({"config.enable_legacy_model_io"},))
    flow.config.enable_legacy_model_io(True)
    assert flow.config.legacy_model_io_enabled() is True
    flow.config.enable_legacy_model_io(False)
    assert flow.config.legacy_model_io_enabled() is False


# -- LAMB's zero-norm case -------------------------------------------------------------------


def test_lamb_moves_a_variable_that_starts_at_zero():
    @flow.global_function(type="train")
    def train() -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), dtype=flow.float64,
                              initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * flow.constant(np.array([1.0, -2.0, 0.5]),
                                                      dtype=flow.float64))
        flow.optimizer.LAMB(0.1).minimize(loss)
        return loss
    train()
    # ||w|| = 0: the trust ratio is 1, so the first step is Adam's: -lr * sign(g).
    np.testing.assert_allclose(flow.get_all_variables()["w"], [-0.1, 0.1, -0.1], rtol=1e-5)


@pytest.mark.parametrize("make, match", [
    (lambda: flow.optimizer.LAMB(0.1, beta1=1.0), "LAMB beta1"),
    (lambda: flow.optimizer.LAMB(0.1, epsilon=0), "LAMB epsilon"),
    (lambda: flow.optimizer.LARS(0.1, lars_coefficient=0), "LARS lars_coefficient"),
    (lambda: flow.optimizer.LARS(0.1, momentum_beta=-0.1), "LARS momentum_beta"),
])
def test_layerwise_optimizer_arguments_are_checked(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_loss_reduction_is_checked():
    with pytest.raises(ValueError, match="MSELoss: reduction must be one of"):
        _predict(lambda x: flow.nn.MSELoss(x, x, reduction="batchmean"),
                 np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="L1Loss: inputs must have one shape"):
        _predict(lambda x: flow.nn.L1Loss(x, flow.reshape(x, (3, 2))),
                 np.zeros((2, 3), np.float32))


def test_the_view_in_force_and_the_machine_id():
    flow.clear_default_session()
    assert flow.scope.consistent_view_enabled() and not flow.scope.mirrored_view_enabled()
    assert flow.current_machine_id() == 0
    seen = []
    for view in (flow.scope.mirrored_view(), flow.scope.consistent_view()):
        config = flow.function_config()
        config.default_logical_view(view)

        @flow.global_function(type="predict", function_config=config)
        def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            seen.append((flow.scope.consistent_view_enabled(),
                         flow.scope.mirrored_view_enabled()))
            return x + 1
        job.compiled_for(flow.session.default_session())
    assert seen == [(False, True), (True, False)]
    flow.clear_default_session()
