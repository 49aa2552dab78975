"""``matmul(xp, a, b)``: ``xp.matmul``, unless this thread has routed products elsewhere.

The device kernels (the convolutions' batched products in :mod:`.conv_gemm`) multiply
through this function so that a CUDA graph capture can send their products to cuBLAS
directly (CuPy refuses cuBLAS calls while a stream is captured; see
:mod:`aioflow.backends.cupy.capture_gemm`, which installs the route with :func:`routed`).

>>> import numpy as np
>>> matmul(np, np.eye(2), np.ones((2, 3))).shape
(2, 3)
"""
from __future__ import annotations

import contextlib
import threading

_route = threading.local()


def matmul(xp, a, b):
    """``a @ b`` with numpy's broadcasting rules, through this thread's route if any."""
    product = getattr(_route, "product", None)
    if product is not None:
        return product(a, b)
    return xp.matmul(a, b)


@contextlib.contextmanager
def routed(product):
    """Within this block, this thread's :func:`matmul` calls ``product(a, b)``."""
    previous = getattr(_route, "product", None)
    _route.product = product
    try:
        yield
    finally:
        _route.product = previous
