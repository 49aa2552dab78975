"""Rows of the op test matrix for issue 18's convolution, pooling, normalization and
resampling names (3-d convolution and pooling, transposed convolutions, upsampling,
instance/group norms, pixel shuffles, paddings, and the exported gradient ops).

Every reference is plain numpy written position by position (windows, scatters,
per-pixel interpolation), independent of the kernels under test.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import aioflow as flow

F32, F64 = np.float32, np.float64

_erf = np.vectorize(math.erf, otypes=[np.float64])


def same_pads(size, k, s, d=1, lower=True):
    """OneFlow's "SAME" (SAME_LOWER: an odd extra pad before) or SAME_UPPER."""
    total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
    small, large = total // 2, total - total // 2
    return (large, small) if lower else (small, large)


def conv_ref(x, w, strides, pads, dilations=None, groups=1):
    """N-d channels-first cross-correlation, one output position at a time."""
    spatial = x.ndim - 2
    dilations = dilations or (1,) * spatial
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ksize = w.shape[2:]
    out = [(size - (k - 1) * d - 1) // s + 1 for size, k, s, d in
           zip(x.shape[2:], ksize, strides, dilations)]
    y = np.zeros((n, o, *out))
    og = o // groups
    for pos in np.ndindex(*out):
        window = tuple(slice(p * s, p * s + (k - 1) * d + 1, d) for p, k, s, d in
                       zip(pos, ksize, strides, dilations))
        patch = x[(slice(None), slice(None)) + window]
        for g in range(groups):
            y[(slice(None), slice(g * og, (g + 1) * og)) + pos] = np.einsum(
                "nck,ock->no", patch[:, g * cg:(g + 1) * cg].reshape(n, cg, -1),
                w[g * og:(g + 1) * og].reshape(og, cg, -1))
    return y


