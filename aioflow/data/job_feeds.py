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

import asyncio
import threading
from typing import Callable, Iterable

import numpy as np

from .loader import Loader

PREFETCH = 2


class FeedSource:
    """One reader of a job: an endless iterable of raw batches and the fields decoded
    from each (a decode function and the placeholder it fills)."""

    def __init__(self, graph, batches: Callable[[], Iterable], what: str):
        from .. import distributed
        if distributed.is_distributed():
            raise NotImplementedError(f"{what}: readers inside a job are not supported with "
                                      "several ranks yet; feed each rank's batches as "
                                      "arguments")
        self.graph = graph
        self.batches = batches
        self.what = what
        self.fields: list[tuple[Callable, object]] = []
        if not hasattr(graph, "feed_sources"):
            graph.feed_sources = []
        graph.feed_sources.append(self)

    def add_field(self, decode: Callable, shape, dtype, label: str):
        """A new blob of the job whose value each step is ``decode(raw_batch)``."""
        from ..ir import current_graph
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


def fed_blob_ids(graph) -> set:
    return {blob.id for source in getattr(graph, "feed_sources", ()) for _, blob in
            source.fields}


class JobFeeds:
    """The feed sources of one compiled job: ``next()`` gives the arrays of its hidden
    placeholders for one step, in placeholder order."""

    def __init__(self, graph):
        self.sources = [s for s in graph.feed_sources if s.fields]
        order = {blob.id: i for i, blob in enumerate(graph.placeholders)}
        fed = [(order[blob.id], s, k) for s, source in enumerate(self.sources)
               for k, (_, blob) in enumerate(source.fields)]
        self._layout = [(s, k) for _, s, k in sorted(fed)]
        self._lock = threading.Lock()
        self._iterators = None
        self._loaders: list[Loader] = []
        self._failed: BaseException | None = None

    def _start(self) -> list:
        for source in self.sources:
            self._loaders.append(Loader(_Endless(source.batches), transform=source.decode,
                                        prefetch=PREFETCH))
        return [iter(loader) for loader in self._loaders]

    def next(self) -> list[np.ndarray]:
        """The next step's arrays (blocks until the loaders have them)."""
        with self._lock:
            if self._failed is not None:
                raise RuntimeError(f"{self.sources[0].what}: the job's reader stopped after "
                                   f"an error: {self._failed}") from self._failed
            if self._iterators is None:
                self._iterators = self._start()
            try:
                per_source = [next(iterator) for iterator in self._iterators]
            except BaseException as exc:
                self._failed = exc
                raise
        return [per_source[s][k] for s, k in self._layout]

    async def next_async(self) -> list[np.ndarray]:
        """``next()`` awaited: the wait happens on the loop's default executor."""
        return await asyncio.get_running_loop().run_in_executor(None, self.next)

    def close(self) -> None:
        for loader in self._loaders:
            loader.close()
        self._loaders = []


class _Endless:
    """An iterable over ``batches()``: each iteration starts a fresh stream."""

    def __init__(self, batches: Callable[[], Iterable]):
        self._batches = batches

    def __iter__(self):
        return iter(self._batches())


def for_graph(graph) -> JobFeeds | None:
    """The feeds of a traced job, or None when it reads no data by itself."""
    if not any(s.fields for s in getattr(graph, "feed_sources", ())):
        return None
    return JobFeeds(graph)
