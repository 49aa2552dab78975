"""Learning-rate schedules against values worked out by hand from OneFlow's formulas.

Expected values are written out here (tables or the formula typed again), never
obtained by calling the schedule under test with other arguments.
"""
import math

import numpy as np
import pytest

from aioflow.optimizer import schedulers as S


def rates(sched, steps):
    return [sched.lr(s) for s in steps]


# --------------------------------------------------------------------- piecewise

def test_piecewise_constant_boundary_step_keeps_earlier_value():
    sched = S.PiecewiseConstantScheduler([3, 7], [1.0, 0.5, 0.25])
    # step <= 3 -> values[0]; 3 < step <= 7 -> values[1]; step > 7 -> values[2]
    expected = [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]
    assert rates(sched, range(11)) == expected
    assert sched.lr(10**9) == 0.25


def test_first_train_step_is_step_zero():
    sched = S.PiecewiseConstantScheduler([0], [0.3, 0.1])
    assert sched.lr(0) == 0.3   # step 0 <= boundary 0: the first step uses values[0]
    assert sched.lr(1) == 0.1


def test_piecewise_constant_without_boundaries_is_constant():
    sched = S.PiecewiseConstantScheduler([], [0.1])
    assert rates(sched, [0, 1, 50, 10**6]) == [0.1] * 4
    assert sched.base_lr == 0.1


def test_piecewise_scaling_list():
    sched = S.PiecewiseScalingScheduler(0.2, [5, 10], [0.5, 0.1])
    assert sched.lr(0) == pytest.approx(0.2)
    assert sched.lr(5) == pytest.approx(0.2)
    assert sched.lr(6) == pytest.approx(0.1)
    assert sched.lr(10) == pytest.approx(0.1)
    assert sched.lr(11) == pytest.approx(0.02)


def test_piecewise_scaling_scalar_is_repeated_not_compounded():
    sched = S.PiecewiseScalingScheduler(1.0, [2, 4], 0.1)
    assert rates(sched, [2, 3, 4, 5, 100]) == pytest.approx([1.0, 0.1, 0.1, 0.1, 0.1])


# ------------------------------------------------------------------------ decays

def test_cosine_around_its_end():
    sched = S.CosineScheduler(0.2, 8, alpha=0.25)
    assert sched.lr(0) == pytest.approx(0.2)
    assert sched.lr(2) == pytest.approx(0.2 * (0.75 * (1 + math.cos(math.pi / 4)) / 2 + 0.25))
    assert sched.lr(4) == pytest.approx(0.125)   # half way: 0.2 * (0.75 * 0.5 + 0.25)
    assert sched.lr(7) == pytest.approx(0.2 * (0.75 * (1 + math.cos(7 * math.pi / 8)) / 2 + 0.25))
    assert sched.lr(8) == pytest.approx(0.05)    # 0.2 * alpha
    assert sched.lr(9) == pytest.approx(0.05)
    assert sched.lr(1000) == pytest.approx(0.05)


def test_cosine_default_alpha_reaches_zero():
    sched = S.CosineScheduler(1.0, 4)
    assert rates(sched, [0, 2, 4, 5]) == pytest.approx([1.0, 0.5, 0.0, 0.0], abs=1e-12)


def test_polynomial_without_cycle_clamps():
    sched = S.PolynomialScheduler(1.0, 4, end_learning_rate=0.1, power=2.0)
    # (1.0 - 0.1) * (1 - t/4)**2 + 0.1
    expected = [1.0, 0.9 * 0.5625 + 0.1, 0.9 * 0.25 + 0.1, 0.9 * 0.0625 + 0.1, 0.1, 0.1]
    assert rates(sched, [0, 1, 2, 3, 4, 10]) == pytest.approx(expected)


def test_polynomial_defaults():
    sched = S.PolynomialScheduler(0.01, 10)
    assert sched.end_learning_rate == 0.0001 and sched.power == 1.0 and sched.cycle is False
    assert sched.lr(5) == pytest.approx((0.01 - 0.0001) * 0.5 + 0.0001)


def test_polynomial_cycle_restarts():
    sched = S.PolynomialScheduler(1.0, 4, end_learning_rate=0.0, power=1.0, cycle=True)
    # step 0 counts as 1; period = 4 * ceil(t / 4)
    expected = {0: 0.75, 1: 0.75, 3: 0.25, 4: 0.0, 5: 1 - 5 / 8, 8: 0.0, 9: 1 - 9 / 12}
    for step, value in expected.items():
        assert sched.lr(step) == pytest.approx(value, abs=1e-12), step


