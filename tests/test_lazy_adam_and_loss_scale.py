"""flow.optimizer.LazyAdam, the loss-scaling policies and CustomScheduler, against numpy
references of OneFlow's kernels (lazy_adam, dynamic_loss_scale_schedule)."""

import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _lazy_adam_ref(w, grads, lr, b1=0.9, b2=0.999, eps=1e-8):
    """OneFlow's dense lazy_adam kernel: elements with |g| < 1e-12 keep w, m and v."""
    m, v, out = np.zeros_like(w), np.zeros_like(w), []
    for t, g in enumerate(grads, 1):
        touched = np.abs(g) >= 1e-12
        rate = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        new_m = b1 * m + (1 - b1) * g
        new_v = b2 * v + (1 - b2) * g * g
        new_w = w - rate * new_m / (np.sqrt(new_v) + eps)
        m, v, w = (np.where(touched, new, old) for new, old in
                   ((new_m, m), (new_v, v), (new_w, w)))
        out.append(w)
    return out


def test_lazy_adam_leaves_untouched_rows_and_their_moments_alone():
    rng = np.random.default_rng(0)
    table0 = rng.standard_normal((5, 3))
    weights = rng.standard_normal((2, 3))

    @flow.global_function(type="train")
    def fit(ids: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", shape=(5, 3), dtype=flow.float64,
                                  initializer=flow.zeros_initializer())
        rows = flow.gather(table, ids)
        loss = flow.math.reduce_sum(rows * flow.constant(weights, dtype=flow.float64))
        flow.optimizer.LazyAdam(0.25, beta1=0.8, beta2=0.9).minimize(loss)
        return loss

    flow.load_variables({"table": table0})
    batches = [np.array(ids, np.int32) for ids in ([0, 2], [2, 3], [0, 0], [4, 2])]
    got = []
    for ids in batches:
        fit(ids)
        got.append(flow.get_all_variables()["table"])
    grads = []
    for ids in batches:
        g = np.zeros_like(table0)
        np.add.at(g, ids, weights)
        grads.append(g)
    for step, (have, want) in enumerate(zip(got, _lazy_adam_ref(table0, grads, 0.25, 0.8, 0.9))):
        np.testing.assert_allclose(have, want, rtol=1e-10, atol=1e-12, err_msg=f"step {step}")
    assert np.array_equal(got[-1][1], table0[1])          # never looked up: never moved
    slots = flow.get_all_variables()
    assert not slots["table-m"][1].any() and not slots["table-v"][1].any()


def test_lazy_adam_differs_from_adam_only_where_gradients_are_zero():
    torch = pytest.importorskip("torch")
    # With every gradient element non-zero, LazyAdam is Adam with bias correction in the
    # form of the Adam paper's algorithm (epsilon added before correcting), which is what
    # torch.optim.Adam computes once epsilon is scaled by sqrt(1 - beta2^t).
    rng = np.random.default_rng(1)
    w0, g = rng.standard_normal(4), rng.standard_normal(4)

    @flow.global_function(type="train")
    def fit() -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), dtype=flow.float64,
                              initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * flow.constant(g, dtype=flow.float64))
        flow.optimizer.LazyAdam(0.1, epsilon=1e-3).minimize(loss)
        return loss

    flow.load_variables({"w": w0})
    fit()
    param = torch.tensor(w0.copy(), requires_grad=True)
    opt = torch.optim.Adam([param], lr=0.1, eps=1e-3 / np.sqrt(1 - 0.999))
    param.grad = torch.tensor(g)
    opt.step()
    np.testing.assert_allclose(flow.get_all_variables()["w"], param.detach().numpy(),
                               rtol=1e-9, atol=1e-12)


def _linear_job(optimizer, dtype=flow.float32):
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((4, 2), dtype=dtype),
            y: tp.Numpy.Placeholder((4, 1), dtype=dtype)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2, 1), dtype=dtype,
                              initializer=flow.zeros_initializer())
        loss = flow.math.square(flow.matmul(x, w) - y)
        optimizer().minimize(loss)
        return loss
    return fit


