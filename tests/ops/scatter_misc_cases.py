"""Rows of the op test matrix for OneFlow v0.3.4's indexing, scatter/segment and other
math names (issue 18, slice C): scatter_nd and friends, segment sums, slice_v2 /
slice_update, argwhere / nonzero, lgamma, count_not_finite, combined_margin_loss, the
quantization ops and the identities of OneFlow's placement machinery.

``add_cases`` is called by test_op_matrix.py as ``oneflow_cases.add_cases`` is. Every
reference is plain numpy (``math.lgamma`` for lgamma). Ops whose state lives in
variables across steps are tested in test_stateful_oneflow_ops.py; ``TESTED_ELSEWHERE``
names them for the matrix's coverage check.
"""
from __future__ import annotations

import math

import numpy as np

import aioflow as flow

F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64

TESTED_ELSEWHERE = {
    op: "a variable's state across steps: tests/ops/test_stateful_oneflow_ops.py"
    for op in ("assign", "categorical_ordinal_encode", "moving_average_min_max_observer")}

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _scatter_add_ref(base, indices, updates):
    out = np.array(base, copy=True)
    k = indices.shape[-1]
    for where, value in zip(indices.reshape(-1, k), updates.reshape((-1,) + out.shape[k:])):
        if all(0 <= w < d for w, d in zip(where, out.shape)):
            out[tuple(where)] += value
    return out


def _scatter_update_ref(params, indices, updates):
    zeroed = np.array(params, copy=True)
    for where in indices.reshape(-1, indices.shape[-1]):
        zeroed[tuple(where)] = 0
    return _scatter_add_ref(zeroed, indices, updates)


def _segment_sum_ref(data, ids, segments, axis=0):
    lead, n = data.shape[:axis], ids.size
    rows = np.moveaxis(data.reshape(lead + (n, -1)), axis, 0)
    out = np.zeros((segments,) + rows.shape[1:], data.dtype)
    for s, row in zip(ids.reshape(-1), rows):
        if 0 <= s < segments:
            out[s] += row
    tail = data.shape[axis + ids.ndim:]
    return np.moveaxis(out, 0, axis).reshape(lead + (segments,) + tail)


def _batch_segment_sum_ref(data, ids, segments):
    return np.stack([_segment_sum_ref(d, i, segments) for d, i in zip(data, ids)])


def _margin_ref(x, label, m1, m2, m3):
    y = np.array(x, copy=True)
    for row, target in enumerate(label):
        if 0 <= target < x.shape[1]:
            y[row, target] = math.cos(m1 * math.acos(x[row, target]) + m2) - m3
    return y


def _observe(x, bit, scheme, formula, per_layer=True):
    """min_max_observer's (scale, zero_point) in numpy, after OneFlow's kernel."""
    rows = x.reshape((1, -1) if per_layer else (x.shape[0], -1))
    high, low = rows.max(1), rows.min(1)
    if formula == "cambricon":
        peak = np.maximum(np.abs(high), np.abs(low))
        return np.floor(np.log2(peak)) - (bit - 2), np.zeros_like(high)
    if scheme == "symmetric":
        return np.maximum(np.abs(high), np.abs(low)) / (2 ** (bit - 1) - 1), np.zeros_like(high)
    scale = (high - low) / (2 ** bit - 1)
    return scale, -np.rint(low / scale)


def _fake_quant_ref(x, bit, scheme, formula, per_layer=True):
    scale, zero = _observe(x, bit, scheme, formula, per_layer)
    view = (-1,) + (1,) * (x.ndim - 1)
    if formula == "cambricon":
        step = 2.0 ** np.trunc(scale[0])
        return np.clip(np.rint(x / step), -2 ** (bit - 1), 2 ** (bit - 1) - 1) * step
    scale = scale.reshape(view)
    if scheme == "symmetric":
        return np.clip(np.rint(x / scale), -2 ** (bit - 1), 2 ** (bit - 1) - 1) * scale
    zp = (np.sign(zero) * np.floor(np.abs(zero) + 0.5)).astype(np.int64).astype(np.uint8)
    zp = zp.astype(np.float64).reshape(view)
    return (np.clip(np.rint(x / scale + zp), 0, 2 ** bit - 1) - zp) * scale