def test_linear_cosine():
    sched = S.LinearCosineScheduler(1.0, 10)   # num_periods=0.5, alpha=0, beta=0.001
    assert sched.lr(0) == pytest.approx(1.001)
    assert sched.lr(5) == pytest.approx(0.5 * 0.5 + 0.001)
    assert sched.lr(10) == pytest.approx(0.001)
    assert sched.lr(11) == pytest.approx(0.001)
    other = S.LinearCosineScheduler(2.0, 10, num_periods=1.0, alpha=0.1, beta=0.0)
    assert other.lr(5) == pytest.approx(0.0, abs=1e-12)     # cos(pi) = -1
    assert other.lr(2) == pytest.approx(2.0 * (0.9 * 0.5 * (1 + math.cos(0.4 * math.pi))))


def test_exponential():
    smooth = S.ExponentialScheduler(0.1, 10, 0.5)
    assert smooth.lr(0) == pytest.approx(0.1)
    assert smooth.lr(5) == pytest.approx(0.1 * math.sqrt(0.5))
    assert smooth.lr(10) == pytest.approx(0.05)
    stairs = S.ExponentialScheduler(0.1, 10, 0.5, staircase=True)
    assert rates(stairs, [0, 9, 10, 19, 20, 21]) == pytest.approx(
        [0.1, 0.1, 0.05, 0.05, 0.025, 0.025])


def test_inverse_time():
    smooth = S.InverseTimeScheduler(1.0, 2, 1.0)
    assert rates(smooth, [0, 1, 2, 4]) == pytest.approx([1.0, 1 / 1.5, 0.5, 1 / 3])
    stairs = S.InverseTimeScheduler(1.0, 2, 1.0, staircase=True)
    assert rates(stairs, [0, 1, 2, 3, 4]) == pytest.approx([1.0, 1.0, 0.5, 0.5, 1 / 3])


def test_natural_exp():
    smooth = S.NaturalExpScheduler(1.0, 4, 2.0)
    assert smooth.lr(2) == pytest.approx(math.exp(-1.0))
    stairs = S.NaturalExpScheduler(1.0, 4, 2.0, staircase=True)
    assert rates(stairs, [3, 4, 8]) == pytest.approx([1.0, math.exp(-2.0), math.exp(-4.0)])


def test_numpy_integer_step_and_float_result():
    value = S.CosineScheduler(0.1, 10).lr(np.int64(3))
    assert type(value) is float


# ------------------------------------------------------------------------ warmups

def test_linear_warmup_then_base_rate():
    sched = S.PiecewiseConstantScheduler([], [1.0], warmup=S.LinearWarmup(4, 0.2))
    # 0.2 + 0.8 * step / 4 for step < 4
    assert rates(sched, range(6)) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0])


def test_constant_warmup_does_not_shift_the_decay_clock():
    sched = S.ExponentialScheduler(1.0, 1, 0.5, warmup=S.ConstantWarmup(3, 0.1))
    assert rates(sched, [0, 1, 2]) == pytest.approx([0.1] * 3)
    assert sched.lr(3) == pytest.approx(0.5 ** 3)   # decay evaluated at step 3, not 0


def test_warmup_uses_first_value_as_base_even_past_a_boundary():
    sched = S.PiecewiseConstantScheduler([1], [1.0, 0.5], warmup=S.ConstantWarmup(3, 0.5))
    assert rates(sched, [0, 1, 2, 3]) == pytest.approx([0.5, 0.5, 0.5, 0.5])
    assert sched.lr(2) == pytest.approx(1.0 * 0.5)   # values[0] * multiplier


def test_warmup_with_cosine():
    sched = S.CosineScheduler(0.1, 20, warmup=S.LinearWarmup(5, 0.0))
    assert sched.lr(0) == 0.0
    assert sched.lr(4) == pytest.approx(0.1 * 4 / 5)
    assert sched.lr(5) == pytest.approx(0.1 * 0.5 * (1 + math.cos(math.pi * 5 / 20)))


def test_zero_step_warmup_is_no_warmup():
    sched = S.PiecewiseConstantScheduler([], [0.3], warmup=S.LinearWarmup(0, 0.5))
    assert sched.lr(0) == 0.3


def test_oneflow_style_warmup_namespace():
    assert S.warmup.linear is S.LinearWarmup
    assert S.warmup.constant is S.ConstantWarmup


# ------------------------------------------------------------------- as_scheduler

@pytest.mark.parametrize("lr", [0.1, 1, np.float32(0.25), 0.0])
def test_as_scheduler_number(lr):
    sched = S.as_scheduler(lr)
    assert isinstance(sched, S.PiecewiseConstantScheduler)
    assert sched.lr(0) == pytest.approx(float(lr)) and sched.lr(12345) == pytest.approx(float(lr))


def test_as_scheduler_passes_schedulers_through():
    sched = S.CosineScheduler(0.1, 10)
    assert S.as_scheduler(sched) is sched


