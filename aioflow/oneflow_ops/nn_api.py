"""``flow.nn``'s functions: activations, softmax and the losses built on it, bias_add,
dropout, normalization with given statistics (``moments``, ``batch_normalization``,
``layer_norm``) and ``tril``. The convolutions and pooling are in :mod:`.nn_conv2d` (1-d
and 2-d) and :mod:`.nn_conv` (3-d, transposed); InstanceNorm and GroupNorm, which own
variables, in :mod:`.nn_norm`; the loss functions with PyTorch's names in
:mod:`.loss_functions`.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def act(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
...     return flow.nn.relu6(flow.nn.leaky_relu(x, alpha=0.5))
>>> act(np.array([-2, 1, 5, 9], np.float32)).tolist()
[0.0, 1.0, 5.0, 6.0]
"""
from __future__ import annotations

import numpy as np

from ..ir import Blob, current_graph
from ..ops import elementwise as _ew
from ..ops import indexing as _idx
from ..ops import nn as _nn
from ..ops.registry import normalize_axis
from . import math_api as math
from .dynamic_api import where
from .ops_api import cast, expand_dims, reshape

__all__ = ["relu", "sigmoid", "tanh", "gelu", "leaky_relu", "softmax", "log_softmax",
           "sparse_softmax_cross_entropy_with_logits",
           "softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
           "bias_add", "dropout", "l2_loss", "elu", "relu6", "hardtanh", "hardsigmoid",
           "hardswish", "swish", "mish", "logsoftmax", "moments", "batch_normalization",
           "layer_norm", "sparse_cross_entropy", "tril", "fused_scale_tril",
           "softmax_grad"]


def relu(x, name=None):
    """``max(x, 0)``."""
    return _ew.relu(x, name=name)


def sigmoid(x, name=None):
    return _ew.sigmoid(x, name=name)


def tanh(x, name=None):
    return _ew.tanh(x, name=name)


def gelu(x, name=None):
    """Gaussian error linear unit (tanh approximation)."""
    inner = (x + 0.044715 * x * x * x) * 0.7978845608028654
    return math.multiply(x * 0.5, math.tanh(inner) + 1.0, name=name)


