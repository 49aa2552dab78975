"""aioflow.serving.DynamicBatcher: coalescing, padding, splitting, overload, timeouts,
cancellation, error isolation, draining, metrics.

Where a test needs a batch to be "running" while other requests wait, it holds the
session's lock: the compute thread takes it to run a step, so steps wait (deterministically,
without timing assumptions) until the test lets go.
"""
import asyncio
import contextlib
import doctest
import re
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.serving
import aioflow.serving.batcher
import aioflow.serving.metrics
import aioflow.typing as tp
from aioflow.engine import session as session_mod
from aioflow.serving import (BatcherClosedError, DynamicBatcher, OverloadedError,
                             RequestTimeoutError)

pytestmark = pytest.mark.timeout(30)

B = 8  # the jobs' batch size


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


class Counting:
    """A job that counts its calls (= steps), otherwise the job itself."""

    def __init__(self, job):
        self.job = job
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.job, name)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.job(*args, **kwargs)


def make_dense(batch=B):
    @flow.global_function(type="predict")
    def dense(x: tp.Numpy.Placeholder((batch, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 4, name="fc")
    return Counting(dense)


def make_labelled(batch=B):
    """Two placeholders, a tuple result; a label outside [0, 4) makes the step raise."""
    @flow.global_function(type="predict")
    def labelled(x: tp.Numpy.Placeholder((batch, 3)),
                 labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32),
                 ) -> Tuple[tp.Numpy, tp.Numpy]:
        logits = flow.layers.dense(x, 4, name="fc")
        return flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits), logits
    return Counting(labelled)


async def reference(x):
    """The unbatched answer: x @ W^T + b with the session's variables."""
    variables = await flow.get_all_variables()
    return np.asarray(x, np.float32) @ variables["fc-weight"].T + variables["fc-bias"]


@contextlib.contextmanager
def steps_held():
    """Steps cannot run (the compute thread waits for the session lock) until exit."""
    lock = session_mod.default_session().lock
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def sample(i, rows=None):
    shape = (3,) if rows is None else (rows, 3)
    return np.full(shape, 0.1 * i, np.float32) + np.arange(3, dtype=np.float32)


async def test_concurrent_callers_share_steps_and_get_their_own_rows():
    job = make_dense()
    async with DynamicBatcher(job, max_wait=0.05) as model:
        xs = [sample(i) for i in range(20)]
        results = await asyncio.gather(*(model(x) for x in xs))
        assert job.calls == 3  # 20 rows in steps of 8: 8 + 8 + 4
        expected = await reference(np.stack(xs))
        for i, result in enumerate(results):
            assert result.shape == (4,)
            np.testing.assert_allclose(result, expected[i], rtol=1e-5, atol=1e-6)
        metrics = model.metrics()
    assert metrics["batches"] == 3 and metrics["succeeded"] == 20
    assert metrics["batch_size_histogram"][8] == 2 and metrics["batch_size_histogram"][4] == 1
    assert metrics["padded_rows"] == 4


async def test_short_batch_is_padded_and_equals_the_direct_call():
    job = make_dense()
    async with DynamicBatcher(job, max_wait=0) as model:
        x = sample(3)
        got = await model(x)
        direct = await job.job(np.concatenate([x[None], np.zeros((B - 1, 3), np.float32)]))
        np.testing.assert_array_equal(got, direct[0])
        assert model.metrics()["padded_rows"] == B - 1
    async with DynamicBatcher(job, max_batch_size=3, max_wait=0) as model:
        results = await asyncio.gather(*(model(sample(i)) for i in range(4)))  # 3 + 1 rows
        np.testing.assert_allclose(np.stack(results),
                                   await reference(np.stack([sample(i) for i in range(4)])),
                                   rtol=1e-5, atol=1e-6)
        assert model.metrics()["padded_rows"] == (B - 3) + (B - 1)  # up to the job's batch


async def test_multi_sample_requests_get_exactly_their_rows():
    job = make_dense()
    async with DynamicBatcher(job, max_wait=0.05) as model:
        sizes = [1, 3, 2, 5, 4]
        requests = [sample(i, rows=n) for i, n in enumerate(sizes)]
        results = await asyncio.gather(*(model(r) for r in requests))
        for request, result in zip(requests, results):
            assert result.shape == (request.shape[0], 4)
            np.testing.assert_allclose(result, await reference(request), rtol=1e-5, atol=1e-6)
        # FIFO, a request never split: [1, 3, 2] | [5] | [4]  (5 does not fit after 6 rows)
        assert job.calls == 3
        assert (await model([[0.0, 1.0, 2.0]])).shape == (1, 4)  # lists work too


async def test_malformed_requests_fail_alone_before_batching():
    job = make_dense()
    async with DynamicBatcher(job, max_batch_size=4) as model:
        with pytest.raises(ValueError, match=r"expected one sample of shape \(3,\) or n "
                                             r"samples of shape \(n, 3\), got shape \(4,\)"):
            await model(np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="at most 4 samples"):
            await model(np.zeros((5, 3), np.float32))
        with pytest.raises(TypeError, match="expected float32 data, got <U1"):
            await model(np.array(["a", "b", "c"]))
        with pytest.raises(TypeError, match="missing argument"):
            await model()
        assert job.calls == 0
        assert (await model(sample(1))).shape == (4,)


