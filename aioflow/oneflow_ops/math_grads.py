"""``flow.math.gelu_grad`` and ``flow.math.sigmoid_grad``: OneFlow's exported gradient
ops, which take the forward's input (or output) and the output gradient ``dy``.

They are compositions of primitive ops, so they are differentiable themselves (a
second-order gradient comes from the parts).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(y: tp.Numpy.Placeholder((2,)), dy: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return flow.math.sigmoid_grad(y, dy)
>>> y, dy = np.array([0.5, 0.9], np.float32), np.array([1.0, 2.0], np.float32)
>>> np.round(job(y, dy).astype(np.float64), 3).tolist()
[0.25, 0.18]
"""
from __future__ import annotations

import math as _pymath

from . import math_api as math

__all__ = ["gelu_grad", "sigmoid_grad"]

_INV_SQRT2 = 1.0 / _pymath.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / _pymath.sqrt(2.0 * _pymath.pi)


def gelu_grad(x, dy, name=None):
    """``dy * gelu'(x)`` for the exact GELU of ``flow.math.gelu``: ``gelu'(x) = (1 +
    erf(x / sqrt(2))) / 2 + x * exp(-x^2 / 2) / sqrt(2 pi)``."""
    cdf = math.multiply(math.add(math.erf(math.multiply(x, _INV_SQRT2)), 1.0), 0.5)
    density = math.multiply(math.exp(math.multiply(math.square(x), -0.5)), _INV_SQRT_2PI)
    return math.multiply(dy, math.add(cdf, math.multiply(x, density)), name=name)


def sigmoid_grad(y, dy, name=None):
    """``dy * y * (1 - y)``, the gradient of ``sigmoid`` given its output ``y``."""
    return math.multiply(dy, math.multiply(y, math.subtract(1.0, y)), name=name)
