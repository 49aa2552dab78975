"""Data that a job reads by itself: the blobs of ``flow.data.ofrecord_reader`` and its
decoders, and of ``flow.data.decode_random``.

In OneFlow the reader is an op of the graph. Here each reader is a *feed source*: the
blobs its decoders return are hidden placeholders of the job, after its parameters. Every
call of the job takes the next batch of each source and passes the decoded arrays as
those placeholders' values. Reading, parsing and decoding happen on a
``flow.data.Loader`` per source, a background thread that keeps ``PREFETCH`` batches
ready, so a step rarely waits for data; an awaited call waits for its batch without
blocking the event loop.
"""
from __future__ import annotations

from typing import Callable, Iterable
from .. import distributed
from ..ir import current_graph





class FeedSource:
    """One reader of a job: an endless iterable of raw batches and the fields decoded
    from each (a decode function and the placeholder it fills)."""

    def __init__(self, graph, batches: Callable[[], Iterable], what: str):
        devices = graph.devices
        if distributed.is_distributed() or (devices is not None and devices.count > 1):
            raise NotImplementedError(f"{what}: readers inside a job are not supported with "
                                      "several ranks or devices yet; feed each device's "
                                      "batches as arguments")
        self.graph = graph
        self.batches = batches
        self.what = what
        self.fields: list[tuple[Callable, object]] = []
        graph.feed_sources.append(self)

    def add_field(self, decode: Callable, shape, dtype, label: str):
        """A new blob of the job whose value each step is ``decode(raw_batch)``."""
        if current_graph() is not self.graph:
            raise ValueError(f"{self.what}: the reader belongs to another job function")
        blob = self.graph.add_placeholder(tuple(shape), dtype,
                                          self.graph.unique_name(label))
        self.fields.append((decode, blob))
        return blob

    def decode(self, raw) -> tuple:
        arrays = []
        for decode, blob in self.fields:
            array = decode(raw)
            if array.shape != blob.shape or array.dtype != blob.dtype.numpy:
                raise ValueError(f"{self.what}: decoded {array.dtype} {array.shape} for "
                                 f"{blob.name}, the job expects {blob.dtype.numpy} "
                                 f"{blob.shape}")
            arrays.append(array)
        return tuple(arrays)
