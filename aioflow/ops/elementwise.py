"""Elementwise ops: constants, casts, broadcasting binary ops, unary math, comparisons."""
from __future__ import annotations

import numbers

import numpy as np

from .._core import dtypes
from ..ir import Blob
from .registry import register, require_float, same_as_first

# -- constants and casts ------------------------------------------------------------------


def _infer_constant(*, value, shape, dtype):
    return [(tuple(shape), dtype)]


@register("constant", infer=_infer_constant, differentiable=False)
def constant(ctx, *, value, shape, dtype):
    # Materialised once per plan by the compiler's constant folding; a fresh array here.
    np_dtype = dtypes.as_numpy(dtype)
    if isinstance(value, np.ndarray) and value.ndim:   # an array constant: to the device
        return ctx.xp.asarray(np.array(np.broadcast_to(value, shape), dtype=np_dtype))
    return ctx.xp.full(shape, value, dtype=np_dtype)


def scalar_like(value, like: Blob) -> Blob:
    """A 0-d constant of ``like``'s dtype (Python scalars in Blob arithmetic)."""
    return constant(value=value, shape=(), dtype=like.dtype)


def _infer_cast(x, *, dtype):
    return [(x.shape, dtypes.from_numpy(dtype))]


@register("cast", infer=_infer_cast)
def cast(ctx, x, *, dtype):
    return x.astype(dtypes.as_numpy(dtype), copy=False)


@cast.grad
def _cast_grad(node, gy):
    # OneFlow's cast grad is cast(dy, in's dtype) whatever the dtypes: a diff passes
    # through a cast to an integer type and back (rounded on the way), as OneFlow's does
    x = node.inputs[0]
    return [cast(gy, dtype=x.dtype) if x.dtype.is_numeric else None]


@register("identity", infer=same_as_first)
def identity(ctx, x):
    return x


@identity.grad
def _identity_grad(node, gy):
    return [gy]


# -- broadcasting helpers -----------------------------------------------------------------


def _infer_broadcast_to(x, *, shape):
    try:
        np.broadcast_shapes(x.shape, tuple(shape))
    except ValueError:
        raise ValueError(f"broadcast_to: cannot broadcast {x.shape} to {tuple(shape)}") from None
    return [(tuple(shape), x.dtype)]


@register("broadcast_to", infer=_infer_broadcast_to)
def broadcast_to(ctx, x, *, shape):
    return ctx.xp.broadcast_to(x, shape)


@broadcast_to.grad
def _broadcast_to_grad(node, gy):
    return [sum_to_shape(gy, node.inputs[0].shape)]


def _infer_sum_to(x, *, shape):
    return [(tuple(shape), x.dtype)]


@register("sum_to_shape", infer=_infer_sum_to)
def sum_to_shape_kernel(ctx, x, *, shape):
    """Sum ``x`` down to ``shape`` (the adjoint of broadcasting)."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1
    )
    out = x.sum(axis=axes, keepdims=True, dtype=x.dtype) if axes else x
    return out.reshape(shape)


@sum_to_shape_kernel.grad
def _sum_to_grad(node, gy):
    return [broadcast_to(gy, shape=node.inputs[0].shape)]


def sum_to_shape(x: Blob, shape) -> Blob:
    """``x`` summed to ``shape``; no op at all when the shapes already agree."""
    return x if tuple(x.shape) == tuple(shape) else sum_to_shape_kernel(x, shape=tuple(shape))


# -- binary ops ---------------------------------------------------------------------------


def _infer_binary(name):
    def infer(a, b):
        if a.dtype is not b.dtype:
            raise TypeError(
                f"{name}: operands must have the same dtype, got {a.dtype.name} and "
                f"{b.dtype.name}; use flow.cast to convert one of them"
            )
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"{name}: shapes {a.shape} and {b.shape} cannot be broadcast together"
            ) from None
        return [(shape, a.dtype)]
    return infer


def _binary(name, ufunc):
    """A broadcasting binary op computed by the array module's ufunc ``ufunc``."""
    def kernel(ctx, a, b, out=None):
        return getattr(ctx.xp, ufunc)(a, b, out=out)
    return register(name, infer=_infer_binary(name), writes_out=True)(kernel)


