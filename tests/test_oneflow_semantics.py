"""Behaviours where OneFlow v0.3.4 (its kernels, checked by its own op tests) is the
reference, and a plain numpy oracle tells OneFlow's answer from another plausible one."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _value_and_diff(build, x):
    """(output, d sum(output)/dx) of ``build(x_blob)`` by a train job with watch_diff."""
    diffs = []

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(x.shape)) -> tp.Numpy:
        x = x + flow.get_variable("zero", shape=(1,), initializer=flow.zeros_initializer())
        flow.watch_diff(x, diffs.append)
        out = build(x)
        flow.optimizer.SGD(0.0, momentum=0).minimize(out)
        return out

    return job(x), diffs[0].numpy()


def test_leaky_relu_with_alpha_above_one_is_x_where_positive_else_alpha_x():
    x = np.array([-2.0, -0.5, 0.5, 3.0], np.float32)
    y, dx = _value_and_diff(lambda b: flow.nn.leaky_relu(b, alpha=5.0), x)
    np.testing.assert_allclose(y, np.where(x > 0, x, 5.0 * x))   # max(x, 5x) differs
    np.testing.assert_allclose(dx, np.where(x > 0, 1.0, 5.0))


def test_squeezing_every_axis_leaves_shape_one_as_oneflow():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((1, 1, 1))) -> tp.Numpy:
        return flow.squeeze(x)
    assert job(np.full((1, 1, 1), 7, np.float32)).shape == (1,)


def test_softmax_cross_entropy_logits_gradient_is_prob_minus_labels_as_oneflow():
    # labels that do not sum to 1: OneFlow's (and TF's) gradient is prob - labels
    logits = np.array([[0.1, 1.2, -0.3], [2.0, 0.0, 1.0]], np.float32)
    labels = np.array([[0.5, 0.9, 0.0], [0.2, 0.2, 0.2]], np.float32)
    diffs = []

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((2, 3)), y: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        x = x + flow.get_variable("zero", shape=(1,), initializer=flow.zeros_initializer())
        flow.watch_diff(x, diffs.append)
        loss = flow.nn.softmax_cross_entropy_with_logits(y, x)
        flow.optimizer.SGD(0.0, momentum=0).minimize(loss)
        return loss

    loss = job(logits, labels)
    shifted = logits - logits.max(1, keepdims=True)
    prob = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
    np.testing.assert_allclose(loss, -(labels * np.log(prob)).sum(1), rtol=1e-5)
    np.testing.assert_allclose(diffs[0].numpy(), prob - labels, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("padding, pads", [
    ([0, 0, 1, 1], ((1, 1), (1, 1))),     # OneFlow's own test: H and W both padded
    ([0, 0, 2, 3], ((2, 2), (3, 3))),
    (1, ((1, 1), (1, 1))),
])
def test_reflection_pad2d_reads_padding_as_oneflows_kernel(padding, pads):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3, 4, 5))) -> tp.Numpy:
        return flow.reflection_pad2d(x, padding)
    np.testing.assert_array_equal(job(x), np.pad(x, ((0, 0), (0, 0)) + pads, "reflect"))


def test_margin_ranking_loss_broadcasts_its_target():
    a = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], np.float32)
    b = np.array([[0.0, 2.5], [1.0, 1.0], [1.0, 1.0]], np.float32)
    t = np.array([[1.0], [-1.0], [1.0]], np.float32)

    @flow.global_function(type="predict")
    def job(a_: tp.Numpy.Placeholder((3, 2)), b_: tp.Numpy.Placeholder((3, 2)),
            t_: tp.Numpy.Placeholder((3, 1))) -> tp.Numpy:
        return flow.nn.MarginRankingLoss(a_, b_, t_, margin=0.2, reduction="none")
    np.testing.assert_allclose(job(a, b, t), np.maximum(0, -t * (a - b) + 0.2), rtol=1e-6)


def test_smooth_l1_loss_with_beta_zero_is_the_l1_loss():
    x = np.array([-1.5, 0.2, 0.0, 2.0], np.float32)
    y, dx = _value_and_diff(
        lambda b: flow.smooth_l1_loss(b, flow.constant(0.0, shape=(4,)), beta=0.0), x)
    np.testing.assert_allclose(y, np.abs(x))
    np.testing.assert_allclose(dx, np.sign(x))
    with pytest.raises(ValueError, match="beta must be at least 0, got -1"):
        _value_and_diff(lambda b: flow.smooth_l1_loss(b, b, beta=-1.0), x)


def test_eager_execution_is_reported_off():
    assert flow.eager_execution_enabled() is False


@pytest.mark.parametrize("params_shape, indices_shape, batch_dims", [
    ((2, 8, 4), (2, 3), 1), ((3, 4, 6, 2), (3, 4, 5), 2)])
def test_gather_with_batch_dims_picks_within_each_batch_entry(params_shape, indices_shape,
                                                               batch_dims):
    rng = np.random.default_rng(0)
    params = rng.random(params_shape).astype(np.float32)
    indices = rng.integers(0, params_shape[batch_dims], indices_shape).astype(np.int32)
    diffs = []

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(params_shape),
            i: tp.Numpy.Placeholder(indices_shape, dtype=flow.int32)) -> tp.Numpy:
        x = x + flow.get_variable("zero", shape=(1,), initializer=flow.zeros_initializer())
        flow.watch_diff(x, diffs.append)
        out = flow.gather(x, i, batch_dims=batch_dims)
        flow.optimizer.SGD(0.0, momentum=0).minimize(out)
        return out

    out = job(params, indices)
    expected = np.take_along_axis(
        params, indices.reshape(indices_shape + (1,) * (len(params_shape) - batch_dims - 1)),
        axis=batch_dims)
    np.testing.assert_array_equal(out, expected)
    counts = np.zeros(params_shape, np.float32)   # d sum(out) / d params: picks counted
    for index in np.ndindex(*indices_shape):
        counts[index[:batch_dims] + (indices[index],)] += 1
    np.testing.assert_array_equal(diffs[0].numpy(), counts)


def _conv_nchw_reference(x, w, pad):
    """Direct NCHW convolution (stride 1) with OIHW ``w`` in float64."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pad, pad))
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return out


