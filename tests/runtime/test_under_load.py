"""Nothing lost under concurrency, cancellation, Ctrl-C and many steps (issue 17's runtime
part): every await gets its own result, cancelled awaits apply exactly the steps
docs/runtime.md promises, an interrupted Callback loop ends promptly and cleanly, and
memory stays flat over thousands of steps."""
import sys
import textwrap

import anyio
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from concurrently import gather

from .jobs import X, Y, interrupt_when_ready, make_train, reference_losses

STEP_VAR = "System-Train-TrainStep-train"


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@pytest.mark.parametrize("width", [4, 4096], ids=["tiny (on the loop)", "queued"])
@pytest.mark.anyio
async def test_a_thousand_concurrent_awaits_each_get_their_own_result(width):
    @flow.global_function(type="predict")
    def scale(x: tp.Numpy.Placeholder((width,))) -> tp.Numpy:
        return x * 3.0 + 1.0
    inputs = [np.full(width, i, np.float32) for i in range(1000)]
    results = await gather(scale(x) for x in inputs)
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result, np.full(width, 3.0 * i + 1.0, np.float32))


@pytest.mark.anyio
async def test_cancelling_a_third_of_300_awaited_steps_applies_exactly_the_started_ones(
        anyio_backend):
    """docs/runtime.md, "Cancellation": a step that started completes and counts (its
    result is dropped); one not started never runs. Every step trains on the same batch,
    so the state after k steps is known: the oracle is the blocking run's. Each call runs
    in its own cancel scope (a task's cancellation under asyncio, a scope's under trio)."""
    expected = await anyio.to_thread.run_sync(reference_losses, 300)
    train = make_train()
    await train(X, Y)                 # compile; step 1
    scopes = [anyio.CancelScope() for _ in range(299)]
    results = [None] * 299

    async def call(i):
        with scopes[i]:
            results[i] = await train(X, Y)

    async with anyio.create_task_group() as group:
        for i in range(299):
            group.start_soon(call, i)
        rng = np.random.default_rng(0)
        for i in rng.choice(299, size=90, replace=False):
            await anyio.sleep(0)      # let some start, cancel others while queued
            scopes[i].cancel()
    await flow.sync_default_session()
    steps = int((await flow.get_all_variables())[STEP_VAR])
    returned = [float(r.mean()) for r in results if r is not None]
    cancelled = sum(r is None for r in results)
    assert all(scopes[i].cancel_called for i, r in enumerate(results) if r is None)
    assert cancelled > 0 and len(returned) + cancelled == 299
    assert 1 + len(returned) <= steps <= 1 + len(returned) + cancelled
    # Each returned loss is that of a distinct step: nothing repeated. The steps ran in
    # the order the tasks first ran, which trio shuffles on purpose; the loss falls at
    # every step of this run (the oracle checks it), so ordering the losses from the
    # highest puts them in step order.
    assert all(np.diff(expected) < 0)
    position = 0
    for loss in sorted(returned, reverse=True) if anyio_backend == "trio" else returned:
        later = [i for i in range(position + 1, steps)
                 if abs(expected[i] - loss) <= 1e-6 * abs(expected[i])]
        assert later, f"loss {loss} is no later step of the oracle's run"
        position = later[0]
    # And the variables are those of exactly `steps` steps: replay that many blocking.
    variables = await flow.get_all_variables()
    oracle = await anyio.to_thread.run_sync(_blocking_state_after, steps)
    for name, value in oracle.items():
        np.testing.assert_allclose(variables[name], value, rtol=1e-5, atol=1e-7,
                                   err_msg=name)


def _blocking_state_after(steps: int) -> dict:
    flow.clear_default_session()
    train = make_train()
    for _ in range(steps):
        train(X, Y)
    state = flow.get_all_variables()
    flow.clear_default_session()
    return state


def test_ctrl_c_in_a_callback_loop_exits_within_two_seconds_with_one_traceback():
    script = textwrap.dedent("""
        import signal, numpy as np, aioflow as flow, aioflow.typing as tp
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
        @flow.global_function(type="train")
        def train(x: tp.Numpy.Placeholder((256, 256))) -> tp.Callback[tp.Numpy]:
            w = flow.get_variable("w", shape=(256, 256), initializer=flow.zeros_initializer())
            y = x
            for _ in range(6):
                y = flow.matmul(y, x + w)
            loss = flow.math.reduce_mean(flow.math.square(y)) * 1e-6
            flow.optimizer.SGD(1e-3, momentum=0).minimize(loss)
            return loss
        x = np.eye(256, dtype=np.float32) * 0.5
        train(x)(lambda loss: None)
        flow.sync_default_session()
        print("ready", flush=True)
        while True:
            train(x)(lambda loss: None)
    """)
    returncode, _, err, took = interrupt_when_ready(script, after=0.5)
    assert took < 2, f"took {took:.1f} s to exit"
    assert returncode != 0
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert "ERROR" not in err, err


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_memory_stays_flat_over_3000_train_steps():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((32, 64)),
              y: tp.Numpy.Placeholder((32,), dtype=flow.int32)) -> tp.Callback[tp.Numpy]:
        h = flow.layers.dense(x, 128, activation=flow.nn.relu, name="h")
        logits = flow.layers.dense(h, 10, name="out")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.Adam(1e-3).minimize(loss)
        return loss
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int32)
    losses = []
    for _ in range(500):                       # warm up: buffers, allocator, caches
        train(x, y)(losses.append)
    flow.sync_default_session()
    warm = _rss_bytes()
    for _ in range(2500):
        train(x, y)(losses.append)
    flow.sync_default_session()
    grown = _rss_bytes() - warm
    assert len(losses) == 3000
    assert grown <= 0.05 * warm, f"RSS grew {grown / 2**20:.1f} MiB from {warm / 2**20:.1f}"
