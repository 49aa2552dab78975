"""Resampling and padding: ``flow.layers.upsample_2d``, ``flow.reflection_pad2d``,
``flow.same_padding`` and ``flow.pad_grad``, composed from primitive ops (so their
gradients come from the parts).

Upsampling is two matrix products, ``A_h @ x @ A_w^T``, with constant interpolation
matrices built when the job is traced: each output row mixes at most two input rows. For
"nearest", output index ``i`` reads input ``min(floor(i / scale), in - 1)``; "bilinear"
samples at ``(i + 0.5) / scale - 0.5`` (clamped at 0) between its two neighbours, as
OneFlow's ``upsample`` kernel (PyTorch's ``align_corners=False``).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def up(x: tp.Numpy.Placeholder((1, 1, 1, 2))) -> tp.Numpy:
...     return flow.layers.upsample_2d(x, size=(1, 2), interpolation="bilinear")
>>> up(np.array([[[[0.0, 4.0]]]], np.float32)).tolist()
[[[[0.0, 1.0, 3.0, 4.0]]]]
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from ..ir import Blob
from ..kernels.conv import same_padding as _same_pads
from .array_ops import gather, pad
from .nn_conv import _to_channels_first, _to_channels_last
from .ops_api import constant, matmul
from .ops_api import slice as slice_

__all__ = ["upsample_2d", "reflection_pad2d", "same_padding", "pad_grad"]


def _require_blob(value, op_name, arg):
    if not isinstance(value, Blob):
        raise TypeError(f"{op_name}: {arg} must be a Blob, got {type(value).__name__}")


def interpolation_matrix(in_size: int, scale: int, interpolation: str) -> np.ndarray:
    """The (in_size * scale, in_size) matrix taking a row of samples to its upsampling."""
    out_size = in_size * scale
    matrix = np.zeros((out_size, in_size))
    rows = np.arange(out_size)
    if interpolation == "nearest":
        matrix[rows, np.minimum(rows // scale, in_size - 1)] = 1.0
        return matrix
    position = np.maximum((rows + 0.5) / scale - 0.5, 0.0)
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, in_size - 1)
    frac = position - low
    np.add.at(matrix, (rows, low), 1.0 - frac)
    np.add.at(matrix, (rows, high), frac)
    return matrix


def upsample_2d(x, size=(2, 2), data_format="NCHW", interpolation="nearest",
                name="Upsample2D"):
    """Upsample the spatial axes of 4-d ``x`` by the integer factors ``size`` =
    (height_scale, width_scale) with "nearest" or "bilinear" interpolation."""
    _require_blob(x, "upsample_2d", "x")
    scales = (size, size) if isinstance(size, int) else tuple(size)
    if len(scales) != 2 or any(not isinstance(s, int) or isinstance(s, bool) or s <= 0
                               for s in scales):
        raise ValueError(f"upsample_2d: size must be a positive int or a pair of them, got "
                         f"{size!r}")
    if interpolation not in ("nearest", "bilinear"):
        raise ValueError(f"upsample_2d: interpolation must be 'nearest' or 'bilinear', got "
                         f"{interpolation!r}")
    fmt = str(data_format).upper()
    if fmt not in ("NCHW", "NHWC") or x.ndim != 4:
        raise ValueError(f"upsample_2d: x must be 4-d with data_format 'NCHW' or 'NHWC', "
                         f"got shape {x.shape} and {data_format!r}")
    nchw = _to_channels_first(x) if fmt == "NHWC" else x
    h, w = nchw.shape[2:]
    rows = constant(interpolation_matrix(h, scales[0], interpolation), dtype=x.dtype)
    cols = constant(interpolation_matrix(w, scales[1], interpolation), dtype=x.dtype)
    # OneFlow names its one op ``name``; here the last of the parts is named so, when the
    # default name is not used (it would repeat for every unnamed call).
    last_name = None if name == "Upsample2D" else name
    y = matmul(matmul(rows, nchw), cols, transpose_b=True,
               name=None if fmt == "NHWC" else last_name)
    return _to_channels_last(y, name=last_name) if fmt == "NHWC" else y


def reflection_pad2d(x, padding, name=None):
    """Pad the H and W axes of NCHW ``x`` with their reflection (the edge not repeated).

    ``padding`` is an int ``p`` (H and W padded by ``p`` on both sides) or a list of four,
    read as OneFlow v0.3.4's op reads it: ``[a, b, c, d]`` pads H by ``c`` on both sides
    and W by ``d`` on both sides; ``a`` and ``b`` are only checked (below W), not used.
    (OneFlow documented ``[left, right, top, bottom]``, but its kernel and its own tests
    pad symmetrically from the last two entries.) Every padding must be below the size
    of the axis it pads."""
    _require_blob(x, "reflection_pad2d", "x")
    if x.ndim != 4:
        raise ValueError(f"reflection_pad2d: x must be 4-d NCHW, got shape {x.shape}")
    if isinstance(padding, int):
        padding = [padding] * 4
    if len(padding) != 4:
        raise ValueError(f"reflection_pad2d: padding must be an int or a list of four, "
                         f"got {padding!r}")
    unused_a, unused_b, pad_h, pad_w = (int(p) for p in padding)
    h, w = x.shape[2:]
    if (min(unused_a, unused_b, pad_h, pad_w) < 0 or max(unused_a, unused_b, pad_w) >= w
            or pad_h >= h):
        raise ValueError(f"reflection_pad2d: each padding must be non-negative and below "
                         f"the padded axis's size ({h}x{w}), got {padding!r}")
    left = right = pad_w
    top = bottom = pad_h
    out = x
    for axis, size, pads in ((3, w, (left, right)), (2, h, (top, bottom))):
        if any(pads):
            index = np.pad(np.arange(size), pads, mode="reflect").astype(np.int32)
            out = gather(out, constant(index, dtype=dtypes.int32), axis=axis)
    return out


def same_padding(x, padding, data_format, kernel_size, strides, dilation_rate, name=None):
    """Zero-pad the spatial axes of ``x`` as a "SAME" convolution with these
    ``kernel_size``/``strides``/``dilation_rate`` would, so its output keeps
    ``ceil(in / stride)`` positions; ``padding`` "SAME_LOWER" puts an odd extra element
    before, "SAME_UPPER" after."""
    _require_blob(x, "same_padding", "x")
    mode = str(padding).upper()
    if mode not in ("SAME_LOWER", "SAME_UPPER"):
        raise ValueError(f"same_padding: padding must be 'SAME_LOWER' or 'SAME_UPPER', got "
                         f"{padding!r}")
    spatial = x.ndim - 2
    args = {"kernel_size": kernel_size, "strides": strides, "dilation_rate": dilation_rate}
    for arg, value in args.items():
        if not isinstance(value, (list, tuple)) or len(value) != spatial:
            raise ValueError(f"same_padding: {arg} must be a list of {spatial} ints (one per "
                             f"spatial axis), got {value!r}")
    first = 2 if str(data_format).upper().startswith("NC") else 1
    pads = [(0, 0)] * x.ndim
    for i, (k, s, d) in enumerate(zip(kernel_size, strides, dilation_rate)):
        before, after = _same_pads(x.shape[first + i], int(k), int(s), int(d))
        pads[first + i] = (after, before) if mode == "SAME_LOWER" else (before, after)
    return pad(x, pads, name=name)


def pad_grad(x, paddings, constant_value=0, name=None):
    """The gradient of ``flow.pad``: ``x`` with ``paddings`` = ``(before, after)`` per
    axis cut away (``constant_value`` is accepted for OneFlow's signature; a gradient does
    not depend on it)."""
    _require_blob(x, "pad_grad", "x")
    pads = [tuple(int(v) for v in p) for p in paddings]
    if len(pads) != x.ndim or any(len(p) != 2 or min(p) < 0 for p in pads):
        raise ValueError(f"pad_grad: paddings must give a non-negative (before, after) pair "
                         f"for each of the {x.ndim} axes, got {paddings!r}")
    sizes = [n - b - a for n, (b, a) in zip(x.shape, pads)]
    if min(sizes) <= 0:
        raise ValueError(f"pad_grad: paddings {paddings!r} remove all of x's shape "
                         f"{x.shape}")
    return slice_(x, [b for b, _ in pads], sizes, name=name)
