"""The three result forms over one pipeline: blocking, callback, await (and legacy)."""
import asyncio
import threading

import anyio
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from concurrently import gather

from .jobs import X, Y, make_predict, make_train, reference_losses


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_callback_form_matches_blocking_form_in_order():
    expected = reference_losses(8)
    train = make_train(tp.Callback[tp.Numpy])
    seen = []
    for i in range(8):
        returned = train(X, Y)(lambda loss, i=i: seen.append((i, float(loss.mean()))))
        assert returned is None
    flow.sync_default_session()
    assert [i for i, _ in seen] == list(range(8))
    np.testing.assert_allclose([v for _, v in seen], expected, rtol=1e-6)


def test_a_queued_steps_callback_runs_on_the_delivery_thread_not_the_caller():
    # (a job's first call is queued: not compiled before it. A short callback of a step
    # run in the caller's thread runs there: tests/runtime/test_inline_callbacks.py)
    train = make_train(tp.Callback[tp.Numpy])
    threads = []
    train(X, Y)(lambda _: threads.append(threading.current_thread().name))
    flow.sync_default_session()
    assert threads == ["aioflow-delivery"]


@pytest.mark.anyio
async def test_await_form_matches_blocking_form():
    expected = await anyio.to_thread.run_sync(reference_losses, 5)
    train = make_train()
    got = [float((await train(X, Y)).mean()) for _ in range(5)]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.anyio
async def test_await_form_returns_awaitable_not_value(anyio_backend):
    import sniffio
    assert sniffio.current_async_library() == anyio_backend   # the loop it claims to run on
    predict = make_predict()
    pending = predict(X)
    assert not isinstance(pending, np.ndarray)
    assert (await pending).shape == (4, 5)


async def test_callback_in_async_code_runs_on_callers_loop():
    train = make_train(tp.Callback[tp.Numpy])
    loop = asyncio.get_running_loop()
    seen = []
    for i in range(4):
        train(X, Y)(lambda loss, i=i: seen.append((i, asyncio.get_running_loop() is loop)))
    await flow.sync_default_session()
    for _ in range(10):
        if len(seen) == 4:
            break
        await asyncio.sleep(0.01)
    assert seen == [(i, True) for i in range(4)]


@pytest.mark.anyio
async def test_hundreds_of_concurrent_awaits_each_get_their_own_result():
    predict = make_predict()
    inputs = [np.full((4, 3), i, np.float32) for i in range(300)]
    results = await gather(predict(x) for x in inputs)
    weights = await flow.get_all_variables()
    for x, y in zip(inputs, results):
        np.testing.assert_allclose(y, x @ weights["fc-weight"].T + weights["fc-bias"],
                                   rtol=1e-5)


def test_legacy_get_and_async_get():
    config = flow.function_config()

    @flow.global_function(config)
    def job(x=flow.FixedTensorDef((4, 3))):
        return {"double": x * 2, "x": x}

    result = job(X).get()
    np.testing.assert_array_equal(result["double"].ndarray(), X * 2)
    seen = []
    job(X).async_get(lambda r: seen.append(r["x"].ndarray().sum()))
    flow.sync_default_session()
    assert seen == [pytest.approx(X.sum())]


async def test_legacy_async_get_in_async_code_runs_on_callers_loop():
    # docs/runtime.md, "Where a result or a callback is handled"
    @flow.global_function(flow.function_config())
    def job(x=flow.FixedTensorDef((4, 3))):
        return x * 2

    loop = asyncio.get_running_loop()
    seen = []
    job(X).async_get(lambda r: seen.append(asyncio.get_running_loop() is loop))
    await flow.sync_default_session()
    for _ in range(10):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == [True]


def test_none_annotation_returns_none_after_the_step():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((4, 3))) -> None:
        flow.math.reduce_sum(x)

    assert job(X) is None


def test_blocking_spelling_inside_a_loop_warns_and_blocks():
    predict = make_predict()

    async def main():
        with pytest.warns(RuntimeWarning, match="stalled"):
            return flow.blocking(predict, X)

    assert asyncio.run(main()).shape == (4, 5)
