"""Dynamic batching of a predict job for asyncio servers.

A predict job has a fixed batch size (its placeholders' batch axis); a web server gets
single requests concurrently. :class:`DynamicBatcher` sits between them, the way Triton's
dynamic batcher and Ray Serve's ``@serve.batch`` do:

* concurrent ``await model(sample)`` calls go into one FIFO queue;
* a worker task takes up to ``max_batch_size`` rows from it, waiting at most ``max_wait``
  seconds after the oldest queued request for stragglers;
* the rows are stacked along each placeholder's batch axis, the batch is padded with
  zeros to the job's batch size, and the job runs **one step** (on aioflow's compute
  thread, so the event loop stays free);
* every leaf of the result (an array, or tuples/lists/dicts of arrays) is split along its
  first axis and each caller gets exactly its own rows.

Requests are checked when they are made (shape, dtype), so a malformed request fails
alone and never reaches a batch. A step that raises fails the requests of that batch, and
only those. A caller's timeout or cancellation withdraws its request if it is still
queued; if its batch is already running, the other rows of the batch are unaffected and
its own rows are dropped. A full queue refuses new requests at once with
:class:`OverloadedError` (HTTP 503). ``close()`` stops admission and drains.

>>> import asyncio, numpy as np, aioflow as flow, aioflow.typing as tp
>>> from aioflow.serving import DynamicBatcher
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def double(x: tp.Numpy.Placeholder((8, 3))) -> tp.Numpy:
...     return x * 2
>>> async def main():
...     async with DynamicBatcher(double, max_wait=0.01) as model:
...         one = await model(np.array([1, 2, 3], np.float32))          # one sample
...         many = await model(np.ones((2, 3), np.float32))             # two samples
...         both = await asyncio.gather(*(model(np.full(3, i, np.float32))
...                                       for i in range(5)))            # one step
...         return one, many.shape, [float(b[0]) for b in both], model.metrics()["batches"]
>>> asyncio.run(main())
(array([2., 4., 6.], dtype=float32), (2, 3), [0.0, 2.0, 4.0, 6.0, 8.0], 3)
"""
from __future__ import annotations

import asyncio
import collections
import logging
import math

import numpy as np

from ..engine.inputs import require_fits
from ..engine.signature import bind_arguments
from .metrics import ServingMetrics, prometheus_text
from ..engine.session import default_session

__all__ = ["DynamicBatcher", "ServingError", "OverloadedError", "BatcherClosedError",
           "RequestTimeoutError"]

log = logging.getLogger("aioflow.serving")

_UNSET = object()
_QUEUED, _BATCHED, _DROPPED = 0, 1, 2


class ServingError(Exception):
    """Base of the batcher's own errors. ``status_code`` is the HTTP status to answer."""

    status_code = 500


class OverloadedError(ServingError):
    """The queue is full: the request was refused without waiting. Answer HTTP 503."""

    status_code = 503


class BatcherClosedError(ServingError):
    """The batcher is closing or closed and takes no new requests. Answer HTTP 503."""

    status_code = 503


class RequestTimeoutError(ServingError, TimeoutError):
    """The request's timeout expired before its result was ready. Answer HTTP 504."""

    status_code = 504


