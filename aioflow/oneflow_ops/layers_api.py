"""``flow.layers``' definitions: dense, conv1d/conv2d, batch and layer normalization and
prelu, with OneFlow's variable names, and the helpers every layer shares (its default
name, its variables, its bias and activation). More layers are in :mod:`.layers_more`.

The naming rule (:func:`_layer_name`): a layer given a ``name`` uses it; unnamed layers of
one job are numbered per kind and name scope (``Dense``, ``Dense_1``, ...) in the order
they are created, so a train job and a predict job that build the same model share its
variables.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
...     return flow.layers.dense(flow.layers.dense(x, 3), 2)
>>> job(np.ones((2, 4), np.float32)).shape
(2, 2)
>>> sorted(flow.get_all_variables())
['Dense-bias', 'Dense-weight', 'Dense_1-bias', 'Dense_1-weight']
"""
from __future__ import annotations

from .. import initializers as init
from ..engine.variables import get_variable
from ..ir import Blob, current_graph
from ..ops import nn as _nn
from ..ops import state as _state
from ..ops.registry import normalize_axis
from .dynamic_api import where
from .math_api import greater, multiply
from .nn_api import bias_add, layer_norm as _layer_norm
from .nn_conv2d import _pair, _single, conv1d as _conv1d, conv2d as _conv2d
from .ops_api import matmul, reshape

__all__ = ["dense", "conv2d", "batch_normalization", "layer_norm", "prelu", "conv1d"]


def _layer_name(name, default):
    graph = current_graph()
    if name is not None:
        return name
    # Numbered per namespace: the first unnamed layer in each namespace gets the plain
    # default name, as OneFlow names it (BERT's LayerNorm in every layer_<i>-output).
    key = (tuple(graph.name_scope), default)
    count = graph.layer_counts.get(key, 0)
    graph.layer_counts[key] = count + 1
    return default if count == 0 else f"{default}_{count}"


def _bias_then_activation(out, units, dtype, name, use_bias, bias_name, bias_initializer,
                          trainable, bias_regularizer, activation, data_format=None):
    """The tail every weight layer shares: an optional bias ``<name>-bias`` (``bias_name``
    if given; zeros unless ``bias_initializer``) added over ``units`` channels, then the
    activation."""
    if use_bias:
        bias = _variable(bias_name or f"{name}-bias", (units,), dtype,
                         bias_initializer or init.zeros_initializer(), trainable,
                         bias_regularizer)
        out = bias_add(out, bias, data_format=data_format, name=f"{name}-bias_add")
    return activation(out) if activation is not None else out


def _variable(name, shape, dtype, initializer, trainable, regularizer=None):
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                        regularizer=regularizer, trainable=trainable)


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          trainable=True, name=None, model_distribute=None):
    """``activation(inputs @ weight^T + bias)`` with weight ``(units, in_features)``.

    Inputs of rank > 2 are flattened to 2-d over their leading axes and restored after.
    The kernel defaults to Glorot-uniform (OneFlow started it at zero), the bias to zero.
    """
    if not isinstance(inputs, Blob):
        raise TypeError(f"dense: inputs must be a Blob, got {type(inputs).__name__}")
    if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
        raise ValueError(f"dense: units must be a positive int, got {units!r}")
    if inputs.ndim < 2:
        raise ValueError(f"dense: inputs must be at least 2-d, got shape {inputs.shape}")
    name = _layer_name(name, "Dense")
    lead, features = inputs.shape[:-1], inputs.shape[-1]
    x = inputs if inputs.ndim == 2 else reshape(inputs, (-1, features))
    weight = _variable(f"{name}-weight", (units, features), inputs.dtype,
                       kernel_initializer or init.glorot_uniform_initializer(), trainable,
                       kernel_regularizer)
    out = matmul(x, weight, transpose_b=True, name=f"{name}-matmul")
    out = _bias_then_activation(out, units, inputs.dtype, name, use_bias, None,
                                bias_initializer, trainable, bias_regularizer, activation)
    if inputs.ndim != 2:
        out = reshape(out, lead + (units,))
    return out


