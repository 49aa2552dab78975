"""Primitive ops, one family per module; importing this package registers them all."""
from . import (conv, conv3d, deconv, elementwise, indexing, layerwise_updates,  # noqa: F401
               linalg, nn, reduce, random_ops, shape, special, state)
from . import (dynamic, gamma, margin, numerics, ordinal_encode, quantize,  # noqa: F401
               scatter)
from . import lazy_adam, loss_scale  # noqa: F401 - flow.optimizer.LazyAdam, loss scaling
from . import unique  # noqa: F401 - flow.experimental.unique_with_counts and friends
from . import tensor_buffer  # noqa: F401 - tensor buffers and tensor lists (host values)
from . import fused  # noqa: F401 - ops the compiler fuses launches into
from .registry import REGISTRY, OpDef, get, register

__all__ = ["REGISTRY", "OpDef", "get", "register"]
