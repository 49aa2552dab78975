"""CUDA-graph replay bookkeeping (backends/graph_capture.py) on the simulated GPU's recording
capturer: results equal eager steps, the switch turns it off, baked values re-capture,
plans that cannot be captured run eagerly and say why."""
import asyncio
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.backends.simulated import SimulatedBackend
from aioflow.backends import graph_capture
from aioflow.engine.session import default_session

BATCH = 6


@pytest.fixture(autouse=True)
def fresh():
    flow.clear_default_session()
    yield
    flow.config.enable_cuda_graphs(True)
    flow.clear_default_session()


def _train_job(optimizer=lambda: flow.optimizer.SGD(0.1, momentum=0.9), dropout=False):
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, 12)),
              y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        hidden = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
        if dropout:
            hidden = flow.nn.dropout(hidden, rate=0.5)
        logits = flow.layers.dense(hidden, 4, name="out")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        optimizer().minimize(loss)
        return loss
    return train


def _data(steps, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, 12)).astype(np.float32),
             rng.integers(0, 4, BATCH).astype(np.int32)) for _ in range(steps)]


def _run(capture, steps=5, optimizer=None, initial=None, dropout=False):
    """(losses, variables, the CapturedStep or None, the recording capturer)."""
    flow.clear_default_session()
    backend = SimulatedBackend(graph_capture=capture)
    try:
        with backends.use(backend):
            train = _train_job(**({"optimizer": optimizer} if optimizer else {}),
                               dropout=dropout)
            compiled = train.compiled_for(default_session())
            if initial is not None:
                flow.load_variables(initial)
            start = flow.get_all_variables()
            losses = [train(x, y) for x, y in _data(steps)]
            return losses, flow.get_all_variables(), start, compiled.captured, \
                backend.graph_capturer()
    finally:
        backend.close()


def _same(a, b):
    np.testing.assert_allclose(np.array(a[0]), np.array(b[0]), rtol=1e-6)
    for name, value in b[1].items():
        np.testing.assert_allclose(a[1][name], value, rtol=1e-6, err_msg=name)


def test_replayed_steps_equal_eager_steps():
    eager = _run(False)
    assert eager[3] is None
    replayed = _run(True, initial=eager[2])
    step, capturer = replayed[3], replayed[4]
    # step 1 warms up eagerly, step 2 captures and launches, steps 3-5 replay
    assert (step.eager_steps, step.captures, step.replays) == (1, 1, 4)
    graph, = capturer.graphs
    assert graph.launches == 4
    assert "increment" not in graph.ops        # the host-side tail runs outside the graph
    assert graph.ops.count("multi_momentum_update") == 1
    _same(replayed, eager)
    # the step counter advanced on every step, replayed or not
    assert int(replayed[1]["System-Train-TrainStep-train"]) == 5


def test_inputs_go_through_fixed_buffers():
    flow.clear_default_session()
    backend = SimulatedBackend(graph_capture=True)
    with backends.use(backend):
        train = _train_job()
        data = _data(4)
        train(*data[0])
        train(*data[1])
        step = train.compiled_for(default_session()).captured
        buffers = list(step._static_inputs)
        train(*data[2])
        assert all(a is b for a, b in zip(buffers, step._static_inputs))
        np.testing.assert_array_equal(step._static_inputs[0], data[2][0])
    backend.close()


def test_the_switch_turns_capture_off():
    flow.config.enable_cuda_graphs(False)
    assert _run(True)[3] is None


def test_cuda_graphs_switch_refuses_a_non_bool():
    with pytest.raises(TypeError, match="enable_cuda_graphs: expected True or False"):
        flow.config.enable_cuda_graphs("yes")