@pytest.mark.parametrize("bad, error", [
    ("0.1", TypeError), (None, TypeError), (True, TypeError), ([0.1], TypeError),
    (-0.1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
])
def test_as_scheduler_refuses(bad, error):
    with pytest.raises(error, match="learning rate"):
        S.as_scheduler(bad)


# ------------------------------------------------------------------- bad arguments

def test_negative_rates_are_accepted_as_in_oneflow():
    # OneFlow checks no sign: its own SSP test ascends with PiecewiseConstantScheduler([],
    # [-10.0])
    assert S.PiecewiseConstantScheduler([], [-10.0]).lr(3) == -10.0
    assert S.CosineScheduler(-0.1, 10).lr(0) == pytest.approx(-0.1)


BAD = [
    (lambda: S.PiecewiseConstantScheduler([1, 2], [0.1, 0.2]), ValueError, r"len\(values\)"),
    (lambda: S.PiecewiseConstantScheduler([2, 1], [0.3, 0.2, 0.1]), ValueError, "increasing"),
    (lambda: S.PiecewiseConstantScheduler([1, 1], [0.3, 0.2, 0.1]), ValueError, "increasing"),
    (lambda: S.PiecewiseConstantScheduler([-1], [0.2, 0.1]), ValueError, r"boundaries\[0\]"),
    (lambda: S.PiecewiseConstantScheduler([1.5], [0.2, 0.1]), TypeError, r"boundaries\[0\]"),
    (lambda: S.PiecewiseConstantScheduler(5, [0.2, 0.1]), TypeError, "boundaries"),
    (lambda: S.PiecewiseConstantScheduler([], [float("nan")]), ValueError, "finite"),
    (lambda: S.PiecewiseConstantScheduler([], []), ValueError, r"len\(values\)"),
    (lambda: S.PiecewiseScalingScheduler(0.1, [1, 2], [0.5]), ValueError, r"len\(scale\)"),
    (lambda: S.CosineScheduler(0.1, 0), ValueError, "steps"),
    (lambda: S.CosineScheduler(0.1, 2.5), TypeError, "steps"),
    (lambda: S.CosineScheduler(0.1, 10, alpha=float("inf")), ValueError, "alpha"),
    (lambda: S.PolynomialScheduler(0.1, 10, power=-1.0), ValueError, "power"),
    (lambda: S.PolynomialScheduler(0.1, 10, end_learning_rate=-1.0), ValueError, "end_learning_rate"),
    (lambda: S.PolynomialScheduler(0.1, 10, cycle="yes"), TypeError, "cycle"),
    (lambda: S.LinearCosineScheduler(0.1, -3), ValueError, "steps"),
    (lambda: S.ExponentialScheduler(0.1, 10, 0.0), ValueError, "decay_rate"),
    (lambda: S.ExponentialScheduler(0.1, 10, -0.5), ValueError, "decay_rate"),
    (lambda: S.ExponentialScheduler(0.1, 10, 0.5, staircase=1), TypeError, "staircase"),
    (lambda: S.InverseTimeScheduler(0.1, 10, -1.0), ValueError, "decay_rate"),
    (lambda: S.NaturalExpScheduler(0.1, 0, 0.5), ValueError, "steps"),
    (lambda: S.LinearWarmup(-1, 0.5), ValueError, "steps"),
    (lambda: S.LinearWarmup(5, 1.0), ValueError, "start_multiplier"),
    (lambda: S.LinearWarmup(5, -0.1), ValueError, "start_multiplier"),
    (lambda: S.ConstantWarmup(5, 0.0), ValueError, "multiplier"),
    (lambda: S.ConstantWarmup(5, 1.0), ValueError, "multiplier"),
    (lambda: S.ConstantWarmup(2.0, 0.5), TypeError, "steps"),
    (lambda: S.CosineScheduler(0.1, 10, warmup="linear"), TypeError, "warmup"),
    (lambda: S.PiecewiseConstantScheduler([], [0.1]).lr(-1), ValueError, "step"),
    (lambda: S.PiecewiseConstantScheduler([], [0.1]).lr(1.0), TypeError, "step"),
    (lambda: S.PiecewiseConstantScheduler([], [0.1]).lr(True), TypeError, "step"),
]


@pytest.mark.parametrize("make, error, match", BAD)
def test_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_error_message_shows_expected_and_received():
    with pytest.raises(ValueError) as info:
        S.PiecewiseConstantScheduler([10, 20], [0.1, 0.01])
    assert "3" in str(info.value) and "got 2" in str(info.value)


def test_misspelt_polynomial_alias_warns():
    with pytest.warns(DeprecationWarning, match="PolynomialScheduler"):
        sched = S.PolynomialSchduler(1.0, 4, end_learning_rate=0.0)
    assert sched.lr(2) == pytest.approx(0.5)


def test_repr_names_parameters():
    text = repr(S.CosineScheduler(0.1, 10, warmup=S.LinearWarmup(2, 0.5)))
    assert text.startswith("CosineScheduler(") and "steps=10" in text and "LinearWarmup" in text
