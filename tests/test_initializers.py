"""Initializers: shapes, dtypes, seeds, and the statistics implied by OneFlow's fans.

Fans are written out by hand in each test for the layout at hand: a dense weight is
(units, in_features); a conv weight is OIHW for "NCHW" and (O, H, W, I) for "NHWC".
Statistical checks use fixed seeds and bounds several standard errors wide.
"""
import math

import numpy as np
import pytest

from aioflow._core import dtypes as flow
from aioflow import initializers as I

TRUNC_STD = 0.87962566103423978   # std of a standard normal truncated to (-2, 2)


def draw(init, shape, dtype=np.float64, seed=0):
    return init(shape, dtype, np.random.default_rng(seed))


# --------------------------------------------------------------- shape and dtype

ALL = [
    I.constant_initializer(0.5), I.zeros_initializer(), I.ones_initializer(),
    I.empty_initializer(), I.random_uniform_initializer(), I.random_normal_initializer(),
    I.random_normal_initializer(seed=3), I.truncated_normal_initializer(),
    I.truncated_normal(0.1), I.glorot_uniform_initializer(), I.glorot_normal_initializer(),
    I.xavier_uniform_initializer("NCHW"), I.variance_scaling_initializer(),
    I.kaiming_initializer((4, 6)),
]


@pytest.mark.parametrize("init", ALL, ids=repr)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, flow.float, flow.double])
@pytest.mark.parametrize("shape", [(4, 6), (5, 3, 2, 2), (7,)])
def test_exact_shape_dtype_and_fresh_contiguous_array(init, dtype, shape):
    rng = np.random.default_rng(0)
    first = init(shape, dtype, rng)
    second = init(shape, dtype, rng)
    assert first.shape == shape
    assert first.dtype == flow.as_numpy(dtype)
    assert first.flags.c_contiguous and first.flags.writeable and first.flags.owndata
    assert first is not second and not np.shares_memory(first, second)
    assert np.isfinite(first).all()


def test_zero_size_and_scalar_shapes():
    assert I.truncated_normal(0.1)((0, 5), np.float32, None).shape == (0, 5)
    assert I.xavier_uniform_initializer()((3, 0), np.float32, None).shape == (3, 0)
    scalar = I.ones_initializer()((), np.float32, None)
    assert scalar.shape == () and scalar == 1.0


def test_repr_is_readable():
    assert repr(I.truncated_normal(0.1)) == "TruncatedNormalInitializer(mean=0.0, stddev=0.1)"
    assert "mode='fan_avg'" in repr(I.xavier_uniform_initializer())


def test_flow_truncated_normal_is_zero_mean_truncated_normal():
    assert I.truncated_normal(0.1) == I.truncated_normal_initializer(0.0, 0.1)
    assert I.truncated_normal().stddev == 1.0
    assert I.xavier_uniform_initializer is I.glorot_uniform_initializer
    assert I.xavier_normal_initializer is I.glorot_normal_initializer


# ------------------------------------------------------------------------ constant

def test_constant_values_and_int_dtypes():
    assert (draw(I.constant_initializer(2.5), (3,), np.float32) == 2.5).all()
    assert (draw(I.zeros_initializer(), (2, 2), np.int64) == 0).all()
    assert (draw(I.ones_initializer(flow.int32), (2,), np.int32) == 1).all()
    truncated = I.constant_initializer(2.7, dtype=flow.int32)   # OneFlow: int(value)
    assert truncated.value == 2
    assert (draw(truncated, (3,), np.int32) == 2).all()
    assert (draw(I.constant_initializer(200), (2,), np.uint8) == 200).all()


def test_constant_refuses_unrepresentable_integer_fill():
    with pytest.raises(ValueError, match="int32"):
        draw(I.constant_initializer(0.5), (2,), np.int32)
    with pytest.raises(ValueError, match="uint8"):
        draw(I.constant_initializer(300), (2,), np.uint8)


# ------------------------------------------------------------------------- uniform

