"""Rows of the op test matrix for the OneFlow v0.3.4 names added in issue 18.

``add_cases`` is called by test_op_matrix.py with its ``case`` function and input
generators (so the rows run, and count for op coverage, exactly as the others). Every
reference is plain numpy (``math.erf`` for erf), independent of the kernels under test.
"""
from __future__ import annotations

import math

import numpy as np

import aioflow as flow

F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _logsumexp(x, axis, keepdims):
    m = x.max(axis=axis, keepdims=True)
    out = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _one_hot(i, depth, axis=-1, on=1, off=0, dtype=np.float32):
    out = np.where(i[..., None] == np.arange(depth), on, off).astype(dtype)
    return np.moveaxis(out, -1, axis)


def _conv1d_ref(x, w, stride, pads, dilation):
    x = np.pad(x, ((0, 0), (0, 0), pads))
    n, c, width = x.shape
    o, _, k = w.shape
    ow = (width - (k - 1) * dilation - 1) // stride + 1
    y = np.zeros((n, o, ow))
    for j in range(ow):
        window = x[:, :, j * stride: j * stride + (k - 1) * dilation + 1: dilation]
        y[:, :, j] = np.einsum("ncw,ocw->no", window, w)
    return y


def _pool1d_ref(x, k, stride, kind):
    n, c, width = x.shape
    ow = (width - k) // stride + 1
    windows = np.stack([x[:, :, j * stride: j * stride + k] for j in range(ow)], axis=2)
    return windows.max(-1) if kind == "max" else windows.mean(-1)