add_op = _binary("add", "add")
subtract_op = _binary("subtract", "subtract")
multiply_op = _binary("multiply", "multiply")


@register("divide", infer=_infer_binary("divide"), writes_out=True)
def divide_op(ctx, a, b, out=None):
    xp = ctx.xp
    if a.dtype.kind in "iu":  # integers: C's (and OneFlow's) division, rounding toward zero
        q = xp.floor_divide(a, b)
        q += ((q < 0) & (xp.remainder(a, b) != 0)).astype(q.dtype)
        if out is None:
            return q
        out[...] = q
        return out
    return xp.divide(a, b, out=out)


pow_op = _binary("pow", "power")
maximum_op = _binary("maximum", "maximum")
minimum_op = _binary("minimum", "minimum")


def _unbroadcast(grads, node):
    return [None if g is None else sum_to_shape(g, x.shape) for g, x in zip(grads, node.inputs)]


@add_op.grad
def _add_grad(node, gy):
    return _unbroadcast([gy, gy], node)


@subtract_op.grad
def _sub_grad(node, gy):
    return _unbroadcast([gy, negative(gy)], node)


@multiply_op.grad
def _mul_grad(node, gy):
    a, b = node.inputs
    return _unbroadcast([multiply_op(gy, b), multiply_op(gy, a)], node)


@divide_op.grad
def _div_grad(node, gy):
    a, b = node.inputs
    y = node.outputs[0]
    ga = divide_op(gy, b)
    gb = negative(multiply_op(ga, y))
    return _unbroadcast([ga, gb], node)


@pow_op.grad
def _pow_grad(node, gy):
    a, b = node.inputs
    y = node.outputs[0]
    # d/da a**b = b * a**(b-1); d/db = log(a) * a**b (zero where a <= 0, as TF does).
    ga = multiply_op(gy, multiply_op(b, pow_op(a, subtract_op(b, scalar_like(1, b)))))
    gb = multiply_op(gy, multiply_op(safe_log(a), y))
    return _unbroadcast([ga, gb], node)


def _select_grad(first_wins_op):
    def rule(node, gy):
        a, b = node.inputs
        mask_a = cast(first_wins_op(a, b), dtype=gy.dtype)
        mask_b = subtract_op(scalar_like(1, mask_a), mask_a)
        return _unbroadcast([multiply_op(gy, mask_a), multiply_op(gy, mask_b)], node)
    return rule


# -- comparisons (int8 results, as OneFlow) ------------------------------------------------


def _infer_compare(name):
    base = _infer_binary(name)

    def infer(a, b):
        (shape, _), = base(a, b)
        return [(shape, dtypes.int8)]
    return infer


def _compare(name, fn):
    return register(name, infer=_infer_compare(name), differentiable=False)(
        lambda ctx, a, b: fn(ctx.xp, a, b).astype(np.int8))


equal_op = _compare("equal", lambda xp, a, b: xp.equal(a, b))
not_equal_op = _compare("not_equal", lambda xp, a, b: xp.not_equal(a, b))
less_op = _compare("less", lambda xp, a, b: xp.less(a, b))
less_equal_op = _compare("less_equal", lambda xp, a, b: xp.less_equal(a, b))
greater_op = _compare("greater", lambda xp, a, b: xp.greater(a, b))
greater_equal_op = _compare("greater_equal", lambda xp, a, b: xp.greater_equal(a, b))

maximum_op.grad(_select_grad(greater_equal_op))
minimum_op.grad(_select_grad(less_equal_op))


def _infer_where(cond, x, y):
    (shape, dtype), = _infer_binary("where")(x, y)
    try:
        return [(np.broadcast_shapes(cond.shape, shape), dtype)]
    except ValueError:
        raise ValueError(f"where: condition shape {cond.shape} cannot be broadcast with "
                         f"x and y's shape {shape}") from None


