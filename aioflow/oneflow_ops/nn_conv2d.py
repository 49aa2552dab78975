"""``flow.nn``'s 2-d convolution and pooling (NCHW or NHWC), and their 1-d forms, which run
as 2-d ones with a height of 1. Padding is "VALID", "SAME" (OneFlow's "SAME_LOWER": an
odd total pad puts the extra element before), "SAME_UPPER" or explicit pads.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def pool(x: tp.Numpy.Placeholder((1, 1, 2, 4))) -> tp.Numpy:
...     return flow.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID")
>>> pool(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)).tolist()
[[[[5.0, 7.0]]]]
"""
from __future__ import annotations

from ..kernels.conv import same_padding
from ..ops import conv as _conv
from .ops_api import reshape, transpose

__all__ = ["conv2d", "max_pool2d", "avg_pool2d", "conv1d", "max_pool1d", "avg_pool1d"]


# -- convolution and pooling geometry ------------------------------------------------------


def _pair(value, arg, op_name):
    if isinstance(value, int):
        return (value, value)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * 2
    if len(value) != 2:
        raise ValueError(f"{op_name}: {arg} must be an int or a pair, got {value}")
    return value


def resolve_padding(padding, in_hw, kernel_hw, strides, dilations, op_name):
    """"SAME"/"VALID"/explicit padding -> ((top, bottom), (left, right))."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return ((0, 0), (0, 0))
        if mode == "SAME_UPPER":
            return tuple(same_padding(i, k, s, d) for i, k, s, d in
                         zip(in_hw, kernel_hw, strides, dilations))
        if mode in ("SAME", "SAME_LOWER"):   # OneFlow: "SAME" is "SAME_LOWER"
            return tuple(tuple(reversed(same_padding(i, k, s, d))) for i, k, s, d in
                         zip(in_hw, kernel_hw, strides, dilations))
        raise ValueError(f"{op_name}: padding must be 'SAME', 'VALID' or explicit pads, got "
                         f"{padding!r}")
    pads = list(padding)
    if len(pads) == 4:  # [[0, 0], [0, 0], [top, bottom], [left, right]] (NCHW)
        pads = pads[2:]
    if len(pads) != 2:
        raise ValueError(f"{op_name}: explicit padding must give (top, bottom) and (left, "
                         f"right), got {padding!r}")
    return tuple((p, p) if isinstance(p, int) else (int(p[0]), int(p[1])) for p in pads)


def _is_nhwc(data_format, op_name) -> bool:
    """True for "NHWC" (channels last), False for "NCHW"; ValueError for anything else."""
    fmt = str(data_format).upper()
    if fmt in ("NCHW", "CHANNELS_FIRST"):
        return False
    if fmt in ("NHWC", "CHANNELS_LAST"):
        return True
    raise ValueError(f"{op_name}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")


# NHWC runs as NCHW between two transposes (the kernels are NCHW's); explicit 4-entry
# padding given in NHWC's axis order is put in NCHW's.
_NHWC_TO_NCHW, _NCHW_TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


def _nchw_padding(padding, nhwc: bool):
    if nhwc and not isinstance(padding, str) and len(padding) == 4:
        return [padding[i] for i in _NHWC_TO_NCHW]
    return padding


def _transposed(blob, perm, name=None):
    return transpose(blob, perm=list(perm), name=name)


def conv2d(input, filters, strides=1, padding="VALID", data_format="NCHW", dilations=1,
           groups=1, name=None):  # noqa: A002 - OneFlow's name
    """2-d convolution of NCHW ``input`` with OIHW ``filters``; with ``data_format="NHWC"``
    of NHWC ``input`` with OHWI ``filters`` (out, kh, kw, in/groups), as OneFlow's."""
    nhwc = _is_nhwc(data_format, "conv2d")
    if input.ndim != 4 or filters.ndim != 4:
        raise ValueError(f"conv2d: input and filters must be 4-d, got shapes {input.shape} "
                         f"and {filters.shape}")
    if nhwc:
        input, filters = _transposed(input, _NHWC_TO_NCHW), _transposed(filters, _NHWC_TO_NCHW)
    strides = _pair(strides, "strides", "conv2d")
    dilations = _pair(dilations, "dilations", "conv2d")
    pads = resolve_padding(_nchw_padding(padding, nhwc), input.shape[2:], filters.shape[2:],
                           strides, dilations, "conv2d")
    out = _conv.conv2d_op(input, filters, strides=strides, pads=pads, dilations=dilations,
                          groups=int(groups), name=None if nhwc else name)
    return _transposed(out, _NCHW_TO_NHWC, name) if nhwc else out


