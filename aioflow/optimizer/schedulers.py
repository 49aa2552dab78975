"""Learning-rate schedules and warmups with OneFlow v0.3's names and defaults.

A schedule answers ``lr(step)``: the learning rate used by train step ``step``,
where the first train step of a job is step 0. This follows OneFlow, whose
``AutoTrainStep`` pass keeps an int64 train-step variable initialized to 0, feeds
its current value to the learning-rate op and then assigns ``value + 1``.

>>> from aioflow.optimizer.schedulers import PiecewiseConstantScheduler, LinearWarmup
>>> sched = PiecewiseConstantScheduler([2], [0.1, 0.01], warmup=LinearWarmup(2, 0.5))
>>> [round(sched.lr(s), 6) for s in range(5)]
[0.05, 0.075, 0.1, 0.01, 0.01]

Rules taken from OneFlow's ``LearningRateScheduleKernel``
(``core/kernel/learning_rate_schedule_kernel.cpp``):

* While ``step < warmup.steps`` the rate is ``base_lr * warmup multiplier`` and the
  decay is not consulted; afterwards the decay is evaluated at the same ``step``
  (the warmup does not shift the decay's clock).
* Piecewise schedules use ``values[i]`` for the first ``i`` with
  ``step <= boundaries[i]``, else the last value; so a boundary step still uses
  the earlier value.
* Cosine, linear-cosine and non-cyclic polynomial decay clamp ``step`` to ``steps``.

Rates come back as Python floats (OneFlow rounded them to float32).
"""
from __future__ import annotations

import math
import numbers
import types
import warnings
from typing import Optional, Sequence, Union

from .._core.deprecation import mark_deprecated

__all__ = [
    "LrScheduler", "PiecewiseConstantScheduler", "PiecewiseScalingScheduler",
    "CosineScheduler", "PolynomialScheduler", "PolynomialSchduler", "LinearCosineScheduler",
    "ExponentialScheduler", "InverseTimeScheduler", "NaturalExpScheduler",
    "Warmup", "LinearWarmup", "ConstantWarmup", "warmup", "as_scheduler",
]


# ----------------------------------------------------------------------------- checks

