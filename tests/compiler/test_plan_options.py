"""Plan options against their reference: the memory plan (buffer sharing by liveness) and
kernel threading (split batches on a one-thread BLAS) train exactly as the plain plan."""
import tracemalloc

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow._core import dtypes
from aioflow.compiler.memory import plan_buffers
from aioflow.ir import Graph, tracing
from aioflow.ops import elementwise as ew
from aioflow.ops import shape as shape_ops


@pytest.fixture(autouse=True)
def restore_plan_options():
    # These tests pin the CPU kernels' rewrites, threading and allocations: on the CPU
    # whatever AIOFLOW_DEVICE the run chose for the rest of the suite.
    flow.clear_default_session()
    with backends.use("numpy"):
        yield
    flow.config.enable_memory_plan(True)
    flow.config.kernel_threading("auto")
    flow.clear_default_session()


def _graph(build, shape=(4, 4)):
    g = Graph("g")
    x = g.add_placeholder(shape, dtypes.float32, "x")
    with tracing(g):
        g.outputs = list(build(x))
    return g


def _buffer_of(g, blob):
    buffer_of_node, _ = plan_buffers(g)
    (index,) = [i for i, n in enumerate(g.nodes) if any(o is blob for o in n.outputs)]
    return buffer_of_node[index]


def test_a_dead_value_lends_its_buffer_to_the_next_op():
    seen = {}

    def build(x):
        a = seen["a"] = ew.exp(x)
        b = seen["b"] = ew.sin(a)        # a dies here: in place
        c = seen["c"] = ew.cos(x)        # b still alive: another buffer
        return [ew.add_op(b, c)]
    g = _graph(build)
    assert _buffer_of(g, seen["a"]) == _buffer_of(g, seen["b"]) == 0
    assert _buffer_of(g, seen["c"]) == 1
    assert len(plan_buffers(g)[1]) == 2


def test_a_view_keeps_its_base_buffer_alive():
    seen = {}

    def build(x):
        a = seen["a"] = ew.exp(x)
        view = shape_ops.reshape(a, shape=(16,))   # may alias a's buffer
        b = seen["b"] = ew.sin(x)                  # a is dead, its view is not
        return [ew.add_op(shape_ops.reshape(b, shape=(16,)), view)]
    g = _graph(build)
    assert _buffer_of(g, seen["b"]) != _buffer_of(g, seen["a"])


def test_no_in_place_write_over_a_view_with_other_strides():
    seen = {}

    def build(x):
        a = seen["a"] = ew.exp(x)
        c = seen["c"] = ew.add_op(a, shape_ops.transpose(a, perm=(1, 0)))
        return [c]
    g = _graph(build)
    assert _buffer_of(g, seen["c"]) != _buffer_of(g, seen["a"])


def test_job_outputs_are_never_reused():
    seen = {}

    def build(x):
        a = seen["a"] = ew.exp(x)
        b = seen["b"] = ew.sin(x)
        c = seen["c"] = ew.cos(b)        # in place over b, which dies here
        return [a, ew.tanh(c)]
    g = _graph(build)
    a = _buffer_of(g, seen["a"])
    assert _buffer_of(g, seen["b"]) == _buffer_of(g, seen["c"])
    others = [_buffer_of(g, n.outputs[0]) for n in g.nodes if n.outputs[0] is not seen["a"]]
    assert a not in others  # a is an output, kept to the end of the step: never lent


def _train_run(memory_plan, model, optimizer, steps=4, kernel_threading="auto"):
    flow.clear_default_session()
    flow.config.enable_memory_plan(memory_plan)
    flow.config.kernel_threading(kernel_threading)
    rng = np.random.default_rng(0)
    shape = (8, 1, 12, 12)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(shape),
              y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, model(x, True))
        optimizer().minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        return flow.nn.softmax(model(x, False))

    flow.train.CheckPoint().init()
    init = np.random.default_rng(1)
    flow.load_variables({k: init.normal(0, 0.3, v.shape).astype(v.dtype)
                         for k, v in flow.get_all_variables().items()
                         if k.endswith(("-weight", "-bias"))})  # not optimizer state
    losses = []
    for _ in range(steps):
        x = rng.random(shape, dtype=np.float32)
        losses.append(train(x, rng.integers(0, 10, 8).astype(np.int32)))
    probabilities = predict(rng.random(shape, dtype=np.float32))
    return losses, probabilities, flow.get_all_variables()


def _mlp(x, train):
    h = flow.layers.dense(flow.reshape(x, [x.shape[0], -1]), 32, activation=flow.nn.relu,
                          name="h")
    h = flow.math.tanh(h) * 2.0 + flow.math.sigmoid(h) - h / 3.0
    return flow.layers.dense(h, 10, name="out")


