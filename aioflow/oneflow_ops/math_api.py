"""``flow.math``'s definitions: elementwise arithmetic and reductions on Blobs, and the
functions OneFlow v0.3.4 composed from them (``gelu``, ``xlogy``, ``top_k``, ...), with
``flow.clip_by_value``. Importing this module binds Python's operators on Blobs
(``a + b``, ``-a``, ``a < b``, ``a % b``) to these functions.

Binary functions broadcast like numpy and accept Python numbers on either side; OneFlow's
convention for reductions holds (reducing every axis without keepdims gives shape (1,)).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
...     return flow.math.reduce_sum(2 * x - 1)
>>> job(np.array([1, 2, 3], dtype=np.float32)).tolist()
[9.0]
"""
from __future__ import annotations

import builtins

import numpy as np

from ..ir.blob import bind_operators
from ..ops import elementwise as _ew
from ..ops import indexing as _idx
from ..ops import reduce as _red
from ..ops import shape as _shape
from ..ops import special as _sp
from ..ops.registry import normalize_axis
from .dynamic_api import where
from .ops_api import _require_blob, cast, expand_dims, reshape


__all__ = ["reciprocal", "add_n", "reduce_variance", "argmax", "squared_difference",
           "add", "subtract", "multiply", "divide", "pow", "maximum", "minimum",
           "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "negative", "abs", "sign", "floor", "ceil", "exp", "log", "log1p", "sqrt",
           "rsqrt", "square", "sin", "cos", "tanh", "sigmoid", "softplus", "relu",
           "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "tan", "asin",
           "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "erf",
           "erfc", "rint", "round", "atan2", "mod", "floordiv", "gelu", "log_sigmoid",
           "sigmoid_v2", "tanh_v2", "xdivy", "xlogy", "reciprocal_no_nan",
           "logical_and", "reduce_all", "reduce_any", "reduce_prod", "reduce_logsumexp",
           "reduce_std", "reduce_euclidean_norm", "l2_normalize", "polyval", "tril",
           "fused_scale_tril", "top_k", "in_top_k", "clip_by_value"]


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
    """Index of the largest value along ``axis`` (int32). Of a 1-d input the result has
    shape (1,), not 0-d: OneFlow's argmax op never makes a 0-d blob."""
    axis = normalize_axis("argmax", axis, input.ndim)
    if input.ndim == 1:
        return reshape(_red.argmax_op(input, axis=axis), (1,), name=name)
    return _red.argmax_op(input, axis=axis, name=name)


def squared_difference(x, y, name=None):
    """``(x - y) ** 2``."""
    return square(subtract(x, y), name=name)



def clip_by_value(values, min_value=None, max_value=None, name=None):
    """``values`` clipped to ``[min_value, max_value]`` (either bound may be None, not
    both), in one op; the gradient passes where ``min_value <= values <= max_value``, as
    OneFlow's ``clip_by_scalar`` gives it. Integer Blobs clip at ``int(bound)``.

    >>> import numpy as np, aioflow as flow, aioflow.typing as tp
    >>> @flow.global_function(type="predict")
    ... def relu6(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
    ...     return flow.clip_by_value(x, 0.0, 6.0)
    >>> relu6(np.array([-1, 2, 6, 9], np.float32)).tolist()
    [0.0, 2.0, 6.0, 6.0]
    >>> flow.clear_default_session()
    """
    _require_blob(values, "clip_by_value", "values")
    if min_value is None and max_value is None:
        raise ValueError("clip_by_value: min_value and max_value cannot both be None")
    for arg, bound in (("min_value", min_value), ("max_value", max_value)):
        if bound is not None and (isinstance(bound, bool)
                                  or not isinstance(bound, (int, float, np.number))):
            raise TypeError(f"clip_by_value: {arg} must be a number or None, got "
                            f"{type(bound).__name__}")
    return _ew.clip_by_scalar(values, low=None if min_value is None else float(min_value),
                              high=None if max_value is None else float(max_value),
                              name=name)


# -- OneFlow v0.3.4's further math (issue 18) ----------------------------------------------