def test_uniform_bounds_and_moments():
    x = draw(I.random_uniform_initializer(-0.5, 1.5), (200_000,))
    assert x.min() >= -0.5 and x.max() <= 1.5
    assert abs(x.mean() - 0.5) < 0.01
    assert abs(x.std() - 2 / math.sqrt(12)) < 0.01


def test_uniform_integers_include_both_ends():
    x = draw(I.random_uniform_initializer(0, 3, dtype=flow.int32), (10_000,), np.int32)
    assert x.dtype == np.int32 and set(np.unique(x)) == {0, 1, 2, 3}


def test_uniform_degenerate_range():
    x = draw(I.random_uniform_initializer(0.25, 0.25), (100,), np.float32)
    assert (x == np.float32(0.25)).all()


def test_uniform_float_initializer_refuses_int_variable():
    with pytest.raises(TypeError, match="floating-point"):
        draw(I.random_uniform_initializer(), (3,), np.int32)


def test_uniform_int_range_must_fit_variable_dtype():
    with pytest.raises(ValueError, match="int8"):
        draw(I.random_uniform_initializer(0, 1000, dtype=flow.int32), (3,), np.int8)


# -------------------------------------------------------------------------- normal

def test_normal_moments():
    x = draw(I.random_normal_initializer(1.0, 0.5), (200_000,))
    assert abs(x.mean() - 1.0) < 0.01 and abs(x.std() - 0.5) < 0.01