def _layer_norm_ref(x, begin, eps, gamma=None, beta=None):
    axes = tuple(range(begin, x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def add_cases(case, U, Away, Distinct, Ints, Fixed, Simplex):  # noqa: C901 - one table
    # -- unary math with gradients ---------------------------------------------------------
    for name, fn, ref, dom, gops in [
            ("tan", flow.math.tan, np.tan, U(-1.2, 1.2, 2, 3), ()),
            ("asin", flow.math.asin, np.arcsin, U(-0.8, 0.8, 2, 3), ("sqrt",)),
            ("acos", flow.math.acos, np.arccos, U(-0.8, 0.8, 2, 3), ("sqrt",)),
            ("atan", flow.math.atan, np.arctan, U(-3, 3, 2, 3), ()),
            ("sinh", flow.math.sinh, np.sinh, U(-2, 2, 2, 3), ("cosh",)),
            ("cosh", flow.math.cosh, np.cosh, U(-2, 2, 2, 3), ("sinh",)),
            ("asinh", flow.math.asinh, np.arcsinh, U(-3, 3, 2, 3), ("sqrt",)),
            ("acosh", flow.math.acosh, np.arccosh, U(1.2, 3, 2, 3), ("sqrt",)),
            ("atanh", flow.math.atanh, np.arctanh, U(-0.8, 0.8, 2, 3), ()),
            ("expm1", flow.math.expm1, np.expm1, U(-2, 2, 2, 3), ()),
            ("erf", flow.math.erf, _erf, U(-3.5, 3.5, 3, 4), ("exp",)),
            ("erfc", flow.math.erfc, _erfc, U(-2, 2, 2, 3), ("exp",))]:
        case(name, fn, ref, (dom,), (name,), gops)
    _far = Fixed([-30.0, -6.0, -3.2, -3.0, -2.9, 0.0, 2.9, 3.0, 3.2, 6.0, 30.0])
    case("erf-both-series", flow.math.erf, _erf, (_far,), ("erf",))
    case("erfc-tails", flow.math.erfc, _erfc, (Fixed([-5.0, -3.5, 3.5, 5.0, 8.0]),),
         ("erfc",), tol32=dict(rtol=1e-4, atol=1e-12))
    _halves = Fixed([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7, 1.49])
    case("round-half-away", flow.math.round, _round_half_away, (_halves,), ("round",),
         grad=False)
    case("rint-half-even", flow.math.rint, np.rint, (_halves,), ("rint",), grad=False)
    case("sigmoid_v2", flow.math.sigmoid_v2, lambda x: 1 / (1 + np.exp(-x)),
         (U(-4, 4, 2, 3),), ("sigmoid",))
    case("tanh_v2", flow.math.tanh_v2, np.tanh, (U(-3, 3, 2, 3),), ("tanh",))
    case("gelu-exact", flow.math.gelu, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
         (U(-3, 3, 2, 4),), ("erf",))
    case("log_sigmoid", flow.math.log_sigmoid, lambda x: -np.logaddexp(0, -x),
         (Fixed([-800.0, -20.0, -1.0, 0.0, 1.5, 20.0, 800.0]),), ("softplus",))

    # -- binary ----------------------------------------------------------------------------
    case("atan2", flow.math.atan2, np.arctan2, (Away(2, 3), Away(3)), ("atan2",),
         ("sum_to_shape",))
    case("mod-float", flow.math.mod, np.mod, (U(-5, 5, 3, 4), Away(4)), ("mod",),
         ("floor", "sum_to_shape"))
    case("mod-operator", lambda a, b: a % b, np.mod, (U(-5, 5, 2, 3), Away(2, 3)), ("mod",))
    case("mod-rnumber", lambda a: 7.5 % a, lambda a: np.mod(7.5, a), (Away(2, 3),), ("mod",))
    case("mod-int-sign-of-divisor", flow.math.mod, np.mod,
         (Fixed([7, -7, 7, -7, 6, 0]), Fixed([3, 3, -3, -3, 4, 5])), ("mod",),
         dtypes=(I32, I64), grad=False)
    case("floordiv", flow.math.floordiv, np.floor_divide,
         (Fixed([7, -7, 7, -7, 6, 0]), Fixed([2, 2, -2, -2, 4, 3])), ("floordiv",),
         dtypes=(F32, F64, I32), grad=False)
    case("floordiv-operator", lambda a, b: a // b, np.floor_divide,
         (U(-5, 5, 2, 3), Away(3)), ("floordiv",), grad=False)
    _with_zeros = Fixed([[0.0, 1.5, -2.0], [0.0, 0.5, 3.0]])
    case("xdivy-zeros", flow.math.xdivy,
         lambda x, y: np.where(x == 0, 0.0, x / np.where(x == 0, 1, y)),
         (_with_zeros, Fixed([[0.0, 2.0, 4.0], [3.0, 0.25, -1.0]])), ("where", "divide"),
         grad=False)
    case("xdivy", flow.math.xdivy, lambda x, y: x / y, (Away(2, 3), Away(2, 3)),
         ("divide",))
    case("xlogy-zeros", flow.math.xlogy,
         lambda x, y: np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1, y))),
         (_with_zeros, Fixed([[0.0, 2.0, 4.0], [3.0, 0.25, 1.0]])), ("where", "log"),
         grad=False)
    case("xlogy", flow.math.xlogy, lambda x, y: x * np.log(y),
         (Away(2, 3), U(0.5, 2, 2, 3)), ("log",))
    case("reciprocal_no_nan", flow.math.reciprocal_no_nan,
         lambda x: np.where(x == 0, 0.0, 1 / np.where(x == 0, 1, x)), (_with_zeros,),
         ("divide", "where"), grad=False)
    case("logical_and", flow.math.logical_and,
         lambda a, b: ((a != 0) & (b != 0)).astype(np.int8),
         (Ints(0, 2, 3, 4), Ints(0, 2, 4)), ("not_equal", "multiply"),
         dtypes=(F32, I32), out_dtype=np.int8, grad=False)

    # -- reductions ------------------------------------------------------------------------
    for axis in (None, 1, (0, 2)):
        tag = "all-axes" if axis is None else f"axis{axis}" if isinstance(axis, int) \
            else "axes" + "_".join(map(str, axis))

        def full(out):
            out = np.asarray(out)
            return out.reshape(1) if out.ndim == 0 else out
        for name, fn, ref in [("reduce_all", flow.math.reduce_all, np.all),
                              ("reduce_any", flow.math.reduce_any, np.any)]:
            case(f"{name}-{tag}", lambda x, _f=fn, _a=axis: _f(x, axis=_a),
                 lambda x, _r=ref, _a=axis: full(_r(x != 0, axis=_a)).astype(np.int8),
                 (Ints(0, 2, 2, 3, 4),), (name,), dtypes=(F32, I32), out_dtype=np.int8,
                 grad=False)
        case(f"reduce_prod-{tag}", lambda x, _a=axis: flow.math.reduce_prod(x, axis=_a),
             lambda x, _a=axis: full(np.prod(x, axis=_a)), (U(0.5, 1.5, 2, 3, 4),),
             ("reduce_prod",), ("reduce_prod_grad",), dtypes=(F32, F64, I32))
        case(f"reduce_logsumexp-{tag}",
             lambda x, _a=axis: flow.math.reduce_logsumexp(x, axis=_a),
             lambda x, _a=axis: full(_logsumexp(x, _a, False)), (U(-3, 3, 2, 3, 4),),
             ("reduce_max", "exp", "log"))
    case("reduce_prod-zeros", lambda x: flow.math.reduce_prod(x, axis=1, keepdims=True),
         lambda x: np.prod(x, axis=1, keepdims=True),
         (Fixed([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1.5, -2.0, 0.5]]),), ("reduce_prod",),
         ("reduce_prod_grad",))
    case("reduce_logsumexp-large-keepdims",
         lambda x: flow.math.reduce_logsumexp(x, axis=-1, keepdims=True),
         lambda x: _logsumexp(x, -1, True), (Fixed([[1000.0, 999.0, -5.0], [-800.0,
                                                   -801.0, -900.0]]),), ("exp",))
    case("reduce_std", lambda x: flow.math.reduce_std(x, axis=1),
         lambda x: np.std(x, axis=1), (U(-2, 2, 3, 4),), ("sqrt",))
    case("reduce_euclidean_norm", lambda x: flow.math.reduce_euclidean_norm(x, axis=0),
         lambda x: np.sqrt((x * x).sum(0)), (U(-2, 2, 3, 4),), ("sqrt",))
    case("l2_normalize", lambda x: flow.math.l2_normalize(x, axis=1),
         lambda x: x / np.sqrt(np.maximum((x * x).sum(1, keepdims=True), 1e-12)),
         (U(-2, 2, 3, 4),), ("rsqrt",))
    case("polyval", lambda x: flow.math.polyval([2.0, -1.0, 0.5], x),
         lambda x: np.polyval([2.0, -1.0, 0.5], x), (U(-2, 2, 2, 3),), ("multiply", "add"))
    for diag in (0, -1, 1):
        case(f"tril-diagonal{diag}", lambda x, _d=diag: flow.math.tril(x, diagonal=_d),
             lambda x, _d=diag: np.tril(x, _d), (U(-2, 2, 2, 3, 4),), ("tril",), ("tril",),
             dtypes=(F32, F64, I32))
    case("nn.tril", flow.nn.tril, np.tril, (U(-2, 2, 4, 4),), ("tril",))
    case("fused_scale_tril", lambda x: flow.math.fused_scale_tril(x, 0, -5.0, 2.0),
         lambda x: np.where(np.tril(np.ones((3, 4))) > 0, 2 * x, -5.0), (U(-2, 2, 3, 4),),
         ("tril", "multiply"))
    case("top_k", lambda x: flow.math.top_k(x, k=2),
         lambda x: np.argsort(-x, axis=-1, kind="stable")[..., :2].astype(np.int32),
         (Distinct(3, 5),), ("argsort",), dtypes=(F32, F64, I32), out_dtype=np.int32,
         grad=False)
    # OneFlow's positional order (input, axis, k, sorted): the 2 largest along axis 0
    case("top_k-axis-positional", lambda x: flow.math.top_k(x, 0, 2, True),
         lambda x: np.argsort(-x, axis=0, kind="stable")[:2].astype(np.int32),
         (Distinct(4, 3),), ("argsort",), dtypes=(F32, I32), out_dtype=np.int32, grad=False)
    case("top_k-ties-lower-index-first", lambda x: flow.math.top_k(x, k=3),
         lambda x: np.argsort(-x, axis=-1, kind="stable")[..., :3].astype(np.int32),
         (Fixed([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2]]),), ("argsort",), dtypes=(F32, I32),
         out_dtype=np.int32, grad=False)
    case("in_top_k", lambda t, p: flow.math.in_top_k(t, p, 2),
         lambda t, p: ((p > p[np.arange(len(t)), t][:, None]).sum(1) < 2).astype(np.int8),
         (Fixed([0, 2, 1], dtype=np.int32), Distinct(3, 4)), ("take_along_axis",),
         dtypes=(F32,), out_dtype=np.int8, grad=False)

    # -- indexing and shape ----------------------------------------------------------------
    case("gather-axis0", lambda p, i: flow.gather(p, i), lambda p, i: p[i],
         (U(-2, 2, 5, 3), Fixed([4, 0, 2, 0], dtype=np.int32)), ("gather",), ("gather_grad",),
         dtypes=(F32, F64, I32))
    case("gather-axis1-2d-indices", lambda p, i: flow.gather(p, i, axis=1),
         lambda p, i: np.take(p, i, axis=1),
         (U(-2, 2, 2, 4, 3), Fixed([[3, 1], [1, 1], [0, 2]], dtype=np.int64)), ("gather",),
         ("gather_grad",))
    case("gather-out-of-range-gives-zeros", lambda p, i: flow.gather(p, i),
         lambda p, i: np.where(((i >= 0) & (i < 3))[:, None], p[np.clip(i, 0, 2)], 0),
         (U(-2, 2, 3, 2), Fixed([-1, 0, 3, 2, 7], dtype=np.int32)), ("gather",),
         ("gather_grad",))
    case("gather_nd", flow.gather_nd, lambda p, i: p[i[..., 0], i[..., 1]],
         (U(-2, 2, 3, 4, 2), Fixed([[2, 1], [0, 3], [2, 1]], dtype=np.int32)), ("gather",),
         ("gather_grad",))
    case("dim_gather", lambda x, i: flow.dim_gather(x, 1, i),
         lambda x, i: np.take_along_axis(x, i, axis=1),
         (U(-2, 2, 2, 3), Fixed([[2, 2, 0], [1, 0, 1]], dtype=np.int32)),
         ("take_along_axis",), ("take_along_axis_grad",))
    case("one_hot", lambda i: flow.one_hot(i, depth=4), lambda i: _one_hot(i, 4),
         (Fixed([[0, 3], [2, 5]]),), ("one_hot",), dtypes=(I32, I64), out_dtype=np.float32,
         grad=False)
    case("one_hot-axis0-values-int", lambda i: flow.one_hot(i, 3, on_value=5, off_value=-1,
                                                            axis=0, dtype=flow.int32),
         lambda i: _one_hot(i, 3, axis=0, on=5, off=-1, dtype=np.int32),
         (Fixed([0, 2, 1, -1]),), ("one_hot", "transpose"), dtypes=(I32,),
         out_dtype=np.int32, grad=False)
    case("pad", lambda x: flow.pad(x, [(1, 0), (0, 2)], constant_value=-1.5),
         lambda x: np.pad(x, [(1, 0), (0, 2)], constant_values=-1.5), (U(-2, 2, 2, 3),),
         ("pad",), ("slice",))
    case("pad-int", lambda x: flow.pad(x, ((0, 1), (2, 0), (1, 1))),
         lambda x: np.pad(x, ((0, 1), (2, 0), (1, 1))), (Ints(-3, 3, 2, 1, 2),), ("pad",),
         dtypes=(I32,), grad=False)
    case("stack-axis0", lambda a, b: flow.stack([a, b]), lambda a, b: np.stack([a, b]),
         (U(-2, 2, 2, 3), U(-2, 2, 2, 3)), ("concat",), ("slice",))
    case("stack-axis-1", lambda a, b, c: flow.stack([a, b, c], axis=-1),
         lambda a, b, c: np.stack([a, b, c], axis=-1),
         (U(-2, 2, 2, 3), U(-2, 2, 2, 3), U(-2, 2, 2, 3)), ("concat",),
         dtypes=(F32, F64, I32))
    for direction in ("ASCENDING", "DESCENDING"):
        sign = 1 if direction == "ASCENDING" else -1
        for axis in (-1, 0):
            case(f"sort-{direction.lower()}-axis{axis}",
                 lambda x, _d=direction, _a=axis: flow.sort(x, axis=_a, direction=_d),
                 lambda x, _s=sign, _a=axis: _s * np.sort(_s * x, axis=_a),
                 (Distinct(3, 4),), ("argsort", "take_along_axis"),
                 ("take_along_axis_grad",), dtypes=(F32, F64, I32))
            case(f"argsort-{direction.lower()}-axis{axis}",
                 lambda x, _d=direction, _a=axis: flow.argsort(x, axis=_a, direction=_d),
                 lambda x, _s=sign, _a=axis: np.argsort(_s * x, axis=_a,
                                                        kind="stable").astype(np.int32),
                 (Ints(0, 3, 3, 4),), ("argsort",), dtypes=(F32, I32), out_dtype=np.int32,
                 grad=False)
    case("reverse", lambda x: flow.reverse(x, axis=[0, -1]), lambda x: x[::-1, :, ::-1],
         (U(-2, 2, 2, 3, 4),), ("reverse",), ("reverse",), dtypes=(F32, F64, I32))
    case("broadcast_like", lambda x, y: flow.broadcast_like(x, y),
         lambda x, y: np.broadcast_to(x, y.shape), (U(-2, 2, 3, 1), U(-2, 2, 2, 3, 4)),
         ("broadcast_to",), ("sum_to_shape",), wrt=(0,))
    case("broadcast_like-axes", lambda x, y: flow.broadcast_like(x, y, broadcast_axes=[1]),
         lambda x, y: np.broadcast_to(x[:, None], y.shape), (U(-2, 2, 2, 4), U(-2, 2, 2, 3, 4)),
         ("broadcast_to",), ("sum_to_shape",), wrt=(0,))
    case("masked_fill", lambda x, m: flow.masked_fill(x, m, -9.0),
         lambda x, m: np.where(m != 0, -9.0, x),
         (U(-2, 2, 2, 3), Ints(0, 2, 2, 3, dtype=np.int8)), ("where",))

    # -- nn ----------------------------------------------------------------------------
    _kinky = Fixed([[-7.0, -4.0, -2.5, -1.3, -0.4], [0.3, 1.2, 2.4, 4.0, 7.5]])
    for name, fn, ref, dom in [
            ("elu", lambda x: flow.nn.elu(x, alpha=0.7),
             lambda x: np.where(x > 0, x, 0.7 * np.expm1(np.minimum(x, 0))),
             Fixed([-800.0, -3.0, -0.5, 0.4, 2.0, 800.0])),
            ("relu6", flow.nn.relu6, lambda x: np.clip(x, 0, 6), _kinky),
            ("hardtanh", lambda x: flow.nn.hardtanh(x, -2.0, 3.0),
             lambda x: np.clip(x, -2, 3), _kinky),
            ("hardsigmoid", flow.nn.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6, _kinky),
            ("hardswish", flow.nn.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, _kinky),
            ("swish", lambda x: flow.nn.swish(x, beta=1.5),
             lambda x: x / (1 + np.exp(-1.5 * x)), U(-4, 4, 2, 3)),
            ("mish", flow.nn.mish, lambda x: x * np.tanh(np.logaddexp(0, x)),
             U(-4, 4, 2, 3)),
            ("logsoftmax", flow.nn.logsoftmax,
             lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)), U(-3, 3, 2, 4))]:
        case(f"nn.{name}", fn, ref, (dom,), ())
    case("nn.moments-mean", lambda x: flow.nn.moments(x, [0, 2])[0],
         lambda x: x.mean((0, 2)), (U(-2, 2, 2, 3, 4),), ("reduce_mean",))
    case("nn.moments-variance-keepdims", lambda x: flow.nn.moments(x, [1], keepdims=True)[1],
         lambda x: x.var(1, keepdims=True), (U(-2, 2, 3, 4),), ("reduce_mean", "square"))
    case("nn.batch_normalization",
         lambda x, m, v, o, s: flow.nn.batch_normalization(x, m, v, o, s, 1e-3, axis=1),
         lambda x, m, v, o, s: (x - m[:, None]) / np.sqrt(v[:, None] + 1e-3) * s[:, None]
         + o[:, None],
         (U(-2, 2, 2, 3, 4), U(-1, 1, 3), U(0.5, 2, 3), U(-1, 1, 3), U(0.5, 1.5, 3)),
         ("rsqrt",))
    case("nn.batch_normalization-nd-stats",
         lambda x: flow.nn.batch_normalization(x, *flow.nn.moments(x, [1], keepdims=True),
                                               axis=0),
         lambda x: (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5),
         (U(-2, 2, 2, 5),), ("rsqrt",))
    case("nn.layer_norm", lambda x, g, b: flow.nn.layer_norm(x, g, b, begin_norm_axis=1),
         lambda x, g, b: _layer_norm_ref(x, 1, 1e-5, g, b),
         (U(-2, 2, 2, 3, 4), U(0.5, 1.5, 4), U(-1, 1, 4)), ("rsqrt",))
    case("nn.layer_norm-no-params-axis2",
         lambda x: flow.nn.layer_norm(x, begin_norm_axis=-1, epsilon=1e-3),
         lambda x: _layer_norm_ref(x, 2, 1e-3), (U(-2, 2, 2, 3, 4),), ("rsqrt",))
    case("nn.sparse_cross_entropy", flow.nn.sparse_cross_entropy,
         lambda lab, p: -np.log(np.take_along_axis(p, lab[:, None].astype(int), 1)[:, 0]),
         (Fixed([0, 3, 1], dtype=np.int32), Simplex(3, 4)), ("take_along_axis", "log"),
         ("take_along_axis_grad",))
    for fmt in ("NCW", "NWC"):
        def to(x, _f=fmt):
            return x if _f == "NCW" else np.swapaxes(x, 1, 2)
        case(f"nn.conv1d-{fmt}",
             lambda x, w, _f=fmt: flow.nn.conv1d(x, w, strides=2, padding=[(1, 2)],
                                                  data_format=_f, dilations=1),
             # NWC: OneFlow's filters are (out, kw, in) there
             lambda x, w, _to=to: _to(_conv1d_ref(_to(x), _to(w), 2, (1, 2), 1)),
             (U(-1, 1, 2, 3, 7) if fmt == "NCW" else U(-1, 1, 2, 7, 3), U(-1, 1, 4, 3, 3)),
             ("conv2d",), ("conv2d_backward_data", "conv2d_backward_filter"),
             tol32=dict(rtol=1e-5, atol=1e-5))
        case(f"nn.max_pool1d-{fmt}",
             lambda x, _f=fmt: flow.nn.max_pool1d(x, 2, 2, "VALID", data_format=_f),
             lambda x, _to=to: _to(_pool1d_ref(_to(x), 2, 2, "max")),
             (Distinct(2, 3, 6) if fmt == "NCW" else Distinct(2, 6, 3),), ("max_pool2d",),
             ("max_pool2d_grad",))
        case(f"nn.avg_pool1d-{fmt}",
             lambda x, _f=fmt: flow.nn.avg_pool1d(x, 3, 1, "VALID", data_format=_f),
             lambda x, _to=to: _to(_pool1d_ref(_to(x), 3, 1, "avg")),
             (U(-2, 2, 2, 3, 6) if fmt == "NCW" else U(-2, 2, 2, 6, 3),), ("avg_pool2d",),
             ("avg_pool2d_grad",))
    case("nn.softmax_grad", lambda y, dy: flow.nn.softmax_grad(y, dy),
         lambda y, dy: y * (dy - (dy * y).sum(-1, keepdims=True)),
         (Simplex(2, 4), U(-1, 1, 2, 4)), ("softmax_grad",), grad=False)