def _number(owner: str, name: str, value, *, low=None, low_open=False, high=None,
            high_open=False) -> float:
    """A finite real (bool refused) within the optional bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{owner}: {name} must be finite, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{owner}: {name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{owner}: {name} must be {'<' if high_open else '<='} {high}, got {value!r}")
    return value


def _int(owner: str, name: str, value, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{owner}: {name} must be >= {low}, got {value!r}")
    return int(value)


def _bool(owner: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be True or False, got {value!r}")
    return value


def _boundaries(owner: str, boundaries) -> list:
    if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, Sequence):
        raise TypeError(f"{owner}: boundaries must be a list of ints, got {boundaries!r}")
    result = [_int(owner, f"boundaries[{i}]", b, low=0) for i, b in enumerate(boundaries)]
    for i in range(1, len(result)):
        if result[i] <= result[i - 1]:
            raise ValueError(f"{owner}: boundaries must be strictly increasing, got {result!r}")
    return result


def _rate_list(owner: str, name: str, values) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{owner}: {name} must be a list of numbers, got {values!r}")
    # any finite rate, as OneFlow: a negative one ascends the loss (its SSP test's -10)
    return [_number(owner, f"{name}[{i}]", v) for i, v in enumerate(values)]


def _check_step(owner: str, step) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"{owner}.lr: step must be an int, got {step!r}")
    if step < 0:
        raise ValueError(f"{owner}.lr: step must be >= 0 (the first train step is 0), got {step!r}")
    return int(step)


# ----------------------------------------------------------------------------- warmups

class Warmup:
    """Base class of warmups: for ``step < steps`` the rate is ``base_lr * multiplier(step)``."""

    steps: int

    def multiplier(self, step: int) -> float:
        raise NotImplementedError


class ConstantWarmup(Warmup):
    """``flow.optimizer.warmup.constant(steps, multiplier)``: ``base_lr * multiplier``
    for the first ``steps`` steps; OneFlow required ``0 < multiplier < 1``.

    >>> from aioflow.optimizer.schedulers import ConstantWarmup, CosineScheduler
    >>> s = CosineScheduler(0.1, 100, warmup=ConstantWarmup(10, 0.1))
    >>> round(s.lr(9), 6), round(s.lr(10), 6)
    (0.01, 0.097553)
    """

    def __init__(self, steps: int, multiplier: float):
        self.steps = _int("ConstantWarmup", "steps", steps, low=0)
        self.multiplier_value = _number("ConstantWarmup", "multiplier", multiplier,
                                        low=0.0, low_open=True, high=1.0, high_open=True)

    def multiplier(self, step: int) -> float:
        return self.multiplier_value

    def __repr__(self) -> str:
        return f"ConstantWarmup(steps={self.steps}, multiplier={self.multiplier_value!r})"


class LinearWarmup(Warmup):
    """``flow.optimizer.warmup.linear(steps, start_multiplier)``: the multiplier grows
    linearly, ``start + (1 - start) * step / steps`` for ``step < steps``;
    OneFlow required ``0 <= start_multiplier < 1``.

    >>> from aioflow.optimizer.schedulers import LinearWarmup, PiecewiseConstantScheduler
    >>> s = PiecewiseConstantScheduler([], [0.01], warmup=LinearWarmup(10, 0.1))
    >>> [round(s.lr(k), 6) for k in (0, 5, 10)]
    [0.001, 0.0055, 0.01]
    """

    def __init__(self, steps: int, start_multiplier: float):
        self.steps = _int("LinearWarmup", "steps", steps, low=0)
        self.start_multiplier = _number("LinearWarmup", "start_multiplier", start_multiplier,
                                        low=0.0, high=1.0, high_open=True)

    def multiplier(self, step: int) -> float:
        start = self.start_multiplier
        return start + (1.0 - start) * (step / self.steps)

    def __repr__(self) -> str:
        return f"LinearWarmup(steps={self.steps}, start_multiplier={self.start_multiplier!r})"


#: ``flow.optimizer.warmup.constant`` / ``.linear`` for re-export by the optimizer module.
warmup = types.SimpleNamespace(constant=ConstantWarmup, linear=LinearWarmup)


# --------------------------------------------------------------------------- schedules

class LrScheduler:
    """Base class: ``lr(step)`` applies the warmup, then the subclass's decay."""

    def __init__(self, base_lr: float, warmup: Optional[Warmup] = None):
        name = type(self).__name__
        self.base_lr = _number(name, "base_lr", base_lr)   # negative: ascent, as OneFlow
        if warmup is not None and not isinstance(warmup, Warmup):
            raise TypeError(f"{name}: warmup must be None, LinearWarmup or ConstantWarmup, "
                            f"got {warmup!r}")
        self.warmup = warmup

    def lr(self, step: int) -> float:
        """The learning rate of train step ``step`` (0 for the first step)."""
        step = _check_step(type(self).__name__, step)
        if self.warmup is not None and step < self.warmup.steps:
            return self.base_lr * self.warmup.multiplier(step)
        return float(self._decayed(step))

    def _decayed(self, step: int) -> float:
        raise NotImplementedError

    def _params(self) -> dict:
        return {"base_lr": self.base_lr}

    def __repr__(self) -> str:
        params = dict(self._params())
        if self.warmup is not None:
            params["warmup"] = self.warmup
        args = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"{type(self).__name__}({args})"


def _piece(boundaries: list, step: int) -> int:
    for i, boundary in enumerate(boundaries):
        if step <= boundary:
            return i
    return len(boundaries)


class PiecewiseConstantScheduler(LrScheduler):
    """``values[i]`` for the first ``i`` with ``step <= boundaries[i]``, else ``values[-1]``.

    ``len(values)`` must be ``len(boundaries) + 1``; the warmup's base rate is
    ``values[0]``. ``PiecewiseConstantScheduler([], [lr])`` is a constant rate.

    >>> from aioflow.optimizer.schedulers import PiecewiseConstantScheduler
    >>> s = PiecewiseConstantScheduler([10, 20], [0.1, 0.01, 0.001])
    >>> [s.lr(k) for k in (0, 10, 11, 20, 21)]
    [0.1, 0.1, 0.01, 0.01, 0.001]
    """

    def __init__(self, boundaries: Sequence[int], values: Sequence[float],
                 warmup: Optional[Warmup] = None):
        name = type(self).__name__
        boundaries = _boundaries(name, boundaries)
        values = _rate_list(name, "values", values)
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"{name}: len(values) must be len(boundaries) + 1 = "
                             f"{len(boundaries) + 1}, got {len(values)}")
        super().__init__(values[0], warmup)
        self.boundaries, self.values = boundaries, values

    def _decayed(self, step):
        return self.values[_piece(self.boundaries, step)]

    def _params(self):
        return {"boundaries": self.boundaries, "values": self.values}


