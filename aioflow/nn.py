"""``flow.nn``: activations, softmax and losses, pooling, dropout, bias_add.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def probs(x: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
...     return flow.nn.softmax(x)
>>> np.round(probs(np.log(np.array([[1, 1, 2]], np.float32))), 3).tolist()
[[0.25, 0.25, 0.5]]
"""
from __future__ import annotations

from .ir import Blob, current_graph
from .kernels.conv import same_padding
from .ops import conv as _conv
from .ops import elementwise as _ew
from .ops import nn as _nn
from .ops.registry import normalize_axis

__all__ = [
    "relu",
    "sigmoid",
    "tanh",
    "gelu",
    "leaky_relu",
    "softmax",
    "log_softmax",
    "sparse_softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits",
    "sigmoid_cross_entropy_with_logits",
    "bias_add",
    "dropout",
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    "l2_loss",
]


def relu(x, name=None):
    """``max(x, 0)``."""
    return _ew.relu(x, name=name)


def sigmoid(x, name=None):
    return _ew.sigmoid(x, name=name)


def tanh(x, name=None):
    return _ew.tanh(x, name=name)


def gelu(x, name=None):
    """Gaussian error linear unit (tanh approximation)."""
    from . import math
    inner = (x + 0.044715 * x * x * x) * 0.7978845608028654
    return math.multiply(x * 0.5, math.tanh(inner) + 1.0, name=name)


def leaky_relu(x, alpha=0.2, name=None):
    """``x`` where ``x > 0``, else ``alpha * x``, for any ``alpha`` (OneFlow's kernel);
    not ``max(x, alpha * x)``, which differs once ``alpha > 1``. The gradient is 1 where
    ``x > 0``, else ``alpha``."""
    from . import math
    return math._where(math.greater(x, 0.0), x, x * alpha, name=name)


def softmax(logits, axis=None, name=None):
    """Softmax along ``axis`` (the last one by default)."""
    axis = -1 if axis is None else axis
    return _nn.softmax_op(logits, axis=normalize_axis("softmax", axis, logits.ndim), name=name)


def log_softmax(logits, axis=None, name=None):
    axis = -1 if axis is None else axis
    return _nn.log_softmax_op(logits, axis=normalize_axis("log_softmax", axis, logits.ndim),
                              name=name)


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-sample cross entropy of ``softmax(logits)`` against integer class ``labels``.

    ``labels`` has the logits' shape without its last axis (a trailing axis of size 1 is
    also accepted); returns the per-sample losses.
    """
    if labels.ndim == logits.ndim and labels.shape[-1] == 1:
        from .oneflow_ops.ops_api import reshape
        labels = reshape(labels, labels.shape[:-1])
    loss, _prob = _nn.sparse_softmax_ce(labels, logits, name=name)
    return loss


def softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-sample cross entropy against a distribution ``labels`` of the logits' shape."""
    loss, _prob = _nn.softmax_ce(labels, logits, name=name)
    return loss


def sigmoid_cross_entropy_with_logits(labels, logits, name=None):
    """Elementwise ``max(x, 0) - x * z + log(1 + exp(-|x|))`` (numerically stable).

    As OneFlow's op: ``labels`` must have the shape of ``logits`` and may be of any
    numeric type (Wide&Deep feeds int32 click labels); they are read in the logits' type,
    and the loss has the logits' shape and type."""
    from . import math
    from .oneflow_ops.ops_api import cast
    for arg, blob in (("labels", labels), ("logits", logits)):
        if not isinstance(blob, Blob):
            raise TypeError(f"sigmoid_cross_entropy_with_logits: {arg} must be a Blob, got "
                            f"{type(blob).__name__}")
    if labels.shape != logits.shape:
        raise ValueError(f"sigmoid_cross_entropy_with_logits: labels must have the shape of "
                         f"logits {logits.shape}, got {labels.shape}")
    if labels.dtype is not logits.dtype:
        labels = cast(labels, logits.dtype)
    return math.subtract(math.relu(logits) - logits * labels,
                         -math.log1p(math.exp(-math.abs(logits))), name=name)


