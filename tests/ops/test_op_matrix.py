"""The op test matrix: every op in ``aioflow.ops.REGISTRY`` has a case here.

* ``CASES``: one row per user-facing function and input configuration. The forward value
  is compared with an independent numpy reference (float32 and float64, integers where
  the op takes them); the gradient (one SGD step on float64 variables) with central
  differences, and again in float32. Each row names the ops it tests (``ops`` in the
  forward job, ``grad_ops`` in the gradient job); the harness checks they are there.
* Tests below the table cover what a row cannot: dropout, batch normalization,
  optimizer updates, convolution and pooling, constants, errors. ``@covers`` records
  their ops (and they check them with ``harness.assert_ops`` too).
* ``NOT_DIRECTLY_TESTED`` names the ops deliberately left out, with the reason.

``test_every_registered_op_is_covered`` fails when a newly registered op is in none of
these: registering an op means adding it here.
"""
from __future__ import annotations

import operator
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import aioflow as flow
from aioflow.ops import REGISTRY
from aioflow.ops import elementwise as ew

from . import harness as H

F32, F64, I32 = np.float32, np.float64, np.int32

# Ops with no row or test of their own: {"op": "why, and which test exercises it"}: only
# the random ops. The *_grad helpers are claimed by the rows' grad_ops (checked to be in
# the gradient job), update ops by test_optimizer_update_ops.
NOT_DIRECTLY_TESTED: dict[str, str] = {
    op: "random draws have no fixed reference: tests/ops/test_random_ops.py checks their "
        "laws and seeded repeats" for op in ("bernoulli", "coin_flip", "random_permutation")}
NOT_DIRECTLY_TESTED.update({
    op: "a train step's own state, checked step by step against OneFlow's rules by "
        "tests/test_lazy_adam_and_loss_scale.py"
    for op in ("dynamic_loss_scale_update", "learning_rate_from_blob")})
NOT_DIRECTLY_TESTED.update({
    op: "a fused op the compiler puts in device plans (compiler/launch_fusion.py), never "
        "called by users: tests/compiler/test_launch_fusion.py checks it against the unfused "
        "ops on numpy and on the strict backend" for op in (
            "bias_add_relu", "sparse_softmax_cross_entropy_train", "multi_sgd_update",
            "multi_momentum_update", "multi_adam_update")})


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


# -- input generators: gen(rng, dtype) -> array ---------------------------------------------


def U(lo, hi, *shape):
    """Uniform in [lo, hi) (rounded for integer dtypes)."""
    def gen(rng, dt):
        a = np.asarray(rng.uniform(lo, hi, shape))
        return np.asarray(np.round(a), dt) if np.dtype(dt).kind in "iu" else a.astype(dt)
    return gen


def Away(*shape, lo=0.3, hi=2.0):
    """Uniform magnitude in [lo, hi) with a random sign: no zeros, no kinks nearby."""
    def gen(rng, dt):
        if np.dtype(dt).kind in "iu":
            return (rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)).astype(dt)
        return (rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)).astype(dt)
    return gen