def conv2d(inputs, filters, kernel_size=1, strides=1, padding="VALID", data_format="NCHW",
           dilation_rate=1, groups=1, activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           trainable=True, name=None, weight_name=None, bias_name=None):
    """2-d convolution layer: weight ``<name>-weight`` of shape (filters, C/groups, kh, kw).

    The kernel defaults to Xavier-uniform as in OneFlow, the bias to zero.
    """
    if not isinstance(inputs, Blob) or inputs.ndim != 4:
        raise ValueError("conv2d: inputs must be a 4-d NCHW Blob, got "
                         f"{getattr(inputs, 'shape', type(inputs).__name__)}")
    if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
        raise ValueError(f"conv2d: filters must be a positive int, got {filters!r}")
    name = _layer_name(name, "Conv2d")
    kh, kw = _pair(kernel_size, "kernel_size", "conv2d")
    channels = inputs.shape[1]
    if channels % groups:
        raise ValueError(f"conv2d: input channels {channels} not divisible by groups {groups}")
    weight = _variable(weight_name or f"{name}-weight", (filters, channels // groups, kh, kw),
                       inputs.dtype,
                       kernel_initializer or init.xavier_uniform_initializer(data_format="NCHW"),
                       trainable, kernel_regularizer)
    out = _conv2d(inputs, weight, strides=strides, padding=padding, data_format=data_format,
                  dilations=dilation_rate, groups=groups, name=f"{name}-conv")
    return _bias_then_activation(out, filters, inputs.dtype, name, use_bias, bias_name,
                                 bias_initializer, trainable, bias_regularizer, activation)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=0.001, center=True,
                        scale=True, beta_initializer=None, gamma_initializer=None,
                        beta_regularizer=None, gamma_regularizer=None,
                        moving_mean_initializer=None, moving_variance_initializer=None,
                        trainable=True, training=True, name=None):
    """Batch normalization over every axis but ``axis`` (use ``axis=1`` for NCHW).

    In a train job (with ``training=True``) it normalizes with the batch statistics and
    updates ``moving_mean``/``moving_variance`` as ``m = momentum * m + (1 - momentum) *
    batch`` (the unbiased batch variance); in predict jobs it uses the moving statistics.
    """
    graph = current_graph()
    axis = _nn.normalize_bn_axis(inputs, axis)
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"batch_normalization: momentum must be in [0, 1], got {momentum!r}")
    name = _layer_name(name, "BatchNorm")
    channels = (inputs.shape[axis],)
    dtype = inputs.dtype
    gamma = _variable(f"{name}-gamma", channels, dtype,
                      gamma_initializer or init.ones_initializer(), trainable and scale,
                      gamma_regularizer)
    beta = _variable(f"{name}-beta", channels, dtype, beta_initializer or init.zeros_initializer(),
                     trainable and center, beta_regularizer)
    moving_mean = get_variable(f"{name}-moving_mean", shape=channels, dtype=dtype,
                               initializer=moving_mean_initializer or init.zeros_initializer(),
                               trainable=False)
    moving_var = get_variable(f"{name}-moving_variance", shape=channels, dtype=dtype,
                              initializer=moving_variance_initializer or init.ones_initializer(),
                              trainable=False)
    if graph.job_type == "train" and training:
        y, mean, var, _inv_std = _nn.batch_norm_train(inputs, gamma, beta, axis=axis,
                                                      epsilon=float(epsilon), name=name)
        _state.assign_moving_average(moving_mean, mean, momentum=float(momentum))
        _state.assign_moving_average(moving_var, var, momentum=float(momentum))
        return y
    return _nn.batch_norm_inference(inputs, gamma, beta, moving_mean, moving_var, axis=axis,
                                    epsilon=float(epsilon), name=name)


# -- OneFlow v0.3.4's further layers (issue 18) ----------------------------------------------


