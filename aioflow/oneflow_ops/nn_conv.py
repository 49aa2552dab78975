"""``flow.nn``'s 3-d convolution and pooling, transposed and TF-compatible 2-d convolutions,
and pixel shuffles, with OneFlow v0.3.4's signatures.

Padding follows OneFlow: ``"VALID"``; ``"SAME"``, which for these ops is OneFlow's
``"SAME_LOWER"`` (an odd total pad puts the extra element *before*); ``"SAME_UPPER"``
(extra after, as TensorFlow); or explicit ``(before, after)`` pairs (or ints), one per
axis of the data format (``[[0, 0], [0, 0], [d0, d1], [h0, h1], [w0, w1]]`` for NCDHW) or
one per spatial axis.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def up(x: tp.Numpy.Placeholder((1, 4, 1, 1))) -> tp.Numpy:
...     return flow.nn.PixelShuffle(x, upscale_factor=2)
>>> up(np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1)).tolist()
[[[[0.0, 1.0], [2.0, 3.0]]]]
"""
from __future__ import annotations

from .._core import dtypes
from .._core.warn import warn_once
from ..ir import Blob
from ..kernels.conv import same_padding as _same_pads
from ..ops import conv3d as _conv3d
from ..ops import deconv as _deconv_ops
from ..ops import random_ops as _random
from .array_ops import broadcast_like, pad
from .nn_conv2d import conv2d
from .ops_api import constant, reshape, transpose
from .ops_api import slice as slice_

__all__ = ["conv3d", "max_pool3d", "avg_pool3d", "conv2d_transpose", "torch_conv2d_transpose",
           "compat_conv2d", "PixelShuffle", "PixelShufflev2", "random_mask_like"]


def _require_blob(value, op_name, arg):
    if not isinstance(value, Blob):
        raise TypeError(f"{op_name}: {arg} must be a Blob, got {type(value).__name__}")


def _ints(value, n, arg, op_name):
    """An int, or a sequence of 1 or ``n`` ints, as a tuple of ``n`` ints."""
    if value is None:
        value = 1
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    try:
        values = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"{op_name}: {arg} must be an int or a list of ints, got "
                         f"{value!r}") from None
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"{op_name}: {arg} must have 1 or {n} entries, got {value!r}")
    return values


def _channels_last(data_format, first, last, op_name):
    fmt = str(data_format).upper()
    if fmt not in (first, last):
        raise ValueError(f"{op_name}: data_format must be {first!r} or {last!r}, got "
                         f"{data_format!r}")
    return fmt == last


def spatial_pads(padding, spatial, ksize, strides, dilations, channels_last, op_name):
    """OneFlow's padding argument -> one ``(before, after)`` pair per spatial axis."""
    n = len(spatial)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return ((0, 0),) * n
        if mode in ("SAME", "SAME_LOWER", "SAME_UPPER"):
            pads = [_same_pads(i, k, s, d) for i, k, s, d in
                    zip(spatial, ksize, strides, dilations)]
            return tuple(p if mode == "SAME_UPPER" else p[::-1] for p in pads)
        raise ValueError(f"{op_name}: padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', "
                         f"'VALID' or explicit pads, got {padding!r}")
    entries = list(padding)
    if len(entries) == n + 2:
        entries = entries[1:-1] if channels_last else entries[2:]
    if len(entries) != n:
        raise ValueError(f"{op_name}: explicit padding must give {n} or {n + 2} entries, "
                         f"got {padding!r}")
    pads = tuple((p, p) if isinstance(p, int) else (int(p[0]), int(p[1])) for p in entries)
    if any(min(p) < 0 for p in pads):
        raise ValueError(f"{op_name}: explicit padding must be non-negative, got {padding!r}")
    return pads


def _to_channels_first(x):
    return transpose(x, perm=[0, x.ndim - 1] + list(range(1, x.ndim - 1)))


def _to_channels_last(x, name=None):
    return transpose(x, perm=[0] + list(range(2, x.ndim)) + [1], name=name)


