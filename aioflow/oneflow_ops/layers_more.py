"""OneFlow v0.3.4's further ``flow.layers``: the 3-d convolution layer, the fused batch
norm variants, and layer norm's two gradient ops.

``batch_normalization_add_relu`` / ``batch_normalization_relu`` are OneFlow's GPU fusions
of ``batch_normalization`` (+ ``addend``) + ``relu``; here they are that composition (the
same variables, values and gradients; OneFlow's CPU path composed them too).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
...     return flow.layers.batch_normalization_relu(x, axis=1, epsilon=0.0)
>>> job(np.array([[-1, 2, 0], [1, -2, 0]], np.float32)).tolist()
[[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]]
"""
from __future__ import annotations

import numpy as np

from .. import initializers as init
from ..ir import Blob
from ..ops.registry import normalize_axis
from . import math_api as math
from .layers_api import _bias_then_activation, _layer_name, _variable, batch_normalization
from .nn_conv import _ints, conv3d as _conv3d
from .ops_api import reshape

__all__ = ["conv3d", "batch_normalization_add_relu", "batch_normalization_relu",
           "layer_norm_grad", "layer_norm_param_grad"]


def conv3d(inputs, filters, kernel_size=1, strides=1, padding="VALID", data_format="NCDHW",
           dilation_rate=1, groups=1, activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           trainable=True, name=None, weight_name=None, bias_name=None):
    """3-d convolution layer: weight ``<name>-weight`` of shape (filters, C/groups, kd, kh,
    kw) (NDHWC: filters, kd, kh, kw, C/groups), Xavier-uniform; bias ``<name>-bias``."""
    if not isinstance(inputs, Blob) or inputs.ndim != 5:
        raise ValueError("conv3d: inputs must be a 5-d Blob, got "
                         f"{getattr(inputs, 'shape', type(inputs).__name__)}")
    if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
        raise ValueError(f"conv3d: filters must be a positive int, got {filters!r}")
    last = str(data_format).upper() == "NDHWC"
    channels = inputs.shape[-1] if last else inputs.shape[1]
    if not isinstance(groups, int) or groups <= 0 or channels % groups:
        raise ValueError(f"conv3d: groups must be a positive int dividing the {channels} "
                         f"input channels, got {groups!r}")
    name = _layer_name(name, "Conv3d")
    kernel = _ints(kernel_size, 3, "kernel_size", "conv3d")
    shape = ((filters,) + kernel + (channels // groups,) if last
             else (filters, channels // groups) + kernel)
    weight = _variable(weight_name or f"{name}-weight", shape, inputs.dtype,
                       kernel_initializer or init.xavier_uniform_initializer(
                           data_format="NDHWC" if last else "NCDHW"),
                       trainable, kernel_regularizer)
    out = _conv3d(inputs, weight, strides, padding, data_format=data_format,
                  dilations=dilation_rate, groups=groups, name=f"{name}-conv")
    return _bias_then_activation(out, filters, inputs.dtype, name, use_bias, bias_name,
                                 bias_initializer, trainable, bias_regularizer, activation,
                                 "NDHWC" if last else None)


def batch_normalization_add_relu(inputs, addend=None, axis=-1, momentum=0.99, epsilon=0.001,
                                 center=True, scale=True, beta_initializer=None,
                                 gamma_initializer=None, beta_regularizer=None,
                                 gamma_regularizer=None, moving_mean_initializer=None,
                                 moving_variance_initializer=None, trainable=True,
                                 training=True, name="BatchNorm", gamma_name=None,
                                 beta_name=None, moving_mean_name=None,
                                 moving_variance_name=None):
    """``relu(batch_normalization(inputs) + addend)`` (``addend`` optional), with the
    variables of ``flow.layers.batch_normalization``."""
    custom = {k: v for k, v in dict(gamma_name=gamma_name, beta_name=beta_name,
                                    moving_mean_name=moving_mean_name,
                                    moving_variance_name=moving_variance_name).items() if v}
    if custom:
        raise NotImplementedError(
            f"batch_normalization_add_relu: custom variable names ({', '.join(custom)}) are "
            "not supported; the variables are <name>-gamma, -beta, -moving_mean and "
            "-moving_variance")
    if addend is not None and (not isinstance(addend, Blob) or addend.shape != inputs.shape):
        raise ValueError(f"batch_normalization_add_relu: addend must be a Blob of the "
                         f"inputs' shape {inputs.shape}, got "
                         f"{getattr(addend, 'shape', type(addend).__name__)}")
    out = batch_normalization(
        inputs, axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer, trainable=trainable,
        training=training, name=None if name == "BatchNorm" else name)
    if addend is not None:
        out = math.add(out, addend)
    return math.relu(out)


def batch_normalization_relu(inputs, axis=-1, momentum=0.99, epsilon=0.001, center=True,
                             scale=True, beta_initializer=None, gamma_initializer=None,
                             beta_regularizer=None, gamma_regularizer=None,
                             moving_mean_initializer=None, moving_variance_initializer=None,
                             trainable=True, training=True, name="BatchNorm"):
    """``relu(batch_normalization(inputs))``."""
    return batch_normalization_add_relu(
        inputs, axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer, trainable=trainable,
        training=training, name=name)


def _per_row(stat, x, begin, arg):
    """A statistic with one value per row (``x.shape[:begin]``), shaped to broadcast."""
    rows = x.shape[:begin]
    if int(np.prod(stat.shape)) != int(np.prod(rows)):
        raise ValueError(f"layer_norm_grad: {arg} must hold one value per normalized row "
                         f"(x.shape[:begin_norm_axis] = {rows}), got shape {stat.shape}")
    return reshape(stat, rows + (1,) * (x.ndim - begin))


def layer_norm_grad(dy, x, mean, inv_variance, begin_norm_axis=1, name="LayerNormGrad"):
    """The gradient of layer normalization (without its affine part) w.r.t. ``x``, given
    the forward's per-row ``mean`` and ``inv_variance`` (``1/sqrt(var + eps)``):
    ``inv * (dy - mean(dy) - x_hat * mean(dy * x_hat))`` over the normalized axes, with
    ``x_hat = (x - mean) * inv``."""
    begin = normalize_axis("layer_norm_grad", begin_norm_axis, x.ndim)
    axes = list(range(begin, x.ndim))
    inv = _per_row(inv_variance, x, begin, "inv_variance")
    x_hat = math.multiply(math.subtract(x, _per_row(mean, x, begin, "mean")), inv)
    centered = math.subtract(dy, math.reduce_mean(dy, axis=axes, keepdims=True))
    projection = math.reduce_mean(math.multiply(dy, x_hat), axis=axes, keepdims=True)
    return math.multiply(inv, math.subtract(centered, math.multiply(x_hat, projection)))


def layer_norm_param_grad(dy, norm, gamma, begin_params_axis=-1, name="LayerNormParamGrad"):
    """Backward of layer norm's affine part ``y = norm * gamma + beta``: returns
    ``(normalized_diff, beta_diff, gamma_diff)`` = ``(dy * gamma, sum(dy), sum(dy *
    norm))``, the sums over the axes before ``begin_params_axis``."""
    begin = normalize_axis("layer_norm_param_grad", begin_params_axis, dy.ndim)
    params = dy.shape[begin:]
    if int(np.prod(gamma.shape)) != int(np.prod(params)):
        raise ValueError(f"layer_norm_param_grad: gamma must have shape {params} "
                         f"(dy.shape[begin_params_axis:]), got {gamma.shape}")
    axes = list(range(begin))
    scale = reshape(gamma, (1,) * begin + tuple(params))
    return (math.multiply(dy, scale), math.reduce_sum(dy, axis=axes),
            math.reduce_sum(math.multiply(dy, norm), axis=axes))
