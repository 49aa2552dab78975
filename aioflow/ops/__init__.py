"""Primitive ops, one family per module; importing this package registers them all."""
from . import conv, elementwise, indexing, linalg, nn, reduce, shape, special, state  # noqa: F401
from . import cupy_kernels  # noqa: F401 - the CuPy backend's own kernels for some ops
from .registry import REGISTRY, OpDef, get, register

__all__ = ["REGISTRY", "OpDef", "get", "register"]
