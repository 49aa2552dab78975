"""``flow.optimizer.loss_scale``: OneFlow's loss-scaling policies, passed to an optimizer as
``loss_scale_policy=`` (``loss_scale_factor=f`` is short for ``static_loss_scale(f)``).

A train step multiplies each loss by the scale before differentiating and divides every
gradient by it afterwards, so small float16 gradients do not underflow; the updates see the
same gradients as without scaling (up to rounding). With the dynamic policy the scale
adapts: a step whose gradients overflow (NaN or infinity) applies no update -- through the
train step's non-finite guard (:mod:`aioflow.engine.step_guard`), always on for such jobs -- and
halves the scale; ``increment_period`` good steps in a row double it.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="train")
... def fit(x: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
...     w = flow.get_variable("w", shape=(1, 1), initializer=flow.zeros_initializer())
...     loss = flow.math.reduce_mean(flow.math.square(flow.matmul(x, w) - 3 * x))
...     policy = flow.optimizer.loss_scale.dynamic_loss_scale(initial_loss_scale=2.0 ** 10,
...                                                           increment_period=2)
...     flow.optimizer.SGD(0.05, momentum=0, loss_scale_policy=policy).minimize(loss)
...     return loss
>>> x = np.arange(4, dtype=np.float32).reshape(4, 1)
>>> for _ in range(3):
...     _ = fit(x)
>>> float(flow.get_all_variables()["System-Train-LossScale-fit"])   # doubled after 2 steps
2048.0
"""
from __future__ import annotations

import math
import numbers

from .._core import dtypes
from ..engine.variables import read_declared
from ..initializers import constant_initializer, zeros_initializer
from ..ir import current_graph
from ..oneflow_ops.math_api import reciprocal
from ..oneflow_ops.ops_api import cast
from ..ops.loss_scale import dynamic_loss_scale_update

__all__ = ["LossScalePolicy", "StaticLossScalePolicy", "DynamicLossScalePolicy",
           "static_loss_scale", "dynamic_loss_scale"]


def _positive(owner: str, name: str, value, *, at_least=0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and value > at_least):
        raise ValueError(f"{owner}: {name} must be a finite number > {at_least:g}, "
                         f"got {value!r}")
    return float(value)


class LossScalePolicy:
    """Base of the policies. ``scaled(loss)`` and ``unscaled(grad)`` are applied while a
    train job is traced; ``after_step(flag)`` adds what runs after the updates."""

    # Whether the job must compute the non-finite flag even when
    # ``flow.config.skip_nonfinite_steps(False)`` switched the guard off.
    needs_guard = False

    def scaled(self, loss):  # pragma: no cover - abstract
        raise NotImplementedError

    def unscaled(self, grad):  # pragma: no cover - abstract
        raise NotImplementedError

    def after_step(self, *flag) -> None:
        """Nothing to do after a step (the static policy); ``flag``: the step's
        non-finite flag, if the job computes one."""


class StaticLossScalePolicy(LossScalePolicy):
    """A fixed scale: ``loss * loss_scale_factor``, gradients divided by it.

    >>> StaticLossScalePolicy(128.0).loss_scale_factor
    128.0
    """

    def __init__(self, loss_scale_factor: float):
        self.loss_scale_factor = _positive("static_loss_scale", "loss_scale_factor",
                                           loss_scale_factor)

    def scaled(self, loss):
        return loss if self.loss_scale_factor == 1.0 else loss * self.loss_scale_factor

    def unscaled(self, grad):
        return grad if self.loss_scale_factor == 1.0 else grad * (1.0 / self.loss_scale_factor)

    def __repr__(self) -> str:
        return f"flow.optimizer.loss_scale.static_loss_scale({self.loss_scale_factor!r})"


class DynamicLossScalePolicy(LossScalePolicy):
    """A scale that adapts (OneFlow's defaults): starts at ``initial_loss_scale``, is
    divided by ``multiplier`` (not below 1) after a step with non-finite gradients, which
    applies no update, and multiplied by it (up to float32's largest value) after
    ``increment_period`` finite steps in a row.

    The scale and the count of good steps are state variables of the job,
    ``System-Train-LossScale-<job>`` (float32) and ``System-Train-GoodStepCounter-<job>``
    (int64), saved in checkpoints with the rest of the training state.
    """

    needs_guard = True

    def __init__(self, initial_loss_scale=(2 ** 30), increment_period=2000, multiplier=2.0):
        owner = "dynamic_loss_scale"
        self.initial_loss_scale = _positive(owner, "initial_loss_scale", initial_loss_scale)
        if isinstance(increment_period, bool) or not isinstance(increment_period, int) \
                or increment_period < 1:
            raise ValueError(f"{owner}: increment_period must be an int >= 1, got "
                             f"{increment_period!r}")
        self.increment_period = increment_period
        self.multiplier = _positive(owner, "multiplier", multiplier, at_least=1.0)

    def _state(self):
        """The job's (scale, good-step count) variables, declared on first use."""
        graph = current_graph()
        blobs = []
        for kind, dtype, init in (("LossScale", dtypes.float32,
                                   constant_initializer(self.initial_loss_scale)),
                                  ("GoodStepCounter", dtypes.int64, zeros_initializer())):
            name = f"System-Train-{kind}-{graph.name}"
            graph.session.declare_variable(name, (), dtype, init, False, graph, is_state=True)
            blobs.append(read_declared(name))
        return blobs

    def _scale_as(self, blob):
        scale = self._state()[0]
        return scale if blob.dtype is scale.dtype else cast(scale, blob.dtype)

    def scaled(self, loss):
        return loss * self._scale_as(loss)

    def unscaled(self, grad):
        return grad * reciprocal(self._scale_as(grad))

    def after_step(self, flag) -> None:
        scale, good_steps = self._state()
        dynamic_loss_scale_update(scale, good_steps, flag,
                                  increment_period=self.increment_period,
                                  multiplier=self.multiplier)

    def __repr__(self) -> str:
        return (f"flow.optimizer.loss_scale.dynamic_loss_scale(initial_loss_scale="
                f"{self.initial_loss_scale!r}, increment_period={self.increment_period!r}, "
                f"multiplier={self.multiplier!r})")


static_loss_scale = StaticLossScalePolicy
dynamic_loss_scale = DynamicLossScalePolicy


def resolve(owner: str, loss_scale_factor, loss_scale_policy):
    """The policy an optimizer's two arguments ask for (None: no scaling), as OneFlow:
    ``loss_scale_factor`` is a static policy, and the two exclude each other."""
    if loss_scale_factor is not None and loss_scale_policy is not None:
        raise ValueError(f"{owner}: give loss_scale_factor or loss_scale_policy, not both "
                         f"(got {loss_scale_factor!r} and {loss_scale_policy!r})")
    if loss_scale_factor is not None:
        return StaticLossScalePolicy(loss_scale_factor)
    if loss_scale_policy is not None and not isinstance(loss_scale_policy, LossScalePolicy):
        raise TypeError(f"{owner}: loss_scale_policy must be flow.optimizer.loss_scale."
                        f"static_loss_scale(...) or dynamic_loss_scale(...), got "
                        f"{loss_scale_policy!r}")
    return loss_scale_policy
