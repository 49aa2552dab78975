"""``flow.data.Loader``: batches prefetched on a background thread into a bounded queue.

Usable with ``for`` and ``async for``; sources are in-memory arrays (a tuple or dict of
arrays with a common first axis), an ``.npz`` file, or any iterable / async iterable of
ready batches.

>>> import numpy as np, aioflow as flow
>>> x = np.arange(10, dtype=np.float32).reshape(5, 2)
>>> y = np.arange(5, dtype=np.int32)
>>> loader = flow.data.Loader((x, y), batch_size=2, drop_last=True)
>>> [b[1].tolist() for b in loader]
[[0, 1], [2, 3]]

Threads and cores: numpy's BLAS already uses every core while a step computes, so a
CPU-bound ``transform`` on the loader thread competes with it instead of overlapping;
I/O-bound loading (files, network) overlaps either way. For CPU-heavy preprocessing,
limit BLAS to fewer threads (``threadpoolctl``) to leave a core to the loader.
"""
from __future__ import annotations

import asyncio
import os
import queue
import threading
from typing import Any, Callable, Iterable

import numpy as np

from .._core import seeds

_END = object()
_STOPPED = object()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


class Loader:
    """Batches from ``source``, prefetched ``prefetch`` batches ahead on a worker thread.

    * ``source``: a tuple/list or dict of arrays sharing their first axis (batched here),
      a path to an ``.npz`` file (``keys`` picks and orders its arrays), or any iterable
      or async iterable yielding ready batches.
    * ``batch_size``, ``drop_last``, ``shuffle`` (with ``seed``; a new order each epoch;
      without ``seed``, one derived from ``flow.random.seed(n)`` when that was called)
      and ``epochs`` apply to array sources; iterables are passed through as they are.
    * ``transform``: a function applied to each batch on the worker thread.

    Breaking out of a loop, or ``close()``, stops the worker. An exception in the worker
    (or in the source) is raised at the consumer, at the batch where it happened.
    """

    def __init__(self, source, batch_size: int = 100, *, shuffle: bool = False, seed=None,
                 drop_last: bool = True, epochs: int = 1, prefetch: int = 2,
                 transform: Callable | None = None, keys: Iterable[str] | None = None):
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"Loader: prefetch must be a positive int, got {prefetch!r}")
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"Loader: epochs must be a positive int, got {epochs!r}")
        if transform is not None and not callable(transform):
            raise TypeError(f"Loader: transform must be callable, got {transform!r}")
        self.prefetch = prefetch
        self.transform = transform
        self._arrays = None
        self._iterable = None
        self._async_iterable = None
        if isinstance(source, (str, os.PathLike)):
            source = _read_npz(source, keys)
        if isinstance(source, (tuple, list, dict)) and source and all(
                isinstance(a, np.ndarray) for a in
                (source.values() if isinstance(source, dict) else source)):
            self._arrays = _ArrayBatches(source, batch_size, shuffle, seed, drop_last, epochs)
        elif hasattr(source, "__aiter__"):
            self._async_iterable = source
        elif hasattr(source, "__iter__"):
            self._iterable = source
        else:
            raise TypeError("Loader: source must be arrays (tuple/list/dict of numpy arrays), "
                            f"an .npz path, an iterable or an async iterable; got "
                            f"{type(source).__name__}")
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    def __len__(self) -> int:
        if self._arrays is None:
            raise TypeError("len(Loader) is known only for array sources")
        return len(self._arrays)

    # -- the worker ----------------------------------------------------------------------
    def _batches(self):
        if self._arrays is not None:
            return iter(self._arrays)
        if self._iterable is not None:
            return iter(self._iterable)
        return _drive_async_iterable(self._async_iterable, self._stop)

    def _start(self) -> queue.Queue:
        if self._worker is not None:
            raise RuntimeError("Loader: already being iterated; create one loader per loop")
        self._stop.clear()
        batches: queue.Queue = queue.Queue(maxsize=self.prefetch)
        self._worker = threading.Thread(target=self._produce, args=(batches,), daemon=True,
                                        name="aioflow-loader")
        self._worker.start()
        return batches

    def _produce(self, batches: queue.Queue) -> None:
        try:
            for batch in self._batches():
                if self.transform is not None:
                    batch = self.transform(batch)
                if not self._put(batches, batch):
                    return
        except BaseException as exc:  # surfaces at the consumer
            self._put(batches, _Failure(exc))
            return
        self._put(batches, _END)

    def _put(self, batches: queue.Queue, item) -> bool:
        while not self._stop.is_set():
            try:
                batches.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        """Stop the worker (it finishes the batch it is preparing) and wait for it."""
        self._stop.set()
        worker, self._worker = self._worker, None
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=5)

    # -- consuming -----------------------------------------------------------------------
    def __iter__(self):
        batches = self._start()
        try:
            while True:
                item = batches.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            self.close()

    async def __aiter__(self):
        batches = self._start()
        try:
            while True:
                try:
                    item = batches.get_nowait()
                except queue.Empty:    # waits off the loop (asyncio's or trio's)
                    item = await _wait_for_batch(batches, self._stop)
                if item is _END or item is _STOPPED:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            self.close()