def bias_add(value, bias, data_format=None, name=None):
    """Add a 1-d ``bias`` along the channel axis (1 for "NC..."/None, last for "N...C")."""
    if data_format is None or data_format.upper().startswith("NC") or value.ndim <= 2:
        axis = 1 if value.ndim >= 2 else 0
    elif data_format.upper() in ("NHWC", "NWC", "NDHWC", "CHANNELS_LAST"):
        axis = value.ndim - 1
    else:
        raise ValueError(f"bias_add: data_format must be None, 'NCHW' or 'NHWC', got "
                         f"{data_format!r}")
    return _nn.bias_add_op(value, bias, axis=axis, name=name)


def dropout(x, rate, noise_shape=None, seed=None, name=None):
    """Zero elements with probability ``rate`` and scale the rest by ``1/(1-rate)``.

    Active in train jobs only: in predict jobs it returns ``x`` unchanged.
    """
    if not isinstance(x, Blob):
        raise TypeError(f"dropout: x must be a Blob, got {type(x).__name__}")
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate!r}")
    if current_graph().job_type != "train" or rate == 0.0:
        return x
    y, _mask = _nn.dropout_op(x, rate=float(rate),
                              noise_shape=None if noise_shape is None else tuple(noise_shape),
                              seed=seed, name=name)
    return y


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
    from .oneflow_ops.ops_api import transpose
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


def l2_loss(t, name=None):
    """``sum(t ** 2) / 2``."""
    from . import math
    return math.multiply(math.reduce_sum(math.square(t)), 0.5, name=name)


# -- OneFlow v0.3.4's further nn functions (issue 18) ---------------------------------------
# Activations are compositions of primitive ops, so their gradients come from the parts.
# Branches that would overflow where not selected (exp of a large x) are clipped first:
# the suite treats numpy's overflow warnings as errors, and a device would produce inf.

__all__ += ["elu", "relu6", "hardtanh", "hardsigmoid", "hardswish", "swish", "mish",
            "logsoftmax", "moments", "batch_normalization", "layer_norm",
            "sparse_cross_entropy", "tril", "fused_scale_tril", "conv1d", "max_pool1d",
            "avg_pool1d", "softmax_grad"]


def _math():
    from . import math
    return math


def elu(x, alpha=1.0, name=None):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    m = _math()
    negative_part = m.multiply(m.expm1(m.minimum(x, 0.0)), alpha)
    return m._where(m.greater(x, 0.0), x, negative_part, name=name)


def relu6(x, name=None):
    """``min(max(x, 0), 6)``."""
    m = _math()
    return m.minimum(m.maximum(x, 0.0), 6.0, name=name)


def hardtanh(x, min_val=-1.0, max_val=1.0, name=None):
    """``x`` clipped to ``[min_val, max_val]``."""
    if min_val >= max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must be below max_val ({max_val})")
    m = _math()
    return m.minimum(m.maximum(x, float(min_val)), float(max_val), name=name)


def hardsigmoid(x, name=None):
    """``relu6(x + 3) / 6``."""
    m = _math()
    return m.divide(relu6(m.add(x, 3.0)), 6.0, name=name)


def hardswish(x, name=None):
    """``x * relu6(x + 3) / 6``."""
    m = _math()
    return m.multiply(x, hardsigmoid(x), name=name)


def swish(x, beta=1.0, name=None):
    """``x * sigmoid(beta * x)``."""
    m = _math()
    return m.multiply(x, m.sigmoid(x if beta == 1.0 else m.multiply(x, beta)), name=name)


def mish(x, name=None):
    """``x * tanh(softplus(x))``."""
    m = _math()
    return m.multiply(x, m.tanh(m.softplus(x)), name=name)


