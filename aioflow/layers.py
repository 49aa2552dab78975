"""``flow.layers``: dense, convolution and normalization layers, with OneFlow's variable
names.

This module only re-exports. The definitions live in :mod:`aioflow.oneflow_ops`:
``layers_api`` (dense, conv1d/conv2d, batch and layer normalization, prelu),
``layers_more`` (conv3d, the fused batch norms, layer norm's gradients), ``resample``
(``upsample_2d``) and ``ordinal_encoder`` (``categorical_ordinal_encoder``).

A layer named ``name`` owns variables ``<name>-weight`` and ``<name>-bias`` (batch norm:
``<name>-gamma``, ``-beta``, ``-moving_mean``, ``-moving_variance``). Without a name, the
layers of one job are called ``Dense``, ``Dense_1``, ... (``Conv2d``..., ``BatchNorm``...)
in the order they are created, so a train job and a predict job that build the same model
share its variables.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
...     return flow.layers.dense(x, 3, activation=flow.nn.relu, name="fc")
>>> job(np.ones((2, 4), np.float32)).shape
(2, 3)
>>> sorted(flow.get_all_variables())
['fc-bias', 'fc-weight']
"""

from .oneflow_ops.layers_api import (
    dense as dense,
    conv2d as conv2d,
    batch_normalization as batch_normalization,
    layer_norm as layer_norm,
    prelu as prelu,
    conv1d as conv1d,
)
from .oneflow_ops.layers_more import (
    conv3d as conv3d,
    batch_normalization_add_relu as batch_normalization_add_relu,
    batch_normalization_relu as batch_normalization_relu,
    layer_norm_grad as layer_norm_grad,
    layer_norm_param_grad as layer_norm_param_grad,
)
from .oneflow_ops.resample import (
    upsample_2d as upsample_2d,
)
from .oneflow_ops.ordinal_encoder import (
    categorical_ordinal_encoder as categorical_ordinal_encoder,
)

__all__ = [
    "dense",
    "conv2d",
    "batch_normalization",
    "layer_norm",
    "prelu",
    "conv1d",
    "conv3d",
    "batch_normalization_add_relu",
    "batch_normalization_relu",
    "layer_norm_grad",
    "layer_norm_param_grad",
    "upsample_2d",
    "categorical_ordinal_encoder",
]