def test_conv2d_and_pooling_take_nhwc_as_oneflow():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)     # NHWC
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)     # OHWI

    @flow.global_function(type="predict")
    def job(x_: tp.Numpy.Placeholder((2, 5, 6, 3)), w_: tp.Numpy.Placeholder((4, 3, 3, 3))
            ) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        conv = flow.nn.conv2d(x_, w_, strides=1, padding=[[0, 0], [1, 1], [1, 1], [0, 0]],
                              data_format="NHWC")
        return (conv, flow.nn.max_pool2d(x_, 2, 2, "VALID", data_format="NHWC"),
                flow.nn.avg_pool2d(x_, 2, 2, "VALID", data_format="NHWC"))

    conv, max_pool, avg_pool = job(x, w)
    expected = _conv_nchw_reference(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), (1, 1))
    np.testing.assert_allclose(conv, expected.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-5)
    windows = x[:, :4, :6].reshape(2, 2, 2, 3, 2, 3)   # (n, h/2, 2, w/2, 2, c)
    np.testing.assert_array_equal(max_pool, windows.max(axis=(2, 4)))
    np.testing.assert_allclose(avg_pool, windows.mean(axis=(2, 4)), rtol=1e-6)

    @flow.global_function(type="predict")
    def bad(x_: tp.Numpy.Placeholder((2, 5, 6, 3))) -> tp.Numpy:
        return flow.nn.conv2d(x_, x_, data_format="NCW")
    with pytest.raises(ValueError, match="data_format must be 'NCHW' or 'NHWC', got 'NCW'"):
        bad(x)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_unique_with_counts_against_numpy(dtype):
    x = np.random.default_rng(2).integers(0, 9, 40).astype(dtype)

    @flow.global_function(type="predict")
    def job(x_: tp.Numpy.Placeholder((40,), dtype=flow.dtypes.convert(dtype))
            ) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        return flow.experimental.unique_with_counts(x_, out_idx=flow.int64)

    y, idx, count, n = job(x)
    values, counts = np.unique(x, return_counts=True)
    k = int(n[0])
    assert k == values.size and idx.dtype == np.int64
    np.testing.assert_array_equal(y[idx], x)
    np.testing.assert_array_equal(np.sort(y[:k]), values)
    np.testing.assert_array_equal(count[:k][np.argsort(y[:k])], counts)
    assert not y[k:].any() and not count[k:].any()   # the padding is zeros


def test_indexed_slices_reduce_sum_against_numpy():
    rng = np.random.default_rng(3)
    indices = rng.integers(0, 6, (4, 5)).astype(np.int32)
    values = rng.random((4, 5, 2, 3)).astype(np.float32)

    @flow.global_function(type="predict")
    def job(i: tp.Numpy.Placeholder((4, 5), dtype=flow.int32),
            v: tp.Numpy.Placeholder((4, 5, 2, 3))) -> tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return flow.experimental.indexed_slices_reduce_sum(i, v)

    keys, sums, n = job(indices, values)
    k = int(n[0])
    assert n.dtype == np.int64 and sums.shape == (20, 6)
    for key, total in zip(keys[:k], sums[:k]):
        expected = values.reshape(20, 6)[indices.reshape(-1) == key].sum(0)
        np.testing.assert_allclose(total, expected, rtol=1e-5)
    np.testing.assert_array_equal(np.sort(keys[:k]), np.unique(indices))


def test_in_top_k_says_no_where_it_cannot_say_as_oneflow():
    predictions = np.array([[0.1, 0.9, 0.5], [np.inf, 0.2, 0.3], [0.3, 0.2, 0.1],
                            [np.nan, 1.0, 0.0]], np.float32)
    targets = np.array([1, 1, 7, 1], np.int32)   # row 2: a target beyond the classes

    @flow.global_function(type="predict")
    def job(t: tp.Numpy.Placeholder((4,), dtype=flow.int32),
            p: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.math.in_top_k(t, p, k=2)
    np.testing.assert_array_equal(job(targets, predictions), [1, 0, 0, 0])