def leaky_relu(x, alpha=0.2, name=None):
    """``x`` where ``x > 0``, else ``alpha * x``, for any ``alpha`` (OneFlow's kernel);
    not ``max(x, alpha * x)``, which differs once ``alpha > 1``. The gradient is 1 where
    ``x > 0``, else ``alpha``."""
    return where(math.greater(x, 0.0), x, x * alpha, name=name)


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

    Active in train jobs only: in predict jobs it returns ``x`` unchanged. With a ``seed``,
    on the CPU, the masks are OneFlow's CPU kernel's: the op's own ``std::mt19937(seed)``
    stream of float32 draws, an element kept where its draw exceeds ``rate``.
    """
    if not isinstance(x, Blob):
        raise TypeError(f"dropout: x must be a Blob, got {type(x).__name__}")
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate!r}")
    if current_graph().job_type != "train" or rate == 0.0:
        return x
    graph = current_graph()
    name = name or graph.unique_name("dropout")
    y, _mask = _nn.dropout_op(x, rate=float(rate),
                              noise_shape=None if noise_shape is None else tuple(noise_shape),
                              seed=seed, key=f"{graph.name}/{name}", name=name)
    return y



def l2_loss(t, name=None):
    """``sum(t ** 2) / 2``."""
    return math.multiply(math.reduce_sum(math.square(t)), 0.5, name=name)



# -- OneFlow v0.3.4's further nn functions (issue 18) ---------------------------------------
# Activations are compositions of primitive ops, so their gradients come from the parts.
# Branches that would overflow where not selected (exp of a large x) are clipped first:
# the suite treats numpy's overflow warnings as errors, and a device would produce inf.


def elu(x, alpha=1.0, name=None):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    negative_part = math.multiply(math.expm1(math.minimum(x, 0.0)), alpha)
    return where(math.greater(x, 0.0), x, negative_part, name=name)


def relu6(x, name=None):
    """``min(max(x, 0), 6)``."""
    return math.minimum(math.maximum(x, 0.0), 6.0, name=name)


def hardtanh(x, min_val=-1.0, max_val=1.0, name=None):
    """``x`` clipped to ``[min_val, max_val]``."""
    if min_val >= max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must be below max_val ({max_val})")
    return math.minimum(math.maximum(x, float(min_val)), float(max_val), name=name)


def hardsigmoid(x, name=None):
    """``relu6(x + 3) / 6``."""
    return math.divide(relu6(math.add(x, 3.0)), 6.0, name=name)


def hardswish(x, name=None):
    """``x * relu6(x + 3) / 6``."""
    return math.multiply(x, hardsigmoid(x), name=name)


def swish(x, beta=1.0, name=None):
    """``x * sigmoid(beta * x)``."""
    return math.multiply(x, math.sigmoid(x if beta == 1.0 else math.multiply(x, beta)), name=name)


def mish(x, name=None):
    """``x * tanh(softplus(x))``."""
    return math.multiply(x, math.tanh(math.softplus(x)), name=name)


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
    mean = math.reduce_mean(x, axis=axes, keepdims=True)
    variance = math.reduce_mean(math.square(math.subtract(x, mean)), axis=axes, keepdims=keepdims)
    if not keepdims:
        mean = math.reduce_mean(x, axis=axes, keepdims=False)
    return mean, variance


def _param_view(blob, x, axis, op_name, arg):
    """A 1-d parameter of x's ``axis`` size (or one of x's rank) shaped to broadcast."""
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
    axis = normalize_axis("batch_normalization", axis, x.ndim)
    mean = _param_view(mean, x, axis, "batch_normalization", "mean")
    variance = _param_view(variance, x, axis, "batch_normalization", "variance")
    out = math.multiply(math.subtract(x, mean),
                        math.rsqrt(math.add(variance, float(variance_epsilon))))
    if scale is not None:
        out = math.multiply(out, _param_view(scale, x, axis, "batch_normalization", "scale"))
    if offset is not None:
        out = math.add(out, _param_view(offset, x, axis, "batch_normalization", "offset"))
    return out if name is None else _ew.identity(out, name=name)


def layer_norm(inputs, gamma=None, beta=None, begin_norm_axis=1, begin_params_axis=-1,
               epsilon=1e-5, name=None):
    """Normalize over the axes from ``begin_norm_axis`` on (mean 0, variance 1), then
    scale by ``gamma`` and shift by ``beta`` (shaped ``inputs.shape[begin_params_axis:]``)."""
    begin = normalize_axis("layer_norm", begin_norm_axis, inputs.ndim)
    axes = list(range(begin, inputs.ndim))
    mean, variance = moments(inputs, axes, keepdims=True)
    out = math.multiply(math.subtract(inputs, mean), math.rsqrt(math.add(variance, float(epsilon))))
    params = inputs.shape[normalize_axis("layer_norm", begin_params_axis, inputs.ndim):]
    view = (1,) * (inputs.ndim - len(params)) + tuple(params)
    for blob, arg, combine in ((gamma, "gamma", math.multiply), (beta, "beta", math.add)):
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
    if labels.ndim == prediction.ndim and labels.shape[-1] == 1:
        labels = reshape(labels, labels.shape[:-1])
    if labels.shape != prediction.shape[:-1]:
        raise ValueError(f"sparse_cross_entropy: labels shape must be {prediction.shape[:-1]}"
                         f" (prediction's without its last axis), got {labels.shape}")
    picked = _idx.take_along_axis_op(prediction, expand_dims(cast(labels, "int64"), -1),
                                     axis=prediction.ndim - 1)
    return math.negative(math.log(reshape(picked, labels.shape)), name=name)


def tril(x, diagonal=0, name=None):
    """Zero the elements above the ``diagonal``-th diagonal (``flow.math.tril``)."""
    return math.tril(x, diagonal=diagonal, name=name)


def fused_scale_tril(x, diagonal=0, fill_value=0, scale=1, name=None):
    """``tril(x * scale)``, ``fill_value`` above the diagonal (``flow.math`` has it too)."""
    return math.fused_scale_tril(x, diagonal=diagonal, fill_value=fill_value, scale=scale,
                                    name=name)