def logsoftmax(logits, axis=None, name=None):
    """Another name of :func:`log_softmax` (OneFlow exports both)."""
    return log_softmax(logits, axis=axis, name=name)


def softmax_grad(y, dy, axis=None, name=None):
    """The gradient of ``softmax`` given its output ``y`` and the output gradient ``dy``:
    ``y * (dy - sum(dy * y, axis))``."""
    axis = -1 if axis is None else axis
    return _nn.softmax_grad(y, dy, axis=normalize_axis("softmax_grad", axis, y.ndim),
                            name=name)


def moments(x, axes, keepdims=False, name=None):
    """``(mean, variance)`` of ``x`` over ``axes`` (the biased variance)."""
    m = _math()
    mean = m.reduce_mean(x, axis=axes, keepdims=True)
    variance = m.reduce_mean(m.square(m.subtract(x, mean)), axis=axes, keepdims=keepdims)
    if not keepdims:
        mean = m.reduce_mean(x, axis=axes, keepdims=False)
    return mean, variance


def _param_view(blob, x, axis, op_name, arg):
    """A 1-d parameter of x's ``axis`` size (or one of x's rank) shaped to broadcast."""
    from .oneflow_ops.ops_api import reshape
    if blob.ndim == x.ndim:
        return blob
    if blob.ndim != 1 or blob.shape[0] != x.shape[axis]:
        raise ValueError(f"{op_name}: {arg} must be 1-d of size {x.shape[axis]} (x's axis "
                         f"{axis}) or have x's rank, got shape {blob.shape}")
    view = [1] * x.ndim
    view[axis] = x.shape[axis]
    return reshape(blob, view)


def batch_normalization(x, mean, variance, offset=None, scale=None, variance_epsilon=1e-5,
                        axis=1, name=None):
    """``(x - mean) / sqrt(variance + variance_epsilon) * scale + offset`` with given
    statistics: 1-d parameters along ``axis`` (1 for NCHW) or of ``x``'s rank."""
    m = _math()
    axis = normalize_axis("batch_normalization", axis, x.ndim)
    mean = _param_view(mean, x, axis, "batch_normalization", "mean")
    variance = _param_view(variance, x, axis, "batch_normalization", "variance")
    out = m.multiply(m.subtract(x, mean), m.rsqrt(m.add(variance, float(variance_epsilon))))
    if scale is not None:
        out = m.multiply(out, _param_view(scale, x, axis, "batch_normalization", "scale"))
    if offset is not None:
        out = m.add(out, _param_view(offset, x, axis, "batch_normalization", "offset"))
    return out if name is None else _ew.identity(out, name=name)


def layer_norm(inputs, gamma=None, beta=None, begin_norm_axis=1, begin_params_axis=-1,
               epsilon=1e-5, name=None):
    """Normalize over the axes from ``begin_norm_axis`` on (mean 0, variance 1), then
    scale by ``gamma`` and shift by ``beta`` (shaped ``inputs.shape[begin_params_axis:]``)."""
    from .oneflow_ops.ops_api import reshape
    m = _math()
    begin = normalize_axis("layer_norm", begin_norm_axis, inputs.ndim)
    axes = list(range(begin, inputs.ndim))
    mean, variance = moments(inputs, axes, keepdims=True)
    out = m.multiply(m.subtract(inputs, mean), m.rsqrt(m.add(variance, float(epsilon))))
    params = inputs.shape[normalize_axis("layer_norm", begin_params_axis, inputs.ndim):]
    view = (1,) * (inputs.ndim - len(params)) + tuple(params)
    for blob, arg, combine in ((gamma, "gamma", m.multiply), (beta, "beta", m.add)):
        if blob is None:
            continue
        if int(np.prod(blob.shape)) != int(np.prod(params)):
            raise ValueError(f"layer_norm: {arg} must have shape {tuple(params)} "
                             f"(inputs.shape[begin_params_axis:]), got {blob.shape}")
        out = combine(out, reshape(blob, view))
    return out if name is None else _ew.identity(out, name=name)


