"""Primitive ops, one family per module; importing this package registers them all."""
from . import (conv, elementwise, indexing, layerwise_updates, linalg, nn, reduce,  # noqa: F401
               random_ops, shape, special, state)
from . import lazy_adam, loss_scale  # noqa: F401 - flow.optimizer.LazyAdam, loss scaling
from . import cupy_kernels  # noqa: F401 - the CuPy backend's own kernels for some ops
from .registry import REGISTRY, OpDef, get, register

__all__ = ["REGISTRY", "OpDef", "get", "register"]
