"""The device pipeline (issue 13) on the simulated GPU of ``aioflow.testing.simulated_gpu``:
steps overlap up to the pipeline depth, complete in order with the results of depth 1,
staging buffers are never reused early, errors reach the right caller, cancellation
loses and repeats nothing, and the caller's loop keeps running."""
import asyncio
import gc
import threading
import time

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.backends.simulated import SimulatedDevice, SimulatedDeviceError
from aioflow.backends.device import run_step
from aioflow.engine.session import default_session
from aioflow.testing import simulated_gpu

from .jobs import X, Y, make_train, reference_losses
from .loop_watch import IterationCPU, worst_gap

STEP_VAR = "System-Train-TrainStep-train"


@pytest.fixture(autouse=True)
def fresh_session():
    depth = flow.config.get("pipeline_depth")
    flow.clear_default_session()
    yield
    flow.clear_default_session()
    flow.config.pipeline_depth(depth)


def _bad_labels():
    return np.array([0, 1, 2, 9], np.int32)   # 9 >= 5 classes: refused inside the step


async def _awaited_epoch(depth: int, steps: int, **timing):
    """Wall time and losses of ``steps`` train calls awaited together at ``depth``."""
    await flow.clear_default_session()
    flow.config.pipeline_depth(depth)
    with simulated_gpu(**timing):
        train = make_train()
        await train(X, Y)                     # compile and warm up outside the timing
        start = time.perf_counter()
        losses = await asyncio.gather(*[train(X, Y) for _ in range(steps)])
        seconds = time.perf_counter() - start
    assert train.compiled_for(default_session()).backend.name == "simulated_gpu"
    return seconds, [float(loss.mean()) for loss in losses]


async def test_depth_two_overlaps_copies_compute_and_fetch_with_the_same_results():
    timing = dict(copy_ms=2, compute_ms=5, fetch_ms=1)
    attempts = []
    # A pipeline that does not overlap fails every attempt; a shared machine's scheduler
    # can stall one (each step crosses five threads), so the better of two is judged.
    for _ in range(2):
        serial, serial_losses = await _awaited_epoch(1, 40, **timing)
        overlapped, overlapped_losses = await _awaited_epoch(2, 40, **timing)
        attempts.append((serial, overlapped))
        if serial / overlapped >= 1.5:
            break
    assert serial / overlapped >= 1.5, attempts
    np.testing.assert_allclose(overlapped_losses, serial_losses, rtol=1e-6)
    expected = await asyncio.to_thread(reference_losses, 41)   # the CPU, blocking
    np.testing.assert_allclose(serial_losses, expected[1:], rtol=1e-6)


async def test_depth_one_runs_each_stage_after_the_previous_step_completed():
    seconds, _ = await _awaited_epoch(1, 10, copy_ms=2, compute_ms=5, fetch_ms=1)
    assert seconds >= 10 * 0.008


def test_blocking_and_callback_forms_ride_on_the_same_pipeline():
    with simulated_gpu(copy_ms=1, compute_ms=2, fetch_ms=1):
        train = make_train()
        blocking = [float(train(X, Y).mean()) for _ in range(3)]
        flow.clear_default_session()
        callback_train = make_train(form=tp.Callback[tp.Numpy])
        got, threads = [], set()

        def on_loss(loss):
            got.append(float(loss.mean()))
            threads.add(threading.current_thread().name)
        for _ in range(3):
            callback_train(X, Y)(on_loss)
        flow.sync_default_session()
    np.testing.assert_allclose(got, blocking, rtol=1e-6)
    assert threads == {"aioflow-delivery"}


async def test_results_come_back_in_order_and_an_error_reaches_its_own_caller():
    with simulated_gpu(copy_ms=1, compute_ms=2, fetch_ms=1):
        train = make_train()
        calls = [train(X, Y), train(X, Y), train(X, _bad_labels()), train(X, Y)]
        results = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(results[2], ValueError)
    assert "labels must lie in [0, 5)" in str(results[2])
    assert any("a call of job 'train'" in note for note in results[2].__notes__)
    losses = [float(r.mean()) for i, r in enumerate(results) if i != 2]
    # The failed step raised before its updates: the others match three clean steps.
    expected = await asyncio.to_thread(reference_losses, 3)
    np.testing.assert_allclose(losses, expected, rtol=1e-6)


