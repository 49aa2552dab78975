"""``flow.experimental.ssp_variable_proxy`` and ``flow.experimental.scope.config`` under
``function_config.enable_ssp``: OneFlow's stale-synchronous reads of a variable. The value
read at step t is the variable as it was at the end of step t - B (its initial value
before), B the buffer size (``ssp_num_stages - ssp_stage_id``); assignments and gradient
updates go to the current variable. References: the recurrences written out in numpy."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _stale_reference(update, buffer_size, steps, start=0.0):
    """(values read, ...): w_{k+1} = update(w_k, read_k), read_k = w_{k-B+1} (w_0 early)."""
    history, reads = [start], []
    for k in range(steps):
        read = history[max(k - buffer_size + 1, 0)]
        reads.append(read)
        history.append(update(history[-1], read))
    return reads


@pytest.mark.parametrize("buffer_size", [1, 2, 4])
@pytest.mark.parametrize("from_stale", [False, True])
def test_the_proxy_reads_the_variable_buffer_size_steps_late(buffer_size, from_stale):
    @flow.global_function()
    def step() -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.constant_initializer(0.5))
        ref, value = flow.experimental.ssp_variable_proxy(w, buffer_size=buffer_size)
        ones = flow.constant_like(w, value=1.0)
        flow.assign(ref, (value if from_stale else ref) + ones)
        return value

    reads = [float(step()[0]) for _ in range(9)]
    want = _stale_reference(lambda w, read: (read if from_stale else w) + 1, buffer_size, 9,
                            start=0.5)
    assert reads == want


@pytest.mark.parametrize("ssp", [False, True])
def test_a_stage_reads_stale_weights_and_its_gradient_updates_the_current_ones(ssp):
    config = flow.FunctionConfig()
    config.enable_ssp(ssp)

    @flow.global_function(type="train", function_config=config)
    def step() -> tp.Numpy:
        with flow.experimental.scope.config(ssp_num_stages=3, ssp_stage_id=1):
            w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
            assert flow.get_variable("w", shape=(2,)) is w    # one proxy per variable
            loss = w * 2.0
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [-1.0]),
                           momentum=0).minimize(loss)
        return loss

    reads = [float(step()[0]) for _ in range(6)]
    # d loss / d w = 2 per element, divided by the loss's 2 instances, times -(-1): +1 a
    # step; the stage reads w from 3 - 1 = 2 steps back with enable_ssp, the current else
    want = _stale_reference(lambda w, read: w + 1, 2 if ssp else 1, 6)
    assert reads == [2 * r for r in want]
    np.testing.assert_allclose(flow.get_all_variables()["w"], [6.0, 6.0])


def test_bad_arguments_are_refused():
    @flow.global_function()
    def job() -> tp.Numpy:
        w = flow.get_variable("w", shape=(1,), initializer=flow.zeros_initializer())
        return flow.experimental.ssp_variable_proxy(w, buffer_size=0)[1]

    with pytest.raises(ValueError, match="buffer_size must be a positive int"):
        job()
    flow.clear_default_session()

    @flow.global_function()
    def job2() -> tp.Numpy:
        return flow.experimental.ssp_variable_proxy(flow.constant(1.0, shape=(1,)))[1]

    with pytest.raises(TypeError, match="ref must be a variable's Blob"):
        job2()
