"""A job call in async code returns an awaitable (runtime/results.py ``JobCall``): every
asyncio entry point and anyio's task groups take it, and using it as a value or dropping
it says what to do (on asyncio and trio)."""
import asyncio
import gc

import anyio
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

X = np.ones(3, np.float32)


@pytest.fixture
def double():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def double_job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x * 2
    yield double_job
    flow.clear_default_session()


async def test_create_task_gather_wait_for_and_await_all_take_it(double):
    expected = X * 2
    np.testing.assert_array_equal(await double(X), expected)
    np.testing.assert_array_equal(await asyncio.create_task(double(X)), expected)
    np.testing.assert_array_equal(await asyncio.wait_for(double(X), 5), expected)
    for result in await asyncio.gather(double(X), double(X)):
        np.testing.assert_array_equal(result, expected)


@pytest.mark.anyio
async def test_task_groups_and_timeouts_take_it(double):
    got = []

    async def keep(pending):
        got.append(await pending)

    async with anyio.create_task_group() as group:
        group.start_soon(keep, double(X))
        group.start_soon(keep, double(X))
    with anyio.fail_after(5):
        got.append(await double(X))
    assert len(got) == 3
    for result in got:
        np.testing.assert_array_equal(result, X * 2)


@pytest.mark.parametrize("misuse", [
    lambda r: r.mean(), lambda r: np.asarray(r), lambda r: float(r), lambda r: r[0],
    lambda r: list(r), lambda r: len(r), lambda r: bool(r)])
@pytest.mark.anyio
async def test_using_the_awaitable_as_a_value_names_the_job_and_the_fix(double, misuse):
    pending = double(X)
    with pytest.raises(TypeError, match=r"double_job\(\.\.\.\).*await double_job"):
        misuse(pending)
    np.testing.assert_array_equal(await pending, X * 2)    # still usable afterwards


@pytest.mark.anyio
async def test_a_dropped_call_warns_at_the_users_line_that_its_step_never_ran(double):
    with pytest.warns(RuntimeWarning, match="double_job.*never awaited.*never ran") as got:
        double(X)   # the line the warning must point at
        gc.collect()
    assert got[0].filename == __file__
    with open(__file__) as source:
        assert "double(X)" in source.read().splitlines()[got[0].lineno - 1]


@pytest.mark.anyio
async def test_its_repr_says_to_await_it(double):
    pending = double(X)
    assert repr(pending) == "<awaitable result of double_job(...): await it for the value>"
    await pending


async def test_a_bad_argument_raises_at_the_await_naming_it_and_the_job_works_on(double):
    # The awaitable does nothing until it runs (docs/runtime.md): binding is part of it.
    pending = double(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"double_job\(\) argument 'x'.*shape \(4,\)"):
        await pending
    with pytest.raises(TypeError, match="double_job"):
        await double(X, X)
    np.testing.assert_array_equal(await double(X), X * 2)


async def test_an_awaited_call_reads_its_arguments_when_it_runs():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def wide(x: tp.Numpy.Placeholder((4096,))) -> tp.Numpy:   # queued: not run on the loop
        return x * 2
    x = np.ones(4096, np.float32)
    pending = wide(x)
    x[...] = 3                       # before it ran: what it reads
    task = asyncio.ensure_future(pending)
    await asyncio.sleep(0)           # it ran up to its queued step (with a copy of x)
    x[...] = -1                      # after: its step keeps the copy
    np.testing.assert_array_equal(await task, np.full(4096, 6, np.float32))
    flow.clear_default_session()