@pytest.mark.parametrize("make", [
    lambda: flow.optimizer.SGD(0.1, momentum=0.5, loss_scale_factor=1024.0),
    lambda: flow.optimizer.SGD(
        0.1, momentum=0.5, loss_scale_policy=flow.optimizer.loss_scale.static_loss_scale(3.0)),
    lambda: flow.optimizer.Adam(0.1, loss_scale_policy=flow.optimizer.loss_scale.
                                dynamic_loss_scale(initial_loss_scale=2.0 ** 20,
                                                   increment_period=2)),
], ids=["factor", "static", "dynamic"])
def test_loss_scaling_trains_like_no_scaling(make):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((4, 2)), rng.standard_normal((4, 1))
    plain = type(make())
    kwargs = {"momentum": 0.5} if plain is flow.optimizer.SGD else {}
    runs = []
    for optimizer in (make, lambda: plain(0.1, **kwargs)):
        flow.clear_default_session()
        fit = _linear_job(optimizer, flow.float64)
        for _ in range(4):
            fit(x, y)
        runs.append(flow.get_all_variables()["w"])
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12, atol=1e-14)


def test_dynamic_loss_scale_skips_overflowing_steps_and_adapts_the_scale():
    # d loss / d w = 4 per element: scaled by 2^127 or 2^126 it overflows float32, so those
    # steps apply nothing and halve the scale; at 2^125 it fits, and after two good steps
    # in a row the scale doubles (OneFlow's dynamic_loss_scale_schedule) -- to 2^126,
    # which overflows again.
    policy = flow.optimizer.loss_scale.dynamic_loss_scale(
        initial_loss_scale=2.0 ** 127, increment_period=2, multiplier=2.0)

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * x) * 2.0
        flow.optimizer.SGD(0.25, momentum=0, loss_scale_policy=policy).minimize(loss)
        return loss

    x = np.full(2, 2.0, np.float32)
    scales, weights = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # planned skips are counted, not warned about
        for _ in range(6):
            fit(x)
            state = flow.get_all_variables()
            scales.append(float(np.log2(state["System-Train-LossScale-fit"])))
            weights.append(float(state["w"][0]))
    assert scales == [126, 125, 125, 126, 125, 125]
    assert weights == [0.0, 0.0, -1.0, -2.0, -2.0, -3.0]   # 4 * 0.25 per applied step
    assert flow.train.skipped_steps(fit) == 3
    state = flow.get_all_variables()
    assert state["System-Train-TrainStep-fit"] == 3
    assert state["System-Train-GoodStepCounter-fit"] == 1


def test_dynamic_loss_scale_shrinks_no_lower_than_one_and_guards_even_when_switched_off():
    policy = flow.optimizer.loss_scale.dynamic_loss_scale(initial_loss_scale=2.0,
                                                          multiplier=4.0)
    flow.config.skip_nonfinite_steps(False)
    try:
        @flow.global_function(type="train")
        def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
            loss = flow.math.reduce_sum(w * x)
            flow.optimizer.SGD(0.5, momentum=0, loss_scale_policy=policy).minimize(loss)
            return loss

        flow.config.check_finite_inputs(False)
        fit(np.array([np.inf, 1.0], np.float32))
    finally:
        flow.config.skip_nonfinite_steps(True)
        flow.config.check_finite_inputs(True)
    state = flow.get_all_variables()
    assert state["System-Train-LossScale-fit"] == 1.0
    assert state["w"].tolist() == [1.0, 1.0]


def test_watch_diff_sees_the_unscaled_gradient():
    seen = []

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        h = w * x
        flow.watch_diff(h, lambda d: seen.append(d))
        loss = flow.math.reduce_sum(h)
        flow.optimizer.SGD(0.1, momentum=0, loss_scale_factor=256.0).minimize(loss)
        return loss

    fit(np.arange(3, dtype=np.float32))
    flow.sync_default_session()
    np.testing.assert_array_equal(seen[0], np.ones(3, np.float32))


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"loss_scale_factor": 2.0,
      "loss_scale_policy": flow.optimizer.loss_scale.static_loss_scale(2.0)},
     ValueError, "not both"),
    ({"loss_scale_policy": 8.0}, TypeError, "loss_scale_policy"),
    ({"loss_scale_factor": 0.0}, ValueError, "loss_scale_factor"),
    ({"loss_scale_factor": float("inf")}, ValueError, "loss_scale_factor"),
])
def test_bad_loss_scale_arguments_are_refused(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        flow.optimizer.Adam(0.1, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"initial_loss_scale": -1.0}, "initial_loss_scale"),
    ({"increment_period": 0}, "increment_period"),
    ({"increment_period": 2.5}, "increment_period"),
    ({"multiplier": 1.0}, "multiplier"),
])
def test_bad_dynamic_policies_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        flow.optimizer.loss_scale.dynamic_loss_scale(**kwargs)