def test_a_changed_learning_rate_is_captured_again():
    schedule = lambda: flow.optimizer.PiecewiseConstantScheduler([2], [0.1, 0.01])  # noqa: E731
    eager = _run(False, steps=6, optimizer=lambda: flow.optimizer.SGD(schedule(), momentum=0))
    replayed = _run(True, steps=6, initial=eager[2],
                    optimizer=lambda: flow.optimizer.SGD(schedule(), momentum=0))
    assert replayed[3].captures == 2          # the rate changed after step 3
    _same(replayed, eager)


def test_a_rate_that_keeps_changing_gives_up_with_a_warning():
    decaying = lambda: flow.optimizer.SGD(  # noqa: E731
        flow.optimizer.ExponentialScheduler(0.1, steps=1, decay_rate=0.9), momentum=0)
    eager = _run(False, steps=graph_capture.MAX_CAPTURES + 4, optimizer=decaying)
    with pytest.warns(RuntimeWarning, match="CUDA graphs off for this job.*keep changing"):
        replayed = _run(True, steps=graph_capture.MAX_CAPTURES + 4, optimizer=decaying,
                        initial=eager[2])
    assert replayed[3].captures == graph_capture.MAX_CAPTURES
    _same(replayed, eager)


def test_replaced_variable_arrays_are_captured_again():
    flow.clear_default_session()
    backend = SimulatedBackend(graph_capture=True)
    with backends.use(backend):
        train = _train_job()
        data = _data(5)
        for x, y in data[:3]:
            train(x, y)
        record = default_session().variables["hidden-weight"]
        record.value = record.value.copy()      # a new array, as a move between backends
        train(*data[3])
        assert train.compiled_for(default_session()).captured.captures == 2
    backend.close()


@pytest.mark.parametrize("case, reason", [
    ({"dropout": True}, "draws random numbers"),
    ({"optimizer": lambda: flow.optimizer.Adam(1e-2, do_bias_correction=True)},
     "bias correction"),
    ({"optimizer": lambda: flow.optimizer.LazyAdam(1e-2)}, "bias correction"),
])
def test_plans_that_cannot_be_captured_run_eagerly_and_say_why(case, reason):
    result = _run(True, **case)
    step = result[3]
    assert reason in step.refused
    assert step.captures == 0 and step.eager_steps == 5
    assert not result[4].graphs


def test_a_failing_capture_warns_once_and_runs_eagerly(monkeypatch):
    def refuse(self, step, ops):
        raise RuntimeError("library call refused while capturing")
    monkeypatch.setattr(graph_capture.RecordingCapturer, "capture", refuse)
    eager = _run(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        replayed = _run(True, initial=eager[2])
    assert [str(w.message) for w in caught if "CUDA graphs off" in str(w.message)] == [
        "job 'train': CUDA graphs off for this job, it runs eagerly: capturing failed: "
        "RuntimeError: library call refused while capturing "
        "(flow.config.enable_cuda_graphs(False) silences this)"]
    assert replayed[3].captures == 0
    _same(replayed, eager)


def test_awaited_steps_replay_too():
    flow.clear_default_session()
    backend = SimulatedBackend(compute_ms=1, graph_capture=True)
    data = _data(4)
    with backends.use(backend):
        train = _train_job()

        async def main():
            return [await train(x, y) for x, y in data]
        losses = asyncio.run(main())
        step = train.compiled_for(default_session()).captured
    backend.close()
    assert step.replays == 3
    assert all(np.isfinite(loss).all() for loss in losses)


def test_predict_jobs_replay_with_the_testing_helper():
    from aioflow.testing import simulated_gpu
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    with simulated_gpu(cuda_graphs=True):
        @flow.global_function(type="predict")
        def double(v: tp.Numpy.Placeholder((2, 6))) -> tp.Numpy:
            with flow.scope.placement("gpu", "0:0"):
                return flow.math.exp(v * 0.1) * 2
        results = [double(x + i) for i in range(3)]
        step = double.compiled_for(default_session()).captured
    assert step.replays == 2
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, np.exp((x + i) * 0.1) * 2, rtol=1e-6)
