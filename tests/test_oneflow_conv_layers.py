"""What the op matrix rows cannot express for issue 18's convolution, normalization and
resampling names: layers with variables (conv3d, the fused batch norms, the affine
instance/group norms), random masks, and bad arguments refused with a clear message."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from tests.ops.oneflow_conv_cases import conv_ref, instance_norm_ref
# The session fixture (autouse) and the one-placeholder predict job of the other issue-18
# names' tests.
from tests.test_oneflow_api_ops import _predict, fresh_session  # noqa: F401


@pytest.mark.parametrize("data_format", ["NCDHW", "NDHWC"])
def test_conv3d_layer_variables_and_values(data_format):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 4, 4)).astype(np.float32)
    got = _predict(lambda b: flow.layers.conv3d(b, 5, kernel_size=(3, 1, 2), padding="SAME",
                                                data_format=data_format, name="c3"), x)
    variables = flow.get_all_variables()
    weight = variables["c3-weight"]
    assert variables["c3-bias"].shape == (5,)
    if data_format == "NCDHW":
        assert weight.shape == (5, 3, 3, 1, 2)
        pads = [(1, 1), (0, 0), (1, 0)]   # OneFlow's SAME puts an odd pad before
        want = conv_ref(x, weight, (1, 1, 1), pads)
    else:
        assert weight.shape == (5, 3, 1, 2, 4)
        pads = [(1, 1), (0, 0), (1, 0)]
        want = np.moveaxis(conv_ref(np.moveaxis(x, -1, 1), np.moveaxis(weight, -1, 1),
                                    (1, 1, 1), pads), 1, -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _bn_train_step(body, x, addend):
    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder(x.shape), a: tp.Numpy.Placeholder(x.shape)
             ) -> tp.Numpy:
        y = body(x, a)
        flow.optimizer.SGD(0.5, momentum=0).minimize(flow.math.reduce_sum(y * y))
        return y
    return step(x, addend)


def test_batch_normalization_add_relu_equals_the_unfused_composition():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    addend = rng.standard_normal((4, 3, 2)).astype(np.float32)
    fused = _bn_train_step(lambda b, a: flow.layers.batch_normalization_add_relu(
        b, a, axis=1, momentum=0.9, name="fused"), x, addend)
    plain = _bn_train_step(lambda b, a: flow.math.relu(flow.layers.batch_normalization(
        b, axis=1, momentum=0.9, name="plain") + a), x, addend)
    np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-6)
    assert np.any(fused == 0) and np.any(fused > 0)
    variables = flow.get_all_variables()
    for part in ("gamma", "beta", "moving_mean", "moving_variance"):
        np.testing.assert_allclose(variables[f"fused-{part}"], variables[f"plain-{part}"],
                                   rtol=1e-6, atol=1e-6, err_msg=part)
    assert not np.allclose(variables["fused-gamma"], 1.0)    # the step trained them


def test_batch_normalization_relu_in_predict_uses_the_moving_statistics():
    x = np.array([[-3.0, 1.0], [2.0, 5.0]], np.float32)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return flow.layers.batch_normalization_relu(
            x, axis=1, epsilon=0.0, moving_mean_initializer=flow.constant_initializer(1.0),
            moving_variance_initializer=flow.constant_initializer(4.0))
    np.testing.assert_allclose(job(x), np.maximum((x - 1.0) / 2.0, 0.0), rtol=1e-6)


def test_affine_instance_and_group_norms_own_per_view_channel_variables():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((2, 4, 3, 3))) -> tp.Numpy:
        a = flow.nn.InstanceNorm2d(x, name="inst")
        b = flow.nn.GroupNorm(x, num_groups=2, name="grp")
        loss = flow.math.reduce_sum(a * x) + flow.math.reduce_sum(b * b * x)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return a
    np.testing.assert_allclose(step(x), instance_norm_ref(x), rtol=1e-4, atol=1e-5)
    variables = flow.get_all_variables()
    assert variables["inst_gamma"].shape == (1, 4, 1)
    assert variables["grp_gamma"].shape == (1, 2, 1)   # OneFlow's GroupNorm: per group
    assert not np.allclose(variables["inst_gamma"], 1.0)
    assert not np.allclose(variables["grp_beta"], 0.0)


def test_random_mask_like_keeps_with_probability_one_minus_rate():
    like = np.zeros((400, 50), np.float32)
    mask = _predict(lambda b: flow.nn.random_mask_like(b, rate=0.25), like)
    assert mask.dtype == np.int8 and mask.shape == like.shape
    assert set(np.unique(mask)) <= {0, 1}
    assert abs(mask.mean() - 0.75) < 0.02          # 20000 draws: sd about 0.003


def test_random_mask_like_seed_repeats_and_noise_shape_broadcasts():
    like = np.zeros((6, 40), np.float32)

    def masks():
        flow.clear_default_session()

        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((6, 40))) -> tp.Numpy:
            return flow.nn.random_mask_like(x, 0.5, seed=7, noise_shape=(1, 40))
        return job(like), job(like)
    first, second = masks()
    assert np.all(first == first[:1])                # one row of draws, broadcast
    assert not np.array_equal(first, second)        # a fresh draw every step
    again, _ = masks()
    np.testing.assert_array_equal(first, again)     # the same sequence for the seed


def _zeros(*shape):
    return flow.constant(0.0, shape=shape)


BAD = [
    (lambda x: flow.nn.conv3d(_zeros(1, 2, 3, 3, 2), _zeros(2, 3, 1, 1, 1), 1, "VALID",
                              data_format="NDHWC", groups=2), ValueError,
     "conv3d: data_format NDHWC does not support groups"),
    (lambda x: flow.nn.conv3d(x, x, 1, "VALID"), ValueError, "conv3d: input and filters "
     "must be 5-d"),
    (lambda x: flow.nn.conv3d(_zeros(1, 2, 3, 3, 3), _zeros(1, 2, 1, 1, 1), 1, "FULL"),
     ValueError, "conv3d: padding must be"),
    (lambda x: flow.nn.max_pool3d(_zeros(1, 1, 2, 2, 2), 2, (1, 1), "VALID"), ValueError,
     "max_pool3d: strides must have 1 or 3 entries"),
    (lambda x: flow.nn.conv2d_transpose(_zeros(1, 2, 3, 3), _zeros(2, 1, 2, 2),
                                        output_shape=(1, 1, 9, 6), strides=2), ValueError,
     "conv2d_transpose: output size 9 on spatial axis 0 does not map back"),
    (lambda x: flow.nn.conv2d_transpose(_zeros(1, 2, 3, 3), _zeros(2, 1, 2, 2),
                                        output_shape=(2, 1, 6, 6), strides=2), ValueError,
     "must keep the batch 1"),
    (lambda x: flow.nn.conv2d_transpose(x, x, input=x, output_shape=(2, 3, 2, 3)),
     ValueError, "give exactly one of 'value' and 'input'"),
    (lambda x: flow.nn.torch_conv2d_transpose(_zeros(1, 2, 3, 3), _zeros(2, 1, 2, 2),
                                              strides=1, padding_needed=(1, 0)), ValueError,
     "padding_needed must be even"),
    (lambda x: flow.layers.upsample_2d(_zeros(1, 1, 2, 2), interpolation="bicubic"),
     ValueError, "upsample_2d: interpolation must be"),
    (lambda x: flow.layers.upsample_2d(_zeros(1, 1, 2, 2), size=(2, 0)), ValueError,
     "upsample_2d: size must be"),
    (lambda x: flow.nn.GroupNorm(_zeros(2, 6, 3), num_groups=4), ValueError,
     "GroupNorm: num_groups must be a positive int dividing the 6 channels"),
    (lambda x: flow.nn.InstanceNorm2d(x), ValueError, "InstanceNorm2d: x must be 4-d"),
    (lambda x: flow.nn.PixelShuffle(_zeros(1, 6, 2, 2), 2), ValueError,
     "PixelShufflev2: input channels 6 must divide by"),
    (lambda x: flow.reflection_pad2d(_zeros(1, 1, 2, 4), [1, 1, 2, 0]), ValueError,
     "reflection_pad2d: each padding must be non-negative and below"),
    (lambda x: flow.same_padding(_zeros(1, 1, 4, 4), "SAME", "NCHW", [3, 3], [1, 1], [1, 1]),
     ValueError, "same_padding: padding must be 'SAME_LOWER' or 'SAME_UPPER'"),
    (lambda x: flow.same_padding(_zeros(1, 1, 4, 4), "SAME_UPPER", "NCHW", [3], [1, 1],
                                 [1, 1]), ValueError, "same_padding: kernel_size must be"),
    (lambda x: flow.pad_grad(x, [(0, 0), (2, 1)]), ValueError,
     "pad_grad: paddings .* remove all of x's shape"),
    (lambda x: flow.layers.layer_norm_grad(x, x, _zeros(3), _zeros(3)), ValueError,
     "layer_norm_grad: inv_variance must hold one value per normalized row"),
    (lambda x: flow.layers.layer_norm_param_grad(x, x, _zeros(2)), ValueError,
     "layer_norm_param_grad: gamma must have shape"),
    (lambda x: flow.nn.random_mask_like(x, 1.0), ValueError,
     "random_mask_like: rate must be in"),
    (lambda x: flow.layers.batch_normalization_add_relu(x, gamma_name="g"),
     NotImplementedError, "custom variable names \\(gamma_name\\)"),
    (lambda x: flow.layers.batch_normalization_add_relu(x, addend=_zeros(3, 2)), ValueError,
     "addend must be a Blob of the inputs' shape"),
    (lambda x: flow.layers.conv3d(x, 2), ValueError, "conv3d: inputs must be a 5-d Blob"),
]


@pytest.mark.parametrize("body, exc, match", BAD)
def test_bad_arguments_are_refused(body, exc, match):
    with pytest.raises(exc, match=match):
        _predict(body, np.zeros((2, 3), np.float32))


def test_conv2d_transpose_takes_its_channels_from_the_filters(monkeypatch):
    """DCGAN scripts of OneFlow v0.3 pass the input's channel count in output_shape; the
    kernel makes the filters' channel count, as OneFlow's did (said once)."""
    from aioflow.engine import session
    monkeypatch.setattr(session.warn_once, "__defaults__", (set(),))
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def up(x: tp.Numpy.Placeholder((1, 4, 3, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 2, 5, 5), initializer=flow.ones_initializer())
        return flow.nn.conv2d_transpose(x, w, output_shape=(1, 4, 6, 6), strides=[2, 2],
                                        padding="SAME")

    with pytest.warns(RuntimeWarning, match="has 4 channels, the filters make 2"):
        out = up(np.ones((1, 4, 3, 3), np.float32))
    assert out.shape == (1, 2, 6, 6)
    flow.clear_default_session()


def _conv1d_ref(x_ncw, w_oiw, stride, dilation):
    """Valid 1-d cross-correlation in float64."""
    n, c, width = x_ncw.shape
    o, _, k = w_oiw.shape
    span = (k - 1) * dilation + 1
    out_w = (width - span) // stride + 1
    y = np.zeros((n, o, out_w))
    for j in range(out_w):
        window = x_ncw[:, :, j * stride: j * stride + span: dilation]   # (n, c, k)
        y[:, :, j] = np.einsum("nck,ock->no", window, w_oiw)
    return y


def test_conv1d_nwc_takes_owi_filters_as_oneflow():
    # OneFlow: channels last, the filters are (out, kw, in); kernel size at axis -2
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 9, 3)).astype(np.float32)        # N, W, C
    w = rng.standard_normal((4, 2, 3)).astype(np.float32)        # O, W, I

    @flow.global_function(type="predict")
    def job(x_: tp.Numpy.Placeholder(x.shape), w_: tp.Numpy.Placeholder(w.shape)) -> tp.Numpy:
        return flow.nn.conv1d(x_, w_, strides=2, padding="VALID", data_format="NWC",
                              dilations=2)

    want = _conv1d_ref(x.transpose(0, 2, 1).astype(np.float64),
                       w.transpose(0, 2, 1).astype(np.float64), 2, 2).transpose(0, 2, 1)
    np.testing.assert_allclose(job(x, w), want, rtol=1e-5, atol=1e-5)


def test_conv1d_layer_nwc_weight_is_owi():
    @flow.global_function(type="predict")
    def job(x_: tp.Numpy.Placeholder((2, 9, 3))) -> tp.Numpy:
        return flow.layers.conv1d(x_, 4, kernel_size=2, data_format="NWC", use_bias=False,
                                  name="c")

    x = np.ones((2, 9, 3), np.float32)
    out = job(x)
    weight = flow.get_all_variables()["c-weight"]
    assert weight.shape == (4, 2, 3) and out.shape == (2, 8, 4)
    np.testing.assert_allclose(out[0, 0], weight.sum(axis=(1, 2)), rtol=1e-5)