def test_every_optimizer_takes_loss_scale_policy_before_variables():
    import inspect
    for name in ("SGD", "SGDW", "Adam", "AdamW", "RMSProp", "LAMB", "LARS", "LazyAdam"):
        params = list(inspect.signature(getattr(flow.optimizer, name)).parameters)
        assert params[-2:] == ["loss_scale_policy", "variables"], name


def test_custom_scheduler_reads_the_rate_from_a_blob_each_step():
    @flow.global_function(type="train")
    def fit(rate: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * flow.constant([1.0, 2.0]))
        doubled = rate * 2.0
        flow.optimizer.SGD(flow.optimizer.CustomScheduler(doubled.logical_blob_name),
                           momentum=0).minimize(loss)
        return loss

    fit(np.array([0.25], np.float32))
    fit(np.array([0.125], np.float32))
    np.testing.assert_allclose(flow.get_all_variables()["w"], [-0.75, -1.5])


@pytest.mark.parametrize("rate_of, exc, match", [
    (lambda x: "no_such_blob", ValueError, "no blob named 'no_such_blob'"),
    (lambda x: x, ValueError, "one floating-point value"),
])
def test_custom_scheduler_bad_blobs(rate_of, exc, match):
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(flow.optimizer.CustomScheduler(rate_of(x)), momentum=0).minimize(loss)
        return loss

    with pytest.raises(exc, match=match):
        fit(np.ones(2, np.float32))


def test_custom_scheduler_has_no_rate_outside_a_job():
    with pytest.raises(TypeError, match="value of the job's blob 'lr'"):
        flow.optimizer.CustomScheduler("lr").lr(0)
    with pytest.raises(TypeError, match="lbn"):
        flow.optimizer.CustomScheduler(0.1)


@pytest.mark.parametrize("make", [
    lambda **kw: flow.optimizer.SGDW(0.5, momentum=0, weight_decay=0.1, **kw),
    lambda **kw: flow.optimizer.AdamW(0.5, weight_decay=0.1, **kw),
], ids=["SGDW", "AdamW"])
@pytest.mark.parametrize("which, decayed", [
    ({}, {"dense-weight", "dense-bias"}),
    ({"weight_decay_includes": "weight"}, {"dense-weight"}),          # a str: a list of one
    ({"weight_decay_excludes": ["bias"]}, {"dense-weight"}),
    ({"weight_decay_includes": ["nothing"]}, set()),
])
def test_weight_decay_includes_and_excludes(make, which, decayed):
    # A zero gradient: the only change is the decay, so it shows who got it.
    @flow.global_function(type="train")
    def fit() -> tp.Numpy:
        names = ("dense-weight", "dense-bias")
        ws = [flow.get_variable(n, shape=(2,), dtype=flow.float64,
                                initializer=flow.ones_initializer()) for n in names]
        loss = flow.math.reduce_sum((ws[0] + ws[1]) * flow.constant([0.0, 0.0],
                                                                     dtype=flow.float64))
        make(**which).minimize(loss)
        return loss

    fit()
    state = flow.get_all_variables()
    for name in ("dense-weight", "dense-bias"):
        want = 1 - 0.5 * 0.1 if name in decayed else 1.0
        np.testing.assert_allclose(state[name], [want, want], rtol=1e-12, err_msg=name)


def test_weight_decay_includes_and_excludes_exclude_each_other():
    with pytest.raises(ValueError, match="SGDW: give weight_decay_includes or"):
        flow.optimizer.SGDW(0.1, weight_decay=0.1, weight_decay_includes=["a"],
                            weight_decay_excludes=["b"])


def test_a_predict_only_session_loads_a_checkpoint_with_loss_scale_state(tmp_path):
    policy = flow.optimizer.loss_scale.dynamic_loss_scale(initial_loss_scale=8.0)

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.Adam(0.1, loss_scale_policy=policy).minimize(loss)
        return loss

    fit(np.ones(2, np.float32))
    flow.checkpoint.save(str(tmp_path / "ckpt"))
    trained = flow.get_all_variables()["w"]
    assert "System-Train-LossScale-fit" in flow.get_all_variables()
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def infer(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())

    flow.train.CheckPoint().load(str(tmp_path / "ckpt"))     # strict, training state ignored
    np.testing.assert_array_equal(infer(np.ones(2, np.float32)), trained)
