"""Launch fusion (compiler/launch_fusion.py): the fused ops against the unfused composition
on numpy and on the strict backend, where each rewrite applies and where it must not, and
the launch count of the seed MLP and LeNet."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.engine.session import default_session

BATCH = 8


@pytest.fixture(autouse=True)
def restore_config():
    flow.clear_default_session()
    yield
    flow.config.launch_fusion("auto")
    flow.config.enable_fusion(True)
    flow.clear_default_session()


def mlp(images):
    hidden = flow.layers.dense(flow.reshape(images, [images.shape[0], -1]), 32,
                               activation=flow.nn.relu, name="hidden")
    return flow.layers.dense(hidden, 10, name="output")


def lenet(images):
    conv1 = flow.layers.conv2d(images, 4, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv1")
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME")
    conv2 = flow.layers.conv2d(pool1, 8, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv2")
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME")
    hidden = flow.layers.dense(flow.reshape(pool2, [pool2.shape[0], -1]), 32,
                               activation=flow.nn.relu, name="dense1")
    return flow.layers.dense(hidden, 10, name="dense2")


OPTIMIZERS = {
    "sgd": lambda: flow.optimizer.SGD(0.1, momentum=0),
    "momentum": lambda: flow.optimizer.SGD(0.05, momentum=0.9),
    "adam": lambda: flow.optimizer.Adam(1e-2),
    "adam-corrected": lambda: flow.optimizer.Adam(1e-2, do_bias_correction=True),
    "adamw": lambda: flow.optimizer.AdamW(1e-2, weight_decay=0.01),
}


def _data(steps=3, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.random((BATCH, 1, 28, 28), dtype=np.float32),
             rng.integers(0, 10, BATCH).astype(np.int32)) for _ in range(steps)]


def _train(model, optimizer, backend, fusion, initial=None, loss_of=None):
    """(losses, variables after training, launches per step, the plan's op names)."""
    flow.clear_default_session()
    flow.config.launch_fusion(fusion)
    with backends.use(backend):
        @flow.global_function(type="train")
        def train(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, model(images))
            OPTIMIZERS[optimizer]().minimize(loss if loss_of is None else loss_of(loss))
            return loss

        plan = train.compiled_for(default_session()).plan
        if initial is not None:
            flow.load_variables(initial)
        variables = flow.get_all_variables()
        losses = [train(x, y) for x, y in _data()]
        return (losses, flow.get_all_variables(), variables, plan.launches_per_step,
                [ins.op_name for ins in plan.instructions])


def _assert_same_training(fused, unfused):
    np.testing.assert_allclose(np.array(fused[0]), np.array(unfused[0]), rtol=1e-5,
                               atol=1e-6)
    for name, value in unfused[1].items():
        np.testing.assert_allclose(fused[1][name], value, rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("model, optimizer", [
    *[pytest.param(mlp, name, id=f"mlp-{name}") for name in sorted(OPTIMIZERS)],
    pytest.param(lenet, "momentum", id="lenet-momentum"),
    pytest.param(lenet, "adam", id="lenet-adam"),
])
def test_fused_training_equals_unfused_on_numpy(model, optimizer):
    unfused = _train(model, optimizer, "numpy", False)
    fused = _train(model, optimizer, "numpy", True, initial=unfused[2])
    assert "multi_sgd_update" in fused[4] or "multi_momentum_update" in fused[4] or (
        "multi_adam_update" in fused[4])
    assert {"bias_add_relu", "sparse_softmax_cross_entropy_train"} <= set(fused[4])
    _assert_same_training(fused, unfused)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_the_strict_backend_fuses_by_default_and_matches_the_unfused_numpy_run(optimizer):
    unfused = _train(mlp, optimizer, "numpy", "auto")
    assert "bias_add_relu" not in unfused[4]    # numpy's default path is left as it was
    fused = _train(mlp, optimizer, "strict", "auto", initial=unfused[2])
    assert "bias_add_relu" in fused[4]
    _assert_same_training(fused, unfused)


def test_the_strict_backend_runs_the_fused_lenet():
    unfused = _train(lenet, "momentum", "numpy", False)
    fused = _train(lenet, "momentum", "strict", "auto", initial=unfused[2])
    assert "multi_momentum_update" in fused[4]
    _assert_same_training(fused, unfused)


@pytest.mark.parametrize("model, saved", [(mlp, 1 + 1 + 3), (lenet, 3 + 1 + 7)],
                         ids=["mlp", "lenet"])
def test_fusion_cuts_the_launches_per_step(model, saved):
    # MLP: one bias + relu, the cross entropy with its gradient, four updates -> one;
    # LeNet: three bias + relu, the cross entropy, eight updates -> one.
    unfused = _train(model, "sgd", "numpy", False)[3]
    fused = _train(model, "sgd", "numpy", True)[3]
    assert fused == unfused - saved


def test_enable_fusion_false_turns_launch_fusion_off_too():
    flow.config.enable_fusion(False)
    ops = _train(mlp, "sgd", "strict", "auto")[4]
    assert "bias_add_relu" not in ops and "multi_sgd_update" not in ops


def test_the_cross_entropy_keeps_its_gradient_op_when_the_loss_gradient_needs_the_loss():
    # minimize(loss * loss): the loss's gradient is 2 * loss, known only after the loss.
    unfused = _train(mlp, "sgd", "numpy", False, loss_of=lambda loss: loss * loss)
    fused = _train(mlp, "sgd", "numpy", True, initial=unfused[2],
                   loss_of=lambda loss: loss * loss)
    assert "sparse_softmax_cross_entropy_grad" in fused[4]
    assert "sparse_softmax_cross_entropy_train" not in fused[4]
    _assert_same_training(fused, unfused)


def test_a_bias_add_read_elsewhere_keeps_its_relu_apart():
    flow.config.launch_fusion(True)

    @flow.global_function(type="predict")
    def both(x: tp.Numpy.Placeholder((4, 3)), b: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        biased = flow.nn.bias_add(x, b)
        return flow.nn.relu(biased) + biased

    x = np.array([[-1, 2, -3], [4, -5, 6], [0.5, -0.5, 0], [1, 1, -1]], np.float32)
    b = np.array([0.25, -0.25, 1], np.float32)
    np.testing.assert_allclose(both(x, b), np.maximum(x + b, 0) + x + b, rtol=1e-6)
    ops = [ins.op_name for ins in both.compiled_for(default_session()).plan.instructions]
    assert "bias_add_relu" not in ops and "relu" in ops


def test_bias_add_relu_forward_and_gradient_against_numpy():
    flow.config.launch_fusion(True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 4, 4)).astype(np.float64)
    w0 = rng.standard_normal(3)

    @flow.global_function(type="train")
    def fit(x_: tp.Numpy.Placeholder((5, 3, 4, 4), dtype=flow.float64)) -> tp.Numpy:
        b = flow.get_variable("b", shape=(3,), dtype=flow.float64,
                              initializer=flow.zeros_initializer())
        y = flow.nn.relu(flow.nn.bias_add(x_, b, data_format="NCHW"))
        flow.optimizer.SGD(1.0, momentum=0).minimize(flow.math.reduce_sum(y * y))
        return y

    assert "bias_add_relu" in [i.op_name for i in fit.compiled_for(default_session()).plan.instructions]
    flow.load_variables({"b": w0})
    y = fit(x)
    expected = np.maximum(x + w0.reshape(1, 3, 1, 1), 0)
    np.testing.assert_allclose(y, expected, rtol=1e-12)
    # d/db sum(relu(x + b)^2) = sum over all but the channel of 2 relu(x + b)
    grad = (2 * expected).sum(axis=(0, 2, 3))
    np.testing.assert_allclose(flow.get_all_variables()["b"], w0 - grad, rtol=1e-10)


def test_launches_per_step_counts_what_launches():
    flow.config.launch_fusion(False)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return flow.math.exp(flow.reshape(x, [6, 4])) + 1.0   # reshape is a view

    plan = job.compiled_for(default_session()).plan
    counted = [i.op_name for i in plan.instructions if i.op_name != "reshape"]
    assert plan.launches_per_step == len(counted)
