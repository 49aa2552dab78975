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

import numpy as np

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
        # The placeholders holding one bytes value per record (OFRecordBytesDecoder's):
        # blob id -> the function giving one record's value whole, for the decoders that
        # take those values as OneFlow's tensor buffer did (ImageDecoderRandomCropResize,
        # a field of its own). The dense array is decoded only when the job reads it: its
        # values must all have one length, and encoded images' do not.
        self.bytes_fields: dict[int, Callable] = {}
        self._read_ids: set | None = None
        graph.feed_sources.append(self)

    def add_field(self, decode: Callable, shape, dtype, label: str):
        """A new blob of the job whose value each step is ``decode(raw_batch)``."""
        if current_graph() is not self.graph:
            raise ValueError(f"{self.what}: the reader belongs to another job function")
        blob = self.graph.add_placeholder(tuple(shape), dtype,
                                          self.graph.unique_name(label))
        self.fields.append((decode, blob))
        return blob

    def add_bytes_field(self, decode: Callable, shape, dtype, label: str,
                        record_bytes: Callable):
        """:meth:`add_field` for the records' bytes values: ``decode`` gives them as a dense
        array (filled only where the job reads it), ``record_bytes(record)`` one whole."""
        blob = self.add_field(decode, shape, dtype, label)
        self.bytes_fields[blob.id] = record_bytes
        return blob

    def _unread(self, blob) -> bool:
        """Whether no op of the job reads ``blob`` and the job does not return it."""
        if self._read_ids is None:   # the graph is whole by the time steps run
            graph = self.graph
            self._read_ids = set(graph.consumers()) | {b.id for b in graph.outputs}
        return blob.id not in self._read_ids

    def decode(self, raw) -> tuple:
        arrays = []
        for decode, blob in self.fields:
            if blob.id in self.bytes_fields and self._unread(blob):
                # a value nothing reads: zeros of its shape without a byte behind them
                arrays.append(np.broadcast_to(np.zeros((), blob.dtype.numpy), blob.shape))
                continue
            array = decode(raw)
            if array.shape != blob.shape or array.dtype != blob.dtype.numpy:
                raise ValueError(f"{self.what}: decoded {array.dtype} {array.shape} for "
                                 f"{blob.name}, the job expects {blob.dtype.numpy} "
                                 f"{blob.shape}")
            arrays.append(array)
        return tuple(arrays)


def bytes_field_of(blob):
    """``(source, record_bytes)`` when ``blob`` is a reader's bytes values
    (:meth:`FeedSource.add_bytes_field`), else None."""
    graph = getattr(blob, "graph", None)
    for source in getattr(graph, "feed_sources", ()):
        if blob.id in source.bytes_fields:
            return source, source.bytes_fields[blob.id]
    return None