def Distinct(*shape, lo=-2.0, hi=2.0):
    """Pairwise distinct values (well apart): no ties for max/min/argmax."""
    def gen(rng, dt):
        size = int(np.prod(shape, dtype=np.int64))
        if np.dtype(dt).kind in "iu":
            return (rng.permutation(size) - size // 2).reshape(shape).astype(dt)
        values = np.linspace(lo, hi, size) + rng.uniform(-0.1, 0.1, size) * (hi - lo) / size
        return rng.permutation(values).reshape(shape).astype(dt)
    return gen


def Ints(lo, hi, *shape, dtype=None):
    """Small integers (as the case's dtype, or a fixed ``dtype``): ties on purpose."""
    def gen(rng, dt):
        return rng.integers(lo, hi, shape).astype(dtype or dt)
    return gen


def Fixed(values, dtype=None):
    def gen(rng, dt):
        return np.asarray(values).astype(dtype or dt)
    return gen


def Simplex(*shape):
    """Rows that are probability distributions (positive, summing to 1 on the last axis)."""
    def gen(rng, dt):
        e = rng.uniform(0.1, 1.0, shape)
        return (e / e.sum(-1, keepdims=True)).astype(dt)
    return gen


# -- the table ------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    fn: Callable            # the user-facing function, applied to Blobs
    ref: Callable           # numpy reference, applied to the (float64-upcast) arrays
    inputs: tuple           # generators, called with (rng, dtype)
    ops: tuple              # ops the forward job must contain
    grad_ops: tuple = ()    # ops the gradient job must contain
    dtypes: tuple = (F32, F64)
    out_dtype: object = None  # None: the dtype the case runs in
    grad: bool = True
    wrt: tuple | None = None  # inputs to differentiate (None: the floating ones)
    tol32: dict | None = None

    def make(self, dt):
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        return [np.asarray(gen(rng, dt)) for gen in self.inputs]


CASES: list[Case] = []


def case(*args, **kwargs):
    CASES.append(Case(*args, **kwargs))


def axis_id(axis, none="all-axes"):
    """Readable test ids: axis1, axis-1, axes0_2."""
    if axis is None:
        return none
    if isinstance(axis, int):
        return f"axis{axis}"
    return "axes" + "_".join(map(str, axis))


def full_reduction_shape(out):
    """OneFlow: a reduction to a 0-d value has shape (1,)."""
    out = np.asarray(out)
    return out.reshape(1) if out.ndim == 0 else out


# elementwise binary ops, with broadcasting -------------------------------------------------

BROADCAST = [("same", (3, 4), (3, 4)), ("row", (2, 3, 4), (4,)), ("outer", (3, 1), (1, 4)),
             ("both", (2, 1, 4), (3, 1)), ("scalar", (), (2, 3))]


def _c_divide(a, b):
    """Integer division rounds toward zero (C, OneFlow); floats divide exactly."""
    if a.dtype.kind in "iu":
        return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
    return a / b


BINARY = [  # name, flow function, numpy reference, (a domain, b domain), int dtypes?
    ("add", flow.math.add, np.add, (U, U), True),
    ("subtract", flow.math.subtract, np.subtract, (U, U), True),
    ("multiply", flow.math.multiply, np.multiply, (U, U), True),
    ("divide", flow.math.divide, _c_divide, (U, Away), True),
    ("pow", flow.math.pow, np.power, ("positive", U), False),
    ("maximum", flow.math.maximum, np.maximum, (U, U), True),
    ("minimum", flow.math.minimum, np.minimum, (U, U), True),
]
BINARY_GRAD_OPS = {"pow": ("safe_log",), "maximum": ("greater_equal", "cast"),
                   "minimum": ("less_equal", "cast")}


def _domain(kind, shape):
    if kind == "positive":
        return U(0.5, 2.0, *shape)
    if kind is Away:
        return Away(*shape)
    return U(-2.0, 2.0, *shape)


for _name, _fn, _ref, (_da, _db), _ints in BINARY:
    for _bid, _sa, _sb in BROADCAST:
        _grad_ops = BINARY_GRAD_OPS.get(_name, ()) + (("sum_to_shape",) if _sa != _sb else ())
        case(f"{_name}-{_bid}", _fn, _ref, (_domain(_da, _sa), _domain(_db, _sb)), (_name,),
             _grad_ops, dtypes=(F32, F64, I32) if _ints else (F32, F64),
             tol32=dict(rtol=1e-4, atol=1e-5) if _name == "pow" else None)

# Python operators and Python numbers on either side.
case("op-add", lambda a, b: a + b, np.add, (U(-2, 2, 3, 4), U(-2, 2, 4)), ("add",))
case("op-radd-number", lambda a: 1.5 + a, lambda a: 1.5 + a, (U(-2, 2, 3),), ("add",))
case("op-sub", lambda a, b: a - b, np.subtract, (U(-2, 2, 3, 4), U(-2, 2, 3, 1)),
     ("subtract",))
case("op-rsub-number", lambda a: 2.0 - a, lambda a: 2.0 - a, (U(-2, 2, 3),), ("subtract",))
case("op-mul", lambda a, b: a * b, np.multiply, (U(-2, 2, 2, 3), U(-2, 2, 2, 3)),
     ("multiply",))
case("op-div", lambda a, b: a / b, np.divide, (U(-2, 2, 2, 3), Away(3)), ("divide",))
case("divide-int-rounds-toward-zero", flow.math.divide, _c_divide,
     (Fixed([7, -7, 7, -7, 6, -1, 0]), Fixed([2, 2, -2, -2, 3, 4, -3])), ("divide",),
     dtypes=(I32, np.int64, np.int8), grad=False)
case("op-rdiv-number", lambda a: 1 / a, lambda a: 1 / a, (Away(2, 3),), ("divide",))
case("reciprocal", flow.math.reciprocal, lambda a: 1 / a, (Away(2, 3),), ("divide",))
case("op-pow-number", lambda a: a ** 2.0, lambda a: a ** 2.0, (U(0.5, 2, 2, 3),), ("pow",))
case("op-rpow-number", lambda a: 2.0 ** a, lambda a: 2.0 ** a, (U(-2, 2, 2, 3),), ("pow",))
case("op-pow-negative-base", lambda a: a ** 3.0, lambda a: a ** 3, (Away(2, 3),), ("pow",))
case("pow-int", flow.math.pow, np.power, (Ints(-3, 4, 2, 3), Ints(0, 4, 3)), ("pow",),
     dtypes=(I32, np.int64), grad=False)
case("op-neg", lambda a: -a, np.negative, (U(-2, 2, 2, 3),), ("negative",))
case("op-abs", lambda a: abs(a), np.abs, (Away(2, 3),), ("abs",), ("sign",))
case("fan-out", lambda a, b: a * a + flow.math.sin(a) * b, lambda a, b: a * a + np.sin(a) * b,
     (U(-2, 2, 2, 3), U(-2, 2, 3)), ("multiply", "add", "sin"))
case("add_n", lambda a, b, c: flow.math.add_n([a, b, c]), lambda a, b, c: a + b + c,
     (U(-1, 1, 2, 3), U(-1, 1, 2, 3), U(-1, 1, 2, 3)), ("add",))
case("squared_difference", flow.math.squared_difference, lambda a, b: (a - b) ** 2,
     (U(-2, 2, 2, 3), U(-2, 2, 3)), ("subtract", "square"))
case("clip_by_value", lambda a: flow.clip_by_value(a, -0.5, 0.5), lambda a: np.clip(a, -.5, .5),
     (Fixed([[-1.3, -0.7, -0.2], [0.1, 0.6, 1.4]]),), ("clip_by_scalar",),
     ("clip_by_scalar_grad",))
case("clip_by_value-min-only", lambda a: flow.clip_by_value(a, min_value=0.2),
     lambda a: np.maximum(a, 0.2), (Fixed([[-1.3, -0.7, 0.4], [0.1, 0.6, 1.4]]),),
     ("clip_by_scalar",), ("clip_by_scalar_grad",))
case("clip_by_value-max-only", lambda a: flow.clip_by_value(a, max_value=0.2),
     lambda a: np.minimum(a, 0.2), (Fixed([[-1.3, -0.7, 0.4], [0.1, 0.6, 1.4]]),),
     ("clip_by_scalar",), ("clip_by_scalar_grad",))
case("clip_by_value-int", lambda a: flow.clip_by_value(a, -1.5, 2.7),
     lambda a: np.clip(a, -1, 2).astype(a.dtype), (Fixed([-4, -1, 0, 2, 3, 7]),),
     ("clip_by_scalar",), dtypes=(I32, np.int64), grad=False)

# comparisons: forward only, int8 results; small integers so that ties happen.
for _name, _fn, _ref in [("equal", flow.math.equal, np.equal),
                         ("not_equal", flow.math.not_equal, np.not_equal),
                         ("less", flow.math.less, np.less),
                         ("less_equal", flow.math.less_equal, np.less_equal),
                         ("greater", flow.math.greater, np.greater),
                         ("greater_equal", flow.math.greater_equal, np.greater_equal)]:
    for _bid, _sa, _sb in BROADCAST[:3]:
        case(f"{_name}-{_bid}", _fn,
             lambda a, b, _r=_ref: _r(a, b).astype(np.int8),
             (Ints(0, 3, *_sa), Ints(0, 3, *_sb)), (_name,), dtypes=(F32, F64, I32),
             out_dtype=np.int8, grad=False)
for _sym, _operator, _op, _ref in [
        ("==", operator.eq, "equal", np.equal), ("!=", operator.ne, "not_equal", np.not_equal),
        ("<", operator.lt, "less", np.less), ("<=", operator.le, "less_equal", np.less_equal),
        (">", operator.gt, "greater", np.greater),
        (">=", operator.ge, "greater_equal", np.greater_equal)]:
    case(f"op-{_operator.__name__}", _operator,  # operator.eq(a, b) is `a == b`: Blob's operators
         lambda a, b, _r=_ref: _r(a, b).astype(np.int8), (Ints(0, 3, 3, 4), Ints(0, 3, 4)),
         (_op,), out_dtype=np.int8, grad=False)
case("op-gt-number", lambda a: a > 0.5, lambda a: (a > 0.5).astype(np.int8), (U(0, 1, 2, 3),),
     ("greater",), out_dtype=np.int8, grad=False)

# where
case("where", flow.where, lambda c, x, y: np.where(c != 0, x, y),
     (Ints(0, 2, 3, 1, dtype=np.int8), U(-2, 2, 3, 4), U(-2, 2, 4)), ("where",),
     ("zeros_like", "sum_to_shape"), dtypes=(F32, F64, I32))
case("where-cond-broadcast", flow.where, lambda c, x, y: np.where(c != 0, x, y),
     (Ints(0, 2, 2, 3, 4, dtype=np.int8), U(-2, 2, 3, 4), U(-2, 2, 4)), ("where",),
     ("sum_to_shape",))
case("where-number", lambda c, x: flow.where(c, x, 0.0), lambda c, x: np.where(c != 0, x, 0),
     (Ints(0, 2, 2, 3, dtype=np.int8), U(-2, 2, 2, 3)), ("where",))
case("where-of-comparison", lambda x, y: flow.where(x > y, x, y), np.maximum,
     (U(-2, 2, 3, 4), U(-2, 2, 3, 4)), ("where", "greater"))


# unary math ---------------------------------------------------------------------------------


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


UNARY = [  # name, flow function, reference, domain, also on int32, grad ops
    ("exp", flow.math.exp, np.exp, U(-3, 3, 2, 3), False, ()),
    ("log", flow.math.log, np.log, U(0.2, 3, 2, 3), False, ()),
    ("log1p", flow.math.log1p, np.log1p, U(-0.8, 3, 2, 3), False, ()),
    ("sqrt", flow.math.sqrt, np.sqrt, U(0.2, 3, 2, 3), False, ()),
    ("rsqrt", flow.math.rsqrt, lambda x: 1 / np.sqrt(x), U(0.2, 3, 2, 3), False, ()),
    ("square", flow.math.square, lambda x: x * x, U(-2, 2, 2, 3), True, ()),
    ("sin", flow.math.sin, np.sin, U(-3, 3, 2, 3), False, ()),
    ("cos", flow.math.cos, np.cos, U(-3, 3, 2, 3), False, ()),
    ("tanh", flow.math.tanh, np.tanh, U(-3, 3, 2, 3), False, ()),
    ("sigmoid", flow.math.sigmoid, _sigmoid, U(-5, 5, 2, 3), False, ()),
    ("softplus", flow.math.softplus, lambda x: np.logaddexp(0.0, x), U(-5, 5, 2, 3), False,
     ("sigmoid",)),
    ("relu", flow.math.relu, lambda x: np.where(x > 0, x, 0), Away(2, 3), True,
     ("relu_grad",)),
    ("abs", flow.math.abs, np.abs, Away(2, 3), True, ("sign",)),
    ("negative", flow.math.negative, np.negative, U(-2, 2, 2, 3), True, ()),
]
for _name, _fn, _ref, _dom, _ints, _gops in UNARY:
    case(_name, _fn, _ref, (_dom,), (_name,), _gops,
         dtypes=(F32, F64, I32) if _ints else (F32, F64))
    if _ints:
        case(f"{_name}-4d", _fn, _ref, (Away(2, 1, 3, 2),), (_name,), _gops)

case("nn.relu", flow.nn.relu, lambda x: np.maximum(x, 0), (Away(3, 4),), ("relu",),
     ("relu_grad",))
case("nn.sigmoid", flow.nn.sigmoid, _sigmoid, (U(-4, 4, 3, 4),), ("sigmoid",))
case("nn.tanh", flow.nn.tanh, np.tanh, (U(-3, 3, 3, 4),), ("tanh",))
case("sign", flow.math.sign, np.sign, (Fixed([[-1.5, 0.0, 2.0], [3.0, -0.1, 0.0]]),),
     ("sign",), dtypes=(F32, F64, I32), grad=False)
case("floor", flow.math.floor, np.floor, (U(-3, 3, 2, 4),), ("floor",), grad=False)
case("ceil", flow.math.ceil, np.ceil, (U(-3, 3, 2, 4),), ("ceil",), grad=False)
# large |x|: no overflow (warnings are errors in this suite), saturated values exact.
_LARGE = Fixed([-1000.0, -100.0, -30.0, -1.0, 0.0, 1.0, 30.0, 100.0, 1000.0])
case("sigmoid-large", flow.math.sigmoid, _sigmoid, (_LARGE,), ("sigmoid",))
case("softplus-large", flow.math.softplus, lambda x: np.logaddexp(0.0, x), (_LARGE,),
     ("softplus",), ("sigmoid",))
case("tanh-large", flow.math.tanh, np.tanh, (_LARGE,), ("tanh",))
case("exp-large-negative", flow.math.exp, np.exp, (Fixed([-1000.0, -100.0, 0.0, 10.0]),),
     ("exp",))
case("sigmoid-grad-large", flow.math.sigmoid, _sigmoid,
     (Fixed([-40.0, -20.0, -8.0, 8.0, 20.0, 40.0]),), ("sigmoid",))

# identity, zeros_like/ones_like, internal broadcasting ops ---------------------------------
case("identity", flow.identity, lambda x: x, (U(-2, 2, 2, 3),), ("identity",),
     dtypes=(F32, F64, I32))
case("zeros_like", lambda x: flow.zeros_like(x), np.zeros_like, (U(-2, 2, 2, 3),),
     ("zeros_like",), dtypes=(F32, F64, I32), grad=False)
case("ones_like", lambda x: flow.ones_like(x), np.ones_like, (U(-2, 2, 2, 3),),
     ("ones_like",), dtypes=(F32, F64, I32), grad=False)
case("broadcast_to", lambda x: ew.broadcast_to(x, shape=(2, 3, 4)),
     lambda x: np.broadcast_to(x, (2, 3, 4)), (U(-2, 2, 3, 1),), ("broadcast_to",),
     ("sum_to_shape",), dtypes=(F32, F64, I32))
case("sum_to_shape", lambda x: ew.sum_to_shape(x, (3, 1)),
     lambda x: x.sum(axis=0).sum(axis=-1, keepdims=True), (U(-2, 2, 2, 3, 4),),
     ("sum_to_shape",), ("broadcast_to",), dtypes=(F32, F64, I32))


# reductions ---------------------------------------------------------------------------------

REDUCTIONS = [("reduce_sum", flow.math.reduce_sum, np.sum),
              ("reduce_mean", flow.math.reduce_mean, np.mean),
              ("reduce_max", flow.math.reduce_max, np.max),
              ("reduce_min", flow.math.reduce_min, np.min)]
for _name, _fn, _ref in REDUCTIONS:
    for _axis in (None, 1, -1, (0, 2)):
        for _keep in (False, True):
            _extreme = _name in ("reduce_max", "reduce_min")
            case(f"{_name}-{axis_id(_axis)}{'-keepdims' if _keep else ''}",
                 lambda x, _f=_fn, _a=_axis, _k=_keep: _f(x, axis=_a, keepdims=_k),
                 lambda x, _r=_ref, _a=_axis, _k=_keep: full_reduction_shape(
                     _r(x, axis=_a, keepdims=_k)),
                 (Distinct(2, 3, 4) if _extreme else U(-2, 2, 2, 3, 4),), (_name,),
                 ("equal",) if _extreme else ("broadcast_to",),
                 dtypes=(F32, F64) if _name == "reduce_mean" else (F32, F64, I32))
    case(f"{_name}-1d", _fn, lambda x, _r=_ref: full_reduction_shape(_r(x)),
         (Distinct(5),), (_name,))
case("reduce_variance", lambda x: flow.math.reduce_variance(x, axis=1),
     lambda x: np.var(x, axis=1), (U(-2, 2, 3, 4),), ("reduce_mean", "square"))
case("l2_loss", flow.nn.l2_loss, lambda x: np.reshape(np.sum(x * x) / 2, (1,)),
     (U(-2, 2, 3, 4),), ("reduce_sum", "square"))

# argmax: int32 indices, no gradient
for _axis in (-1, 0, 1):
    case(f"argmax-{axis_id(_axis)}", lambda x, _a=_axis: flow.math.argmax(x, axis=_a),
         lambda x, _a=_axis: np.argmax(x, axis=_a), (Distinct(3, 4),), ("argmax",),
         dtypes=(F32, F64, I32), out_dtype=np.int32, grad=False)
case("argmax-1d", flow.math.argmax, lambda x: np.argmax(x).reshape(1),   # OneFlow: (1,)
     (Distinct(5),), ("argmax",), dtypes=(F32, I32), out_dtype=np.int32, grad=False)
case("argmax-ties-first", flow.math.argmax, lambda x: np.argmax(x, axis=-1),
     (Fixed([[1, 3, 3], [2, 2, 0]]),), ("argmax",), dtypes=(F32, I32), out_dtype=np.int32,
     grad=False)


# matmul -------------------------------------------------------------------------------------


def _t(x, flag):
    return np.swapaxes(x, -1, -2) if flag else x


MATMUL = [  # id, a shape, b shape, transpose_a, transpose_b (batch broadcasting: sum_to_shape)
    ("2d", (3, 4), (4, 5), False, False),
    ("ta", (4, 3), (4, 5), True, False),
    ("tb", (3, 4), (5, 4), False, True),
    ("ta-tb", (4, 3), (5, 4), True, True),
    ("batched", (2, 3, 4), (2, 4, 5), False, False),
    ("batched-rhs-2d", (2, 3, 4), (4, 5), False, False),
    ("batched-broadcast", (2, 1, 3, 4), (3, 4, 2), False, False),
    ("batched-broadcast-ta-tb", (2, 4, 3), (1, 5, 4), True, True),
    ("batched-lhs-2d-ta", (4, 3), (2, 4, 5), True, False),
]
for _id, _sa, _sb, _ta, _tb in MATMUL:
    _broadcast = _sa[:-2] != _sb[:-2]
    case(f"matmul-{_id}",
         lambda a, b, _ta=_ta, _tb=_tb: flow.matmul(a, b, transpose_a=_ta, transpose_b=_tb),
         lambda a, b, _ta=_ta, _tb=_tb: np.matmul(_t(a, _ta), _t(b, _tb)),
         (U(-2, 2, *_sa), U(-2, 2, *_sb)), ("matmul",),
         ("matmul", "sum_to_shape") if _broadcast else ("matmul",),
         dtypes=(F32, F64, I32), tol32=dict(rtol=1e-5, atol=1e-5))
case("matmul-operator", lambda a, b: a @ b, np.matmul, (U(-2, 2, 3, 4), U(-2, 2, 4, 2)),
     ("matmul",), tol32=dict(rtol=1e-5, atol=1e-5))
case("matmul-alpha", lambda a, b: flow.matmul(a, b, alpha=0.5), lambda a, b: 0.5 * (a @ b),
     (U(-2, 2, 3, 4), U(-2, 2, 4, 2)), ("matmul", "multiply"),
     tol32=dict(rtol=1e-5, atol=1e-5))


# shape ops ----------------------------------------------------------------------------------

case("reshape", lambda x: flow.reshape(x, (6, -1)), lambda x: x.reshape(6, -1),
     (U(-2, 2, 2, 3, 4),), ("reshape",), ("reshape",), dtypes=(F32, F64, I32))
case("reshape_like", lambda x, y: flow.reshape_like(x, y), lambda x, y: x.reshape(y.shape),
     (U(-2, 2, 2, 6), U(-2, 2, 3, 4)), ("reshape",), wrt=(0,))
case("flatten", lambda x: flow.flatten(x, start_dim=1), lambda x: x.reshape(2, -1),
     (U(-2, 2, 2, 3, 4),), ("reshape",))
case("squeeze-axis", lambda x: flow.squeeze(x, axis=[1]), lambda x: np.squeeze(x, 1),
     (U(-2, 2, 2, 1, 3, 1),), ("reshape",), dtypes=(F32, F64, I32))
case("squeeze-all", flow.squeeze, np.squeeze, (U(-2, 2, 2, 1, 3, 1),), ("reshape",))
case("expand_dims-0", lambda x: flow.expand_dims(x, 0), lambda x: x[None],
     (U(-2, 2, 2, 3),), ("reshape",), dtypes=(F32, F64, I32))
case("expand_dims-last", lambda x: flow.expand_dims(x, -1), lambda x: x[..., None],
     (U(-2, 2, 2, 3),), ("reshape",))
for _perm in [(2, 0, 1), (1, 0, 2), None, (-1, 0, 1)]:
    case(f"transpose-{'reversed' if _perm is None else '_'.join(map(str, _perm))}",
         lambda x, _p=_perm: flow.transpose(x, perm=_p),
         lambda x, _p=_perm: np.transpose(x, None if _p is None else [p % 3 for p in _p]),
         (U(-2, 2, 2, 3, 4),), ("transpose",), ("transpose",), dtypes=(F32, F64, I32))
case("concat-axis0", lambda a, b, c: flow.concat([a, b, c], axis=0),
     lambda a, b, c: np.concatenate([a, b, c], axis=0),
     (U(-2, 2, 2, 3), U(-2, 2, 1, 3), U(-2, 2, 3, 3)), ("concat",), ("slice",),
     dtypes=(F32, F64, I32))
case("concat-axis-1", lambda a, b: flow.concat([a, b], axis=-1),
     lambda a, b: np.concatenate([a, b], axis=-1), (U(-2, 2, 2, 3, 1), U(-2, 2, 2, 3, 2)),
     ("concat",), ("slice",))
for _key_id, _key in [("rows-1:-cols-::2", np.s_[1:, ::2]), ("ellipsis-int", np.s_[..., 1]),
                      ("newaxis-int-range", np.s_[None, 0, 1:3]), ("last-row", np.s_[-1]),
                      ("reversed-rows", np.s_[::-1, 1:]), ("tail-newaxis", np.s_[:, -2:, None])]:
    case(f"getitem-{_key_id}", lambda x, _k=_key: x[_k], lambda x, _k=_key: x[_k],
         (U(-2, 2, 3, 5),), ("slice",), ("slice_grad",), dtypes=(F32, F64, I32))
case("slice", lambda x: flow.slice(x, begin=[1, 0], size=[2, -1]), lambda x: x[1:3, :],
     (U(-2, 2, 4, 3),), ("slice",), ("slice_grad",))

# cast: the output dtype is the target; truncation toward zero for float -> int
for _src, _dst in [(F32, F64), (F64, F32), (F32, I32), (F64, I32), (I32, F32), (I32, F64),
                   (I32, np.int8)]:
    _sid = f"cast-{np.dtype(_src).name}-to-{np.dtype(_dst).name}"
    case(_sid, lambda x, _d=_dst: flow.cast(x, H.flow_dtype(_d)),
         lambda x, _d=_dst: x.astype(_d),
         (U(-5, 5, 2, 4) if np.dtype(_src).kind == "f" else Ints(-100, 100, 2, 4),),
         ("cast",), dtypes=(_src,), out_dtype=_dst, grad=False)


# nn: softmax family, cross entropies, bias_add -----------------------------------------------


def _log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


_LOGITS_LARGE = Fixed([[1000.0, 0.0, -1000.0], [-50.0, 50.0, 49.0]])
for _axis, _shape in [(None, (3, 5)), (-1, (2, 3, 4)), (1, (2, 3, 4)), (0, (3, 4))]:
    _a = -1 if _axis is None else _axis
    case(f"softmax-{axis_id(_axis, 'default-axis')}", lambda x, _ax=_axis: flow.nn.softmax(x, axis=_ax),
         lambda x, _ax=_a: np.exp(_log_softmax(x, _ax)), (U(-3, 3, *_shape),), ("softmax",),
         ("softmax_grad",))
    case(f"log_softmax-{axis_id(_axis, 'default-axis')}", lambda x, _ax=_axis: flow.nn.log_softmax(x, axis=_ax),
         lambda x, _ax=_a: _log_softmax(x, _ax), (U(-3, 3, *_shape),), ("log_softmax",),
         ("log_softmax_grad",))
case("softmax-large", flow.nn.softmax, lambda x: np.exp(_log_softmax(x)), (_LOGITS_LARGE,),
     ("softmax",), ("softmax_grad",))
case("log_softmax-large", flow.nn.log_softmax, _log_softmax, (_LOGITS_LARGE,),
     ("log_softmax",), ("log_softmax_grad",))


def _sparse_ce(labels, logits):
    labels = labels.reshape(logits.shape[:-1])
    picked = np.take_along_axis(_log_softmax(logits), labels[..., None].astype(int), -1)
    return -picked[..., 0]


for _id, _ls, _xs, _ldt in [("2d", (4,), (4, 5), np.int32), ("labels-int64", (4,), (4, 5),
                            np.int64), ("labels-Nx1", (4, 1), (4, 5), np.int32),
                            ("3d", (2, 3), (2, 3, 5), np.int32),
                            ("labels-uint8", (3,), (3, 4), np.uint8)]:
    case(f"sparse_softmax_cross_entropy-{_id}",
         flow.nn.sparse_softmax_cross_entropy_with_logits, _sparse_ce,
         (Ints(0, _xs[-1], *_ls, dtype=_ldt), U(-3, 3, *_xs)),
         ("sparse_softmax_cross_entropy",), ("sparse_softmax_cross_entropy_grad",),
         out_dtype=None)
case("sparse_softmax_cross_entropy-large", flow.nn.sparse_softmax_cross_entropy_with_logits,
     _sparse_ce, (Fixed([0, 1], dtype=np.int32), _LOGITS_LARGE),
     ("sparse_softmax_cross_entropy",), ("sparse_softmax_cross_entropy_grad",))


def _dense_ce(labels, logits):
    return -(labels * _log_softmax(logits)).sum(-1)


case("softmax_cross_entropy", flow.nn.softmax_cross_entropy_with_logits, _dense_ce,
     (Simplex(4, 5), U(-3, 3, 4, 5)), ("softmax_cross_entropy",),
     ("softmax_cross_entropy_grad",))
# Labels not summing to 1: OneFlow's (and TF's) logits gradient prob - labels is then not
# the loss's derivative (test_softmax_ce_logits_grad_is_oneflows below): labels' only here.
case("softmax_cross_entropy-unnormalized", flow.nn.softmax_cross_entropy_with_logits,
     _dense_ce, (U(0, 2, 2, 3, 4), U(-3, 3, 2, 3, 4)), ("softmax_cross_entropy",),
     ("softmax_cross_entropy_grad",), wrt=(0,))
case("softmax_cross_entropy-large", flow.nn.softmax_cross_entropy_with_logits, _dense_ce,
     (Fixed([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]]), _LOGITS_LARGE), ("softmax_cross_entropy",),
     ("softmax_cross_entropy_grad",))