def sparse_cross_entropy(labels, prediction, name=None):
    """``-log(prediction[label])`` per sample, for probabilities ``prediction`` (not
    logits) and integer ``labels`` of its shape without the last axis."""
    from .ops import indexing as _idx
    from .oneflow_ops.ops_api import cast, expand_dims, reshape
    m = _math()
    if labels.ndim == prediction.ndim and labels.shape[-1] == 1:
        labels = reshape(labels, labels.shape[:-1])
    if labels.shape != prediction.shape[:-1]:
        raise ValueError(f"sparse_cross_entropy: labels shape must be {prediction.shape[:-1]}"
                         f" (prediction's without its last axis), got {labels.shape}")
    picked = _idx.take_along_axis_op(prediction, expand_dims(cast(labels, "int64"), -1),
                                     axis=prediction.ndim - 1)
    return m.negative(m.log(reshape(picked, labels.shape)), name=name)


def tril(x, diagonal=0, name=None):
    """Zero the elements above the ``diagonal``-th diagonal (``flow.math.tril``)."""
    return _math().tril(x, diagonal=diagonal, name=name)


def fused_scale_tril(x, diagonal=0, fill_value=0, scale=1, name=None):
    """``tril(x * scale)``, ``fill_value`` above the diagonal (``flow.math`` has it too)."""
    return _math().fused_scale_tril(x, diagonal=diagonal, fill_value=fill_value, scale=scale,
                                    name=name)


# -- 1-d convolution and pooling, as their 2-d forms with a height of 1 ---------------------


def _to_ncw(x, data_format, op_name):
    from .oneflow_ops.ops_api import transpose
    fmt = data_format.upper()
    if x.ndim != 3:
        raise ValueError(f"{op_name}: input must be 3-d ({data_format}), got shape {x.shape}")
    if fmt == "NCW":
        return x
    if fmt == "NWC":
        return transpose(x, perm=(0, 2, 1))
    raise ValueError(f"{op_name}: data_format must be 'NCW' or 'NWC', got {data_format!r}")


def _from_nc1w(y, data_format):
    from .oneflow_ops.ops_api import reshape, transpose
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
    """1-d convolution of ``input`` (NCW) with OIW ``filters``."""
    from .oneflow_ops.ops_api import reshape
    x = _to_ncw(input, data_format, "conv1d")
    if filters.ndim != 3:
        raise ValueError(f"conv1d: filters must be 3-d OIW, got shape {filters.shape}")
    x4 = reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
    w4 = reshape(filters, (filters.shape[0], filters.shape[1], 1, filters.shape[2]))
    y = conv2d(x4, w4, strides=(1, _single(strides, "strides", "conv1d")),
               padding=_padding_1d(padding, "conv1d"),
               dilations=(1, _single(dilations, "dilations", "conv1d")), groups=groups,
               name=name)
    return _from_nc1w(y, data_format)


def _pool1d(pool, op_name, input, ksize, strides, padding, data_format, name):
    from .oneflow_ops.ops_api import reshape
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


import numpy as np  # noqa: E402

from .oneflow_ops.loss_functions import (  # noqa: E402,F401
    BCELoss, BCEWithLogitsLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, TripletMarginLoss)

__all__ += ["MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss",
            "MarginRankingLoss", "TripletMarginLoss"]

from .oneflow_ops.nn_conv import (  # noqa: E402,F401
    PixelShuffle, PixelShufflev2, avg_pool3d, compat_conv2d, conv2d_transpose, conv3d, max_pool3d,
    random_mask_like, torch_conv2d_transpose)
from .oneflow_ops.nn_norm import (  # noqa: E402,F401
    GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d)

__all__ += ["conv3d", "max_pool3d", "avg_pool3d", "conv2d_transpose", "torch_conv2d_transpose",
            "compat_conv2d", "PixelShuffle", "PixelShufflev2", "random_mask_like", "GroupNorm",
            "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
