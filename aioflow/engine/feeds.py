"""A job's own data: each step's arrays for the hidden placeholders that the readers in its
body (``flow.data.ofrecord_reader`` and its decoders, ``flow.data.decode_random``) added.

The readers (:mod:`aioflow.data.job_feeds`' ``FeedSource``) register themselves on the
traced graph (``Graph.feed_sources``); this module, on the engine's side, reads those
sources through one background :class:`~aioflow.runtime.loader.Loader` each, which keeps
``PREFETCH`` batches ready, so a step rarely waits for data.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Callable, Iterable

import numpy as np

from ..runtime.loader import Loader

PREFETCH = 2


def fed_blob_ids(graph) -> set:
    return {blob.id for source in graph.feed_sources for _, blob in
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
    if not any(s.fields for s in graph.feed_sources):
        return None
    return JobFeeds(graph)
