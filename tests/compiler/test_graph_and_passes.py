"""IR and compiler invariants, checked on traced graphs without running any kernel."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.compiler import eliminate_dead_code, gradients, verify
from aioflow.compiler.passes import schedule_side_effects_last
from aioflow.ir import Graph, tracing
from aioflow.ops import REGISTRY
from aioflow.engine.session import default_session


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _graph(name="g"):
    graph = Graph(name)
    graph.session = default_session()
    return graph


def test_dead_code_is_removed_and_side_effects_kept():
    graph = _graph()
    x = graph.add_placeholder((3,), flow.float32, "x")
    with tracing(graph):
        used = flow.math.exp(x)
        flow.math.log(x)  # nobody reads it
        counter = flow.get_variable("c", shape=(), dtype=flow.int64,
                                    initializer=flow.zeros_initializer(flow.int64))
        REGISTRY["increment"](counter)
    graph.outputs = [used]
    removed = eliminate_dead_code(graph)
    names = [n.op.name for n in graph.nodes]
    assert removed == 1 and "log" not in names
    assert "increment" in names and "variable" in names
    verify(graph)


def test_side_effects_are_scheduled_after_pure_ops():
    graph = _graph()
    x = graph.add_placeholder((3,), flow.float32, "x")
    with tracing(graph):
        w = flow.get_variable("w", shape=(3,), initializer=flow.zeros_initializer())
        REGISTRY["sgd_update"](w, x, flow.constant(0.1))
        late = w * 2.0
    graph.outputs = [late]
    schedule_side_effects_last(graph)
    assert graph.nodes[-1].op.name == "sgd_update"
    verify(graph)


def test_verify_rejects_use_before_definition():
    graph = _graph()
    x = graph.add_placeholder((2,), flow.float32, "x")
    with tracing(graph):
        a = flow.math.exp(x)
        b = flow.math.log(a)
    graph.outputs = [b]
    graph.nodes.reverse()
    with pytest.raises(AssertionError, match="before it is defined"):
        verify(graph)


def test_gradients_build_ops_and_skip_unconnected_inputs():
    graph = _graph()
    x = graph.add_placeholder((2, 3), flow.float32, "x")
    with tracing(graph):
        w = flow.get_variable("w", shape=(3, 4), initializer=flow.zeros_initializer())
        unused = flow.get_variable("u", shape=(4,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(flow.matmul(x, w))
        grads = gradients(graph, loss, [w, unused])
    assert set(grads) == {w.id}
    assert grads[w.id].shape == (3, 4)
    assert any(n.op.name == "matmul" and n.outputs[0] is grads[w.id] for n in graph.nodes)


def test_missing_gradient_rule_fails_loudly_at_compile_time():
    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(flow.math.floor(w * x) + w)
        flow.optimizer.SGD(0.1).minimize(loss)
        return loss

    # floor is registered as non-differentiable: the path through it is cut, the other
    # path still trains. An op that claims differentiability but has no rule must raise.
    job(np.ones(3, np.float32))
    op = REGISTRY["floor"]
    saved = op.differentiable
    op.differentiable = True
    try:
        @flow.global_function(type="train")
        def job2(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            w = flow.get_variable("w2", shape=(3,), initializer=flow.zeros_initializer())
            loss = flow.math.reduce_sum(flow.math.floor(w * x))
            flow.optimizer.SGD(0.1).minimize(loss)
            return loss
        with pytest.raises(NotImplementedError, match="'floor'.*no gradient rule"):
            job2(np.ones(3, np.float32))
    finally:
        op.differentiable = saved


def test_every_registered_op_has_all_its_rules():
    for name, op in REGISTRY.items():
        assert callable(op.infer) and callable(op.forward), name
        if op.differentiable and not op.side_effect:
            assert op.grad_rule is not None, f"op {name} is differentiable but has no rule"


def test_graph_printout_shows_one_op_per_line_with_shapes():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.nn.relu(flow.layers.dense(x, 4, name="fc"))

    text = str(job.graph)
    assert "x: float32[2, 3]" in text
    assert "fc-matmul: float32[2, 4] = matmul(x, fc-weight)" in text
    assert text.strip().endswith("}")
