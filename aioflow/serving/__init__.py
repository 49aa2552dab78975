"""Serving predict jobs from asyncio web servers: dynamic batching and its metrics.

``DynamicBatcher(job)`` coalesces concurrent ``await model(sample)`` calls into one job
step per batch (see :mod:`aioflow.serving.batcher`); ``model.metrics()`` and
``model.prometheus()`` report what an operator watches (:mod:`aioflow.serving.metrics`).
``examples/serve_mnist.py`` is a complete HTTP server built on it.

>>> import aioflow.serving
>>> sorted(n for n in aioflow.serving.__all__ if n.endswith("Error"))
['BatcherClosedError', 'OverloadedError', 'RequestTimeoutError', 'ServingError']
"""
from .batcher import (BatcherClosedError, DynamicBatcher, OverloadedError,
                      RequestTimeoutError, ServingError)
from .metrics import ServingMetrics, prometheus_text

__all__ = ["DynamicBatcher", "ServingError", "OverloadedError", "BatcherClosedError",
           "RequestTimeoutError", "ServingMetrics", "prometheus_text"]