def layer_norm(inputs, center=True, scale=True, trainable=True, begin_norm_axis=1,
               begin_params_axis=-1, epsilon=1e-5, name="LayerNorm"):
    """Layer normalization over the axes from ``begin_norm_axis`` on, with variables
    ``<name>-gamma`` (ones) and ``<name>-beta`` (zeros) of shape
    ``inputs.shape[begin_params_axis:]``."""
    if not isinstance(inputs, Blob):
        raise TypeError(f"layer_norm: inputs must be a Blob, got {type(inputs).__name__}")
    name = _layer_name(None if name == "LayerNorm" else name, "LayerNorm")
    params = inputs.shape[normalize_axis("layer_norm", begin_params_axis, inputs.ndim):]
    gamma = _variable(f"{name}-gamma", params, inputs.dtype, init.ones_initializer(),
                      trainable) if scale else None
    beta = _variable(f"{name}-beta", params, inputs.dtype, init.zeros_initializer(),
                     trainable) if center else None
    return _layer_norm(inputs, gamma, beta, begin_norm_axis=begin_norm_axis,
                       begin_params_axis=begin_params_axis, epsilon=epsilon)


def prelu(inputs, alpha_initializer=None, alpha_regularizer=None, shared_axes=None,
          trainable=True, name="PRelu", model_distribute=None):
    """``x`` where positive, else ``alpha * x``, with a learned ``<name>-alpha`` of the
    input's shape without its batch axis (1 along ``shared_axes``), starting at zero."""
    if not isinstance(inputs, Blob):
        raise TypeError(f"prelu: inputs must be a Blob, got {type(inputs).__name__}")
    name = _layer_name(None if name == "PRelu" else name, "PRelu")
    shape = list(inputs.shape[1:])
    for a in shared_axes or ():
        if not 1 <= a < inputs.ndim:
            raise ValueError(f"prelu: shared_axes must name non-batch axes of a "
                             f"{inputs.ndim}-d input, got {shared_axes!r}")
        shape[a - 1] = 1
    alpha = _variable(f"{name}-alpha", tuple(shape), inputs.dtype,
                      alpha_initializer or init.constant_initializer(0), trainable,
                      alpha_regularizer)
    return where(greater(inputs, 0.0), inputs, multiply(inputs, alpha))


def conv1d(inputs, filters, kernel_size=1, strides=1, padding="VALID", data_format="NCW",
           dilation_rate=1, groups=1, activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
           bias_regularizer=None, trainable=True, name=None, weight_name=None,
           bias_name=None):
    """1-d convolution layer: weight ``<name>-weight`` of shape (filters, C/groups, k), or
    (filters, k, C/groups) for ``data_format="NWC"`` (OneFlow's layouts)."""
    if not isinstance(inputs, Blob) or inputs.ndim != 3:
        raise ValueError("conv1d: inputs must be a 3-d Blob, got "
                         f"{getattr(inputs, 'shape', type(inputs).__name__)}")
    if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
        raise ValueError(f"conv1d: filters must be a positive int, got {filters!r}")
    name = _layer_name(name, "Conv1d")
    channels = inputs.shape[1] if data_format.upper() == "NCW" else inputs.shape[2]
    if channels % groups:
        raise ValueError(f"conv1d: input channels {channels} not divisible by groups {groups}")
    k = _single(kernel_size, "kernel_size", "conv1d")
    nwc = data_format.upper() == "NWC"
    shape = (filters, k, channels // groups) if nwc else (filters, channels // groups, k)
    weight = _variable(weight_name or f"{name}-weight", shape, inputs.dtype,
                       kernel_initializer or init.xavier_uniform_initializer(
                           data_format="NHWC" if nwc else "NCHW"),
                       trainable, kernel_regularizer)
    out = _conv1d(inputs, weight, strides=strides, padding=padding, data_format=data_format,
                  dilations=dilation_rate, groups=groups, name=f"{name}-conv")
    return _bias_then_activation(out, filters, inputs.dtype, name, use_bias, bias_name,
                                 bias_initializer, trainable, bias_regularizer, activation,
                                 "NWC" if data_format.upper() == "NWC" else None)