async def test_a_sticky_device_error_fails_pending_steps_and_repair_brings_it_back():
    with simulated_gpu(copy_ms=1, compute_ms=20, fetch_ms=1) as gpu:
        train = make_train()
        await train(X, Y)
        pending = [asyncio.ensure_future(train(X, Y)) for _ in range(3)]
        await asyncio.sleep(0.005)
        gpu.break_device(RuntimeError("an illegal memory access was encountered"))
        results = await asyncio.gather(*pending, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        assert failed and all(isinstance(r, SimulatedDeviceError) for r in failed)
        assert "illegal memory access" in str(failed[-1])
        assert isinstance(results[-1], SimulatedDeviceError)   # queued behind: failed too
        gpu.repair()
        loss = await train(X, Y)           # the pipeline is usable again
        assert np.isfinite(loss).all()


async def test_cancelled_awaits_lose_and_repeat_no_step():
    expected = await asyncio.to_thread(reference_losses, 30)
    flow.config.pipeline_depth(3)
    with simulated_gpu(copy_ms=1, compute_ms=3, fetch_ms=1):
        train = make_train()
        tasks = [asyncio.ensure_future(train(X, Y)) for _ in range(30)]
        for i, task in enumerate(tasks):
            if i % 3 == 1:
                await asyncio.sleep(0.002)
                task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await flow.sync_default_session()
        counter = int((await flow.get_all_variables())[STEP_VAR])
    done = [float(r.mean()) for r in results if not isinstance(r, BaseException)]
    cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
    assert cancelled > 0
    # Steps that ran are counted once each: those whose result came back, and the
    # cancelled ones that had started; those withdrawn before starting never ran.
    assert len(done) <= counter <= len(done) + cancelled
    # Each returned loss is the loss of the step with its place in the sequence of steps
    # that ran: strictly increasing positions in the oracle's losses, none repeated.
    position = -1
    for loss in done:
        matches = [i for i in range(position + 1, counter)
                   if abs(expected[i] - loss) <= 1e-6 * abs(expected[i])]
        assert matches, f"loss {loss} is not a later step of the oracle's sequence"
        position = matches[0]


async def _hundred_calls(train):
    """100 awaited calls, one per loop iteration as requests arriving would be: the calls'
    own work on the loop (binding, copying, submitting: 50-300 us each on a 2-core VM) is
    the caller's, not the pipeline's, and is not what the test measures."""
    tasks = []
    for _ in range(100):
        tasks.append(asyncio.ensure_future(train(X, Y)))
        await asyncio.sleep(0)
    return await asyncio.gather(*tasks)


async def _idle_then_busy(train, cpu: IterationCPU) -> tuple[float, float, float]:
    """(worst gap with a hundred steps in flight, worst gap of the idle loop just before,
    the loop's longest iteration in CPU time meanwhile), s."""
    idle = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.2, idle.set_result, None)
    baseline = await worst_gap(idle)         # this machine's scheduler alone
    cpu.reset()
    steps = asyncio.ensure_future(_hundred_calls(train))
    busy = await worst_gap(steps)
    await steps
    return busy, baseline, cpu.longest


async def test_the_loop_keeps_beating_while_a_hundred_steps_are_in_flight():
    """The loop's own work per iteration stays under 5 ms of its CPU, and its wall-clock
    gap under 10 ms beyond the idle loop's (loop_watch.py says why two bounds)."""
    flow.config.pipeline_depth(100)
    with simulated_gpu(copy_ms=0.5, compute_ms=2, fetch_ms=0.5):
        train = make_train()
        await train(X, Y)
        attempts = []
        cpu = IterationCPU(asyncio.get_running_loop())
        # A stall the pipeline causes shows in every attempt; a shared machine's
        # scheduler may preempt the loop in one (so the best of three is judged). The
        # garbage collector is held off while measuring: after thousands of tests its
        # full collections alone take 100-300 ms, which is Python's pause, not aioflow's.
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                attempts.append(await _idle_then_busy(train, cpu))
                busy, baseline, longest = attempts[-1]
                if busy < 0.010 + baseline and longest < 0.005:
                    break
        finally:
            gc.enable()
            cpu.close()
    assert busy < 0.010 + baseline and longest < 0.005, [
        f"gap {1e3 * b:.1f} ms (idle {1e3 * i:.1f}), longest iteration {1e3 * c:.1f} ms CPU"
        for b, i, c in attempts]


