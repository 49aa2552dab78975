"""aioflow: OneFlow's job functions with an asyncio-native runtime.

``import aioflow as flow`` and ``import aioflow.typing as tp`` replace OneFlow's imports:

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def add_one(x: tp.Numpy.Placeholder((3,), dtype=flow.float)) -> tp.Numpy:
...     return x + 1
>>> add_one(np.zeros(3, np.float32))
array([1., 1., 1.], dtype=float32)

This module only re-exports; each name lives in the module named in its docstring.
"""
from . import (checkpoint, config, data, distributed, env, initializers, layers, losses,
               math, nn, optimizer, random, regularizers, scope, train, typing, unittest)
from . import experimental, linalg, quantization, system
from . import detection, image
from . import session
from . import deprecated
from ._core.deprecation import is_deprecated
from .engine.modes import enable_eager_execution
from .scope import name_scope
from ._core import dtypes
from .oneflow_ops.image_api import (
    Resize as image_resize,
    batch_align as image_batch_align,
    decode as image_decode,
    flip as image_flip,
    normalize as image_normalize,
    random_crop as image_random_crop,
    target_resize as image_target_resize,
)
from . import distribute  # OneFlow's schemes; flow.distributed is aioflow's multi-rank world
from . import checkpoint_io  # the earlier path of flow.checkpoint.io, still an attribute
from .checkpoint import get_all_variables, load_variables
from ._core.dtypes import (DType, char, double, float, float16, float32, float64, half, int8,
                     int32, int64, uint8)
from .engine.function import global_function
from .engine.function_config import FunctionConfig, function_config
from .initializers import (constant_initializer, glorot_normal_initializer,
                           glorot_uniform_initializer, kaiming_initializer,
                           ones_initializer, random_normal_initializer,
                           random_uniform_initializer, truncated_normal,
                           truncated_normal_initializer, variance_scaling_initializer,
                           xavier_normal_initializer, xavier_uniform_initializer,
                           zeros_initializer)
from .ir import Blob
from .ir import Blob as BlobDef
from .ir.blob_facts import INVALID_BATCH_AXIS  # OneFlow's constant
from .scope import device_prior_placement, fixed_placement
from .oneflow_ops.loss_functions import smooth_l1_loss
from .oneflow_ops.array_ops import (argsort, broadcast_like, constant_scalar, dim_gather, elem_cnt,
                                    gather, gather_nd, identity_n, masked_fill, one_hot, ones, pad,
                                    range, reverse, sort, stack, zeros)
from .oneflow_ops.ops_api import (
    cast, concat, constant, constant_like, expand_dims, flatten, identity, matmul, ones_like,
    reshape, reshape_like, slice, squeeze, transpose, zeros_like)
from .oneflow_ops.resample import pad_grad, reflection_pad2d, same_padding
from .runtime.results import blocking
from .oneflow_ops.assign_api import assign
from .oneflow_ops.dynamic_api import (argwhere, cast_to_static_shape, dynamic_reshape, nonzero,
                                      sync_dynamic_resize, where)
from .oneflow_ops.margin_loss import combined_margin_loss
from .oneflow_ops.math_api import clip_by_value, in_top_k
# OneFlow exported clip_by_value under these names too
from .oneflow_ops.math_api import (clip_by_value as clamp, clip_by_value as clip,
                                   clip_by_value as clip_by_scalar)
from .oneflow_ops.math_more import (broadcast_to_compatible_with, count_not_finite,
                                    multi_count_not_finite)
from .oneflow_ops.micro_batch import acc, pack, repeat, unpack
from .oneflow_ops.ordinal_encoder import categorical_ordinal_encode
from .oneflow_ops.scatter_api import (scatter_nd, slice_update, slice_v2, tensor_scatter_nd_add,
                                      tensor_scatter_nd_update, unsorted_batch_segment_sum,
                                      unsorted_segment_sum, unsorted_segment_sum_like)
from .oneflow_ops.view_ops import amp_white_identity, cast_to_current_logical_view, parallel_cast
from .engine.session import clear_default_session, eager_execution_enabled, sync_default_session
from .typing import PlaceholderSpec
from . import summary  # callable: flow.summary(job) is model_summary.summary
from .engine.variables import get_variable
from .engine.watch import watch, watch_diff
from .env import current_machine_id
from . import util
from ._core.dtypes import convert_oneflow_dtype_to_numpy_dtype
from .env import current_resource
from ._core.no_effect import inter_job_reuse_mem_strategy
from .oneflow_ops.object_bbox import (
    object_bbox_flip,
    object_bbox_scale,
    object_segmentation_polygon_flip,
    object_segmentation_polygon_scale,
    object_segmentation_polygon_to_mask,
)
from .engine.scope_desc import current_global_function_desc, current_scope
from .oneflow_ops.user_op_builder import (
    consistent_user_op_builder, consistent_user_op_module_builder, user_op_builder,
    user_op_module_builder)
from ._core.dtypes import record, tensor_buffer
from .oneflow_ops.tensor_defs import FixedTensorDef, MirroredTensorDef, MirroredTensorListDef
from .oneflow_ops.tensor_buffer_api import (tensor_buffer_to_tensor, tensor_buffer_to_tensor_list,
                                            tensor_list_split, tensor_list_to_tensor_buffer,
                                            tensor_to_tensor_buffer)

__version__ = "0.1.0"

distributed.setup()   # joins the world when a launcher started several ranks; else nothing

__all__ = [name for name in dir() if not name.startswith("_")]