def _reduced(loss, reduction):
    if reduction == "mean":
        return np.reshape(loss.mean(), (1,))
    if reduction == "sum":
        return np.reshape(loss.sum(), (1,))
    return loss


def _softplus(x):
    return np.logaddexp(0, x)


def _pnorm(d, p):
    return (np.abs(d) ** p).sum(-1) ** (1 / p)


def add_loss_cases(case, U, Away, Distinct, Ints, Fixed, Simplex):
    """The loss functions, each against its formula in numpy."""
    for red in ("none", "mean", "sum"):
        case(f"nn.MSELoss-{red}", lambda x, y, _r=red: flow.nn.MSELoss(x, y, reduction=_r),
             lambda x, y, _r=red: _reduced((x - y) ** 2, _r), (U(-2, 2, 2, 3), U(-2, 2, 2, 3)),
             ("square",))
        case(f"nn.L1Loss-{red}", lambda x, y, _r=red: flow.nn.L1Loss(x, y, reduction=_r),
             lambda x, y, _r=red: _reduced(np.abs(x - y), _r), (Away(2, 3), Fixed(
                 [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])), ("abs",))
    case("nn.BCELoss-weight", lambda x, t, w: flow.nn.BCELoss(x, t, w),
         lambda x, t, w: _reduced(-w * (t * np.log(x) + (1 - t) * np.log(1 - x)), "mean"),
         (U(0.05, 0.95, 2, 3), U(0, 1, 2, 3), U(0.5, 1.5, 2, 3)), ("log",))
    case("nn.BCELoss-saturated", lambda x, t: flow.nn.BCELoss(x, t, reduction="none"),
         lambda x, t: -(t * np.maximum(np.log(np.maximum(x, 1e-300)), -100)
                        + (1 - t) * np.maximum(np.log(np.maximum(1 - x, 1e-300)), -100)),
         (Fixed([0.0, 1.0, 0.5, 1.0]), Fixed([1.0, 0.0, 1.0, 1.0])), ("log",), grad=False)
    case("nn.BCEWithLogitsLoss",
         lambda x, t, pw: flow.nn.BCEWithLogitsLoss(x, t, pos_weight=pw, reduction="sum"),
         lambda x, t, pw: _reduced(pw * t * _softplus(-x) + (1 - t) * _softplus(x), "sum"),
         (U(-4, 4, 2, 3), U(0, 1, 2, 3), U(0.5, 2, 3)), ("softplus",))
    case("nn.BCEWithLogitsLoss-large", lambda x, t: flow.nn.BCEWithLogitsLoss(
        x, t, reduction="none"),
         lambda x, t: t * _softplus(-x) + (1 - t) * _softplus(x),
         (Fixed([-800.0, -30.0, 0.0, 30.0, 800.0]), Fixed([1.0, 0.0, 0.5, 1.0, 0.0])),
         ("softplus",), wrt=(0,))
    case("nn.KLDivLoss", lambda x, t: flow.nn.KLDivLoss(x, t, reduction="sum"),
         lambda x, t: _reduced(np.where(t > 0, t * np.log(np.where(t > 0, t, 1)), 0) - t * x,
                               "sum"),
         (U(-3, -0.1, 2, 4), Simplex(2, 4)), ("log",))
    case("nn.KLDivLoss-log-target", lambda x, t: flow.nn.KLDivLoss(x, t, log_target=True),
         lambda x, t: _reduced(np.exp(t) * (t - x), "mean"),
         (U(-3, -0.1, 2, 4), U(-3, -0.1, 2, 4)), ("exp",))
    case("nn.MarginRankingLoss", lambda a, b, t: flow.nn.MarginRankingLoss(a, b, t, 0.3),
         lambda a, b, t: _reduced(np.maximum(-t * (a - b) + 0.3, 0), "mean"),
         (Fixed([0.9, -1.0, 0.2, 1.5, -0.4]), Fixed([0.1, 0.5, 1.4, -0.5, 0.6]),
          Fixed([1.0, -1.0, 1.0, -1.0, 1.0])), ("maximum",), wrt=(0, 1))
    for swap in (False, True):
        case(f"nn.TripletMarginLoss-swap{swap}",
             lambda a, p, n, _s=swap: flow.nn.TripletMarginLoss(a, p, n, margin=2.0, p=3.0,
                                                                swap=_s, reduction="none"),
             lambda a, p, n, _s=swap: np.maximum(
                 _pnorm(a - p + 1e-6, 3) - (np.minimum(_pnorm(a - n + 1e-6, 3),
                                                       _pnorm(p - n + 1e-6, 3)) if _s
                                            else _pnorm(a - n + 1e-6, 3)) + 2.0, 0),
             (U(-1, 1, 3, 4), U(-1, 1, 3, 4), U(-1, 1, 3, 4)), ("pow",))
    case("smooth_l1_loss", lambda x, y: flow.smooth_l1_loss(x, y, beta=0.5),
         lambda x, y: np.where(np.abs(x - y) < 0.5, (x - y) ** 2 / 2 / 0.5,
                               np.abs(x - y) - 0.25),
         (Fixed([-2.0, -0.3, 0.1, 0.35, 1.7, 3.0]), Fixed([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])),
         ("where",), wrt=(0,))