async def test_integers_that_would_wrap_are_refused_before_batching():
    job = make_labelled()
    async with DynamicBatcher(job) as model:
        with pytest.raises(ValueError, match=r"argument 'labels': values from 4294967296 to "
                                             r"4294967296 do not fit in int32"):
            await model(sample(0), np.array(2 ** 32, np.int64))
        assert job.calls == 0
        losses, _ = await model(sample(0), np.array(1, np.int64))  # int64 that fits: fine
        assert losses.shape == ()


async def test_several_placeholders_tuple_and_dict_results():
    labelled = make_labelled()
    async with DynamicBatcher(labelled, max_wait=0.05) as model:
        x = np.stack([sample(i) for i in range(5)])
        labels = np.array([0, 1, 2, 3, 1], np.int32)
        results = await asyncio.gather(model(x[:2], labels[:2]),
                                       model(x=x[2], labels=labels[2]),
                                       model(x[3:], labels=labels[3:].astype(np.int64)))
        assert labelled.calls == 1
        loss, logits = results[0]
        assert loss.shape == (2,) and logits.shape == (2, 4)
        assert results[1][0].shape == () and results[1][1].shape == (4,)
        all_logits = np.concatenate([results[0][1], results[1][1][None], results[2][1]])
        np.testing.assert_allclose(all_logits, await reference(x), rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match="disagree on the number of samples"):
            await model(x[:2], labels[:3])

    @flow.global_function(type="predict")
    def columns(pair: Tuple[tp.Numpy.Placeholder((B, 2)), tp.Numpy.Placeholder((B, 2))],
                *, t: tp.Numpy.Placeholder((2, B), batch_axis=1)) -> tp.Dict:
        a, b = pair
        return {"sum": a + b, "t": flow.transpose(t, perm=[1, 0])}

    async with DynamicBatcher(columns, max_wait=0.05) as model:
        one, many = await asyncio.gather(
            model((np.ones(2), np.full(2, 2.0)), t=np.array([5.0, 6.0])),
            model((np.ones((3, 2)), np.zeros((3, 2))), t=np.arange(6.0).reshape(2, 3)))
    assert set(one) == {"sum", "t"}
    np.testing.assert_array_equal(one["sum"], [3.0, 3.0])
    np.testing.assert_array_equal(one["t"], [5.0, 6.0])
    np.testing.assert_array_equal(many["t"], np.arange(6.0).reshape(2, 3).T)


async def test_full_queue_refuses_at_once_with_overloaded_error():
    job = make_dense()
    async with DynamicBatcher(job, max_queue=B) as model:
        # All nine enqueue in one event-loop tick, before the worker can take any.
        results = await asyncio.gather(*(model(sample(i)) for i in range(B + 1)),
                                       return_exceptions=True)
        assert all(isinstance(r, np.ndarray) for r in results[:B])
        assert isinstance(results[B], OverloadedError)
        assert "overloaded" in str(results[B]) and results[B].status_code == 503
        assert model.metrics()["rejected"] == 1
        assert (await model(sample(0))).shape == (4,)  # and it keeps serving