class PiecewiseScalingScheduler(LrScheduler):
    """``base_lr * scales[i]`` with ``scales = [1] + scale`` and the piecewise rule above.

    A single number for ``scale`` is repeated for every boundary, as OneFlow did (not
    compounded): ``scale=0.1, boundaries=[5, 10]`` gives factors ``[1, 0.1, 0.1]``.

    >>> from aioflow.optimizer.schedulers import PiecewiseScalingScheduler
    >>> s = PiecewiseScalingScheduler(0.1, [5, 10], [0.5, 0.1])
    >>> [round(s.lr(k), 6) for k in (5, 6, 11)]
    [0.1, 0.05, 0.01]
    """

    def __init__(self, base_lr: float, boundaries: Sequence[int],
                 scale: Union[float, Sequence[float]], warmup: Optional[Warmup] = None):
        super().__init__(base_lr, warmup)
        name = type(self).__name__
        self.boundaries = _boundaries(name, boundaries)
        if isinstance(scale, numbers.Real) and not isinstance(scale, bool):
            scale = [scale] * len(self.boundaries)
        scale = _rate_list(name, "scale", scale)
        if len(scale) != len(self.boundaries):
            raise ValueError(f"{name}: len(scale) must equal len(boundaries) = "
                             f"{len(self.boundaries)}, got {len(scale)}")
        self.scale = scale
        self._scales = [1.0] + scale

    def _decayed(self, step):
        return self.base_lr * self._scales[_piece(self.boundaries, step)]

    def _params(self):
        return {"base_lr": self.base_lr, "boundaries": self.boundaries, "scale": self.scale}


class CosineScheduler(LrScheduler):
    """``base_lr * ((1 - alpha) * 0.5 * (1 + cos(pi * t / steps)) + alpha)``, t = min(step, steps).

    >>> from aioflow.optimizer.schedulers import CosineScheduler
    >>> s = CosineScheduler(0.01, 10, alpha=0.1)
    >>> [round(s.lr(k), 6) for k in (0, 5, 10, 50)]
    [0.01, 0.0055, 0.001, 0.001]
    """

    def __init__(self, base_lr: float, steps: int, alpha: float = 0.0,
                 warmup: Optional[Warmup] = None):
        super().__init__(base_lr, warmup)
        self.steps = _int(type(self).__name__, "steps", steps, low=1)
        self.alpha = _number(type(self).__name__, "alpha", alpha)

    def _decayed(self, step):
        t = min(step, self.steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * t / self.steps))
        return self.base_lr * ((1.0 - self.alpha) * cosine + self.alpha)

    def _params(self):
        return {"base_lr": self.base_lr, "steps": self.steps, "alpha": self.alpha}