@register("where", infer=_infer_where)
def where(ctx, cond, x, y):
    return ctx.xp.where(cond != 0, x, y)


@where.grad
def _where_grad(node, gy):
    cond, x, y = node.inputs
    zeros = zeros_like(gy)
    gx = where(cond, gy, zeros)
    gyy = where(cond, zeros, gy)
    return [None, sum_to_shape(gx, x.shape), sum_to_shape(gyy, y.shape)]


# -- unary ops ----------------------------------------------------------------------------


def _infer_unary(name, floating):
    def infer(x):
        if floating:
            require_float(name, x)
        return [(x.shape, x.dtype)]
    return infer


def _unary(name, fn, *, floating=True, differentiable=True):
    return register(name, infer=_infer_unary(name, floating), differentiable=differentiable)(
        lambda ctx, x: fn(ctx.xp, x))


def _unary_ufunc(name, ufunc, *, floating=True, differentiable=True, extra=()):
    """A unary op that is one ufunc call (``extra``: its further operands, e.g. relu's 0),
    so it can write into the memory plan's ``out=`` buffer."""
    def kernel(ctx, x, out=None):
        return getattr(ctx.xp, ufunc)(x, *extra, out=out)
    return register(name, infer=_infer_unary(name, floating), differentiable=differentiable,
                    writes_out=True)(kernel)


negative = _unary_ufunc("negative", "negative", floating=False)
abs_op = _unary_ufunc("abs", "absolute", floating=False)
sign = _unary_ufunc("sign", "sign", floating=False, differentiable=False)
floor = _unary_ufunc("floor", "floor", differentiable=False)
ceil = _unary_ufunc("ceil", "ceil", differentiable=False)
exp = _unary_ufunc("exp", "exp")
log = _unary_ufunc("log", "log")
log1p = _unary_ufunc("log1p", "log1p")
safe_log = _unary("safe_log", lambda xp, x: xp.log(xp.where(x > 0, x, 1)), differentiable=False)
sqrt = _unary_ufunc("sqrt", "sqrt")
rsqrt = _unary("rsqrt", lambda xp, x: 1 / xp.sqrt(x))
square = _unary_ufunc("square", "square", floating=False)
sin = _unary_ufunc("sin", "sin")
cos = _unary_ufunc("cos", "cos")
tanh = _unary_ufunc("tanh", "tanh")


def _sigmoid(xp, x):
    # Split by sign so exp never overflows (float32 exp(89) is inf).
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


sigmoid = _unary("sigmoid", _sigmoid)
relu = _unary_ufunc("relu", "maximum", floating=False, extra=(0,))


def _softplus(xp, x):
    return (xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))).astype(x.dtype, copy=False)


softplus = _unary("softplus", _softplus)


@register("relu_grad", infer=same_as_first, differentiable=False, writes_out=True)
def relu_grad(ctx, y, gy, out=None):
    # A multiply by the boolean mask: 10x faster than where(y > 0, gy, 0) in numpy.
    return ctx.xp.multiply(gy, y > 0, out=out)


def _clip_bound(value, dtype):
    """A bound of ``clip_by_scalar`` in the array's kind (OneFlow's integral_min/max
    attributes for integer arrays: ``int(value)``), None for no bound."""
    if value is None:
        return None
    return int(value) if np.dtype(dtype).kind in "iu" else float(value)


def _infer_clip(x, *, low, high):
    return [(x.shape, x.dtype)]


@register("clip_by_scalar", infer=_infer_clip, writes_out=True)
def clip_by_scalar(ctx, x, *, low, high, out=None):
    """``x`` clipped to ``[low, high]`` (None: no bound on that side), one pass: OneFlow's
    ``clip_by_scalar`` (and its ``_min`` / ``_max`` forms)."""
    return ctx.xp.clip(x, _clip_bound(low, x.dtype), _clip_bound(high, x.dtype), out=out)


@register("clip_by_scalar_grad", infer=same_as_first, differentiable=False,
          writes_out=True)