async def test_timeouts_do_not_disturb_other_requests():
    job = make_dense()
    async with DynamicBatcher(job, max_batch_size=2, max_wait=0) as model:
        with steps_held():
            a = asyncio.ensure_future(model(sample(1), timeout=0.05))  # in batch 1
            b = asyncio.ensure_future(model(sample(2)))                  # in batch 1
            c = asyncio.ensure_future(model(sample(3), timeout=0.05))  # queued
            d = asyncio.ensure_future(model(sample(4)))                  # queued
            with pytest.raises(RequestTimeoutError, match="in its batch"):
                await a
            with pytest.raises(RequestTimeoutError, match="in the queue"):
                await c
            assert isinstance(a.exception(), TimeoutError)
        expected = await reference(np.stack([sample(2), sample(4)]))
        np.testing.assert_allclose(await b, expected[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(await d, expected[1], rtol=1e-5, atol=1e-6)
        metrics = model.metrics()
    assert metrics["timed_out"] == 2 and metrics["succeeded"] == 2
    assert metrics["batch_rows"] == 3  # c was withdrawn before its batch formed


async def test_cancelled_callers_do_not_disturb_other_requests():
    job = make_dense()
    async with DynamicBatcher(job, max_batch_size=2, max_wait=0) as model:
        with steps_held():
            tasks = [asyncio.ensure_future(model(sample(i))) for i in range(4)]
            for _ in range(5):
                await asyncio.sleep(0)  # batch 1 (0, 1) submitted, 2 and 3 queued
            assert model.metrics()["queue_depth"] == 2
            tasks[0].cancel()  # in the running batch
            tasks[2].cancel()  # still queued: withdrawn
            await asyncio.sleep(0)
            assert model.metrics()["queue_depth"] == 1
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        assert isinstance(results[2], asyncio.CancelledError)
        expected = await reference(np.stack([sample(1), sample(3)]))
        np.testing.assert_allclose(results[1], expected[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(results[3], expected[1], rtol=1e-5, atol=1e-6)
        metrics = model.metrics()
    assert metrics["cancelled"] == 2 and metrics["batches"] == 2 and metrics["batch_rows"] == 3


async def test_a_failing_step_fails_exactly_the_callers_of_its_batch():
    labelled = make_labelled()
    x = sample(0)
    async with DynamicBatcher(labelled, max_batch_size=2, max_wait=0.05) as model:
        results = await asyncio.gather(model(x, np.int32(99)),  # bad label: batch 1 fails
                                       model(x, np.int32(1)),   # same batch: fails too
                                       model(x, np.int32(2)),   # batch 2
                                       model(x, np.int32(3)),   # batch 2
                                       return_exceptions=True)
        for failed in results[:2]:
            assert isinstance(failed, ValueError) and "labels must lie" in str(failed)
        for ok in results[2:]:
            assert isinstance(ok, tuple) and ok[1].shape == (4,)
        assert labelled.calls == 2
        assert model.metrics()["failed"] == 2
        assert (await model(x, np.int32(0)))[0].shape == ()  # later batches are fine


async def test_close_drains_queued_requests_then_refuses():
    job = make_dense()
    model = DynamicBatcher(job, max_batch_size=2, max_wait=0)
    await model.start()
    with steps_held():
        tasks = [asyncio.ensure_future(model(sample(i))) for i in range(5)]
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(model.close())
        await asyncio.sleep(0.05)
        assert not closing.done() and not model.accepting
        with pytest.raises(BatcherClosedError):
            await model(sample(9))
    await closing
    results = await asyncio.gather(*tasks)
    np.testing.assert_allclose(np.stack(results),
                               await reference(np.stack([sample(i) for i in range(5)])),
                               rtol=1e-5, atol=1e-6)
    assert model.closed and job.calls == 3
    with pytest.raises(BatcherClosedError, match="closed"):
        await model(sample(0))


async def test_close_without_drain_fails_queued_but_finishes_running_batches():
    job = make_dense()
    model = DynamicBatcher(job, max_batch_size=2, max_wait=0)
    await model.start()
    with steps_held():
        tasks = [asyncio.ensure_future(model(sample(i))) for i in range(4)]
        for _ in range(5):
            await asyncio.sleep(0)
        closing = asyncio.ensure_future(model.close(drain=False))
        await asyncio.sleep(0)
    await closing
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["ndarray", "ndarray", "BatcherClosedError",
                                                    "BatcherClosedError"]
    assert job.calls == 1


async def test_metrics_dict_and_prometheus_text():
    job = make_dense()
    async with DynamicBatcher(job, max_wait=0.01, name="dense_model") as model:
        await asyncio.gather(*(model(sample(i)) for i in range(10)))
        await model(sample(0, rows=3))
        metrics = model.metrics()
        text = model.prometheus()
    assert metrics["requests"] == 11 and metrics["samples"] == 13
    assert metrics["succeeded"] == 11 and metrics["queue_depth"] == 0
    assert sum(metrics["batch_size_histogram"].values()) == metrics["batches"]
    latency = metrics["latency_seconds"]
    assert latency["count"] == 11
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] < 10
    assert metrics["mean_batch_size"] == 13 / metrics["batches"]
    sample_line = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? '
                             r'(-?[0-9.e+-]+|NaN|[+-]Inf)$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or \
            sample_line.match(line), line
    assert 'aioflow_serving_requests_total{model="dense_model"} 11' in text
    assert 'aioflow_serving_batch_size_bucket{model="dense_model",le="+Inf"}' in text
    assert 'aioflow_serving_request_latency_seconds{model="dense_model",quantile="0.99"}' in text


async def test_refuses_jobs_it_cannot_batch():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((B, 3))) -> tp.Numpy:
        loss = flow.math.reduce_mean(flow.layers.dense(x, 1, name="t"))
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def callback(x: tp.Numpy.Placeholder((B, 3))) -> tp.Callback[tp.Numpy]:
        return x

    @flow.global_function(type="predict")
    def reduced(x: tp.Numpy.Placeholder((B, 3))) -> tp.Numpy:
        return flow.math.reduce_sum(x)

    @flow.global_function(type="predict")
    def mismatched(x: tp.Numpy.Placeholder((B, 3)),
                   y: tp.Numpy.Placeholder((B + 1, 3))) -> tp.Numpy:
        return x

    with pytest.raises(ValueError, match="train job cannot be batched"):
        DynamicBatcher(train)
    with pytest.raises(TypeError, match="Callback"):
        DynamicBatcher(callback)
    with pytest.raises(ValueError, match="batch axes differ"):
        DynamicBatcher(mismatched)
    with pytest.raises(ValueError, match="max_batch_size"):
        DynamicBatcher(reduced, max_batch_size=B + 1)
    model = DynamicBatcher(reduced)
    with pytest.raises(ValueError, match=r"result 0 of the job has shape \(1,\)"):
        await model.start()


def test_module_doctests():
    for module in (aioflow.serving, aioflow.serving.batcher, aioflow.serving.metrics):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__
