"""``flow.optimizer.CustomScheduler``: a learning rate that the job computes itself.

OneFlow's ``CustomScheduler(lbn)`` names a blob of the job by its logical blob name; each
step's rate is that blob's value. aioflow accepts the name (``blob.logical_blob_name``) or
the Blob itself.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="train")
... def fit(x: tp.Numpy.Placeholder((2,)), rate: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
...     w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
...     loss = flow.math.reduce_sum(w * x)
...     scheduler = flow.optimizer.CustomScheduler(rate.logical_blob_name)
...     flow.optimizer.SGD(scheduler, momentum=0).minimize(loss)
...     return loss
>>> _ = fit(np.ones(2, np.float32), np.array([0.5], np.float32))
>>> flow.get_all_variables()["w"].tolist()
[-0.5, -0.5]
"""
from __future__ import annotations

from ..ir import Blob
from ..ops.state import learning_rate_from_blob
from .schedulers import LrScheduler

__all__ = ["CustomScheduler"]


class CustomScheduler(LrScheduler):
    """The rate of each step is the value of the job's blob ``lbn`` (one floating-point
    element), read when the step's updates run."""

    def __init__(self, lbn):
        if not isinstance(lbn, (str, Blob)):
            raise TypeError("CustomScheduler: lbn must be a blob's logical_blob_name (str) "
                            f"or the Blob, got {lbn!r}")
        self.lbn = lbn
        self.warmup = None

    def lr(self, step: int) -> float:
        raise TypeError("CustomScheduler has no rate of its own: its rate is the value of "
                        f"the job's blob {self._name()!r}, known only while a step runs")

    def _name(self) -> str:
        return self.lbn if isinstance(self.lbn, str) else self.lbn.logical_blob_name

    def _blob(self, graph) -> Blob:
        if isinstance(self.lbn, Blob):
            if self.lbn.graph is not graph:
                raise ValueError(f"CustomScheduler: the blob {self._name()!r} belongs to "
                                 f"another job than {graph.name!r}")
            return self.lbn
        candidates = list(graph.placeholders) + [b for node in graph.nodes
                                                 for b in node.outputs]
        for blob in candidates:
            if blob.logical_blob_name == self.lbn:
                return blob
        raise ValueError(f"CustomScheduler: job {graph.name!r} has no blob named "
                         f"{self.lbn!r} (pass blob.logical_blob_name of a blob the job "
                         "computes, or the Blob itself)")

    def rate(self, graph) -> Blob:
        """The step's learning rate (a host float64 scalar) from the named blob."""
        return learning_rate_from_blob(self._blob(graph))

    def __repr__(self) -> str:
        return f"CustomScheduler({self._name()!r})"