def _pool_geometry(input, ksize, strides, padding, nhwc, op_name):
    if input.ndim != 4:
        raise ValueError(f"{op_name}: input must be 4-d, got shape {input.shape}")
    ksize = _pair(ksize, "ksize", op_name)
    strides = _pair(strides, "strides", op_name)
    spatial = input.shape[1:3] if nhwc else input.shape[2:]
    pads = resolve_padding(_nchw_padding(padding, nhwc), spatial, ksize, strides, (1, 1),
                           op_name)
    return dict(ksize=ksize, strides=strides, pads=pads)


def _pool2d(pool, input, ksize, strides, padding, data_format, name, op_name):
    """``pool(nchw_input, **geometry)`` (its first output), in ``data_format``."""
    nhwc = _is_nhwc(data_format, op_name)
    geometry = _pool_geometry(input, ksize, strides, padding, nhwc, op_name)
    x = _transposed(input, _NHWC_TO_NCHW) if nhwc else input
    y = pool(x, name=None if nhwc else name, **geometry)
    y = y[0] if isinstance(y, (tuple, list)) else y
    return _transposed(y, _NCHW_TO_NHWC, name) if nhwc else y


def max_pool2d(input, ksize, strides, padding, data_format="NCHW", name=None):  # noqa: A002
    """Max pooling over ``ksize`` windows (NCHW, or NHWC)."""
    return _pool2d(_conv.max_pool2d_op, input, ksize, strides, padding, data_format, name,
                   "max_pool2d")


def avg_pool2d(input, ksize, strides, padding, data_format="NCHW", name=None):  # noqa: A002
    """Average pooling (NCHW, or NHWC); padded positions are not counted."""
    return _pool2d(_conv.avg_pool2d_op, input, ksize, strides, padding, data_format, name,
                   "avg_pool2d")


# -- 1-d convolution and pooling, as their 2-d forms with a height of 1 ---------------------


def _to_ncw(x, data_format, op_name):
    fmt = data_format.upper()
    if x.ndim != 3:
        raise ValueError(f"{op_name}: input must be 3-d ({data_format}), got shape {x.shape}")
    if fmt == "NCW":
        return x
    if fmt == "NWC":
        return transpose(x, perm=(0, 2, 1))
    raise ValueError(f"{op_name}: data_format must be 'NCW' or 'NWC', got {data_format!r}")


def _from_nc1w(y, data_format):
    y = reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
    return transpose(y, perm=(0, 2, 1)) if data_format.upper() == "NWC" else y


def _single(value, arg, op_name):
    if isinstance(value, int):
        return value
    value = tuple(int(v) for v in value)
    if len(value) != 1:
        raise ValueError(f"{op_name}: {arg} must be an int or a 1-element list, got {value}")
    return value[0]


def _padding_1d(padding, op_name):
    if isinstance(padding, str):
        return padding
    pads = list(padding)
    if len(pads) == 3:     # [[0, 0], [0, 0], [left, right]]
        pads = pads[2:]
    if len(pads) != 1:
        raise ValueError(f"{op_name}: explicit padding must give one (left, right) pair, "
                         f"got {padding!r}")
    return [(0, 0), pads[0]]


def conv1d(input, filters, strides=1, padding="VALID", data_format="NCW", dilations=1,
           groups=1, name=None):  # noqa: A002 - OneFlow's names
    """1-d convolution of NCW ``input`` with OIW ``filters``; with ``data_format="NWC"`` of
    NWC ``input`` with OWI ``filters`` (out, kw, in/groups), as OneFlow's."""
    x = _to_ncw(input, data_format, "conv1d")
    if filters.ndim != 3:
        raise ValueError(f"conv1d: filters must be 3-d (OIW, or OWI for NWC), got shape "
                         f"{filters.shape}")
    if data_format.upper() == "NWC":
        filters = transpose(filters, perm=(0, 2, 1))
    x4 = reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
    w4 = reshape(filters, (filters.shape[0], filters.shape[1], 1, filters.shape[2]))
    y = conv2d(x4, w4, strides=(1, _single(strides, "strides", "conv1d")),
               padding=_padding_1d(padding, "conv1d"),
               dilations=(1, _single(dilations, "dilations", "conv1d")), groups=groups,
               name=name)
    return _from_nc1w(y, data_format)


def _pool1d(pool, op_name, input, ksize, strides, padding, data_format, name):
    x = _to_ncw(input, data_format, op_name)
    x4 = reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
    y = pool(x4, (1, _single(ksize, "ksize", op_name)),
             (1, _single(strides, "strides", op_name)), _padding_1d(padding, op_name),
             name=name)
    return _from_nc1w(y, data_format)


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """1-d max pooling (OneFlow v0.3.4 declared it but raised NotImplementedError)."""
    return _pool1d(max_pool2d, "max_pool1d", input, ksize, strides, padding, data_format,
                   name)


def avg_pool1d(input, ksize, strides, padding, data_format="NCW", name=None):  # noqa: A002
    """1-d average pooling; padded positions are not counted."""
    return _pool1d(avg_pool2d, "avg_pool1d", input, ksize, strides, padding, data_format,
                   name)