async def test_a_job_with_its_own_smaller_depth_is_admitted_one_at_a_time():
    config = flow.FunctionConfig()
    config.pipeline_depth(1)

    with simulated_gpu(copy_ms=1, compute_ms=2, fetch_ms=1):
        @flow.global_function(type="predict", function_config=config)
        def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
            return x * 2

        in_use = []
        admission = default_session().pipeline.admission
        compiled = predict.compiled_for(default_session())
        real = compiled.plan.run

        def recording(ctx, inputs):
            in_use.append(admission.in_use)
            return real(ctx, inputs)
        compiled.plan.run = recording
        results = await asyncio.gather(*[predict(X + i) for i in range(8)])
    assert max(in_use) == 1 and len(in_use) == 8
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result, (X + i) * 2)


def test_function_config_pipeline_depth_is_validated():
    config = flow.FunctionConfig()
    assert config.pipeline_depth() is None
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="function_config.pipeline_depth"):
            config.pipeline_depth(bad)


async def test_variables_read_on_the_host_see_every_submitted_step():
    with simulated_gpu(copy_ms=1, compute_ms=5, fetch_ms=1):
        train = make_callback_train = make_train(form=tp.Callback[tp.Numpy])
        for _ in range(5):
            make_callback_train(X, Y)(lambda loss: None)     # not waited for
        variables = await flow.get_all_variables()
    assert int(variables[STEP_VAR]) == 5
    assert train is make_callback_train


# -- staging buffers -----------------------------------------------------------------


def _predict_each(values, depth, poison=True, stage_hook=None):
    """Results of ``predict(x)`` for each x, called in the Callback form from plain code
    (each call waits for admission, so at most ``depth`` calls hold staging buffers)."""
    flow.clear_default_session()
    flow.config.pipeline_depth(depth)
    with simulated_gpu(copy_ms=3, compute_ms=1, fetch_ms=1, poison=poison) as gpu:
        if stage_hook is not None:
            stage_hook(gpu)

        @flow.global_function(type="predict")
        def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Callback[tp.Numpy]:
            return x + 1
        results = {}
        for i, value in enumerate(values):
            predict(value)(lambda result, i=i: results.__setitem__(i, result))
        flow.sync_default_session()
    return [results[i] for i in range(len(values))], gpu


def test_staging_buffers_are_reused_only_after_their_copies_finished():
    values = [X * i for i in range(30)]
    results, gpu = _predict_each(values, depth=3)
    for value, result in zip(values, results):
        np.testing.assert_array_equal(result, value + 1)
    assert 1 < gpu.ring.allocated <= 3 + 2   # reused: in flight, being called, staged


def test_a_buffer_released_before_its_copy_would_show_as_poison():
    def release_at_once(gpu):     # a pipeline bug: buffers go back as soon as staged
        stage = gpu.stage

        def early(host_arrays):
            staged = stage(host_arrays)
            gpu.ring.give_back(staged.keep_alive)
            return staged
        gpu.stage = early
    values = [X * i for i in range(6)]
    results, _ = _predict_each(values, depth=2, stage_hook=release_at_once)
    assert any(np.isnan(result).any() for result in results)


def test_release_refuses_while_the_copy_may_still_read_the_buffers():
    device = SimulatedDevice(copy_ms=50, compute_ms=0, fetch_ms=0, poison=True)
    staged = device.stage([np.ones(3)])
    with pytest.raises(RuntimeError, match="released before their copies finished"):
        staged.release()
    staged.event.wait()
    staged.release()
    device.close()


def test_run_step_on_the_simulated_device_matches_numpy():
    device = SimulatedDevice(copy_ms=1, compute_ms=1, fetch_ms=1)
    out = run_step(device, lambda arrays: [arrays[0] @ arrays[1]],
                   [np.eye(3), np.arange(9.0).reshape(3, 3)])
    np.testing.assert_array_equal(out[0], np.arange(9.0).reshape(3, 3))
    device.close()


def test_modelled_times_are_validated():
    with pytest.raises(ValueError, match="compute_ms"):
        with simulated_gpu(compute_ms=-1):
            pass


def test_an_argument_reused_right_after_a_callback_call_does_not_change_its_step():
    with simulated_gpu(copy_ms=5, compute_ms=1, fetch_ms=1) as gpu:
        @flow.global_function(type="predict")
        def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Callback[tp.Numpy]:
            return x + 1
        got = []
        x = X.copy()
        for i in range(4):
            x[...] = X * i
            predict(x)(got.append)        # returns before the step read x
        x[...] = -100
        flow.sync_default_session()
        # From the second call on, the call's copy is the staging buffer itself: one host
        # copy per input, and the ring's buffers are reused.
        assert gpu.ring.allocated <= 4
    for i, result in enumerate(got):
        np.testing.assert_array_equal(result, X * i + 1)