def _convnet(x, train):
    c = flow.layers.conv2d(x, 4, 3, padding="SAME", activation=flow.nn.relu, name="conv")
    c = flow.layers.batch_normalization(c, axis=1, training=train, name="bn")
    p = flow.nn.max_pool2d(c, ksize=2, strides=2, padding="VALID")
    return flow.layers.dense(flow.reshape(p, [p.shape[0], -1]), 10, name="fc")


@pytest.mark.parametrize("model", [_mlp, _convnet], ids=["mlp", "convnet-bn"])
@pytest.mark.parametrize("optimizer", [
    lambda: flow.optimizer.SGD(0.05, momentum=0.9),
    lambda: flow.optimizer.Adam(1e-2, do_bias_correction=True)], ids=["momentum", "adam"])
def test_training_is_identical_with_and_without_the_memory_plan(model, optimizer):
    planned = _train_run(True, model, optimizer)
    reference = _train_run(False, model, optimizer)
    for got, want in zip(planned[0], reference[0]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(planned[1], reference[1])
    assert planned[2].keys() == reference[2].keys()
    for name in planned[2]:
        np.testing.assert_array_equal(planned[2][name], reference[2][name], err_msg=name)


def test_training_agrees_with_kernels_split_or_not(monkeypatch):
    from aioflow.kernels import conv, parallel
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(conv, "_CHUNK_BYTES", 1)  # one sample per chunk: real splitting
    optimizer = lambda: flow.optimizer.SGD(0.05, momentum=0.9)  # noqa: E731
    plain = _train_run(True, _convnet, optimizer, kernel_threading="blas")
    # Split as inside a held step whether or not this BLAS obeyed the hold (OpenBLAS
    # ignores worker threads once the main thread set a count, as other tests do).
    splits = []
    real = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel", lambda tasks: (
        splits.append(len(tasks)), real(tasks))[1])
    monkeypatch.setattr(parallel, "blas_held", lambda: True)
    split = _train_run(True, _convnet, optimizer, kernel_threading="split")
    assert splits and set(splits) == {2}
    # Only the order of the filter gradient's partial sums differs.
    np.testing.assert_allclose(split[0], plain[0], rtol=1e-5)
    np.testing.assert_allclose(split[1], plain[1], rtol=1e-5, atol=1e-7)
    for name in plain[2]:
        np.testing.assert_allclose(split[2][name], plain[2][name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_auto_threading_splits_only_plans_with_convolutions():
    from aioflow.engine.session import default_session
    seen = {}
    for model in (_mlp, _convnet):
        flow.clear_default_session()

        @flow.global_function(type="predict")
        def predict(x: tp.Numpy.Placeholder((8, 1, 12, 12))) -> tp.Numpy:
            return model(x, False)
        seen[model.__name__] = predict.compiled_for(default_session()).plan.split_kernels
    assert seen == {"_mlp": False, "_convnet": True}
    flow.config.kernel_threading("blas")
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def conv_predict(x: tp.Numpy.Placeholder((8, 1, 12, 12))) -> tp.Numpy:
        return _convnet(x, False)
    assert not conv_predict.compiled_for(default_session()).plan.split_kernels
    with pytest.raises(ValueError, match="mode must be 'auto', 'blas' or 'split', got 'x'"):
        flow.config.kernel_threading("x")


def _chain_job():
    @flow.global_function(type="predict")
    def chain(x: tp.Numpy.Placeholder((512, 512))) -> tp.Numpy:
        y = flow.math.exp(-x * x) + 1.0
        return flow.nn.relu(flow.math.sin(y) * y - 0.5)
    return chain


@pytest.mark.parametrize("memory_plan", [True, False])
def test_results_are_private_copies(memory_plan):
    flow.config.enable_memory_plan(memory_plan)
    chain = _chain_job()
    x = np.linspace(-2, 2, 512 * 512, dtype=np.float32).reshape(512, 512)
    first = chain(x)
    kept = first.copy()
    second = chain(x[::-1].copy())
    np.testing.assert_array_equal(first, kept)  # a later step did not write over it
    assert not np.shares_memory(first, second)


def _step_allocations(memory_plan):
    """Peak bytes numpy allocates during one warm step of a chain of elementwise ops."""
    flow.clear_default_session()
    flow.config.enable_memory_plan(memory_plan)
    chain = _chain_job()
    x = np.ones((512, 512), np.float32)
    chain(x)  # compiles, allocates the plan's buffers
    chain(x)
    tracemalloc.start()
    try:
        chain(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def test_a_warm_step_allocates_only_its_result():
    array_bytes = 512 * 512 * 4
    planned, unplanned = _step_allocations(True), _step_allocations(False)
    # With the plan: the result's private copy (plus small change); without: every op's
    # output, two or more alive at once.
    assert planned < 1.5 * array_bytes, planned
    assert unplanned > 2 * array_bytes, unplanned