async def _wait_for_batch(batches: queue.Queue, stop: threading.Event):
    """The next item of ``batches``, waited for on a worker thread: asyncio's default
    executor, or under trio (anyio's other backend) one of trio's worker threads. Only
    when the prefetched batches ran out, so a loader that keeps ahead never hops.
    Cancelled, the wait is abandoned; the worker thread ends with the loader (``close``
    sets ``stop``)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:   # a trio task
        import anyio.to_thread
        return await anyio.to_thread.run_sync(_get_or_stop, batches, stop,
                                              abandon_on_cancel=True)
    return await loop.run_in_executor(None, _get_or_stop, batches, stop)


def _get_or_stop(batches: queue.Queue, stop: threading.Event):
    while not stop.is_set():
        try:
            return batches.get(timeout=0.05)
        except queue.Empty:
            continue
    return _STOPPED


def _drive_async_iterable(source, stop: threading.Event):
    """Iterate an async iterable from the worker thread, on a private event loop."""
    loop = asyncio.new_event_loop()
    iterator = source.__aiter__()
    try:
        while not stop.is_set():
            try:
                yield loop.run_until_complete(iterator.__anext__())
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())
        loop.close()


def _read_npz(path, keys) -> Any:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Loader: no such .npz file: {path}")
    with np.load(path, allow_pickle=False) as archive:
        names = list(keys) if keys is not None else list(archive.files)
        missing = [k for k in names if k not in archive.files]
        if missing:
            raise KeyError(f"Loader: {path} has no arrays {missing} (it has {archive.files})")
        return tuple(archive[k] for k in names)


class _ArrayBatches:
    def __init__(self, arrays, batch_size, shuffle, seed, drop_last, epochs):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"Loader: batch_size must be a positive int, got {batch_size!r}")
        self.is_dict = isinstance(arrays, dict)
        self.keys = list(arrays) if self.is_dict else None
        self.arrays = list(arrays.values()) if self.is_dict else list(arrays)
        lengths = {len(a) for a in self.arrays}
        if len(lengths) != 1:
            raise ValueError(f"Loader: arrays must share their first axis, got lengths "
                             f"{sorted(lengths)}")
        self.n = lengths.pop()
        self.batch_size = batch_size
        self.shuffle = shuffle
        # no seed: one derived from flow.random.seed(n) when set, else fresh entropy
        self.rng = np.random.default_rng(seeds.loader_seed() if seed is None else seed)
        self.drop_last = drop_last
        self.epochs = epochs
        if drop_last and self.n < batch_size:
            raise ValueError(f"Loader: batch_size {batch_size} is larger than the {self.n} "
                             "samples and drop_last=True leaves no batch")

    def per_epoch(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __len__(self) -> int:
        return self.per_epoch() * self.epochs

    def __iter__(self):
        for _ in range(self.epochs):
            order = self.rng.permutation(self.n) if self.shuffle else None
            for b in range(self.per_epoch()):
                index = slice(b * self.batch_size, (b + 1) * self.batch_size)
                picked = order[index] if order is not None else index
                batch = [np.ascontiguousarray(a[picked]) for a in self.arrays]
                yield dict(zip(self.keys, batch)) if self.is_dict else tuple(batch)