def conv3d(input, filters, strides, padding, data_format="NCDHW", dilations=None,  # noqa: A002
           groups=1, name=None):
    """3-d convolution of ``input`` (NCDHW, or NDHWC) with ``filters`` (out, in/groups,
    kd, kh, kw; for NDHWC out, kd, kh, kw, in)."""
    _require_blob(input, "conv3d", "input")
    _require_blob(filters, "conv3d", "filters")
    last = _channels_last(data_format, "NCDHW", "NDHWC", "conv3d")
    if input.ndim != 5 or filters.ndim != 5:
        raise ValueError(f"conv3d: input and filters must be 5-d, got shapes {input.shape} "
                         f"and {filters.shape}")
    if last and groups != 1:
        raise ValueError(f"conv3d: data_format NDHWC does not support groups > 1 (as "
                         f"OneFlow), got groups={groups}")
    x, w = (_to_channels_first(input), _to_channels_first(filters)) if last else \
        (input, filters)
    strides = _ints(strides, 3, "strides", "conv3d")
    dilations = _ints(dilations, 3, "dilations", "conv3d")
    pads = spatial_pads(padding, x.shape[2:], w.shape[2:], strides, dilations, last,
                        "conv3d")
    y = _conv3d.conv3d_op(x, w, strides=strides, pads=pads, dilations=dilations,
                          groups=int(groups), name=name)
    return _to_channels_last(y) if last else y


def _pool3d(op, op_name, input, ksize, strides, padding, data_format, ceil_mode, name):
    _require_blob(input, op_name, "input")
    last = _channels_last(data_format, "NCDHW", "NDHWC", op_name)
    if input.ndim != 5:
        raise ValueError(f"{op_name}: input must be 5-d, got shape {input.shape}")
    x = _to_channels_first(input) if last else input
    ksize = _ints(ksize, 3, "ksize", op_name)
    strides = _ints(strides, 3, "strides", op_name)
    pads = spatial_pads(padding, x.shape[2:], ksize, strides, (1, 1, 1), last, op_name)
    if ceil_mode:
        pads = tuple(_ceil_pads(n, k, s, p) for n, k, s, p in
                     zip(x.shape[2:], ksize, strides, pads))
    y = op(x, ksize=ksize, strides=strides, pads=pads, name=name)
    y = y[0] if isinstance(y, tuple) else y
    return _to_channels_last(y) if last else y


def _ceil_pads(size, k, s, pads):
    """Extra padding after, so that a floor-mode window count equals the ceil-mode one
    (a last window must still start inside the input or its leading padding)."""
    before, after = pads
    span = size + before + after - k
    out = -(-span // s) + 1
    if (out - 1) * s >= size + before:
        out -= 1
    return before, after + max(0, (out - 1) * s + k - (size + before + after))


def max_pool3d(input, ksize, strides, padding, data_format="NCDHW", ceil_mode=False,  # noqa: A002
               name=None):
    """3-d max pooling (NCDHW or NDHWC)."""
    return _pool3d(_conv3d.max_pool3d_op, "max_pool3d", input, ksize, strides, padding,
                   data_format, ceil_mode, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NCDHW", ceil_mode=False,  # noqa: A002
               name=None):
    """3-d average pooling (NCDHW or NDHWC); padded positions are not counted."""
    return _pool3d(_conv3d.avg_pool3d_op, "avg_pool3d", input, ksize, strides, padding,
                   data_format, ceil_mode, name)


# -- transposed convolution -------------------------------------------------------------------


def _one_of(a, b, names, op_name):
    if (a is None) == (b is None):
        raise ValueError(f"{op_name}: give exactly one of {names[0]!r} and {names[1]!r}")
    return a if a is not None else b


def _deconv_operands(value, input, filter, filters, data_format, dilations, op_name):  # noqa: A002
    x = _one_of(value, input, ("value", "input"), op_name)
    w = _one_of(filter, filters, ("filter", "filters"), op_name)
    _require_blob(x, op_name, "input")
    _require_blob(w, op_name, "filters")
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op_name}: input and filters must be 4-d, got shapes {x.shape} "
                         f"and {w.shape}")
    last = _channels_last(data_format, "NCHW", "NHWC", op_name)
    dilations = _ints(dilations, 2, "dilations", op_name)
    if last:
        if dilations != (1, 1):
            raise ValueError(f"{op_name}: dilations must be 1 with data_format NHWC (as "
                             f"OneFlow), got {dilations}")
        x, w = _to_channels_first(x), _to_channels_first(w)
    return x, w, last, dilations


