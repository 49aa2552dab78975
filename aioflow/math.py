"""``flow.math``: elementwise arithmetic and reductions on Blobs.

Binary functions broadcast like numpy and accept Python numbers on either side.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def norms(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
...     return flow.math.sqrt(flow.math.reduce_sum(flow.math.square(x), axis=1))
>>> norms(np.array([[3, 4, 0], [0, 0, 2]], dtype=np.float32)).tolist()
[5.0, 2.0]
"""
from __future__ import annotations

from .ir.blob import bind_operators
from .ops import elementwise as _ew
from .ops import reduce as _red


__all__ = [
    "reciprocal",
    "add_n",
    "reduce_variance",
    "argmax",
    "squared_difference",
    "add",
    "subtract",
    "multiply",
    "divide",
    "pow",
    "maximum",
    "minimum",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "negative",
    "abs",
    "sign",
    "floor",
    "ceil",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "square",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "softplus",
    "relu",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
]


def _binary(op, op_name):
    def apply(x, y, name=None):
        a, b = _ew.promote(x, y, op_name)
        return op(a, b, name=name)
    apply.__name__ = op_name
    apply.__doc__ = f"Elementwise ``{op_name}`` with numpy broadcasting."
    return apply


add = _binary(_ew.add_op, "add")
subtract = _binary(_ew.subtract_op, "subtract")
multiply = _binary(_ew.multiply_op, "multiply")
divide = _binary(_ew.divide_op, "divide")
pow = _binary(_ew.pow_op, "pow")  # noqa: A001 - OneFlow's name
maximum = _binary(_ew.maximum_op, "maximum")
minimum = _binary(_ew.minimum_op, "minimum")
equal = _binary(_ew.equal_op, "equal")
not_equal = _binary(_ew.not_equal_op, "not_equal")
less = _binary(_ew.less_op, "less")
less_equal = _binary(_ew.less_equal_op, "less_equal")
greater = _binary(_ew.greater_op, "greater")
greater_equal = _binary(_ew.greater_equal_op, "greater_equal")


def _unary(op, op_name):
    def apply(x, name=None):
        return op(x, name=name)
    apply.__name__ = op_name
    apply.__doc__ = f"Elementwise ``{op_name}``."
    return apply


negative = _unary(_ew.negative, "negative")
abs = _unary(_ew.abs_op, "abs")  # noqa: A001
sign = _unary(_ew.sign, "sign")
floor = _unary(_ew.floor, "floor")
ceil = _unary(_ew.ceil, "ceil")
exp = _unary(_ew.exp, "exp")
log = _unary(_ew.log, "log")
log1p = _unary(_ew.log1p, "log1p")
sqrt = _unary(_ew.sqrt, "sqrt")
rsqrt = _unary(_ew.rsqrt, "rsqrt")
square = _unary(_ew.square, "square")
sin = _unary(_ew.sin, "sin")
cos = _unary(_ew.cos, "cos")
tanh = _unary(_ew.tanh, "tanh")
sigmoid = _unary(_ew.sigmoid, "sigmoid")
softplus = _unary(_ew.softplus, "softplus")
relu = _unary(_ew.relu, "relu")

# Python's operators on Blobs (``a + b``, ``-a``, ``a < b``) build these ops.
bind_operators(add=add, subtract=subtract, multiply=multiply, divide=divide, pow=pow,
               negative=negative, abs=abs, equal=equal, not_equal=not_equal, less=less,
               less_equal=less_equal, greater=greater, greater_equal=greater_equal)


def reciprocal(x, name=None):
    """``1 / x``."""
    return divide(1.0, x, name=name)


def add_n(inputs, name=None):
    """The sum of a list of Blobs of one shape."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("add_n: expected at least one Blob")
    total = inputs[0]
    for blob in inputs[1:]:
        total = add(total, blob)
    return total


def _reduction(op, op_name):
    def apply(input_tensor, axis=None, keepdims=False, name=None):
        return _red.reduce(op, op_name, input_tensor, axis, keepdims, name)
    apply.__name__ = op_name
    apply.__doc__ = (f"``{op_name}`` over ``axis`` (all axes if None). OneFlow's convention: "
                     "reducing every axis without keepdims gives shape (1,).")
    return apply


reduce_sum = _reduction(_red.reduce_sum_op, "reduce_sum")
reduce_mean = _reduction(_red.reduce_mean_op, "reduce_mean")
reduce_max = _reduction(_red.reduce_max_op, "reduce_max")
reduce_min = _reduction(_red.reduce_min_op, "reduce_min")


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """Biased variance over ``axis``."""
    mean = reduce_mean(input_tensor, axis=axis, keepdims=True)
    return reduce_mean(square(input_tensor - mean), axis=axis, keepdims=keepdims, name=name)


def argmax(input, axis=-1, name=None):  # noqa: A002 - OneFlow's name
    """Index of the largest value along ``axis`` (int32)."""
    from .ops.registry import normalize_axis
    return _red.argmax_op(input, axis=normalize_axis("argmax", axis, input.ndim), name=name)


def squared_difference(x, y, name=None):
    """``(x - y) ** 2``."""
    return square(subtract(x, y), name=name)