def clip_by_scalar_grad(ctx, gy, x, *, low, high, out=None):
    """``gy`` where ``low <= x <= high``, else 0: OneFlow's clip gradient keeps the bounds
    themselves."""
    xp = ctx.xp
    inside = None
    if low is not None:
        inside = x >= _clip_bound(low, x.dtype)
    if high is not None:
        below = x <= _clip_bound(high, x.dtype)
        inside = below if inside is None else inside & below
    return xp.multiply(gy, inside, out=out)


@clip_by_scalar.grad
def _clip_grad(node, gy):
    return [clip_by_scalar_grad(gy, node.inputs[0], **node.attrs)]


@negative.grad
def _neg_grad(node, gy):
    return [negative(gy)]


@abs_op.grad
def _abs_grad(node, gy):
    return [multiply_op(gy, sign(node.inputs[0]))]


@exp.grad
def _exp_grad(node, gy):
    return [multiply_op(gy, node.outputs[0])]


@log.grad
def _log_grad(node, gy):
    return [divide_op(gy, node.inputs[0])]


@log1p.grad
def _log1p_grad(node, gy):
    x = node.inputs[0]
    return [divide_op(gy, add_op(x, scalar_like(1, x)))]


@sqrt.grad
def _sqrt_grad(node, gy):
    y = node.outputs[0]
    return [divide_op(gy, multiply_op(scalar_like(2, y), y))]


@rsqrt.grad
def _rsqrt_grad(node, gy):
    y = node.outputs[0]
    cube = multiply_op(y, square(y))
    return [multiply_op(gy, multiply_op(scalar_like(-0.5, y), cube))]


@square.grad
def _square_grad(node, gy):
    x = node.inputs[0]
    return [multiply_op(gy, multiply_op(scalar_like(2, x), x))]


@sin.grad
def _sin_grad(node, gy):
    return [multiply_op(gy, cos(node.inputs[0]))]


@cos.grad
def _cos_grad(node, gy):
    return [negative(multiply_op(gy, sin(node.inputs[0])))]


@tanh.grad
def _tanh_grad(node, gy):
    y = node.outputs[0]
    return [multiply_op(gy, subtract_op(scalar_like(1, y), square(y)))]


@sigmoid.grad
def _sigmoid_grad(node, gy):
    y = node.outputs[0]
    return [multiply_op(gy, multiply_op(y, subtract_op(scalar_like(1, y), y)))]


@softplus.grad
def _softplus_grad(node, gy):
    return [multiply_op(gy, sigmoid(node.inputs[0]))]


@relu.grad
def _relu_grad(node, gy):
    return [relu_grad(node.outputs[0], gy)]


def _zeros_infer(x):
    return [(x.shape, x.dtype)]


@register("zeros_like", infer=_zeros_infer, differentiable=False)
def zeros_like(ctx, x):
    return ctx.xp.zeros(x.shape, x.dtype)


@register("ones_like", infer=_zeros_infer, differentiable=False)
def ones_like(ctx, x):
    return ctx.xp.ones(x.shape, x.dtype)


# -- promotion of Python scalars / numpy arrays in binary expressions -------------------------


def to_blob(value, like: Blob, op_name: str) -> Blob:
    """A Python number (or a small numpy array) becomes a constant of ``like``'s dtype."""
    if isinstance(value, Blob):
        return value
    if isinstance(value, (numbers.Number, np.number)):
        return scalar_like(value, like)
    if isinstance(value, np.ndarray):
        return constant(value=value.astype(like.dtype.numpy), shape=value.shape,
                        dtype=like.dtype)
    raise TypeError(f"{op_name}: expected a Blob or a number, got {type(value).__name__}")


def promote(a, b, op_name: str) -> tuple[Blob, Blob]:
    if isinstance(a, Blob):
        return a, to_blob(b, a, op_name)
    if isinstance(b, Blob):
        return to_blob(a, b, op_name), b
    raise TypeError(f"{op_name}: at least one operand must be a Blob")
