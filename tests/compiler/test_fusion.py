"""Every compiler rewrite against the unrewritten graph: same outputs, same training."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends


@pytest.fixture(autouse=True)
def restore_fusion():
    # These tests pin the CPU kernels' rewrites, threading and allocations: on the CPU
    # whatever AIOFLOW_DEVICE the run chose for the rest of the suite.
    flow.clear_default_session()
    with backends.use("numpy"):
        yield
    flow.config.enable_fusion(True)
    flow.clear_default_session()


def _convnet(images, pool_pad="VALID", ksize=2, strides=2, filters=4, kernel=3,
             activation=flow.nn.relu):
    conv = flow.layers.conv2d(images, filters, kernel, padding="SAME",
                              activation=activation, name="conv")
    pool = flow.nn.max_pool2d(conv, ksize=ksize, strides=strides, padding=pool_pad)
    return flow.layers.dense(flow.reshape(pool, [pool.shape[0], -1]), 3, name="fc")


def _run(fused, shape=(5, 2, 8, 8), **geometry):
    flow.clear_default_session()
    flow.config.enable_fusion(fused)
    rng = np.random.default_rng(0)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(shape),
              y: tp.Numpy.Placeholder((shape[0],), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, _convnet(x, **geometry))
        flow.optimizer.SGD(0.1, momentum=0.9).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        return _convnet(x, **geometry)

    shapes = {k: v.shape for k, v in flow.get_all_variables().items()}  # compiles both
    weights = {k: rng.standard_normal(shapes[k]).astype(np.float32) * 0.3
               for k in ("conv-weight", "conv-bias", "fc-weight", "fc-bias")}
    flow.load_variables(weights)
    x = rng.standard_normal(shape).astype(np.float32)
    y = (np.arange(shape[0]) % 3).astype(np.int32)
    losses = [train(x, y) for _ in range(3)]
    ops = [n.op.name for n in train.graph.nodes]
    return predict(x), losses, flow.get_all_variables(), ops


def test_pool_before_bias_relu_matches_unfused_forward_and_training():
    out_f, losses_f, vars_f, ops_f = _run(True)
    out_u, losses_u, vars_u, ops_u = _run(False)
    # pooling moved before the bias and relu, then fused into the convolution
    assert ops_f.index("conv2d_max_pool2d") < ops_f.index("bias_add") < ops_f.index("relu")
    assert "max_pool2d" not in ops_f and "conv2d" not in ops_f
    assert ops_u.index("bias_add") < ops_u.index("relu") < ops_u.index("max_pool2d")
    _assert_same_results((out_f, losses_f, vars_f), (out_u, losses_u, vars_u))


def _assert_same_results(fused, unfused):
    """Same predictions, same losses and same trained variables to float rounding."""
    (out_f, losses_f, vars_f), (out_u, losses_u, vars_u) = fused, unfused
    np.testing.assert_allclose(out_f, out_u, rtol=1e-5, atol=1e-6)
    for a, b in zip(losses_f, losses_u):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for name in vars_u:
        np.testing.assert_allclose(vars_f[name], vars_u[name], rtol=1e-5, atol=1e-6)


def test_rewrite_is_skipped_for_overlapping_or_padded_windows():
    _, _, _, ops = _run(True, ksize=3, strides=2, pool_pad="SAME")
    assert ops.index("bias_add") < ops.index("relu") < ops.index("max_pool2d")


@pytest.mark.parametrize("shape,geometry,kernel_path", [
    ((5, 2, 8, 8), {}, "im2col"),                                  # few input channels
    ((16, 16, 8, 8), {"filters": 16, "kernel": 5}, "winograd"),    # Winograd's 2x2 tiles
    ((5, 2, 7, 7), {}, "unfused kernels"),                         # odd output: floor mode
])
def test_conv_max_pool_fusion_matches_unfused(shape, geometry, kernel_path, monkeypatch):
    from aioflow.kernels import winograd
    calls = []
    real = winograd.max_of_phases
    monkeypatch.setattr(winograd, "max_of_phases",
                        lambda *a: (calls.append(1), real(*a))[1])
    out_f, losses_f, vars_f, ops_f = _run(True, shape=shape, **geometry)
    fused_calls = len(calls)
    out_u, losses_u, vars_u, ops_u = _run(False, shape=shape, **geometry)
    assert "conv2d_max_pool2d" in ops_f and "conv2d_max_pool2d" not in ops_u
    assert (fused_calls > 0) is (kernel_path != "unfused kernels") and len(calls) == fused_calls
    _assert_same_results((out_f, losses_f, vars_f), (out_u, losses_u, vars_u))


def test_conv_max_pool_fusion_needs_the_pool_to_be_the_only_reader():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def both(x: tp.Numpy.Placeholder((2, 2, 8, 8))) -> tp.Numpy:
        conv = flow.layers.conv2d(x, 4, 3, padding="SAME", name="conv")
        pool = flow.nn.max_pool2d(conv, ksize=2, strides=2, padding="VALID")
        return flow.math.reduce_sum(conv) + flow.math.reduce_sum(pool)

    both(np.zeros((2, 2, 8, 8), np.float32))
    ops = [n.op.name for n in both.graph.nodes]
    assert "conv2d" in ops and "max_pool2d" in ops and "conv2d_max_pool2d" not in ops


def test_without_an_activation_the_pooling_still_moves_before_the_bias_and_fuses():
    fused = _run(True, activation=None)
    unfused = _run(False, activation=None)
    ops = fused[3]
    assert "conv2d_max_pool2d" in ops and "relu" not in ops
    assert ops.index("conv2d_max_pool2d") < ops.index("bias_add")
    _assert_same_results(fused[:3], unfused[:3])