tan = _unary(_sp.tan, "tan")
asin = _unary(_sp.arcsin, "asin")
acos = _unary(_sp.arccos, "acos")
atan = _unary(_sp.arctan, "atan")
sinh = _unary(_sp.sinh, "sinh")
cosh = _unary(_sp.cosh, "cosh")
asinh = _unary(_sp.arcsinh, "asinh")
acosh = _unary(_sp.arccosh, "acosh")
atanh = _unary(_sp.arctanh, "atanh")
expm1 = _unary(_sp.expm1, "expm1")
erf = _unary(_sp.erf, "erf")
erfc = _unary(_sp.erfc, "erfc")
rint = _unary(_sp.rint, "rint")
round = _unary(_sp.round_op, "round")  # noqa: A001 - OneFlow's name
round.__doc__ = "Round half away from zero (C's ``round``, as OneFlow), not to even."
rint.__doc__ = "Round half to even (``numpy.rint``)."
sigmoid_v2 = sigmoid
tanh_v2 = tanh
atan2 = _binary(_sp.atan2_op, "atan2")
atan2.__doc__ = "``atan2(x, y)``: the angle of the point (y, x), elementwise."
floordiv = _binary(_sp.floordiv_op, "floordiv")
floordiv.__doc__ = "``floor(x / y)``, elementwise (no gradient)."
mod = _binary(_sp.mod_op, "mod")
mod.__doc__ = ("``x mod y`` with the divisor's sign, as Python's ``%`` (``a % b`` on Blobs "
               "calls this).")
bind_operators(mod=mod, floordiv=floordiv)


def gelu(x, name=None):
    """The exact Gaussian error linear unit ``x * (1 + erf(x / sqrt(2))) / 2`` (OneFlow's
    ``math.gelu``; ``flow.nn.gelu`` is the tanh approximation)."""
    return multiply(multiply(x, 0.5), add(erf(multiply(x, 0.7071067811865476)), 1.0),
                    name=name)


def log_sigmoid(x, name=None):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``."""
    return negative(softplus(negative(x)), name=name)


def _nonzero(x):
    return not_equal(x, 0)


def reciprocal_no_nan(x, name=None):
    """``1 / x``, and 0 where ``x`` is 0."""
    zero = equal(x, 0)
    safe = where(zero, 1, x)
    return where(zero, 0, divide(1, safe), name=name)


def xdivy(x, y, name=None):
    """``x / y``, and 0 where ``x`` is 0 (whatever ``y``)."""
    x, y = _ew.promote(x, y, "xdivy")
    zero = equal(x, 0)
    return where(zero, 0, divide(x, where(zero, 1, y)), name=name)


def xlogy(x, y, name=None):
    """``x * log(y)``, and 0 where ``x`` is 0 (whatever ``y``)."""
    x, y = _ew.promote(x, y, "xlogy")
    zero = equal(x, 0)
    return where(zero, 0, multiply(x, log(where(zero, 1, y))), name=name)


def logical_and(x, y, name=None):
    """1 where both are nonzero, else 0 (int8)."""
    return multiply(_nonzero(x), _nonzero(y), name=name)


def _axes_of(op_name, x, axis):
    return _red._axes(op_name, x, axis)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    """1 (int8) where every element over ``axis`` is nonzero."""
    return _idx.reduce_all_op(input_tensor, axes=_axes_of("reduce_all", input_tensor, axis),
                              keepdims=bool(keepdims), name=name)


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    """1 (int8) where some element over ``axis`` is nonzero."""
    return _idx.reduce_any_op(input_tensor, axes=_axes_of("reduce_any", input_tensor, axis),
                              keepdims=bool(keepdims), name=name)


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None):
    """Product over ``axis``; its gradient is exact when elements are zero."""
    return _idx.reduce_prod_op(input_tensor,
                               axes=_axes_of("reduce_prod", input_tensor, axis),
                               keepdims=bool(keepdims), name=name)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """``log(sum(exp(x)))`` over ``axis``, shifted by the maximum so it cannot overflow."""
    peak = reduce_max(input_tensor, axis=axis, keepdims=True)
    total = reduce_sum(exp(input_tensor - peak), axis=axis, keepdims=True)
    out = log(total) + peak
    if keepdims:
        return _identity(out, name)
    return reshape(out, _red.reduced_shape(input_tensor.shape,
                                            _axes_of("reduce_logsumexp", input_tensor, axis),
                                            False), name=name)


def _identity(x, name):
    return x if name is None else _ew.identity(x, name=name)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """Biased standard deviation over ``axis``."""
    return sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims), name=name)


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """``sqrt(sum(x ** 2))`` over ``axis``."""
    return sqrt(reduce_sum(square(input_tensor), axis=axis, keepdims=keepdims), name=name)


def l2_normalize(input, axis=None, epsilon=1e-12, name=None):  # noqa: A002
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``."""
    norm2 = reduce_sum(square(input), axis=axis, keepdims=True)
    return multiply(input, rsqrt(maximum(norm2, epsilon)), name=name)


