"""``flow.nn``: activations, softmax and losses, convolution and pooling, normalization,
dropout, bias_add.

This module only re-exports. The definitions live in :mod:`aioflow.oneflow_ops`:
``nn_api`` (activations, softmax and its losses, bias_add, dropout, normalization with
given statistics), ``nn_conv2d`` (1-d and 2-d convolution and pooling), ``nn_conv`` (3-d,
transposed and TF-compatible convolutions, pixel shuffles), ``nn_norm`` (InstanceNorm,
GroupNorm) and ``loss_functions`` (the losses with PyTorch's names).

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def probs(x: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
...     return flow.nn.softmax(x)
>>> np.round(probs(np.log(np.array([[1, 1, 2]], np.float32))), 3).tolist()
[[0.25, 0.25, 0.5]]
"""

from .oneflow_ops.nn_api import (
    relu as relu,
    sigmoid as sigmoid,
    tanh as tanh,
    gelu as gelu,
    leaky_relu as leaky_relu,
    softmax as softmax,
    log_softmax as log_softmax,
    sparse_softmax_cross_entropy_with_logits as sparse_softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits as softmax_cross_entropy_with_logits,
    sigmoid_cross_entropy_with_logits as sigmoid_cross_entropy_with_logits,
    bias_add as bias_add,
    dropout as dropout,
    l2_loss as l2_loss,
    elu as elu,
    relu6 as relu6,
    hardtanh as hardtanh,
    hardsigmoid as hardsigmoid,
    hardswish as hardswish,
    swish as swish,
    mish as mish,
    logsoftmax as logsoftmax,
    moments as moments,
    batch_normalization as batch_normalization,
    layer_norm as layer_norm,
    sparse_cross_entropy as sparse_cross_entropy,
    tril as tril,
    fused_scale_tril as fused_scale_tril,
    softmax_grad as softmax_grad,
)
from .oneflow_ops.nn_conv2d import (
    conv2d as conv2d,
    max_pool2d as max_pool2d,
    avg_pool2d as avg_pool2d,
    conv1d as conv1d,
    max_pool1d as max_pool1d,
    avg_pool1d as avg_pool1d,
)
from .oneflow_ops.nn_conv import (
    conv3d as conv3d,
    max_pool3d as max_pool3d,
    avg_pool3d as avg_pool3d,
    conv2d_transpose as conv2d_transpose,
    torch_conv2d_transpose as torch_conv2d_transpose,
    compat_conv2d as compat_conv2d,
    PixelShuffle as PixelShuffle,
    PixelShufflev2 as PixelShufflev2,
    random_mask_like as random_mask_like,
)
from .oneflow_ops.nn_norm import (
    InstanceNorm1d as InstanceNorm1d,
    InstanceNorm2d as InstanceNorm2d,
    InstanceNorm3d as InstanceNorm3d,
    GroupNorm as GroupNorm,
)
from .oneflow_ops.loss_functions import (
    MSELoss as MSELoss,
    L1Loss as L1Loss,
    BCELoss as BCELoss,
    BCEWithLogitsLoss as BCEWithLogitsLoss,
    KLDivLoss as KLDivLoss,
    MarginRankingLoss as MarginRankingLoss,
    TripletMarginLoss as TripletMarginLoss,
)

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
    "l2_loss",
    "elu",
    "relu6",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "swish",
    "mish",
    "logsoftmax",
    "moments",
    "batch_normalization",
    "layer_norm",
    "sparse_cross_entropy",
    "tril",
    "fused_scale_tril",
    "softmax_grad",
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    "conv1d",
    "max_pool1d",
    "avg_pool1d",
    "conv3d",
    "max_pool3d",
    "avg_pool3d",
    "conv2d_transpose",
    "torch_conv2d_transpose",
    "compat_conv2d",
    "PixelShuffle",
    "PixelShufflev2",
    "random_mask_like",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "GroupNorm",
    "MSELoss",
    "L1Loss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "KLDivLoss",
    "MarginRankingLoss",
    "TripletMarginLoss",
]