case("sigmoid_cross_entropy", flow.nn.sigmoid_cross_entropy_with_logits,
     lambda z, x: np.logaddexp(0, x) - x * z, (U(0, 1, 3, 4), U(-4, 4, 3, 4)),
     ("relu", "log1p", "exp", "abs"), ("relu_grad",), wrt=(1,))

for _id, _vs, _bs, _fmt in [("2d", (2, 3), (3,), None), ("NCHW", (2, 3, 2, 2), (3,), "NCHW"),
                            ("NHWC", (2, 2, 2, 3), (3,), "NHWC"), ("1d", (3,), (3,), None),
                            ("3d-default", (2, 3, 4), (3,), None)]:
    _axis = len(_vs) - 1 if _fmt == "NHWC" or len(_vs) == 1 else 1
    _view = [1] * len(_vs)
    _view[_axis] = _bs[0]
    case(f"bias_add-{_id}", lambda v, b, _f=_fmt: flow.nn.bias_add(v, b, data_format=_f),
         lambda v, b, _w=tuple(_view): v + b.reshape(_w), (U(-2, 2, *_vs), U(-2, 2, *_bs)),
         ("bias_add",), ("sum_to_shape",) if _vs != _bs else (), dtypes=(F32, F64, I32))

case("gelu", flow.nn.gelu,
     lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))),
     (U(-3, 3, 2, 4),), ("tanh", "multiply"))