class _Leaf:
    """One placeholder of the job: where it sits in the arguments, and its batch axis."""

    __slots__ = ("name", "spec", "axis", "shape", "sample_shape", "dtype")

    def __init__(self, name, spec, job_name):
        if spec.kind != "numpy":
            raise TypeError(f"DynamicBatcher({job_name}): placeholder {name!r} is "
                            f"{spec.kind}; only tp.Numpy placeholders can be batched")
        if spec.batch_axis is None or not spec.shape:
            raise TypeError(f"DynamicBatcher({job_name}): placeholder {name!r} has no batch "
                            "axis; every placeholder of a batched job needs one")
        self.name = name
        self.spec = spec
        self.axis = spec.batch_axis % len(spec.shape)
        self.shape = spec.shape
        self.sample_shape = spec.shape[:self.axis] + spec.shape[self.axis + 1:]
        self.dtype = spec.dtype.numpy

    @property
    def batch_size(self) -> int:
        return self.shape[self.axis]

    def rows(self, value) -> tuple[np.ndarray, bool]:
        """``value`` as a private array of rows along the batch axis; True if one sample."""
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        if array.dtype != self.dtype:
            if array.dtype.kind not in "biuf" or not np.can_cast(array.dtype, self.dtype,
                                                                 casting="same_kind"):
                raise TypeError(f"argument {self.name!r}: expected {self.dtype} data, got "
                                f"{array.dtype}")
            require_fits(array, self.dtype, f"argument {self.name!r}")
        if array.shape == self.sample_shape:
            return np.expand_dims(array.astype(self.dtype, copy=True), self.axis), True
        if (array.ndim == len(self.shape)
                and array.shape[:self.axis] + array.shape[self.axis + 1:] == self.sample_shape):
            if array.shape[self.axis] == 0:
                raise ValueError(f"argument {self.name!r}: no samples (batch axis of size 0)")
            return array.astype(self.dtype, copy=True), False
        batch_form = [str(d) for d in self.shape]
        batch_form[self.axis] = "n"
        raise ValueError(f"argument {self.name!r}: expected one sample of shape "
                         f"{self.sample_shape} or n samples of shape "
                         f"({', '.join(batch_form)}), got shape {array.shape}")


class _Request:
    __slots__ = ("rows", "n", "single", "future", "enqueued", "state")

    def __init__(self, rows, n, single, future, enqueued):
        self.rows = rows
        self.n = n
        self.single = single
        self.future = future
        self.enqueued = enqueued
        self.state = _QUEUED


