"""Short Callback and old-API steps called from plain code run in the calling thread
(``flow.config.inline_callback_ms``, ``Pipeline.run_step_inline``): same losses, same
order of callbacks, the same bound on callbacks pending, errors reported as before."""
import threading
import time

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.session import default_session

from .jobs import X, Y, make_slow, make_train, ran_on, reference_losses


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    before = flow.config.get("inline_callback_ms")
    yield
    flow.config.inline_callback_ms(before)
    flow.clear_default_session()


def _callback_losses(train, steps):
    got = []
    for _ in range(steps):
        train(X, Y)(lambda loss: got.append(float(loss.mean())))
    flow.sync_default_session()
    return got


def test_short_callback_steps_run_in_the_calling_thread_with_the_blocking_losses():
    expected = reference_losses(6)
    train = make_train(tp.Callback[tp.Numpy])
    threads = ran_on(train)
    np.testing.assert_allclose(_callback_losses(train, 6), expected, rtol=1e-6)
    # compiled by ran_on, and tiny: every step runs here (a larger job's first step is
    # queued, its time not known yet)
    assert threads == [threading.current_thread().name] * 6


def test_zero_budget_queues_every_callback_step():
    expected = reference_losses(4)
    flow.config.inline_callback_ms(0)
    train = make_train(tp.Callback[tp.Numpy])
    threads = ran_on(train)
    np.testing.assert_allclose(_callback_losses(train, 4), expected, rtol=1e-6)
    assert threads == ["aioflow-compute"] * 4


def test_the_old_api_get_runs_short_steps_here_too():
    expected = reference_losses(4)

    @flow.global_function(type="train")
    def train(x=flow.FixedTensorDef((4, 3)), y=flow.FixedTensorDef((4,), dtype=flow.int32)):
        logits = flow.layers.dense(x, 5, name="fc",
                                   kernel_initializer=flow.constant_initializer(0.1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(flow.identity(y), logits)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss
    threads = ran_on(train)
    losses = [float(train(X, Y).get().mean()) for _ in range(4)]
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    assert threads == [threading.current_thread().name] * 4


def test_an_inline_step_waits_for_the_queued_steps_ahead_and_delivers_after_them():
    slow, eye = make_slow(0.05, form=tp.Callback[tp.Numpy])
    train = make_train(tp.Callback[tp.Numpy])
    train(X, Y)(lambda loss: None)       # compiled, its time known
    flow.sync_default_session()
    assert train.compiled_for(default_session()).fits_inline
    assert not slow.compiled_for(default_session()).fits_inline
    order = []
    slow(eye)(lambda y: order.append("slow"))
    train(X, Y)(lambda loss: order.append("train"))
    flow.sync_default_session()
    assert order == ["slow", "train"]


def test_slow_callbacks_slow_the_caller_down_to_depth_pending():
    train = make_train(tp.Callback[tp.Numpy])
    train(X, Y)(lambda loss: None)
    flow.sync_default_session()
    ran = []

    def slow_callback(loss):
        time.sleep(0.02)
        ran.append(loss)
    for _ in range(8):
        train(X, Y)(slow_callback)
    pending = 8 - len(ran)
    flow.sync_default_session()
    depth = flow.config.get("pipeline_depth")
    assert len(ran) == 8 and pending <= depth


def test_a_failing_inline_step_is_reported_with_its_step_number_and_later_steps_run():
    train = make_train(tp.Callback[tp.Numpy])
    got = []
    train(X, Y)(lambda loss: got.append(1))
    flow.sync_default_session()
    bad = np.array([0, 1, 2, 9], np.int32)   # label 9 of 5 classes: the step raises
    train(X, bad)(lambda loss: got.append("bad"))
    train(X, Y)(lambda loss: got.append(3))
    with pytest.raises(ValueError, match="labels") as info:
        flow.sync_default_session()
    assert "(in step 2 of this session, a call of job 'train')" in info.value.__notes__
    assert got == [1, 3]


def test_arguments_reused_after_an_inline_call_do_not_change_its_step():
    expected = reference_losses(3)
    train = make_train(tp.Callback[tp.Numpy])
    x = X.copy()
    got = []
    for _ in range(3):
        train(x, Y)(lambda loss: got.append(float(loss.mean())))
        x[:] = 1e3        # the caller reuses its buffer at once
        x[:] = X
    flow.sync_default_session()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_larger_job_queues_its_first_step_then_runs_short_ones_here():
    @flow.global_function(type="predict")
    def mlp(x: tp.Numpy.Placeholder((100, 784))) -> tp.Callback[tp.Numpy]:
        return flow.layers.dense(x, 512, activation=flow.nn.relu, name="hidden")
    x = np.random.default_rng(0).standard_normal((100, 784)).astype(np.float32)
    got = []
    mlp(x)(got.append)                        # compiles, queued: its time is unknown
    flow.sync_default_session()
    compiled = mlp.compiled_for(default_session())
    assert not compiled._tiny and compiled.step_seconds is not None
    flow.config.inline_callback_ms(1e3)       # whatever this machine's step takes
    threads = ran_on(mlp)
    for _ in range(3):
        mlp(x)(got.append)
    flow.sync_default_session()
    assert threads == [threading.current_thread().name] * 3
    for value in got[1:]:
        np.testing.assert_allclose(value, got[0], rtol=1e-6)


def test_the_budget_is_validated():
    for bad in (-1, "2", None, True, float("nan")):
        with pytest.raises(ValueError, match=r"inline_callback_ms: expected a number of "
                                             r"milliseconds >= 0, got"):
            flow.config.inline_callback_ms(bad)
    assert flow.config.get("inline_callback_ms") == 2.0