def _transposed_conv(x, w, strides, dilations, before, out_hw, last, name):
    """``out[..., h, w] = full[..., h + before_h, w + before_w]``, zeros past the end of
    the full transposed convolution."""
    full = _deconv_ops.conv2d_transpose_op(x, w, strides=strides, dilations=dilations,
                                       name=None if name is None else f"{name}-full")
    sizes = full.shape[2:]
    keep = [min(o, f - b) for o, f, b in zip(out_hw, sizes, before)]
    if min(keep) <= 0:
        raise ValueError(f"conv2d_transpose: the output {tuple(out_hw)} starts past the end "
                         f"of the transposed convolution {tuple(sizes)}")
    y = full
    if any(before) or list(keep) != list(sizes):
        y = slice_(full, [0, 0, *before], [-1, -1, *keep])
    extra = [o - k for o, k in zip(out_hw, keep)]
    if any(extra):
        y = pad(y, [(0, 0), (0, 0), (0, extra[0]), (0, extra[1])])
    return _to_channels_last(y) if last else y


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None,  # noqa: A002
                     padding="VALID", data_format="NCHW", name=None, input=None,
                     filters=None, dilations=None):
    """2-d transposed convolution ("deconvolution"), the input gradient of a convolution.

    ``filters`` has shape (in_channels, out_channels, kh, kw) (NHWC: in, kh, kw, out);
    ``output_shape`` is the full 4-d output shape. ``padding`` "VALID" or "SAME" must be
    consistent with it, as OneFlow checks: a convolution with these ``strides`` and
    padding maps ``output_shape`` back to the input's shape.
    """
    op_name = "conv2d_transpose"
    x, w, last, dilations = _deconv_operands(value, input, filter, filters, data_format,
                                             dilations, op_name)
    strides = _ints(strides, 2, "strides", op_name)
    if output_shape is None or len(output_shape) != 4:
        raise ValueError(f"{op_name}: output_shape must give 4 sizes, got {output_shape!r}")
    out = [int(v) for v in output_shape]
    out_hw, out_c = (out[1:3], out[3]) if last else (out[2:], out[1])
    if out[0] != x.shape[0]:
        raise ValueError(f"{op_name}: output_shape {tuple(out)} must keep the batch "
                         f"{x.shape[0]}")
    if out_c != w.shape[1]:
        # OneFlow's kernel takes the channels from the filters and read only the spatial
        # sizes of output_shape (v0.2/v0.3.0; v0.3.4 began to assert): DCGAN scripts of
        # that era pass the input's channels there. Said once, not refused.
        warn_once("conv2d_transpose-channels", f"{op_name}: output_shape {tuple(out)} has "
                  f"{out_c} channels, the filters make {w.shape[1]}; the output has "
                  f"{w.shape[1]} (OneFlow's kernel reads only output_shape's spatial sizes)")
    mode = str(padding).upper()
    if mode not in ("VALID", "SAME"):
        raise ValueError(f"{op_name}: padding must be 'SAME' or 'VALID', got {padding!r}")
    before = []
    for i, (o, n, k, s, d) in enumerate(zip(out_hw, x.shape[2:], w.shape[2:], strides,
                                            dilations)):
        span = (k - 1) * d + 1
        fits = (o + s - span) // s == n if mode == "VALID" else (o + s - 1) // s == n
        if not fits:
            raise ValueError(f"{op_name}: output size {o} on spatial axis {i} does not "
                             f"map back to the input's {n} with stride {s}, kernel {k} and "
                             f"padding {mode}")
        before.append(max(0, (n - 1) * s + span - o) // 2 if mode == "SAME" else 0)
    return _transposed_conv(x, w, strides, dilations, before, out_hw, last, name)


def torch_conv2d_transpose(value=None, filter=None, output_padding=None, strides=None,  # noqa: A002
                           padding_needed=None, data_format="NCHW", name=None, input=None,
                           filters=None, dilations=None):
    """PyTorch's ``conv_transpose2d`` in OneFlow's terms: ``padding_needed`` gives the
    total (even) padding per spatial axis, ``padding_needed / 2`` cropped from each side,
    and ``output_padding`` adds rows/columns at the end: out = (in - 1) * stride - 2 *
    (padding_needed / 2) + (k - 1) * dilation + 1 + output_padding."""
    op_name = "torch_conv2d_transpose"
    x, w, last, dilations = _deconv_operands(value, input, filter, filters, data_format,
                                             dilations, op_name)
    strides = _ints(strides, 2, "strides", op_name)
    if padding_needed is None or len(padding_needed) != 2:
        raise ValueError(f"{op_name}: padding_needed must give 2 sizes, got "
                         f"{padding_needed!r}")
    if any(int(p) % 2 or int(p) < 0 for p in padding_needed):
        raise ValueError(f"{op_name}: padding_needed must be even and non-negative, got "
                         f"{padding_needed!r}")
    extra = _ints(0 if output_padding is None else output_padding, 2, "output_padding",
                  op_name)
    before = [int(p) // 2 for p in padding_needed]
    out_hw = [_deconv_ops.full_size(n, k, s, d) - 2 * b + e for n, k, s, d, b, e in
              zip(x.shape[2:], w.shape[2:], strides, dilations, before, extra)]
    return _transposed_conv(x, w, strides, dilations, before, out_hw, last, name)


def compat_conv2d(input, filters, strides, padding,  # noqa: A002 - OneFlow's names
                  data_format="NCHW", dilations=None, groups=1, name=None):
    """``flow.nn.conv2d`` with TensorFlow's "SAME": an odd total padding puts the extra
    element after (OneFlow's ``"SAME_UPPER"``)."""
    if isinstance(padding, str) and padding.upper() == "SAME":
        padding = "SAME_UPPER"
    return conv2d(input, filters, strides=strides, padding=padding, data_format=data_format,
                  dilations=1 if dilations is None else dilations, groups=groups, name=name)


# -- pixel shuffle and random masks ---------------------------------------------------------


def PixelShufflev2(input, h_upscale_factor, w_upscale_factor, name=None):  # noqa: N802,A002
    """(N, C * h * w, H, W) -> (N, C, H * h, W * w): channel ``c * h * w + i * w + j``
    moves to position ``(H * h + i, W * w + j)`` of output channel ``c``."""
    _require_blob(input, "PixelShufflev2", "input")
    fh, fw = int(h_upscale_factor), int(w_upscale_factor)
    if fh <= 0 or fw <= 0:
        raise ValueError(f"PixelShufflev2: the upscale factors must be positive, got "
                         f"{h_upscale_factor!r} and {w_upscale_factor!r}")
    if input.ndim != 4:
        raise ValueError(f"PixelShufflev2: input must be 4-d NCHW, got shape {input.shape}")
    n, c, h, w = input.shape
    if c % (fh * fw):
        raise ValueError(f"PixelShufflev2: input channels {c} must divide by "
                         f"h_upscale_factor * w_upscale_factor = {fh * fw}")
    out = reshape(input, (n, c // (fh * fw), fh, fw, h, w))
    out = transpose(out, perm=[0, 1, 4, 2, 5, 3])
    return reshape(out, (n, c // (fh * fw), h * fh, w * fw), name=name)


def PixelShuffle(input, upscale_factor, name=None):  # noqa: N802,A002
    """(N, C * r * r, H, W) -> (N, C, H * r, W * r), the sub-pixel convolution's shuffle."""
    return PixelShufflev2(input, upscale_factor, upscale_factor, name=name)


def random_mask_like(like, rate, seed=None, noise_shape=None, name=None):
    """An int8 mask of ``like``'s shape: 1 (keep) with probability ``1 - rate``, else 0;
    a fresh draw every step (the same sequence for a given ``seed``). With
    ``noise_shape`` (which OneFlow v0.3.4 refused), the draws of that shape are broadcast
    to ``like``'s."""
    _require_blob(like, "random_mask_like", "like")
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"random_mask_like: rate must be in [0, 1), got {rate!r}")
    shape = like.shape if noise_shape is None else tuple(int(d) for d in noise_shape)
    keep = constant(1.0 - float(rate), dtype=dtypes.float32, shape=shape)
    mask = _random.bernoulli_op(keep, seed=seed, dtype=dtypes.int8,
                                name=None if noise_shape is not None else name)
    return mask if noise_shape is None else broadcast_like(mask, like, name=name)
