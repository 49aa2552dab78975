"""``flow.regularizers``' definitions: penalties added to a train job's loss for a
layer's variables.

As in OneFlow, whose update rule adds ``l1 * sign(w) + l2 * w`` to a regularized
variable's gradient, the penalty is ``l1 * sum(|w|) + l2 / 2 * sum(w^2)``. Pass one as
``kernel_regularizer=``/``bias_regularizer=`` of a layer or ``regularizer=`` of
``flow.get_variable``.
"""
from __future__ import annotations

from . import math_api as math

__all__ = ["Regularizer", "l1", "l2", "l1_l2"]


class Regularizer:
    def __init__(self, l1: float = 0.0, l2: float = 0.0):
        if l1 < 0 or l2 < 0:
            raise ValueError(f"regularizer: l1 and l2 must be >= 0, got l1={l1}, l2={l2}")
        self.l1, self.l2 = float(l1), float(l2)

    def __call__(self, weight):
        penalty = None
        if self.l1:
            penalty = math.reduce_sum(math.abs(weight)) * self.l1
        if self.l2:
            term = math.reduce_sum(math.square(weight)) * (0.5 * self.l2)
            penalty = term if penalty is None else penalty + term
        return penalty if penalty is not None else math.reduce_sum(weight) * 0.0

    def __repr__(self) -> str:
        return f"l1_l2(l1={self.l1}, l2={self.l2})"


def l1(l: float = 0.01) -> Regularizer:  # noqa: E741 - OneFlow's argument name
    return Regularizer(l1=l)


def l2(l: float = 0.01) -> Regularizer:  # noqa: E741
    return Regularizer(l2=l)


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> Regularizer:
    return Regularizer(l1=l1, l2=l2)