class PolynomialScheduler(LrScheduler):
    """``(base_lr - end) * (1 - t / T) ** power + end``.

    Without ``cycle``: ``t = min(step, steps)``, ``T = steps``. With ``cycle``:
    ``t = max(step, 1)``, ``T = steps * ceil(t / steps)`` (the decay restarts).

    >>> from aioflow.optimizer.schedulers import PolynomialScheduler
    >>> s = PolynomialScheduler(0.001, 5, end_learning_rate=0.00001, power=2)
    >>> [round(s.lr(k), 8) for k in (0, 1, 5, 9)]
    [0.001, 0.0006436, 1e-05, 1e-05]
    """

    def __init__(self, base_lr: float, steps: int, end_learning_rate: float = 0.0001,
                 power: float = 1.0, cycle: bool = False, warmup: Optional[Warmup] = None):
        super().__init__(base_lr, warmup)
        name = type(self).__name__
        self.steps = _int(name, "steps", steps, low=1)
        self.end_learning_rate = _number(name, "end_learning_rate", end_learning_rate, low=0.0)
        self.power = _number(name, "power", power, low=0.0)
        self.cycle = _bool(name, "cycle", cycle)

    def _decayed(self, step):
        if self.cycle:
            t = max(step, 1)  # OneFlow: step 0 counts as 1, so it lies in the first cycle
            period = self.steps * -(-t // self.steps)
        else:
            t, period = min(step, self.steps), self.steps
        span = self.base_lr - self.end_learning_rate
        return span * (1.0 - t / period) ** self.power + self.end_learning_rate

    def _params(self):
        return {"base_lr": self.base_lr, "steps": self.steps,
                "end_learning_rate": self.end_learning_rate, "power": self.power,
                "cycle": self.cycle}


@mark_deprecated
class PolynomialSchduler(PolynomialScheduler):
    """OneFlow's misspelt, deprecated alias of :class:`PolynomialScheduler`."""

    def __init__(self, *args, **kwargs):
        warnings.warn("PolynomialSchduler will be removed, use PolynomialScheduler instead",
                      DeprecationWarning, stacklevel=2)
        super().__init__(*args, **kwargs)


class LinearCosineScheduler(LrScheduler):
    """``base_lr * ((alpha + (T - t) / T) * 0.5 * (1 + cos(2 pi num_periods t / T)) + beta)``,
    t = min(step, T), T = steps.

    >>> from aioflow.optimizer.schedulers import LinearCosineScheduler
    >>> s = LinearCosineScheduler(0.1, 10)
    >>> [round(s.lr(k), 6) for k in (0, 10, 20)]
    [0.1001, 0.0001, 0.0001]
    """

    def __init__(self, base_lr: float, steps: int, num_periods: float = 0.5,
                 alpha: float = 0.0, beta: float = 0.001, warmup: Optional[Warmup] = None):
        super().__init__(base_lr, warmup)
        name = type(self).__name__
        self.steps = _int(name, "steps", steps, low=1)
        self.num_periods = _number(name, "num_periods", num_periods)
        self.alpha = _number(name, "alpha", alpha)
        self.beta = _number(name, "beta", beta)

    def _decayed(self, step):
        t, total = min(step, self.steps), self.steps
        linear = (total - t) / total
        cosine = 0.5 * (1.0 + math.cos(math.pi * 2.0 * self.num_periods * t / total))
        return self.base_lr * ((self.alpha + linear) * cosine + self.beta)

    def _params(self):
        return {"base_lr": self.base_lr, "steps": self.steps, "num_periods": self.num_periods,
                "alpha": self.alpha, "beta": self.beta}


class _RateDecay(LrScheduler):
    """Shared shape of the exponential, inverse-time and natural-exp schedules."""

    _decay_rate_low = 0.0
    _decay_rate_open = False

    def __init__(self, base_lr: float, steps: int, decay_rate: float, staircase: bool = False,
                 warmup: Optional[Warmup] = None):
        super().__init__(base_lr, warmup)
        name = type(self).__name__
        self.steps = _int(name, "steps", steps, low=1)
        self.decay_rate = _number(name, "decay_rate", decay_rate, low=self._decay_rate_low,
                                  low_open=self._decay_rate_open)
        self.staircase = _bool(name, "staircase", staircase)

    def _ratio(self, step: int) -> float:
        return step // self.steps if self.staircase else step / self.steps

    def _params(self):
        return {"base_lr": self.base_lr, "steps": self.steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase}


class ExponentialScheduler(_RateDecay):
    """``base_lr * decay_rate ** p``, p = step / steps (floored with ``staircase``).

    >>> from aioflow.optimizer.schedulers import ExponentialScheduler
    >>> s = ExponentialScheduler(0.1, 10, 0.5, staircase=True)
    >>> [s.lr(k) for k in (0, 9, 10, 25)]
    [0.1, 0.1, 0.05, 0.025]
    """

    _decay_rate_open = True  # a rate of 0 or below has no real power

    def _decayed(self, step):
        return self.base_lr * self.decay_rate ** self._ratio(step)


class InverseTimeScheduler(_RateDecay):
    """``base_lr / (1 + decay_rate * p)``, p = step / steps (floored with ``staircase``).

    OneFlow's docstring put the floor around ``decay_rate * p``; its kernel floors p
    alone, which is what aioflow does.

    >>> from aioflow.optimizer.schedulers import InverseTimeScheduler
    >>> s = InverseTimeScheduler(0.1, 5, 0.9)
    >>> [round(s.lr(k), 6) for k in (0, 5, 10)]
    [0.1, 0.052632, 0.035714]
    """

    def _decayed(self, step):
        return self.base_lr / (1.0 + self.decay_rate * self._ratio(step))


class NaturalExpScheduler(_RateDecay):
    """``base_lr * exp(-decay_rate * p)``, p = step / steps (floored with ``staircase``).

    >>> from aioflow.optimizer.schedulers import NaturalExpScheduler
    >>> s = NaturalExpScheduler(0.1, 10, 0.5)
    >>> round(s.lr(20), 6)
    0.036788
    """

    def _decayed(self, step):
        return self.base_lr * math.exp(-self.decay_rate * self._ratio(step))


def as_scheduler(lr_or_scheduler) -> LrScheduler:
    """A scheduler as is; a plain number ``lr >= 0`` as ``PiecewiseConstantScheduler([], [lr])``.

    >>> from aioflow.optimizer.schedulers import as_scheduler
    >>> as_scheduler(0.1).lr(1000)
    0.1
    """
    if isinstance(lr_or_scheduler, LrScheduler):
        return lr_or_scheduler
    if isinstance(lr_or_scheduler, bool) or not isinstance(lr_or_scheduler, numbers.Real):
        raise TypeError("expected a learning rate (a number >= 0) or a scheduler such as "
                        f"flow.optimizer.PiecewiseConstantScheduler, got {lr_or_scheduler!r}")
    rate = float(lr_or_scheduler)
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"learning rate must be a finite number >= 0, got {rate!r}")
    return PiecewiseConstantScheduler([], [rate])