def test_seed_reproducible_and_ignores_passed_rng():
    a = I.random_normal_initializer(0.0, 1.0, seed=42)((50,), np.float32, np.random.default_rng(1))
    b = I.random_normal_initializer(0.0, 1.0, seed=42)((50,), np.float32, np.random.default_rng(2))
    c = I.random_normal_initializer(0.0, 1.0, seed=43)((50,), np.float32, np.random.default_rng(1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    expected = np.random.default_rng(42).normal(0.0, 1.0, 50).astype(np.float32)
    assert np.array_equal(a, expected)


def test_unseeded_initializers_follow_the_passed_rng():
    init = I.truncated_normal(0.1)
    assert np.array_equal(draw(init, (20,), seed=5), draw(init, (20,), seed=5))
    assert not np.array_equal(draw(init, (20,), seed=5), draw(init, (20,), seed=6))


def test_normal_family_refuses_int_variables():
    for init in (I.random_normal_initializer(), I.truncated_normal(), I.xavier_normal_initializer()):
        with pytest.raises(TypeError, match="floating-point"):
            draw(init, (4, 4), np.int32)


# ---------------------------------------------------------------- truncated normal

@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_truncated_normal_never_reaches_two_stddev(dtype):
    mean, std = 0.3, 0.1
    x = draw(I.truncated_normal_initializer(mean, std), (100_000,), dtype)
    assert (np.abs(x.astype(np.float64) - mean) < 2 * std).all()


def test_truncated_normal_below_dtype_resolution_terminates():
    x = draw(I.truncated_normal_initializer(0.3, 1e-12), (1000,), np.float32)
    assert (x == np.float32(0.3)).all()


def test_truncated_normal_std_and_no_pile_up_at_the_bound():
    std = 0.1
    x = draw(I.truncated_normal(std), (200_000,))
    assert abs(x.mean()) < 0.002
    assert abs(x.std() / (TRUNC_STD * std) - 1) < 0.02
    # Redrawn, not clipped: the shell 1.9-2 std holds its normal share (about 1.2 %),
    # while clipping would put the 4.6 % of mass beyond 2 std on the bound.
    shell = (math.erf(2 / math.sqrt(2)) - math.erf(1.9 / math.sqrt(2))) / math.erf(2 / math.sqrt(2))
    frac = np.mean(np.abs(x) > 1.9 * std)
    assert abs(frac - shell) < 0.003


# --------------------------------------------------------- xavier / variance scaling

def test_xavier_uniform_dense():
    units, fan_in = 300, 100          # weight (units, in_features)
    limit = math.sqrt(6 / (fan_in + units))
    w = draw(I.xavier_uniform_initializer(), (units, fan_in))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit
    assert abs(w.std() / (limit / math.sqrt(3)) - 1) < 0.02


@pytest.mark.parametrize("data_format, shape", [
    ("NCHW", (64, 32, 3, 3)), ("channels_first", (64, 32, 3, 3)), ("", (64, 32, 3, 3)),
    ("NHWC", (64, 3, 3, 32)),
])
def test_xavier_uniform_conv(data_format, shape):
    fan_in = 32 * 3 * 3               # in_channels * receptive field
    fan_out = 64 * 3 * 3              # out_channels * receptive field
    limit = math.sqrt(6 / (fan_in + fan_out))
    w = draw(I.xavier_uniform_initializer(data_format), shape)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit


def test_xavier_normal_conv():
    w = draw(I.xavier_normal_initializer("NCHW"), (128, 64, 3, 3))
    expected = math.sqrt(2 / (64 * 9 + 128 * 9))
    assert abs(w.std() / expected - 1) < 0.02 and abs(w.mean()) < 0.1 * expected


def test_variance_scaling_truncated_normal_fan_in_dense():
    units, fan_in = 256, 1024
    w = draw(I.variance_scaling_initializer(2.0, "fan_in"), (units, fan_in))
    target = math.sqrt(2.0 / fan_in)  # std after truncation
    assert abs(w.std() / target - 1) < 0.02
    assert np.abs(w).max() < 2 * target / TRUNC_STD


def test_variance_scaling_normal_fan_out_conv():
    w = draw(I.variance_scaling_initializer(1.0, "fan_out", "random_normal", "NCHW"),
             (64, 16, 5, 5))
    assert abs(w.std() / math.sqrt(1.0 / (64 * 25)) - 1) < 0.02


def test_variance_scaling_uniform_fan_avg_case_insensitive():
    init = I.variance_scaling_initializer(3.0, "FAN_AVG", "Random_Uniform")
    assert init.mode == "fan_avg" and init.distribution == "random_uniform"
    w = draw(init, (400, 200))
    limit = math.sqrt(3 * 3.0 / 300)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit


# -------------------------------------------------------------------------- kaiming

def test_kaiming_dense_relu_normal():
    init = I.kaiming_initializer((256, 512), nonlinearity="relu")
    assert init.stddev == pytest.approx(math.sqrt(2 / 512))
    assert abs(draw(init, (256, 512)).std() / math.sqrt(2 / 512) - 1) < 0.02


def test_kaiming_default_is_leaky_relu_with_zero_slope():
    assert I.kaiming_initializer((10, 50)).stddev == pytest.approx(math.sqrt(2 / 50))


@pytest.mark.parametrize("nonlinearity, slope, gain", [
    (None, 0.0, 1.0), ("sigmoid", 0.0, 1.0), ("tanh", 0.0, 5 / 3),
    ("relu", 0.0, math.sqrt(2)), ("leaky_relu", 0.2, math.sqrt(2 / 1.04)),
])
def test_kaiming_gains(nonlinearity, slope, gain):
    init = I.kaiming_initializer((8, 32), nonlinearity=nonlinearity, negative_slope=slope)
    assert init.stddev == pytest.approx(gain / math.sqrt(32))


def test_kaiming_uniform_conv_fan_out_and_layouts():
    nchw = I.kaiming_initializer((64, 32, 3, 3), "random_uniform", "fan_out", "relu")
    nhwc = I.kaiming_initializer((64, 3, 3, 32), "random_uniform", "fan_out", "relu",
                                 data_format="NHWC")
    bound = math.sqrt(3) * math.sqrt(2) / math.sqrt(64 * 9)
    assert nchw.maxval == pytest.approx(bound) and nchw.minval == pytest.approx(-bound)
    assert nhwc.maxval == pytest.approx(bound)
    w = draw(nchw, (64, 32, 3, 3))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound


def test_kaiming_fan_avg_conv():
    init = I.kaiming_initializer((16, 8, 3, 3), mode="fan_avg", nonlinearity=None)
    assert init.stddev == pytest.approx(1 / math.sqrt((8 * 9 + 16 * 9) / 2))


def test_kaiming_std_comes_from_its_own_shape():
    init = I.kaiming_initializer((1, 100), nonlinearity=None)    # std 0.1
    w = draw(init, (300, 300))                                   # the call shape differs
    assert abs(w.std() / 0.1 - 1) < 0.02


# --------------------------------------------------------------------- bad arguments

BAD = [
    (lambda: I.random_normal_initializer(stddev=-1.0), ValueError, "stddev"),
    (lambda: I.random_normal_initializer(stddev=0.0), ValueError, "stddev"),
    (lambda: I.random_normal_initializer(mean=float("nan")), ValueError, "mean"),
    (lambda: I.random_normal_initializer(seed=-1), ValueError, "seed"),
    (lambda: I.random_normal_initializer(seed=1.5), ValueError, "seed"),
    (lambda: I.random_normal_initializer(dtype=flow.int32), ValueError, "dtype"),
    (lambda: I.truncated_normal(-0.1), ValueError, "stddev"),
    (lambda: I.truncated_normal_initializer(0.0, float("inf")), ValueError, "stddev"),
    (lambda: I.random_uniform_initializer(1.0, 0.0), ValueError, "minval"),
    (lambda: I.random_uniform_initializer("0", 1), TypeError, "minval"),
    (lambda: I.constant_initializer(float("nan")), ValueError, "value"),
    (lambda: I.constant_initializer("a"), TypeError, "value"),
    (lambda: I.constant_initializer(1.0, dtype=np.complex64), TypeError, "dtype"),
    (lambda: I.variance_scaling_initializer(mode="fan_x"), ValueError, "mode"),
    (lambda: I.variance_scaling_initializer(distribution="uniform"), ValueError, "distribution"),
    (lambda: I.variance_scaling_initializer(scale=0.0), ValueError, "scale"),
    (lambda: I.variance_scaling_initializer(scale=-2.0), ValueError, "scale"),
    (lambda: I.variance_scaling_initializer(data_format="HWCN"), ValueError, "data_format"),
    (lambda: I.xavier_uniform_initializer(data_format=None), TypeError, "data_format"),
    (lambda: I.xavier_normal_initializer(data_format="CHW"), ValueError, "data_format"),
    (lambda: I.kaiming_initializer((3,)), ValueError, "shape"),
    (lambda: I.kaiming_initializer((0, 3)), ValueError, "shape"),
    (lambda: I.kaiming_initializer("ab"), TypeError, "shape"),
    (lambda: I.kaiming_initializer((3, 3), distribution="truncated_normal"), ValueError,
     "distribution"),
    (lambda: I.kaiming_initializer((3, 3), mode="avg"), ValueError, "mode"),
    (lambda: I.kaiming_initializer((3, 3), nonlinearity="gelu"), ValueError, "nonlinearity"),
    (lambda: I.kaiming_initializer((3, 3), negative_slope="x"), TypeError, "negative_slope"),
    (lambda: I.kaiming_initializer((3, 3), data_format=""), ValueError, "data_format"),
    (lambda: I.ones_initializer()((2, -1), np.float32, None), ValueError, "shape"),
    (lambda: I.ones_initializer()((2.0, 3), np.float32, None), TypeError, "shape"),
    (lambda: I.ones_initializer()(5, np.float32, None), TypeError, "shape"),
    (lambda: I.ones_initializer()((2,), np.complex128, None), TypeError, "dtype"),
    (lambda: I.truncated_normal()((2,), np.float32, np.random.RandomState(0)), TypeError, "rng"),
]


@pytest.mark.parametrize("make, error, match", BAD)
def test_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_error_message_states_expected_and_received():
    with pytest.raises(ValueError) as info:
        I.variance_scaling_initializer(mode="fan_x")
    message = str(info.value)
    assert "fan_in" in message and "'fan_x'" in message
    with pytest.raises(ValueError) as info:
        I.random_uniform_initializer(2, 1)
    assert "minval" in str(info.value) and "maxval" in str(info.value)