def polyval(coeffs, x, name=None):
    """``coeffs[0] * x ** (n-1) + ... + coeffs[n-1]`` by Horner's rule; ``coeffs`` is a list
    of numbers or Blobs."""
    if not isinstance(coeffs, (list, tuple)):
        raise TypeError(f"polyval: coeffs must be a list or tuple, got {type(coeffs).__name__}")
    if not coeffs:
        return _ew.zeros_like(x, name=name)
    out = _ew.to_blob(coeffs[0], x, "polyval")
    out = add(multiply(x, 0), out)   # broadcast a scalar coefficient to x's shape
    for c in coeffs[1:]:
        out = add(multiply(out, x), c)
    return _identity(out, name)


def tril(x, diagonal=0, name=None):
    """Zero the elements above the ``diagonal``-th diagonal of the last two axes."""
    return _idx.tril_op(x, diagonal=int(diagonal), fill_value=0, name=name)


def fused_scale_tril(x, diagonal=0, fill_value=0, scale=1, name=None):
    """``tril(x * scale)`` with ``fill_value`` above the diagonal."""
    scaled = x if scale == 1 else multiply(x, scale)
    return _idx.tril_op(scaled, diagonal=int(diagonal), fill_value=fill_value, name=name)


def top_k(input, axis=-1, k=1, sorted=True, name=None):  # noqa: A002 - OneFlow's names
    """Indices (int32) of the ``k`` largest values along ``axis`` (OneFlow's argument
    order: ``top_k(input, axis, k, sorted)``), largest first (ties: the lower index first);
    all of them, sorted, where ``k`` exceeds the axis' length. As OneFlow, it returns
    indices only; the values are ``flow.gather`` of them (or ``flow.sort``).
    ``sorted=False`` gives the same order."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k:
        raise ValueError(f"top_k: k must be a positive int, got {k!r}")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"top_k: axis must be an int, got {axis!r}")
    axis = normalize_axis("top_k", axis, input.ndim)
    n = input.shape[axis] if input.ndim else 0
    order = _idx.argsort_op(input, axis=axis, descending=True)
    if k >= n:
        return _identity(order, name)
    index = (builtins.slice(None),) * axis + (builtins.slice(0, k),)
    return _shape.slice_op(order, index=index, name=name)


_FLOAT32_MAX = 3.4028234663852886e38   # numpy.finfo(numpy.float32).max


def in_top_k(targets, predictions, k, name=None):
    """1 (int8) where ``targets[i]`` is among the ``k`` largest of ``predictions[i]``:
    the count of predictions larger than the target's is below ``k``. As OneFlow's (and
    TensorFlow's) kernel, 0 where it cannot say: a target beyond the classes, or a row
    holding a non-finite prediction."""
    if predictions.ndim != 2 or targets.shape != predictions.shape[:1]:
        raise ValueError(f"in_top_k: predictions must be 2-d and targets 1-d of its batch "
                         f"size, got {predictions.shape} and {targets.shape}")
    classes = predictions.shape[1]
    index = minimum(cast(targets, "int64"), classes - 1)   # in range; refused below
    picked = _idx.take_along_axis_op(predictions, expand_dims(index, 1), axis=1)
    above = reduce_sum(cast(greater(predictions, picked), "int32"), axis=1)
    # |x| <= max is False for inf and NaN alike, without an invalid-value warning
    finite = reduce_sum(cast(less_equal(abs(predictions), _FLOAT32_MAX), "int32"), axis=1)
    can_say = logical_and(equal(finite, classes), less(cast(targets, "int64"), classes))
    return logical_and(less(above, k), can_say, name=name)