case("leaky_relu", lambda x: flow.nn.leaky_relu(x, alpha=0.1),
     lambda x: np.where(x > 0, x, 0.1 * x), (Away(2, 4),), ("where",))
case("leaky_relu-alpha-above-1", lambda x: flow.nn.leaky_relu(x, alpha=3.0),
     lambda x: np.where(x > 0, x, 3.0 * x), (Away(2, 4),), ("where",))



# convolution and pooling (NCHW data, OIHW weights) ------------------------------------------


def _same_pads(size, k, s, d=1, extra_first=True):
    """SAME: output ceil(size / s). OneFlow's "SAME" is its "SAME_LOWER": an odd pixel of
    padding goes first; "SAME_UPPER" (TensorFlow's SAME) puts it at the end."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    small, large = total // 2, total - total // 2
    return (large, small) if extra_first else (small, large)


def _pads_of(padding, hw, khw, strides, dilations):
    if padding == "VALID":
        return ((0, 0), (0, 0))
    if padding in ("SAME", "SAME_LOWER", "SAME_UPPER"):
        return tuple(_same_pads(*a, extra_first=padding != "SAME_UPPER")
                     for a in zip(hw, khw, strides, dilations))
    return tuple(tuple(p) for p in padding[2:])


def _conv2d_ref(x, w, strides, padding, dilations, groups):
    (sh, sw), (dh, dw) = strides, dilations
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (pt, pb), (pl, pr) = _pads_of(padding, (h, wd), (kh, kw), strides, dilations)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        xs = xp[:, (oc // per_group) * cg:(oc // per_group + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                           j * dw:j * dw + (ow - 1) * sw + 1:sw]
                y[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    return y


CONV = [  # id, x shape, w shape, strides, padding, dilations, groups
    ("valid", (2, 3, 5, 5), (4, 3, 3, 3), 1, "VALID", 1, 1),
    ("same-stride2", (1, 3, 6, 5), (2, 3, 3, 3), 2, "SAME", 1, 1),
    ("same-dilation2", (1, 2, 7, 6), (3, 2, 3, 3), 1, "SAME", 2, 1),
    ("groups2", (1, 4, 5, 5), (6, 2, 3, 3), 1, "SAME", 1, 2),
    ("depthwise", (1, 3, 5, 4), (3, 1, 3, 3), (2, 1), "SAME", 1, 3),
    ("explicit-pads", (1, 2, 4, 5), (2, 2, 2, 3), 1, [[0, 0], [0, 0], [1, 0], [2, 1]], 1, 1),
    ("1x1", (2, 4, 3, 3), (5, 4, 1, 1), 1, "VALID", 1, 1),
    ("8-channels-stride1", (1, 8, 4, 4), (2, 8, 3, 3), 1, "SAME", 1, 1),
    ("16-channels-row-shift", (1, 16, 4, 4), (2, 16, 2, 2), 1, "VALID", 1, 1),
    ("row-shift-stride2-dilated", (1, 8, 7, 7), (2, 8, 3, 5), 2, "SAME", (1, 2), 1),
    ("row-shift-groups", (1, 16, 4, 4), (4, 8, 2, 4), (1, 2), "SAME", 1, 2),
    ("same-upper-stride2", (1, 3, 6, 5), (2, 3, 3, 3), 2, "SAME_UPPER", 1, 1),
    ("same-lower-even-kernel", (1, 2, 5, 4), (2, 2, 2, 2), 1, "SAME_LOWER", 1, 1),
]


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


for _id, _xs, _ws, _st, _pad, _dil, _grp in CONV:
    case(f"conv2d-{_id}",
         lambda x, w, _s=_st, _p=_pad, _d=_dil, _g=_grp: flow.nn.conv2d(
             x, w, strides=_s, padding=_p, dilations=_d, groups=_g),
         lambda x, w, _s=_st, _p=_pad, _d=_dil, _g=_grp: _conv2d_ref(
             x, w, _pair(_s), _p, _pair(_d), _g),
         (U(-1, 1, *_xs), U(-1, 1, *_ws)), ("conv2d",),
         ("conv2d_backward_data", "conv2d_backward_filter"), tol32=dict(rtol=1e-5, atol=1e-5))


# id, x shape, w shape: the fused conv + 2x2/stride-2 max pooling (its Winograd path, which
# needs 16+ channels and so too many weights for central differences here, is checked
# against the unfused kernels in tests/kernels/test_conv_pool.py)
CONV_POOL = [
    ("im2col", (2, 2, 6, 6), (3, 2, 3, 3)),                 # few input channels
    ("odd-output", (2, 2, 5, 5), (3, 2, 3, 3)),             # floor mode: unfused kernels
]
for _id, _xs, _ws in CONV_POOL:
    case(f"conv2d_max_pool2d-{_id}",
         lambda x, w: flow.nn.max_pool2d(flow.nn.conv2d(x, w, padding="SAME"), ksize=2,
                                         strides=2, padding="VALID"),
         lambda x, w: _pool_ref(_conv2d_ref(x, w, (1, 1), "SAME", (1, 1), 1), (2, 2),
                                (2, 2), "VALID", "max"),
         (U(-1, 1, *_xs), U(-1, 1, *_ws)), ("conv2d_max_pool2d",),
         ("max_pool2d_grad", "conv2d_backward_data", "conv2d_backward_filter"),
         tol32=dict(rtol=1e-5, atol=1e-5))


def _pool_ref(x, ksize, strides, padding, kind):
    (kh, kw), (sh, sw) = ksize, strides
    n, c, h, w = x.shape
    (pt, pb), (pl, pr) = _pads_of(padding, (h, w), ksize, strides, (1, 1))
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    real = np.pad(np.ones((h, w)), ((pt, pb), (pl, pr)))
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows, cols = slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)
            window = xp[:, :, rows, cols]
            if kind == "max":
                y[:, :, i, j] = window.max(axis=(2, 3))
            else:  # padding is not counted
                y[:, :, i, j] = window.sum(axis=(2, 3)) / real[rows, cols].sum()
    return y


POOL = [  # id, x shape, ksize, strides, padding
    ("2x2-stride2", (2, 3, 4, 4), 2, 2, "VALID"),
    ("2x2-stride2-odd-valid", (1, 2, 5, 5), 2, 2, "VALID"),
    ("3x3-stride2-same", (1, 2, 5, 5), 3, 2, "SAME"),
    ("2x2-stride1-overlap", (1, 2, 4, 5), 2, 1, "VALID"),
    ("2x3-stride-1x2-same", (1, 2, 5, 6), (2, 3), (1, 2), "SAME"),
    ("3x3-stride3-same", (1, 1, 7, 7), 3, 3, "SAME"),
    ("2x3-stride-1x2-same-upper", (1, 2, 5, 6), (2, 3), (1, 2), "SAME_UPPER"),
]
for _kind, _fn in [("max", flow.nn.max_pool2d), ("avg", flow.nn.avg_pool2d)]:
    for _id, _xs, _k, _st, _pad in POOL:
        case(f"{_kind}_pool2d-{_id}",
             lambda x, _f=_fn, _k=_k, _s=_st, _p=_pad: _f(x, ksize=_k, strides=_s, padding=_p),
             lambda x, _kd=_kind, _k=_k, _s=_st, _p=_pad: _pool_ref(x, _pair(_k), _pair(_s),
                                                                    _p, _kd),
             (Distinct(*_xs) if _kind == "max" else U(-2, 2, *_xs),), (f"{_kind}_pool2d",),
             (f"{_kind}_pool2d_grad",))


# OneFlow v0.3.4's further names (issue 18): their rows live in oneflow_cases.py.
from .oneflow_cases import add_cases, add_loss_cases  # noqa: E402
from .oneflow_conv_cases import add_conv_cases  # noqa: E402

add_cases(case, U, Away, Distinct, Ints, Fixed, Simplex)
add_loss_cases(case, U, Away, Distinct, Ints, Fixed, Simplex)
add_conv_cases(case, U, Away, Distinct, Ints, Fixed, Simplex)

# Indexing, scatter/segment and other math names (issue 18, slice C).
from . import scatter_misc_cases  # noqa: E402

scatter_misc_cases.add_cases(case, U, Away, Distinct, Ints, Fixed, Simplex)
NOT_DIRECTLY_TESTED.update(scatter_misc_cases.TESTED_ELSEWHERE)
NOT_DIRECTLY_TESTED.update({
    op: "against numpy in tests/test_oneflow_semantics.py (padded data-dependent outputs)"
    for op in ("unique_with_counts", "indexed_slices_reduce_sum")})
NOT_DIRECTLY_TESTED.update({
    op: "host containers of tensors of varying shapes, no gradient: "
        "tests/ops/test_tensor_buffer_ops.py checks them against numpy slicing"
    for op in ("tensor_to_tensor_buffer", "tensor_buffer_to_tensor",
               "tensor_buffer_to_tensor_list", "tensor_list_to_tensor_buffer",
               "tensor_list_split")})
NOT_DIRECTLY_TESTED.update({
    "batch_gather": "tests/test_gather_batch_dims.py: forward against numpy (out-of-range "
                    "indices included), gradient against central differences",
    "batch_gather_grad": "batch_gather's gradient, tests/test_gather_batch_dims.py",
})
NOT_DIRECTLY_TESTED.update({
    op: "host image preprocessing on tensor buffers or uint8 batches, no gradient: "
        "tests/data/test_ofrecord_image_pipeline.py and tests/test_image_ops.py check them "
        "against numpy (and OpenCV where installed)"
    for op in ("crop_mirror_normalize", "image_resize_keep_aspect_ratio",
               "image_resize_to_fixed", "image_decode", "image_flip", "image_normalize",
               "image_batch_align", "image_random_crop")})
NOT_DIRECTLY_TESTED.update({
    "mt19937_uniform": "OneFlow's TestRandomSource stream: tests/test_user_op_builder.py "
                       "checks it against numpy's MT19937 draws across steps",
    "ssp_value": "a stale read whose gradient goes to the variable: tests/test_ssp.py "
                 "checks the values read and the updates against numpy recurrences",
})
NOT_DIRECTLY_TESTED.update({
    op: "host box and polygon transforms on tensor buffers, no gradient: "
        "tests/test_image_ops.py checks them against numpy"
    for op in ("object_bbox_flip", "object_bbox_scale", "object_segmentation_polygon_flip",
               "object_segmentation_polygon_scale", "object_segmentation_polygon_to_mask")})


# -- the matrix tests ---------------------------------------------------------------------------

FORWARD = [pytest.param(c, dt, id=f"{c.id}-{np.dtype(dt).name}") for c in CASES
           for dt in c.dtypes]
GRADIENT = [pytest.param(c, id=c.id) for c in CASES if c.grad]


@pytest.mark.parametrize("c, dt", FORWARD)
def test_forward(c: Case, dt):
    inputs = c.make(dt)
    tol = (c.tol32 or {}) if np.dtype(dt) == np.float32 else {}
    H.check_forward(c.fn, c.ref, inputs, expect_ops=c.ops, out_dtype=c.out_dtype or dt,
                    **tol)


@pytest.mark.parametrize("c", GRADIENT)
def test_gradient(c: Case):
    inputs = c.make(F64)
    H.check_grad(c.fn, inputs, wrt=c.wrt, expect_ops=c.grad_ops)


# -- what a row cannot express ------------------------------------------------------------------

COVERED_BY_TESTS: dict[str, tuple[str, ...]] = {}


def covers(*ops):
    """Record that the decorated test covers ``ops`` (it must also assert_ops them)."""
    def mark(test):
        COVERED_BY_TESTS[test.__name__] = ops
        return test
    return mark


def test_max_gradient_is_shared_among_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    (g,), _, _ = H.analytic_grads(lambda v: flow.math.reduce_max(v, axis=1), [x], [0], seed=3)
    cot = H.cotangent((2,), 3)
    np.testing.assert_allclose(g, [[0, cot[0] / 2, cot[0] / 2], [cot[1], 0, 0]], rtol=1e-12)


def test_cast_gradient_is_cast_back():
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    (g,), _, _ = H.analytic_grads(lambda v: flow.cast(v, flow.float32), [x], [0], seed=4,
                                  expect_ops=("cast",))
    np.testing.assert_allclose(g, H.cotangent((2, 3), 4, np.float32).astype(np.float64),
                               rtol=1e-12, atol=1e-15)


def test_gradient_through_integer_cast_is_cast_there_and_back():
    """OneFlow's cast gradient is cast(dy, input dtype) whatever the types: through
    cast(x, int32) the diff goes to int32 (truncated) and back to float64."""
    x = np.linspace(-2, 2, 6).reshape(2, 3)
    (g,), _, _ = H.analytic_grads(
        lambda v: v + flow.cast(flow.cast(v, flow.int32), flow.float64), [x], [0], seed=5)
    cot = H.cotangent((2, 3), 5)
    np.testing.assert_allclose(g, cot + np.trunc(cot), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("value, dtype, shape, expected", [
    pytest.param(2.5, None, (2, 3), np.full((2, 3), 2.5, np.float32), id="float-number"),
    pytest.param(7, None, (3,), np.full(3, 7, np.int32), id="int-number"),
    pytest.param(1, flow.float64, (2, 2), np.ones((2, 2)), id="number-float64"),
    pytest.param(np.arange(6.0).reshape(2, 3), None, None,
                 np.arange(6, dtype=np.float32).reshape(2, 3), id="float64-array-to-float32"),
    pytest.param(np.arange(3.0), flow.float64, (2, 3), np.tile(np.arange(3.0), (2, 1)),
                 id="array-broadcast-float64"),
    pytest.param([1, 2, 3], flow.int32, None, np.array([1, 2, 3], np.int32), id="list-int32"),
])
@covers("constant")
def test_constant(value, dtype, shape, expected):
    job = H.instrument(H.make_job(lambda: flow.constant(value, dtype=dtype, shape=shape), []))
    H.assert_ops(job, ["constant"])
    got = job()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_constant_like():
    x = np.zeros((2, 3), np.float64)
    got = H.run(lambda b: flow.constant_like(b, 4.0), x, expect_ops=["constant"])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.full((2, 3), 4.0))


# dropout --------------------------------------------------------------------------------------


def _dropout_train_job(shape, rate, dtype=flow.float64, noise_shape=None, seed=None):
    """Train job: y = dropout(x) for a variable x; minimizes sum(y * cot); returns y."""
    def body():
        x = flow.get_variable("x", shape=shape, dtype=dtype,
                              initializer=flow.ones_initializer())
        y = flow.nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed)
        cot = flow.constant(H.cotangent(shape, 0, dtype.numpy), dtype=dtype)
        flow.optimizer.SGD(1.0, momentum=0).minimize(flow.math.reduce_sum(y * cot))
        return y
    return H.instrument(H.make_job(body, [], job_type="train"))


@pytest.mark.parametrize("dtype", [flow.float16, flow.float32, flow.float64],
                         ids=["float16", "float32", "float64"])
@covers("dropout")
def test_dropout_train_mask_and_gradient(dtype):
    shape, rate = (100, 50), 0.3
    job = _dropout_train_job(shape, rate, dtype)
    H.assert_ops(job, ["dropout"])
    x = np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(dtype.numpy)
    flow.load_variables({"x": x})
    y = job()
    assert y.dtype == dtype.numpy and y.shape == shape
    dropped = y == 0
    # kept elements are scaled by 1 / (1 - rate); about `rate` of them are dropped
    rtol = 2e-3 if dtype is flow.float16 else 1e-6
    np.testing.assert_allclose(y[~dropped], x[~dropped] / (1 - rate), rtol=rtol)
    assert abs(dropped.mean() - rate) < 4 * np.sqrt(rate * (1 - rate) / dropped.size)
    # gradient: the same mask and scale
    g = x - flow.get_all_variables()["x"]
    want = np.where(dropped, 0.0, H.cotangent(shape, 0, dtype.numpy) / (1 - rate))
    tol = 1e-2 if dtype is flow.float16 else 1e-6
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol)
    # a new mask every step
    assert not np.array_equal(job() == 0, dropped)


def test_dropout_noise_shape_and_seed():
    shape = (40, 6)
    job = _dropout_train_job(shape, 0.5, noise_shape=(40, 1), seed=7)
    y1, y2 = job(), job()
    kept = y1 != 0
    assert np.all(kept == kept[:, :1]), "noise_shape (40, 1): whole rows kept or dropped"
    assert 0 < kept[:, 0].sum() < 40
    assert np.any((y1 != 0) != (y2 != 0))  # each step draws a new mask...
    flow.clear_default_session()
    again = _dropout_train_job(shape, 0.5, noise_shape=(40, 1), seed=7)
    z1, z2 = again(), again()
    np.testing.assert_array_equal(y1 != 0, z1 != 0)  # ...but a seed fixes the sequence
    np.testing.assert_array_equal(y2 != 0, z2 != 0)


def test_seeded_dropout_on_the_cpu_draws_oneflows_masks():
    # OneFlow's CPU kernel: the op's own std::mt19937(seed) stream of float32 draws (its
    # 32-bit outputs over 2^32; numpy's legacy RandomState gives the same outputs), kept
    # where the draw exceeds rate, scaled by 1 / (1 - rate); the stream goes on each step.
    job = _dropout_train_job((2, 8), 0.75, dtype=flow.float32, seed=12345)
    H.assert_ops(job, ["dropout"])
    if H._compiled(job).backend.name == "cupy":   # AIOFLOW_DEVICE=gpu
        pytest.skip("OneFlow's CPU masks: a job on the GPU draws from CuPy's generator, "
                    "as OneFlow's GPU kernel draws from its own")
    steps = [job(), job()]
    raw = np.random.RandomState(12345).randint(0, 2 ** 32, size=32, dtype=np.uint32)
    keep = (raw.astype(np.float32) / np.float32(2 ** 32)) > np.float32(0.75)
    for k, y in enumerate(steps):
        np.testing.assert_array_equal(y.reshape(-1) != 0, keep[16 * k:16 * (k + 1)])
    # OneFlow's own test of these masks (test_dropout.py, the CPU literal of step 1)
    np.testing.assert_array_equal((steps[0].reshape(-1) != 0).astype(int),
                                  [1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1])


def test_dropout_is_identity_in_predict_and_at_rate_zero():
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    got = H.run(lambda b: flow.nn.dropout(b, rate=0.5), x)
    np.testing.assert_array_equal(got, x)
    job = _dropout_train_job((4, 5), 0.0)
    assert "dropout" not in H.ops_in(job)
    np.testing.assert_array_equal(job(), np.ones((4, 5)))


# batch normalization ----------------------------------------------------------------------


def _bn_reference(x, gamma, beta, axis, eps):
    axes = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
    view = [1] * x.ndim
    view[axis] = -1
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(view) + beta.reshape(view)


BN_CASES = [pytest.param((4, 3, 2, 2), 1, id="NCHW-axis1"), pytest.param((6, 3), -1,
            id="2d-axis-1"), pytest.param((2, 3, 4), 2, id="3d-axis2")]


def _bn(axis, momentum=0.9, name="bn"):
    return lambda x: flow.layers.batch_normalization(x, axis=axis, momentum=momentum,
                                                     epsilon=1e-3, name=name)


@pytest.mark.parametrize("shape, axis", BN_CASES)
@covers("batch_norm_train", "batch_norm_grad", "assign_moving_average")
def test_batch_norm_train(shape, axis):
    rng = np.random.default_rng(2)
    x = rng.uniform(-2, 2, shape) * 3 + 1
    c = shape[axis]
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c)
    old_mean, old_var = rng.uniform(-1, 1, c), rng.uniform(0.5, 2, c)
    state = {"bn-gamma": gamma, "bn-beta": beta, "bn-moving_mean": old_mean,
             "bn-moving_variance": old_var}
    want = _bn_reference(x, gamma, beta, axis, 1e-3)
    axes = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
    for dtype in (np.float32, np.float64):
        # forward: a train job returning the normalized batch (lr 0: gamma/beta stay)
        flow.clear_default_session()

        def body(xb):
            y = _bn(axis)(xb)
            flow.optimizer.SGD(0.0, momentum=0).minimize(flow.math.reduce_mean(y))
            return y

        job = H.instrument(H.make_job(body, [H._spec(x.astype(dtype))], job_type="train"))
        H.assert_ops(job, ["batch_norm_train", "assign_moving_average"])
        flow.load_variables(state)
        y = job(x.astype(dtype))
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10)
        assert y.dtype == dtype
        np.testing.assert_allclose(y, want, **tol)
        # moving statistics: m = momentum * m + (1 - momentum) * batch (unbiased variance)
        new = flow.get_all_variables()
        assert new["bn-moving_mean"].dtype == new["bn-moving_variance"].dtype == dtype
        np.testing.assert_allclose(new["bn-moving_mean"],
                                   0.9 * old_mean + 0.1 * x.mean(axis=axes), **tol)
        np.testing.assert_allclose(new["bn-moving_variance"],
                                   0.9 * old_var + 0.1 * x.var(axis=axes, ddof=1), **tol)
    # the gradient job in float32 (the instrumented kernels catch dtype leaks)
    flow.clear_default_session()
    (g32,), _, _ = H.analytic_grads(_bn(axis), [x.astype(np.float32)], [0], preload=state,
                                    expect_ops=("batch_norm_train", "batch_norm_grad"))
    # gradients w.r.t. x, gamma and beta against central differences of the numpy loss
    flow.clear_default_session()
    (gx,), extra, _ = H.analytic_grads(_bn(axis), [x], [0], preload=state,
                                       read=["bn-gamma", "bn-beta"])
    cot = H.cotangent(x.shape, 0)
    loss = lambda x_, g_, b_: float(np.sum(_bn_reference(x_, g_, b_, axis, 1e-3) * cot))  # noqa
    nx, ng, nb = H.numeric_grads(loss, [x, gamma, beta], [0, 1, 2])
    np.testing.assert_allclose(gx, nx, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(extra["bn-gamma"], ng, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(extra["bn-beta"], nb, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g32, gx, rtol=1e-3, atol=1e-4)


def _bn_frozen_reference(x, gamma, beta, mean, var, axis, eps):
    view = [1] * x.ndim
    view[axis] = -1
    return ((x - mean.reshape(view)) / np.sqrt(var.reshape(view) + eps) * gamma.reshape(view)
            + beta.reshape(view))


@pytest.mark.parametrize("shape, axis", BN_CASES)
@covers("batch_norm_inference_grad")
def test_batch_norm_frozen_in_train_job(shape, axis):
    """training=False in a train job: moving statistics normalize, and stay unchanged;
    x, gamma and beta still get gradients."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, shape)
    c = shape[axis]
    state = {"bn-gamma": rng.uniform(0.5, 1.5, c), "bn-beta": rng.uniform(-1, 1, c),
             "bn-moving_mean": rng.uniform(-1, 1, c),
             "bn-moving_variance": rng.uniform(0.5, 2, c)}
    frozen = lambda v: flow.layers.batch_normalization(v, axis=axis, epsilon=1e-3,  # noqa
                                                       training=False, name="bn")
    (gx,), extra, loss = H.analytic_grads(
        frozen, [x], [0], preload=state, read=["bn-gamma", "bn-beta"],
        expect_ops=("batch_norm_inference", "batch_norm_inference_grad"))
    mean, var = state["bn-moving_mean"], state["bn-moving_variance"]
    cot = H.cotangent(x.shape, 0)

    def numpy_loss(x_, g_, b_):
        return float(np.sum(_bn_frozen_reference(x_, g_, b_, mean, var, axis, 1e-3) * cot))

    np.testing.assert_allclose(np.sum(loss), numpy_loss(x, state["bn-gamma"],
                                                        state["bn-beta"]), rtol=1e-10)
    nx, ng, nb = H.numeric_grads(numpy_loss, [x, state["bn-gamma"], state["bn-beta"]],
                                 [0, 1, 2])
    np.testing.assert_allclose(gx, nx, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(extra["bn-gamma"], ng, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(extra["bn-beta"], nb, rtol=1e-5, atol=1e-7)
    after = flow.get_all_variables()
    np.testing.assert_array_equal(after["bn-moving_mean"], mean)
    np.testing.assert_array_equal(after["bn-moving_variance"], var)
    flow.clear_default_session()  # the float32 model has float32 variables
    (gx32,), extra32, _ = H.analytic_grads(frozen, [x.astype(np.float32)], [0],
                                           preload=state, read=["bn-gamma"])
    assert gx32.dtype == extra32["bn-gamma"].dtype == np.float32
    np.testing.assert_allclose(gx32, gx, rtol=1e-3, atol=1e-4)


@covers("batch_norm_inference")
def test_batch_norm_inference_uses_moving_statistics():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    job = H.instrument(H.make_job(_bn(1), [H._spec(x)]))
    H.assert_ops(job, ["batch_norm_inference"])
    state = {"bn-gamma": rng.uniform(0.5, 1.5, 3), "bn-beta": rng.uniform(-1, 1, 3),
             "bn-moving_mean": rng.uniform(-1, 1, 3), "bn-moving_variance": rng.uniform(.5, 2, 3)}
    flow.load_variables(state)
    want = ((x - state["bn-moving_mean"]) / np.sqrt(state["bn-moving_variance"] + 1e-3)
            * state["bn-gamma"] + state["bn-beta"])
    got = job(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(flow.get_all_variables()["bn-moving_mean"],
                                  state["bn-moving_mean"].astype(np.float32))


# optimizer updates ------------------------------------------------------------------------


def _one_update(optimizer, w0, grad, steps=1):
    """Values of w after ``steps`` steps of ``optimizer`` on loss sum(w * grad)."""
    def body():
        w = flow.get_variable("w", shape=w0.shape, dtype=flow.float64,
                              initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * flow.constant(grad, dtype=flow.float64))
        optimizer().minimize(loss)
        return loss
    job = H.instrument(H.make_job(body, [], job_type="train"))
    flow.load_variables({"w": w0})
    values = []
    for _ in range(steps):
        job()
        values.append(flow.get_all_variables()["w"])
    return job, values


def _sgd_ref(w, g, lr, steps, momentum=0.0, wd=0.0):
    v, out = np.zeros_like(w), []
    for _ in range(steps):
        if momentum:   # OneFlow's MomentumUpdateFunctor: the decay stays out of v
            v = momentum * v - lr * g
            w = w + v - lr * wd * w
        else:          # its SGDUpdateFunctor
            w = w - lr * (g + wd * w)
        out.append(w)
    return out


def _adam_ref(w, g, lr, steps, b1=0.9, b2=0.999, eps=1e-8, bias=False, wd=0.0):
    m, v, out = np.zeros_like(w), np.zeros_like(w), []
    for t in range(1, steps + 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if bias:  # as PyTorch: epsilon is added to the corrected sqrt(v); AdamW's decay
            # at OneFlow's corrected rate lr * sqrt(1 - b2^t) / (1 - b1^t)
            m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            w = w - lr * m_hat / (np.sqrt(v_hat) + eps) - lr_t * wd * w
        else:
            w = w - lr * (m / (np.sqrt(v) + eps) + wd * w)
        out.append(w)
    return out


def _rmsprop_ref(w, g, lr, steps, d=0.99, eps=1e-8, centered=False):
    s, mg, out = np.zeros_like(w), np.zeros_like(w), []
    for _ in range(steps):
        s = d * s + (1 - d) * g * g
        mg = d * mg + (1 - d) * g
        w = w - lr * g / np.sqrt(s - mg * mg + eps if centered else s + eps)
        out.append(w)
    return out


def _lamb_ref(w, g, lr, steps, b1=0.9, b2=0.999, eps=1e-6):
    m, v, out = np.zeros_like(w), np.zeros_like(w), []
    for t in range(1, steps + 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        w = w - lr * np.linalg.norm(w) / np.linalg.norm(r) * r
        out.append(w)
    return out


def _lazy_adam_ref(w, g, lr, steps, b1=0.9, b2=0.999, eps=1e-8):
    m, v, out = np.zeros_like(w), np.zeros_like(w), []
    for t in range(1, steps + 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
        out.append(w)
    return out


def _lars_ref(w, g, lr, steps, beta=0.9, eps=1e-9, coeff=1e-4):
    mom, out = np.zeros_like(w), []
    for _ in range(steps):
        mom = beta * mom - lr * coeff * np.linalg.norm(w) / (np.linalg.norm(g) + eps) * g
        w = w + mom
        out.append(w)
    return out


# Rates exactly representable in float32: the learning_rate op is float32 (as in OneFlow).
OPTIMIZERS = [
    pytest.param(lambda: flow.optimizer.SGD(0.25, momentum=0), "sgd_update",
                 lambda w, g: _sgd_ref(w, g, 0.25, 3), id="SGD"),
    pytest.param(lambda: flow.optimizer.SGD(0.25, momentum=0.9), "momentum_update",
                 lambda w, g: _sgd_ref(w, g, 0.25, 3, momentum=0.9), id="SGD-momentum"),
    pytest.param(lambda: flow.optimizer.SGDW(0.25, momentum=0.5, weight_decay=0.01),
                 "momentum_update", lambda w, g: _sgd_ref(w, g, 0.25, 3, 0.5, 0.01),
                 id="SGDW"),
    pytest.param(lambda: flow.optimizer.Adam(0.25), "adam_update",
                 lambda w, g: _adam_ref(w, g, 0.25, 3), id="Adam"),
    pytest.param(lambda: flow.optimizer.Adam(0.25, do_bias_correction=True), "adam_update",
                 lambda w, g: _adam_ref(w, g, 0.25, 3, bias=True), id="Adam-bias-correction"),
    pytest.param(lambda: flow.optimizer.AdamW(0.25, weight_decay=0.01), "adam_update",
                 lambda w, g: _adam_ref(w, g, 0.25, 3, wd=0.01), id="AdamW"),
    pytest.param(lambda: flow.optimizer.AdamW(0.25, weight_decay=0.01, do_bias_correction=True),
                 "adam_update", lambda w, g: _adam_ref(w, g, 0.25, 3, bias=True, wd=0.01),
                 id="AdamW-bias-correction"),
    pytest.param(lambda: flow.optimizer.RMSProp(0.25), "rmsprop_update",
                 lambda w, g: _rmsprop_ref(w, g, 0.25, 3), id="RMSProp"),
    pytest.param(lambda: flow.optimizer.RMSProp(0.25, centered=True), "rmsprop_update",
                 lambda w, g: _rmsprop_ref(w, g, 0.25, 3, centered=True), id="RMSProp-centered"),
    pytest.param(lambda: flow.optimizer.SGD(
        flow.optimizer.PiecewiseConstantScheduler([0, 1], [0.5, 0.25, 0.125]), momentum=0),
        "sgd_update", lambda w, g: [w - 0.5 * g, w - 0.75 * g, w - 0.875 * g],
        id="SGD-piecewise-lr"),
    pytest.param(lambda: flow.optimizer.LAMB(0.25), "lamb_update",
                 lambda w, g: _lamb_ref(w, g, 0.25, 3), id="LAMB"),
    pytest.param(lambda: flow.optimizer.LARS(0.25, lars_coefficient=0.5), "lars_update",
                 lambda w, g: _lars_ref(w, g, 0.25, 3, coeff=0.5), id="LARS"),
    # Every gradient element is non-zero here: LazyAdam's skipping is tested in
    # tests/test_lazy_adam_and_loss_scale.py.
    pytest.param(lambda: flow.optimizer.LazyAdam(0.25), "lazy_adam_update",
                 lambda w, g: _lazy_adam_ref(w, g, 0.25, 3), id="LazyAdam"),
]


@pytest.mark.parametrize("optimizer, update_op, reference", OPTIMIZERS)
@covers("sgd_update", "momentum_update", "adam_update", "rmsprop_update", "lamb_update",
        "lars_update", "lazy_adam_update", "learning_rate",
        "increment", "variable")
def test_optimizer_update_ops(optimizer, update_op, reference):
    rng = np.random.default_rng(4)
    w0, grad = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    job, values = _one_update(optimizer, w0, grad, steps=3)
    H.assert_ops(job, [update_op, "learning_rate", "increment", "variable"])
    for step, (got, want) in enumerate(zip(values, reference(w0, grad)), 1):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"step {step}")
    counter = flow.get_all_variables()[f"System-Train-TrainStep-{job.__name__}"]
    assert counter == 3


@pytest.mark.parametrize("optimizer, update_op, reference", OPTIMIZERS)
@covers("all_finite", "sgd_update", "momentum_update", "adam_update", "rmsprop_update",
        "increment")
def test_optimizer_updates_skip_a_non_finite_step(optimizer, update_op, reference):
    # The gradient comes from a placeholder scale: 1 is a normal step, NaN or inf poisons
    # the gradient. A poisoned step changes no variable, slot or counter; the step after it
    # computes exactly what it would have without it.
    rng = np.random.default_rng(4)
    w0, grad = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def body(scale):
        w = flow.get_variable("w", shape=w0.shape, dtype=flow.float64,
                              initializer=flow.zeros_initializer())
        g = flow.constant(grad, dtype=flow.float64) * scale
        loss = flow.math.reduce_sum(w * g)
        optimizer().minimize(loss)
        return loss

    one = np.ones((2, 3))
    job = H.instrument(H.make_job(body, [H._spec(one)], job_type="train"))
    H.assert_ops(job, ["all_finite", update_op, "increment"])
    flow.load_variables({"w": w0})
    counter = f"System-Train-TrainStep-{job.__name__}"
    flow.config.check_finite_inputs(False)
    try:
        job(one)
        before = flow.get_all_variables()
        with pytest.warns(flow.train.NonFiniteStepWarning, match=f"{job.__name__}.*step 1"):
            job(np.where(np.eye(2, 3) > 0, np.nan, one))
        job(np.full((2, 3), np.inf))      # counted, not warned again
    finally:
        flow.config.check_finite_inputs(True)
    after = flow.get_all_variables()
    assert all(np.array_equal(after[n], before[n]) for n in before), "a skipped step changed state"
    assert after[counter] == 1 and flow.train.skipped_steps(job) == 2
    job(one)
    job(one)
    np.testing.assert_allclose(flow.get_all_variables()["w"], reference(w0, grad)[2],
                               rtol=1e-10, atol=1e-12)
    assert flow.get_all_variables()[counter] == 3


# errors: shape rules reject bad inputs at trace time, naming the op ----------------------------

ERRORS = [
    pytest.param(lambda a, b: a + b, [((2, 3), F32), ((2, 3), F64)], TypeError, "add:",
                 id="add-dtype-mismatch"),
    pytest.param(lambda a, b: a * b, [((2, 3), F32), ((4,), F32)], ValueError, "multiply:",
                 id="multiply-broadcast"),
    pytest.param(lambda a, b: flow.matmul(a, b), [((2, 3), F32), ((4, 5), F32)], ValueError,
                 "matmul:", id="matmul-inner"),
    pytest.param(lambda a: flow.reshape(a, (4, -1)), [((2, 3), F32)], ValueError, "reshape:",
                 id="reshape-size"),
    pytest.param(lambda a, b: flow.concat([a, b], axis=0), [((2, 3), F32), ((2, 4), F32)],
                 ValueError, "concat:", id="concat-shape"),
    pytest.param(lambda a: flow.math.exp(a), [((2,), I32)], TypeError, "exp:", id="exp-int"),
    pytest.param(lambda a: flow.nn.softmax(a), [((2,), I32)], TypeError, "softmax:",
                 id="softmax-int"),
    pytest.param(lambda a: flow.math.reduce_sum(a, axis=2), [((2, 3), F32)], ValueError,
                 "reduce_sum:", id="reduce-axis"),
    pytest.param(lambda v, b: flow.nn.bias_add(v, b), [((2, 3), F32), ((2,), F32)],
                 ValueError, "bias_add:", id="bias_add-shape"),
    pytest.param(lambda l, x: flow.nn.sparse_softmax_cross_entropy_with_logits(l, x),
                 [((4,), F32), ((4, 5), F32)], TypeError, "sparse_softmax", id="sparse-ce-float"),
    pytest.param(lambda a: a[:, 3], [((2, 3), F32)], IndexError, "index", id="getitem-range"),
    pytest.param(lambda c, x: flow.where(c, x, x), [((3,), np.int8), ((2,), F32)],
                 ValueError, "where:", id="where-broadcast"),
    pytest.param(lambda c, x, y: flow.where(c, x, y), [((3,), np.int8), ((3,), F32),
                 ((3,), F64)], TypeError, "where:", id="where-dtype"),
    pytest.param(lambda a: flow.transpose(a, perm=(0, 0)), [((2, 3), F32)], ValueError,
                 "transpose:", id="transpose-perm"),
    pytest.param(lambda a: flow.math.argmax(a, axis=2), [((2, 3), F32)], ValueError,
                 "argmax:", id="argmax-axis"),
    pytest.param(lambda a: flow.squeeze(a, axis=1), [((2, 3), F32)], ValueError, "squeeze:",
                 id="squeeze-not-1"),
    pytest.param(lambda a, b: flow.concat([a, b], axis=0), [((2, 3), F32), ((2, 3), I32)],
                 TypeError, "concat:", id="concat-dtype"),
    pytest.param(lambda a, b: flow.matmul(a, b), [((2, 3), F32), ((3, 4), F64)], TypeError,
                 "matmul:", id="matmul-dtype"),
    pytest.param(lambda v, b: flow.nn.bias_add(v, b), [((2, 3), F32), ((3,), F64)],
                 TypeError, "bias_add:", id="bias_add-dtype"),
    pytest.param(lambda l, x: flow.nn.softmax_cross_entropy_with_logits(l, x),
                 [((4, 3), F32), ((4, 5), F32)], ValueError, "softmax_cross_entropy",
                 id="dense-ce-shape"),
    pytest.param(lambda x, w: flow.nn.conv2d(x, w), [((1, 3, 5, 5), F32),
                 ((2, 4, 3, 3), F32)], ValueError, "conv2d:", id="conv2d-channels"),
    pytest.param(lambda x, w: flow.nn.conv2d(x, w), [((1, 3, 2, 2), F32),
                 ((2, 3, 3, 3), F32)], ValueError, "conv2d:", id="conv2d-too-small"),
    pytest.param(lambda x, w: flow.nn.conv2d(x, w), [((1, 3, 5, 5), F32),
                 ((2, 3, 3, 3), F64)], TypeError, "conv2d:", id="conv2d-dtype"),
    pytest.param(lambda x: flow.nn.max_pool2d(x, 2, 2, "VALID"), [((3, 5, 5), F32)],
                 ValueError, "max_pool2d:", id="max_pool2d-3d"),
    pytest.param(lambda x: flow.nn.avg_pool2d(x, 3, 1, "VALID"), [((1, 1, 2, 2), F32)],
                 ValueError, "avg_pool2d:", id="avg_pool2d-too-small"),
    pytest.param(lambda x: flow.layers.batch_normalization(x, axis=3), [((2, 3), F32)],
                 ValueError, "batch_normalization:", id="batch_norm-axis"),
    pytest.param(lambda x: flow.nn.dropout(x, rate=1.0), [((2, 3), F32)], ValueError,
                 "dropout:", id="dropout-rate"),
    pytest.param(lambda x: ew.broadcast_to(x, shape=(2, 4)), [((3,), F32)], ValueError,
                 "broadcast_to:", id="broadcast_to-shape"),
]


@pytest.mark.parametrize("fn, specs, exc, match", ERRORS)
def test_bad_inputs_are_refused(fn, specs, exc, match):
    arrays = [np.zeros(shape, dtype) for shape, dtype in specs]
    with pytest.raises(exc, match=match):
        H.run(fn, *arrays)


def test_sparse_cross_entropy_label_out_of_range():
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 5\)"):
        H.run(flow.nn.sparse_softmax_cross_entropy_with_logits,
              np.array([0, 5], np.int32), np.zeros((2, 5), np.float32))


# -- coverage -----------------------------------------------------------------------------------


def covered_ops() -> set[str]:
    ops = set()
    for c in CASES:
        ops.update(c.ops)
        if c.grad:
            ops.update(c.grad_ops)
    for test_ops in COVERED_BY_TESTS.values():
        ops.update(test_ops)
    return ops


def test_every_registered_op_is_covered():
    missing = set(REGISTRY) - covered_ops() - set(NOT_DIRECTLY_TESTED)
    assert not missing, (
        f"ops registered without a case in the op test matrix: {sorted(missing)}. Add a row "
        "to CASES in tests/ops/test_op_matrix.py (or a test marked @covers(...)), or list "
        "the op in NOT_DIRECTLY_TESTED with the test that exercises it")


def test_matrix_bookkeeping_is_honest():
    unknown = (covered_ops() | set(NOT_DIRECTLY_TESTED)) - set(REGISTRY)
    assert not unknown, f"the matrix names ops that are not registered: {sorted(unknown)}"
    both = covered_ops() & set(NOT_DIRECTLY_TESTED)
    assert not both, f"ops both covered and listed in NOT_DIRECTLY_TESTED: {sorted(both)}"
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