def add_cases(case, U, Away, Distinct, Ints, Fixed, Simplex):  # noqa: C901 - one table
    # -- scatter_nd and the tensor_scatter_nd pair ----------------------------------------
    case("scatter_nd-repeated-indices-add", lambda i, u: flow.scatter_nd(i, u, (5, 3)),
         lambda i, u: _scatter_add_ref(np.zeros((5, 3)), i, u),
         (Fixed([[4], [0], [4]], dtype=I32), U(-2, 2, 3, 3)), ("scatter_nd",), ("gather_nd_rows",),
         dtypes=(F32, F64, I32), out_dtype=None, wrt=(1,))
    case("scatter_nd-k2-out-of-range-dropped", lambda i, u: flow.scatter_nd(i, u, (3, 4, 2)),
         lambda i, u: _scatter_add_ref(np.zeros((3, 4, 2)), i, u),
         (Fixed([[2, 1], [0, 3], [3, 0], [1, -1]], dtype=I64), U(-2, 2, 4, 2)),
         ("scatter_nd",), ("gather_nd_rows",), wrt=(1,))
    case("tensor_scatter_nd_add", flow.tensor_scatter_nd_add,
         lambda p, i, u: _scatter_add_ref(p, i, u),
         (U(-2, 2, 4, 3), Fixed([[2], [0], [2]], dtype=I32), U(-2, 2, 3, 3)),
         ("tensor_scatter_nd_add",), ("gather_nd_rows",), dtypes=(F32, F64, I32))
    case("tensor_scatter_nd_update-repeats-add", flow.tensor_scatter_nd_update,
         lambda p, i, u: _scatter_update_ref(p, i, u),
         (U(-2, 2, 4, 3), Fixed([[2], [0], [2]], dtype=I32), U(-2, 2, 3, 3)),
         ("tensor_scatter_nd_update",), ("tensor_scatter_nd_update", "gather_nd_rows"),
         dtypes=(F32, F64, I32))
    case("tensor_scatter_nd_update-k2", flow.tensor_scatter_nd_update,
         lambda p, i, u: _scatter_update_ref(p, i, u),
         (U(-2, 2, 3, 4), Fixed([[1, 2], [0, 0]], dtype=I64), U(-2, 2, 2)),
         ("tensor_scatter_nd_update",), ("tensor_scatter_nd_update", "gather_nd_rows"))

    # -- segment sums ---------------------------------------------------------------------
    for name, fn in [("unsorted_segment_sum", flow.unsorted_segment_sum),
                     ("math.unsorted_segment_sum", flow.math.unsorted_segment_sum)]:
        case(f"{name}-axis0-dropped-id", lambda d, i, _f=fn: _f(d, i, 3),
             lambda d, i: _segment_sum_ref(d, i, 3),
             (U(-2, 2, 4, 3), Fixed([1, 0, 1, 3], dtype=I32)), ("unsorted_segment_sum",),
             ("gather",), dtypes=(F32, F64, I32))
    case("unsorted_segment_sum-axis1-2d-ids",
         lambda d, i: flow.unsorted_segment_sum(d, i, 4, axis=1),
         lambda d, i: _segment_sum_ref(d, i, 4, axis=1),
         (U(-2, 2, 2, 2, 3, 2), Fixed([[0, 2, 2], [1, 0, 2]], dtype=I64)),
         ("unsorted_segment_sum",), ("gather",))
    for name, fn in [("unsorted_segment_sum_like", flow.unsorted_segment_sum_like),
                     ("math.unsorted_segment_sum_like", flow.math.unsorted_segment_sum_like)]:
        case(name, lambda d, i, like, _f=fn: _f(d, i, like, axis=1),
             lambda d, i, like: _segment_sum_ref(d, i, like.shape[1], axis=1),
             (U(-2, 2, 2, 5), Fixed([2, 0, 2, 1, 0], dtype=I32), U(-2, 2, 2, 3)),
             ("unsorted_segment_sum",), ("gather",), wrt=(0,))
    for name, fn in [("unsorted_batch_segment_sum", flow.unsorted_batch_segment_sum),
                     ("math.unsorted_batch_segment_sum", flow.math.unsorted_batch_segment_sum)]:
        case(name, lambda d, i, _f=fn: _f(d, i, 3),
             lambda d, i: _batch_segment_sum_ref(d, i, 3),
             (U(-2, 2, 2, 4, 2), Fixed([[0, 1, 0, 2], [2, 2, 5, -1]], dtype=I32)),
             ("unsorted_segment_sum",), ("gather",))

    # -- slices ---------------------------------------------------------------------------
    case("slice_v2-steps", lambda x: flow.slice_v2(x, [(1, None, 2), (4, 0, -2)]),
         lambda x: x[1::2, 4:0:-2], (U(-2, 2, 4, 5),), ("slice",), ("slice_grad",),
         dtypes=(F32, F64, I32))
    case("slice_v2-short-list", lambda x: flow.slice_v2(x, [(-2, None, None)]),
         lambda x: x[-2:], (U(-2, 2, 3, 2, 2),), ("slice",), ("slice_grad",))
    case("slice_update", lambda x, u: flow.slice_update(x, u, [(1, None, 2), (4, 0, -2)]),
         lambda x, u: _set(x, np.s_[1::2, 4:0:-2], u), (U(-2, 2, 4, 5), U(-2, 2, 2, 2)),
         ("slice_update",), ("slice_update", "slice"), dtypes=(F32, F64, I32))

    # -- data-dependent shapes: the job's result is cut to its valid part -----------------
    _sparse = Fixed([[0, 2, 0, 1], [3, 0, 0, 4], [0, 0, 0, 0]])
    case("argwhere", flow.argwhere, lambda x: np.argwhere(x).astype(np.int32), (_sparse,),
         ("argwhere",), dtypes=(F32, I32), out_dtype=np.int32, grad=False)
    case("argwhere-int64-none-found", lambda x: flow.argwhere(x, dtype=flow.int64),
         lambda x: np.argwhere(x).astype(np.int64), (Fixed([[0, 0], [0, 0]]),),
         ("argwhere",), dtypes=(F32,), out_dtype=np.int64, grad=False)
    case("where-condition-only-is-argwhere", flow.where,
         lambda x: np.argwhere(x).astype(np.int32), (_sparse,), ("argwhere",),
         dtypes=(I32,), out_dtype=np.int32, grad=False)
    case("nonzero", flow.nonzero, lambda x: np.array(np.nonzero(x), dtype=np.int32),
         (_sparse,), ("argwhere", "transpose"), dtypes=(F32, I32), out_dtype=np.int32,
         grad=False)
    case("cast_to_static_shape-argwhere", lambda x: flow.cast_to_static_shape(flow.argwhere(x)),
         lambda x: _pad_rows(np.argwhere(x), x.size).astype(np.int32), (_sparse,),
         ("argwhere",), dtypes=(F32,), out_dtype=np.int32, grad=False)
    case("sync_dynamic_resize", flow.sync_dynamic_resize, lambda x, n: x[:int(n[0])],
         (U(-2, 2, 4, 3), Fixed([2], dtype=I32)), ("identity",), dtypes=(F32, F64),
         grad=False)
    case("dynamic_reshape", lambda x: flow.dynamic_reshape(x, (-1, 6)),
         lambda x: x.reshape(-1, 6), (U(-2, 2, 2, 3, 2),), ("reshape",), ("reshape",))

    # -- math -----------------------------------------------------------------------------
    case("lgamma", flow.math.lgamma, _lgamma, (U(0.2, 8, 3, 4),), ("lgamma",), ("digamma",))
    case("lgamma-reflection-and-large", flow.math.lgamma, _lgamma,
         (Fixed([-3.7, -2.5, -1.3, -0.4, 0.3, 1.0, 2.0, 7.5, 30.0, 150.0]),), ("lgamma",),
         ("digamma",))
    case("lgamma-poles", flow.math.lgamma, lambda x: np.full(x.shape, np.inf),
         (Fixed([0.0, -1.0, -4.0]),), ("lgamma",), grad=False)
    for name, fn, ref in [("two_stage_reduce_max", flow.math.two_stage_reduce_max, np.max),
                          ("two_stage_reduce_min", flow.math.two_stage_reduce_min, np.min)]:
        op = name.replace("two_stage_", "")
        case(f"{name}-axis1", lambda x, _f=fn: _f(x, axis=1, keepdims=True),
             lambda x, _r=ref: _r(x, axis=1, keepdims=True), (Distinct(2, 3, 4),), (op,),
             dtypes=(F32, F64, I32))
    case("reduced_shape_elem_cnt-axes",
         lambda x: flow.math.reduced_shape_elem_cnt(x, axis=[0, -1]),
         lambda x: np.array([x.shape[0] * x.shape[-1]], np.int32), (U(-1, 1, 3, 4, 5),), (),
         out_dtype=np.int32, grad=False)
    case("reduced_shape_elem_cnt-all-int64",
         lambda x: flow.math.reduced_shape_elem_cnt(x, dtype=flow.int64),
         lambda x: np.array([x.size], np.int64), (U(-1, 1, 3, 4),), (), out_dtype=np.int64,
         grad=False)
    for name, fn in [("broadcast_to_compatible_with", flow.broadcast_to_compatible_with),
                     ("math.broadcast_to_compatible_with",
                      flow.math.broadcast_to_compatible_with)]:
        case(name, lambda x, a, b, _f=fn: _f(x, [a, b]),
             lambda x, a, b: np.broadcast_to(x, (4, 2, 3)),
             (U(-2, 2, 4, 1, 1), U(-2, 2, 1, 2, 1), U(-2, 2, 3)), ("broadcast_to",),
             ("sum_to_shape",), wrt=(0,))
    _bad = Fixed([[1.0, np.nan, np.inf], [-np.inf, 0.0, 2.0]])
    case("count_not_finite", flow.count_not_finite,
         lambda x: np.array([np.sum(~np.isfinite(x))], np.int64), (_bad,),
         ("count_not_finite",), out_dtype=np.int64, grad=False)
    case("multi_count_not_finite", lambda a, b: flow.multi_count_not_finite([a, b]),
         lambda a, b: np.array([np.sum(~np.isfinite(a)) + np.sum(~np.isfinite(b))], np.int64),
         (_bad, Fixed([np.nan, 1.0, np.nan])), ("count_not_finite",), out_dtype=np.int64,
         grad=False)
    case("in_top_k-top-level", lambda t, p: flow.in_top_k(t, p, 2),
         lambda t, p: ((p > p[np.arange(len(t)), t][:, None]).sum(1) < 2).astype(np.int8),
         (Fixed([1, 3, 0], dtype=np.int32), Distinct(3, 4)), ("take_along_axis",),
         dtypes=(F32,), out_dtype=np.int8, grad=False)
    case("linalg.matmul", lambda a, b: flow.linalg.matmul(a, b, transpose_b=True),
         lambda a, b: a @ b.T, (U(-2, 2, 3, 4), U(-2, 2, 2, 4)), ("matmul",), ("matmul",),
         tol32=dict(rtol=1e-5, atol=1e-5))

    # -- combined_margin_loss ---------------------------------------------------------------
    for m1, m2, m3 in [(1.0, 0.5, 0.0), (1.35, 0.25, 0.15), (1.0, 0.0, 0.35)]:
        case(f"combined_margin_loss-{m1}-{m2}-{m3}",
             lambda x, lab, _m=(m1, m2, m3): flow.combined_margin_loss(x, lab, *_m),
             lambda x, lab, _m=(m1, m2, m3): _margin_ref(x, lab, *_m),
             (U(-0.9, 0.9, 3, 4), Fixed([2, 0, 3], dtype=I32)), ("combined_margin_loss",),
             ("combined_margin_loss_grad",))
    case("combined_margin_loss-label-outside", lambda x, lab: flow.combined_margin_loss(
        x, lab, 1.0, 0.5, 0.0), lambda x, lab: _margin_ref(x, lab, 1.0, 0.5, 0.0),
         (U(-0.9, 0.9, 3, 4), Fixed([-1, 1, 4], dtype=I64)), ("combined_margin_loss",),
         ("combined_margin_loss_grad",))

    # -- quantization (forward; the straight-through gradient has its own test) -------------
    q = flow.quantization
    for bit, scheme, formula, per_layer in [(8, "symmetric", "google", True),
                                            (4, "affine", "google", True),
                                            (8, "symmetric", "google", False),
                                            (6, "affine", "google", False),
                                            (8, "symmetric", "cambricon", True)]:
        tag = f"{bit}bit-{scheme}-{formula}-{'layer' if per_layer else 'channel'}"
        attrs = dict(quantization_bit=bit, quantization_scheme=scheme,
                     quantization_formula=formula)

        def observed(x, _a=attrs, _p=per_layer):
            return q.min_max_observer(x, per_layer_quantization=_p, **_a)

        case(f"min_max_observer-scale-{tag}", lambda x, _o=observed: _o(x)[0],
             lambda x, _a=(bit, scheme, formula, per_layer): _observe(x, *_a)[0],
             (U(-1.5, 1.2, 3, 4),), ("min_max_observer",), grad=False)
        case(f"min_max_observer-zero_point-{tag}", lambda x, _o=observed: _o(x)[1],
             lambda x, _a=(bit, scheme, formula, per_layer): _observe(x, *_a)[1],
             (U(-1.5, 1.2, 3, 4),), ("min_max_observer",), grad=False)
        case(f"fake_quantization-{tag}",
             lambda x, _o=observed, _a=attrs: q.fake_quantization(x, *_o(x), **_a),
             lambda x, _a=(bit, scheme, formula, per_layer): _fake_quant_ref(x, *_a),
             (U(-1.5, 1.2, 3, 4),), ("min_max_observer", "fake_quantization"), grad=False)

    # -- identities of OneFlow's placement and AMP machinery; micro-batch repeat / acc -------
    case("amp_white_identity", flow.amp_white_identity, lambda x: x, (U(-2, 2, 2, 3),),
         ("identity",), dtypes=(F32, F64, I32))
    case("parallel_cast", lambda x: flow.parallel_cast(x, distribute=None), lambda x: x,
         (U(-2, 2, 2, 3),), ("identity",))
    case("repeat-acc", lambda x: flow.acc(flow.repeat(x, 3) * x, 3), lambda x: 3 * x * x,
         (U(-2, 2, 2, 3),), ("identity", "multiply"), dtypes=(F32, F64, I32))


def _set(x, index, value):
    out = np.array(x, copy=True)
    out[index] = value
    return out


def _pad_rows(rows, count):
    out = np.full((count, rows.shape[1]), -1, rows.dtype)
    out[:len(rows)] = rows
    return out