class DynamicBatcher:
    """Serve a predict job to many concurrent callers, one job step per batch.

    ``job``: a ``@flow.global_function(type="predict")`` job whose return annotation is a
    value form (``tp.Numpy``, ``Tuple[...]``, ``tp.Dict``, ...), every placeholder of which
    has a batch axis of the same size (the job's batch size). Every placeholder is batched;
    every leaf of the result must have that batch size as its first axis.

    ``max_batch_size``: at most this many rows per step (default and maximum: the job's
    batch size); the rest of the batch is zero padding. ``max_wait``: seconds a batch may
    wait, after its oldest request arrived, for more rows (0: take what is queued now).
    ``max_queue``: samples that may wait for a batch (default 16 batches); beyond it new
    requests raise :class:`OverloadedError` at once. ``timeout``: default per-request
    timeout in seconds (None: none), overridable per call. ``max_inflight_batches``:
    batches submitted to the runtime at once; 1 (the default) forms the next batch while
    the current step runs, which gives the fullest batches under load. ``name``: the
    ``model`` label of the metrics (default: the job's name).

    Call ``await model(*args, timeout=..., **kwargs)`` with the job's arguments, each
    either **one sample** (the placeholder's shape without its batch axis; the result
    leaves come back without the batch axis) or **n samples** (the placeholder's shape
    with n, 1 <= n <= max_batch_size, on the batch axis; the result leaves have n rows).
    A request's rows always go to one step together.

    Lifecycle: ``async with DynamicBatcher(job) as model:``, or ``await model.start()``
    (compiles the job; a call also starts it if needed) and ``await model.close()``
    (stops admission, finishes queued requests, waits for running steps). A batcher
    belongs to the event loop it started on.

    Errors raised by a call: ``TypeError``/``ValueError`` (malformed request, at once),
    :class:`OverloadedError`, :class:`BatcherClosedError`, :class:`RequestTimeoutError`,
    or the exception the job's step raised for the batch this request was in.
    """

    def __init__(self, job, *, max_batch_size: int | None = None, max_wait: float = 0.005,
                 max_queue: int | None = None, timeout: float | None = None,
                 max_inflight_batches: int = 1, name: str | None = None):
        job_name = getattr(job, "__name__", repr(job))
        spec = getattr(job, "return_spec", None)
        if spec is None or not hasattr(job, "parameters"):
            raise TypeError(f"DynamicBatcher: expected an aioflow job function "
                            f"(@flow.global_function), got {job!r}")
        if getattr(job, "job_type", "predict") != "predict":
            raise ValueError(f"DynamicBatcher({job_name}): a {job.job_type} job cannot be "
                             "batched (padding rows would change its updates); use a "
                             "type='predict' job")
        if spec.callback or spec.is_legacy or spec.is_none:
            form = ("tp.Callback[...]" if spec.callback else
                    "no return annotation" if spec.is_legacy else "-> None")
            raise TypeError(f"DynamicBatcher({job_name}): the job returns {form}; annotate "
                            "it with a value form such as -> tp.Numpy or -> Tuple[...]")
        self.job = job
        self.name = name or job_name
        self._params = []  # (parameter, [leaf, ...]); a Tuple placeholder has several
        self._leaves: list[_Leaf] = []
        for p in job.parameters:
            if p.name == "timeout":
                raise TypeError(f"DynamicBatcher({job_name}): the keyword 'timeout' is the "
                                "batcher's; rename the job parameter")
            specs = p.spec if isinstance(p.spec, tuple) else (p.spec,)
            leaves = [_Leaf(p.name if len(specs) == 1 and not isinstance(p.spec, tuple)
                            else f"{p.name}[{i}]", s, job_name) for i, s in enumerate(specs)]
            self._params.append((p, leaves))
            self._leaves += leaves
        if not self._leaves:
            raise TypeError(f"DynamicBatcher({job_name}): the job has no placeholders")
        sizes = {leaf.batch_size for leaf in self._leaves}
        if len(sizes) != 1:
            sizes_text = ", ".join(f"{leaf.name}: {leaf.batch_size}" for leaf in self._leaves)
            raise ValueError(f"DynamicBatcher({job_name}): the placeholders' batch axes differ "
                             f"in size ({sizes_text})")
        self.batch_size = sizes.pop()
        if max_batch_size is None:
            max_batch_size = self.batch_size
        if not isinstance(max_batch_size, int) or not 1 <= max_batch_size <= self.batch_size:
            raise ValueError(f"DynamicBatcher({job_name}): max_batch_size must be an int in "
                             f"[1, {self.batch_size}] (the job's batch size), got "
                             f"{max_batch_size!r}")
        if not (isinstance(max_wait, (int, float)) and 0 <= max_wait < math.inf):
            raise ValueError(f"DynamicBatcher: max_wait must be a number of seconds >= 0, "
                             f"got {max_wait!r}")
        if max_queue is None:
            max_queue = 16 * max_batch_size
        if not isinstance(max_queue, int) or max_queue < max_batch_size:
            raise ValueError(f"DynamicBatcher: max_queue must be an int >= max_batch_size "
                             f"({max_batch_size}), got {max_queue!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"DynamicBatcher: timeout must be > 0 seconds or None, got "
                             f"{timeout!r}")
        if not isinstance(max_inflight_batches, int) or max_inflight_batches < 1:
            raise ValueError("DynamicBatcher: max_inflight_batches must be a positive int, "
                             f"got {max_inflight_batches!r}")
        self.max_batch_size = max_batch_size
        self.max_wait = float(max_wait)
        self.max_queue = max_queue
        self.timeout = timeout
        self.max_inflight_batches = max_inflight_batches
        self._metrics = ServingMetrics(max_batch_size)
        self._queue: collections.deque[_Request] = collections.deque()
        self._queued_rows = 0
        self._queued_requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Future | None = None
        self._worker: asyncio.Task | None = None
        self._wakeup: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._batch_tasks: set[asyncio.Task] = set()
        self._closing = False
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "closing" if self._closing else (
            "running" if self._worker is not None else "not started")
        return (f"<DynamicBatcher {self.name} max_batch_size={self.max_batch_size} "
                f"max_wait={self.max_wait} {state}>")

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Compile the job (on a worker thread), check it can be split, start batching."""
        if self._closing:
            raise BatcherClosedError(f"model {self.name!r} is closed")
        loop = asyncio.get_running_loop()
        if self._starting is None:
            self._loop = loop
            self._starting = loop.create_future()
            try:
                await loop.run_in_executor(None, self._compile_and_check)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    self._starting.cancel()
                else:
                    self._starting.set_exception(exc)
                    self._starting.exception()  # retrieved; concurrent starters see it too
                self._starting = None
                raise
            self._wakeup = asyncio.Event()
            self._slots = asyncio.Semaphore(self.max_inflight_batches)
            self._worker = loop.create_task(self._work(), name=f"DynamicBatcher({self.name})")
            self._starting.set_result(None)
            return
        self._check_loop(loop)
        await asyncio.shield(self._starting)

    def _compile_and_check(self) -> None:
        compiled = self.job.compiled_for(default_session())
        for i, blob in enumerate(compiled.graph.outputs):
            if not blob.shape or blob.shape[0] != self.batch_size:
                raise ValueError(
                    f"DynamicBatcher({self.name}): result {i} of the job has shape "
                    f"{blob.shape}; every result must have the batch size "
                    f"{self.batch_size} as its first axis to be split between requests")

    async def close(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop taking requests; finish queued ones (``drain``) and the running steps.

        ``drain=False``, or a drain that takes longer than ``timeout`` seconds, fails the
        requests still queued with :class:`BatcherClosedError`; steps already submitted
        always complete (a running step cannot be interrupted).
        """
        self._closing = True
        if self._starting is not None and not self._starting.done():
            await asyncio.wait([self._starting])  # a failed start leaves nothing to drain
        if self._worker is None:
            self._closed = True
            return
        self._check_loop(asyncio.get_running_loop())
        if not drain:
            self._fail_queued(BatcherClosedError(f"model {self.name!r} closed before this "
                                                 "request was batched"))
        self._wakeup.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._worker), timeout)
        except asyncio.TimeoutError:  # TimeoutError on 3.11+
            self._fail_queued(BatcherClosedError(f"model {self.name!r} closed: draining took "
                                                 f"longer than {timeout} s"))
            self._wakeup.set()
            await asyncio.shield(self._worker)
        while self._batch_tasks:
            await asyncio.gather(*self._batch_tasks, return_exceptions=True)
        self._closed = True

    async def __aenter__(self) -> "DynamicBatcher":
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def accepting(self) -> bool:
        """True while started and not closing: what a readiness probe should report."""
        return self._worker is not None and not self._closing

    # -- requests --------------------------------------------------------------------------
    async def __call__(self, *args, timeout=_UNSET, **kwargs):
        """Run the job on these samples, batched with other callers'; see the class doc."""
        rows, n, single = self._bind(args, kwargs)
        if self._closing:
            raise BatcherClosedError(f"model {self.name!r} is closed")
        if self._worker is None:
            await self.start()
        loop = asyncio.get_running_loop()
        self._check_loop(loop)
        if self._closing:
            raise BatcherClosedError(f"model {self.name!r} is closed")
        if n > self.max_batch_size:
            raise ValueError(f"a request may have at most {self.max_batch_size} samples "
                             f"(max_batch_size), got {n}")
        metrics = self._metrics
        if self._queued_rows + n > self.max_queue:
            metrics.count("rejected")
            raise OverloadedError(f"model {self.name!r} is overloaded: {self._queued_rows} "
                                  f"samples are waiting (max_queue={self.max_queue}); retry "
                                  "later")
        future = loop.create_future()
        request = _Request(rows, n, single, future, loop.time())
        future.add_done_callback(lambda _f, r=request: self._withdraw(r))
        self._queue.append(request)
        self._queued_rows += n
        self._queued_requests += 1
        metrics.count("requests")
        metrics.count("samples", n)
        self._wakeup.set()
        if timeout is _UNSET:
            timeout = self.timeout
        try:
            if timeout is None:
                return await future
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:  # TimeoutError on 3.11+
            if not future.cancelled():
                raise  # the step itself raised a TimeoutError
            metrics.count("timed_out")
            where = "in the queue" if request.state == _DROPPED else "in its batch"
            raise RequestTimeoutError(f"model {self.name!r}: no result within {timeout} s "
                                      f"(timed out {where})") from None
        except asyncio.CancelledError:
            metrics.count("cancelled")
            raise

    def _bind(self, args, kwargs):
        """The request's rows per placeholder; raises TypeError/ValueError if malformed."""
        values = bind_arguments([p for p, _ in self._params], args, kwargs, self.name)
        rows, forms = [], set()
        for p, leaves in self._params:
            value = values[p.name]
            if isinstance(p.spec, tuple):
                if not isinstance(value, (tuple, list)) or len(value) != len(leaves):
                    raise TypeError(f"{self.name}: argument {p.name!r} must be a tuple of "
                                    f"{len(leaves)} arrays")
                parts = value
            else:
                parts = (value,)
            for leaf, part in zip(leaves, parts):
                array, single = leaf.rows(part)
                rows.append(array)
                forms.add((single, array.shape[leaf.axis]))
        if len(forms) != 1:
            raise ValueError(f"{self.name}: the arguments disagree on the number of samples "
                             "(pass one sample for every argument, or n samples for every "
                             "argument)")
        single, n = forms.pop()
        return rows, n, single

    def _withdraw(self, request: _Request) -> None:
        """Done-callback of a request's future: a request cancelled while queued leaves."""
        if request.state == _QUEUED:
            request.state = _DROPPED
            request.rows = None
            self._queued_rows -= request.n
            self._queued_requests -= 1

    def _fail_queued(self, exc: BaseException) -> None:
        while self._queue:
            request = self._queue.popleft()
            if request.state == _QUEUED and not request.future.done():
                self._metrics.count("failed")
                request.future.set_exception(exc)  # _withdraw fixes the counts

    def _check_loop(self, loop) -> None:
        if self._loop is not None and loop is not self._loop:
            raise RuntimeError(f"DynamicBatcher {self.name!r} was started on another event "
                               "loop; create one batcher per loop")

    # -- the worker ------------------------------------------------------------------------
    async def _work(self) -> None:
        try:
            while True:
                await self._slots.acquire()
                batch = await self._next_batch()
                if batch is None:
                    self._slots.release()
                    return
                task = asyncio.get_running_loop().create_task(self._run(batch))
                self._batch_tasks.add(task)
                task.add_done_callback(self._batch_tasks.discard)
        except BaseException as exc:
            self._closing = True
            if not isinstance(exc, asyncio.CancelledError):
                log.exception("aioflow.serving: the batcher of %r stopped", self.name)
            self._fail_queued(BatcherClosedError(f"model {self.name!r} stopped: {exc!r}"))
            raise

    async def _next_batch(self) -> list[_Request] | None:
        """Wait for a batch: full, or its oldest request waited ``max_wait``; None: done."""
        loop = asyncio.get_running_loop()
        queue = self._queue
        while True:
            while queue and queue[0].state != _QUEUED:
                queue.popleft()
            if not queue:
                if self._closing:
                    return None
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            left = queue[0].enqueued + self.max_wait - loop.time()
            if self._queued_rows >= self.max_batch_size or left <= 0 or self._closing:
                break
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), left)
            except asyncio.TimeoutError:  # TimeoutError on 3.11+
                pass
        batch, rows = [], 0
        while queue:
            request = queue[0]
            if request.state != _QUEUED:
                queue.popleft()
                continue
            if rows + request.n > self.max_batch_size:
                break  # first in, first out: no reordering to fill the batch
            queue.popleft()
            request.state = _BATCHED
            self._queued_rows -= request.n
            self._queued_requests -= 1
            batch.append(request)
            rows += request.n
        return batch

    def _assemble(self, batch: list[_Request]):
        """The job's arguments: each placeholder's rows stacked and zero-padded."""
        arrays = []
        for i, leaf in enumerate(self._leaves):
            out = np.zeros(leaf.shape, leaf.dtype)
            index = [slice(None)] * len(leaf.shape)
            offset = 0
            for request in batch:
                index[leaf.axis] = slice(offset, offset + request.n)
                out[tuple(index)] = request.rows[i]
                offset += request.n
            arrays.append(out)
        positional, keyword, at = [], {}, 0
        for p, leaves in self._params:
            if isinstance(p.spec, tuple):
                value = tuple(arrays[at:at + len(leaves)])
            else:
                value = arrays[at]
            at += len(leaves)
            if p.positional:
                positional.append(value)
            else:
                keyword[p.name] = value
        return positional, keyword

    async def _run(self, batch: list[_Request]) -> None:
        loop = asyncio.get_running_loop()
        metrics = self._metrics
        rows = sum(r.n for r in batch)
        metrics.inflight_batches += 1
        started = loop.time()
        try:
            positional, keyword = self._assemble(batch)
            for request in batch:
                request.rows = None
            result = await self.job(*positional, **keyword)
        except asyncio.CancelledError:
            for request in batch:
                request.future.cancel()
            raise
        except BaseException as exc:  # the step's error goes to this batch's callers only
            for request in batch:
                if not request.future.done():
                    metrics.count("failed")
                    metrics.record_latency(loop.time() - request.enqueued)
                    request.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            offset = 0
            now = loop.time()
            for request in batch:
                if not request.future.done():
                    request.future.set_result(
                        _split(result, offset, request.n, request.single))
                    metrics.count("succeeded")
                    metrics.record_latency(now - request.enqueued)
                offset += request.n
        finally:
            metrics.inflight_batches -= 1
            metrics.record_batch(rows, len(batch), loop.time() - started, self.batch_size - rows)
            self._slots.release()

    # -- metrics ---------------------------------------------------------------------------
    def metrics(self) -> dict:
        """A plain dict: counts, queue depth, batch-size histogram, latency percentiles.

        Keys: ``requests samples succeeded failed rejected timed_out cancelled batches
        batch_rows padded_rows`` (counters), ``queue_depth queued_samples
        inflight_batches`` (now), ``batch_size_histogram`` ({rows: steps}),
        ``mean_batch_size``, ``latency_seconds`` and ``batch_seconds`` ({count, sum, p50,
        p90, p99}; percentiles over the last 10,000, NaN before the first).
        """
        self._metrics.queue_depth = self._queued_requests
        self._metrics.queued_samples = self._queued_rows
        return self._metrics.snapshot()

    def reset_metrics(self) -> None:
        """Start the metrics' counters, histograms and latencies afresh, e.g. after a
        warm-up call at start-up, which is no client's request and would otherwise show in
        ``/metrics`` as one (and as a batch of mostly padding).

        >>> import asyncio, numpy as np, aioflow as flow, aioflow.typing as tp
        >>> @flow.global_function(type="predict")
        ... def double(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        ...     return x * 2
        >>> async def serve():
        ...     async with DynamicBatcher(double) as model:
        ...         await model(np.zeros(2, np.float32))      # warm-up
        ...         model.reset_metrics()
        ...         return model.metrics()["requests"], model.metrics()["padded_rows"]
        >>> asyncio.run(serve())
        (0, 0)
        """
        self._metrics.reset()

    def prometheus(self, prefix: str = "aioflow_serving") -> str:
        """The same metrics in Prometheus' text exposition format, labelled model=name."""
        return prometheus_text({self.name: self.metrics()}, prefix)


def _split(tree, offset: int, n: int, single: bool):
    """This request's part of every array leaf of ``tree`` (rows on the first axis)."""
    if isinstance(tree, np.ndarray):
        return np.array(tree[offset]) if single else tree[offset:offset + n].copy()
    if isinstance(tree, dict):
        return {k: _split(v, offset, n, single) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_split(v, offset, n, single) for v in tree)
    return tree