def pool_ref(x, ksize, strides, pads, kind):
    """Windows over NaN padding: nanmax / nanmean ignore the padding."""
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pads), constant_values=np.nan)
    out = [(size - k) // s + 1 for size, k, s in zip(x.shape[2:], ksize, strides)]
    y = np.zeros(x.shape[:2] + tuple(out))
    reduce = np.nanmax if kind == "max" else np.nanmean
    for pos in np.ndindex(*out):
        window = tuple(slice(p * s, p * s + k) for p, k, s in zip(pos, ksize, strides))
        patch = x[(slice(None), slice(None)) + window].reshape(x.shape[:2] + (-1,))
        y[(slice(None), slice(None)) + pos] = reduce(patch, axis=-1)
    return y


def deconv_ref(x, w, strides, before, out_hw, dilations=(1, 1)):
    """Scatter every input element times the filters, then keep ``out_hw`` positions from
    ``before`` on (zeros past the end)."""
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    full = np.zeros((n, o, (h - 1) * sh + (kh - 1) * dh + 1, (wd - 1) * sw + (kw - 1) * dw + 1))
    for i, j, a, b in itertools.product(range(h), range(wd), range(kh), range(kw)):
        full[:, :, i * sh + a * dh, j * sw + b * dw] += x[:, :, i, j] @ w[:, :, a, b]
    out = np.zeros((n, o, *out_hw))
    keep = [min(t, f - b) for t, f, b in zip(out_hw, full.shape[2:], before)]
    out[:, :, :keep[0], :keep[1]] = full[:, :, before[0]:before[0] + keep[0],
                                         before[1]:before[1] + keep[1]]
    return out


def upsample_ref(x, scales, interpolation):
    n, c, h, w = x.shape
    sh, sw = scales
    if interpolation == "nearest":
        return x.repeat(sh, axis=2).repeat(sw, axis=3)
    y = np.zeros((n, c, h * sh, w * sw))

    def taps(i, scale, size):
        p = max((i + 0.5) / scale - 0.5, 0.0)
        lo = int(np.floor(p))
        return lo, min(lo + 1, size - 1), p - lo
    for i, j in itertools.product(range(h * sh), range(w * sw)):
        r0, r1, fr = taps(i, sh, h)
        c0, c1, fc = taps(j, sw, w)
        y[:, :, i, j] = ((1 - fr) * ((1 - fc) * x[:, :, r0, c0] + fc * x[:, :, r0, c1])
                         + fr * ((1 - fc) * x[:, :, r1, c0] + fc * x[:, :, r1, c1]))
    return y


def instance_norm_ref(x, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)


def pixel_shuffle_ref(x, fh, fw):
    n, c, h, w = x.shape
    y = np.zeros((n, c // (fh * fw), h * fh, w * fw))
    for ch, i, j in itertools.product(range(c), range(h), range(w)):
        out_c, rest = divmod(ch, fh * fw)
        a, b = divmod(rest, fw)
        y[:, out_c, i * fh + a, j * fw + b] = x[:, ch, i, j]
    return y


def layer_norm_grad_ref(dy, x, mean, inv, begin):
    rows = x.shape[:begin] + (1,) * (x.ndim - begin)
    mean, inv = mean.reshape(rows), inv.reshape(rows)
    axes = tuple(range(begin, x.ndim))
    x_hat = (x - mean) * inv
    return inv * (dy - dy.mean(axes, keepdims=True)
                  - x_hat * (dy * x_hat).mean(axes, keepdims=True))


def _channels_last(a):
    return np.moveaxis(a, 1, -1)


def _channels_first(a):
    return np.moveaxis(a, -1, 1)


def add_conv_cases(case, U, Away, Distinct, Ints, Fixed, Simplex):  # noqa: C901 - one table
    conv_grads = ("conv3d_backward_data", "conv3d_backward_filter")
    tol = dict(rtol=1e-5, atol=1e-5)
    # -- conv3d ------------------------------------------------------------------------
    case("nn.conv3d-same-lower-strided",
         lambda x, w: flow.nn.conv3d(x, w, strides=(1, 2, 1), padding="SAME"),
         lambda x, w: conv_ref(x, w, (1, 2, 1), [same_pads(3, 2, 1), same_pads(4, 3, 2),
                                                 same_pads(3, 2, 1)]),
         (U(-1, 1, 1, 2, 3, 4, 3), U(-1, 1, 3, 2, 2, 3, 2)), ("conv3d",), conv_grads,
         tol32=tol)
    case("nn.conv3d-groups-dilated-explicit",
         lambda x, w: flow.nn.conv3d(x, w, 1, [[0, 0], [0, 0], [1, 0], [0, 1], [1, 1]],
                                     dilations=(2, 1, 1), groups=2),
         lambda x, w: conv_ref(x, w, (1, 1, 1), [(1, 0), (0, 1), (1, 1)], (2, 1, 1), 2),
         (U(-1, 1, 1, 4, 4, 3, 2), U(-1, 1, 2, 2, 2, 2, 2)), ("conv3d",), conv_grads,
         tol32=tol)
    case("nn.conv3d-NDHWC",
         lambda x, w: flow.nn.conv3d(x, w, 1, "VALID", data_format="NDHWC"),
         lambda x, w: _channels_last(conv_ref(_channels_first(x), _channels_first(w),
                                              (1, 1, 1), [(0, 0)] * 3)),
         (U(-1, 1, 1, 3, 3, 2, 2), U(-1, 1, 2, 2, 2, 1, 2)), ("conv3d", "transpose"),
         conv_grads, tol32=tol)
    # -- 3-d pooling ---------------------------------------------------------------------
    for kind, fn in (("max", flow.nn.max_pool3d), ("avg", flow.nn.avg_pool3d)):
        data = Distinct if kind == "max" else (lambda *s: U(-2, 2, *s))
        ops, grads = (f"{kind}_pool3d",), (f"{kind}_pool3d_grad",)
        case(f"nn.{kind}_pool3d-2-stride2-valid",
             lambda x, _f=fn: _f(x, 2, 2, "VALID"),
             lambda x, _k=kind: pool_ref(x, (2,) * 3, (2,) * 3, [(0, 0)] * 3, _k),
             (data(1, 2, 4, 4, 5),), ops, grads)
        case(f"nn.{kind}_pool3d-3-stride2-same",
             lambda x, _f=fn: _f(x, 3, [2, 2, 1], "SAME"),
             lambda x, _k=kind: pool_ref(x, (3,) * 3, (2, 2, 1),
                                         [same_pads(3, 3, 2), same_pads(4, 3, 2),
                                          same_pads(3, 3, 1)], _k),
             (data(1, 2, 3, 4, 3),), ops, grads)
        case(f"nn.{kind}_pool3d-NDHWC-ceil",
             lambda x, _f=fn: _f(x, 2, 2, "VALID", data_format="NDHWC", ceil_mode=True),
             lambda x, _k=kind: _channels_last(pool_ref(
                 _channels_first(x), (2,) * 3, (2,) * 3, [(0, 1), (0, 1), (0, 0)], _k)),
             (data(1, 3, 3, 4, 2),), ops + ("transpose",), grads)
    case("nn.avg_pool3d-explicit-pads", lambda x: flow.nn.avg_pool3d(x, 2, 1, [1, 0, [0, 1]]),
         lambda x: pool_ref(x, (2,) * 3, (1,) * 3, [(1, 1), (0, 0), (0, 1)], "avg"),
         (U(-2, 2, 1, 1, 2, 3, 2),), ("avg_pool3d",), ("avg_pool3d_grad",))
    # -- transposed and TF-compatible 2-d convolutions ---------------------------------
    deconv_grads = ("conv2d", "conv2d_backward_filter")
    case("nn.conv2d_transpose-valid-extra-row",
         lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(2, 2, 7, 6), strides=2),
         lambda x, w: deconv_ref(x, w, (2, 2), (0, 0), (7, 6)),
         (U(-1, 1, 2, 3, 3, 3), U(-1, 1, 3, 2, 2, 1)), ("conv2d_transpose",),
         deconv_grads, tol32=tol)
    case("nn.conv2d_transpose-same-dilated",
         lambda x, w: flow.nn.conv2d_transpose(filters=w, input=x, output_shape=(1, 2, 5, 3),
                                               strides=[2, 1], padding="SAME",
                                               dilations=[1, 2]),
         lambda x, w: deconv_ref(x, w, (2, 1), (1, 2), (5, 3), (1, 2)),
         (U(-1, 1, 1, 2, 3, 3), U(-1, 1, 2, 2, 3, 3)), ("conv2d_transpose", "slice"),
         deconv_grads, tol32=tol)
    case("nn.conv2d_transpose-NHWC-same-odd",
         lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(1, 5, 4, 2), strides=2,
                                               padding="SAME", data_format="NHWC"),
         lambda x, w: _channels_last(deconv_ref(_channels_first(x), _channels_first(w),
                                                (2, 2), (0, 0), (5, 4))),
         (U(-1, 1, 1, 3, 2, 2), U(-1, 1, 2, 2, 2, 2)), ("conv2d_transpose", "transpose"),
         deconv_grads, tol32=tol)
    case("nn.torch_conv2d_transpose",
         lambda x, w: flow.nn.torch_conv2d_transpose(x, w, output_padding=(1, 0),
                                                     strides=2, padding_needed=(2, 2)),
         lambda x, w: deconv_ref(x, w, (2, 2), (1, 1), (2 * 2 + 3 - 2 + 1, 3 * 2 + 3 - 2)),
         (U(-1, 1, 1, 2, 3, 4), U(-1, 1, 2, 3, 3, 3)), ("conv2d_transpose", "slice"),
         deconv_grads, tol32=tol)
    case("nn.compat_conv2d-same-upper",
         lambda x, w: flow.nn.compat_conv2d(x, w, 2, "SAME"),
         lambda x, w: conv_ref(x, w, (2, 2), [same_pads(6, 2, 2, lower=False),
                                              same_pads(5, 3, 2, lower=False)]),
         (U(-1, 1, 1, 2, 6, 5), U(-1, 1, 2, 2, 2, 3)), ("conv2d",),
         ("conv2d_backward_data", "conv2d_backward_filter"), tol32=tol)
    # -- upsampling, shuffles, paddings ------------------------------------------------
    for interp in ("nearest", "bilinear"):
        case(f"layers.upsample_2d-{interp}",
             lambda x, _i=interp: flow.layers.upsample_2d(x, (2, 3), interpolation=_i),
             lambda x, _i=interp: upsample_ref(x, (2, 3), _i), (U(-2, 2, 2, 2, 3, 2),),
             ("matmul",), ("matmul",))
        case(f"layers.upsample_2d-{interp}-NHWC",
             lambda x, _i=interp: flow.layers.upsample_2d(x, 3, "NHWC", interpolation=_i),
             lambda x, _i=interp: _channels_last(upsample_ref(_channels_first(x), (3, 3),
                                                              _i)),
             (U(-2, 2, 1, 2, 3, 2),), ("matmul", "transpose"))
    case("nn.PixelShuffle", lambda x: flow.nn.PixelShuffle(x, 2),
         lambda x: pixel_shuffle_ref(x, 2, 2), (U(-2, 2, 2, 8, 2, 3),), ("transpose",))
    case("nn.PixelShufflev2", lambda x: flow.nn.PixelShufflev2(x, 3, 2),
         lambda x: pixel_shuffle_ref(x, 3, 2), (U(-2, 2, 1, 12, 2, 2),), ("transpose",))
    # OneFlow v0.3.4 pads H by entry 2 and W by entry 3, each on both sides
    case("reflection_pad2d", lambda x: flow.reflection_pad2d(x, [2, 1, 1, 2]),
         lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)), mode="reflect"),
         (U(-2, 2, 1, 2, 4, 3),), ("gather",), ("gather_grad",))
    case("reflection_pad2d-int", lambda x: flow.reflection_pad2d(x, 1),
         lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect"),
         (U(-2, 2, 2, 1, 2, 3),), ("gather",))
    case("same_padding-lower-NCHW",
         lambda x: flow.same_padding(x, "SAME_LOWER", "NCHW", [3, 2], [2, 1], [1, 2]),
         lambda x: np.pad(x, [(0, 0), (0, 0), same_pads(4, 3, 2), same_pads(3, 2, 1, 2)]),
         (U(-2, 2, 1, 2, 4, 3),), ("pad",), ("slice",))
    case("same_padding-upper-NHWC",
         lambda x: flow.same_padding(x, "same_upper", "NHWC", [2, 2], [1, 1], [1, 1]),
         lambda x: np.pad(x, [(0, 0), same_pads(3, 2, 1, lower=False),
                              same_pads(2, 2, 1, lower=False), (0, 0)]),
         (U(-2, 2, 1, 3, 2, 2),), ("pad",))
    case("pad_grad", lambda x: flow.pad_grad(x, [(0, 0), (1, 2), (0, 1)]),
         lambda x: x[:, 1:-2, :-1], (U(-2, 2, 2, 5, 3),), ("slice",))
    # -- normalizations ----------------------------------------------------------------
    for name, fn, shape in (("InstanceNorm1d", flow.nn.InstanceNorm1d, (2, 3, 4)),
                            ("InstanceNorm2d", flow.nn.InstanceNorm2d, (2, 2, 3, 2)),
                            ("InstanceNorm3d", flow.nn.InstanceNorm3d, (1, 2, 2, 2, 2))):
        case(f"nn.{name}", lambda x, _f=fn: _f(x, eps=1e-3, affine=False),
             lambda x: instance_norm_ref(x, 1e-3), (U(-2, 2, *shape),), ("reduce_mean",))
    case("nn.GroupNorm", lambda x: flow.nn.GroupNorm(x, num_groups=2, affine=False),
         lambda x: instance_norm_ref(x.reshape(2, 2, -1)).reshape(x.shape),
         (U(-2, 2, 2, 4, 3),), ("reduce_mean",))
    # -- exported gradient ops ---------------------------------------------------------
    case("layers.layer_norm_grad",
         lambda dy, x, m, v: flow.layers.layer_norm_grad(dy, x, m, v, begin_norm_axis=1),
         lambda dy, x, m, v: layer_norm_grad_ref(dy, x, m, v, 1),
         (U(-1, 1, 2, 3, 2), U(-2, 2, 2, 3, 2), U(-0.5, 0.5, 2), U(0.5, 2, 2)),
         ("reduce_mean",))
    for i, part in enumerate(("normalized_diff", "beta_diff", "gamma_diff")):
        case(f"layers.layer_norm_param_grad-{part}",
             lambda dy, nrm, g, _i=i: flow.layers.layer_norm_param_grad(dy, nrm, g, -1)[_i],
             lambda dy, nrm, g, _i=i: (dy * g, dy.sum((0, 1)), (dy * nrm).sum((0, 1)))[_i],
             (U(-1, 1, 2, 3, 4), U(-2, 2, 2, 3, 4), U(0.5, 1.5, 4)),
             ("multiply",) if i != 1 else ("reduce_sum",))
    case("math.gelu_grad", flow.math.gelu_grad,
         lambda x, dy: dy * (0.5 * (1 + _erf(x / np.sqrt(2)))
                             + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)),
         (U(-3, 3, 2, 4), U(-1, 1, 2, 4)), ("erf", "exp"))
    case("math.sigmoid_grad", flow.math.sigmoid_grad, lambda y, dy: dy * y * (1 - y),
         (U(0.05, 0.95, 2, 3), U(-1, 1, 2, 3)), ("multiply",))
