"""Results of job calls and the life of jobs in a session: fresh copies, the graph
listing, repeated calls, variables shared by name, late jobs, and session resets."""
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.engine.session import default_session

X = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def const_var(name, value, shape=(2,), trainable=True):
    return flow.get_variable(name, shape=shape, trainable=trainable,
                             initializer=flow.constant_initializer(value))


# ------------------------------------------------------------------------- fresh copies

def test_results_are_fresh_copies():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 2))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        w = const_var("w", 1.5)
        return x, w, x * w

    x = X.copy()
    first, w, prod = job(x)
    assert first is not x and not np.shares_memory(first, x)
    first[:] = -1
    w[:] = 99
    prod[:] = 0
    np.testing.assert_array_equal(x, X)  # the caller's input is untouched
    again, w2, prod2 = job(x)
    np.testing.assert_array_equal(again, X)
    np.testing.assert_array_equal(w2, [1.5, 1.5])
    np.testing.assert_array_equal(prod2, X * 1.5)
    np.testing.assert_array_equal(flow.get_all_variables()["w"], [1.5, 1.5])


def test_the_same_blob_returned_twice_gives_two_independent_arrays():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 2))) -> Tuple[tp.Numpy, tp.Numpy]:
        y = x + 1
        return y, y

    a, b = job(X)
    a[:] = 0
    np.testing.assert_array_equal(b, X + 1)


def test_get_all_variables_returns_copies():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + const_var("b", 2.0)

    values = flow.get_all_variables()
    values["b"][:] = 100
    np.testing.assert_array_equal(job(np.zeros(2, np.float32)), [2, 2])


def test_train_job_returns_a_variable_as_it_was_before_the_update():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> Tuple[tp.Numpy, tp.Numpy]:
        w = const_var("w", 1.0)
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(0.5, momentum=0).minimize(loss)
        return w, loss

    x = np.array([1.0, 2.0], np.float32)
    w0, loss0 = train(x)
    np.testing.assert_array_equal(w0, [1.0, 1.0])
    assert float(np.asarray(loss0).reshape(-1)[0]) == 3.0
    np.testing.assert_allclose(flow.get_all_variables()["w"], [0.5, 0.0])
    w1, _ = train(x)
    np.testing.assert_allclose(w1, [0.5, 0.0])
    w1[:] = 1000  # a returned copy, not the variable
    np.testing.assert_allclose(flow.get_all_variables()["w"], [0.0, -1.0])


# ------------------------------------------------------------------------- the graph

def test_graph_lists_one_op_per_line_with_shapes():
    @flow.global_function(type="predict")
    def model(x: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
        h = flow.layers.dense(x, 5, name="fc1", activation=flow.nn.relu)
        return flow.math.reduce_sum(h, axis=1)

    graph = model.graph
    text = str(graph)
    lines = text.splitlines()
    assert lines[0] == "graph model(x: float32[3, 4]) {"
    assert lines[-1] == "}"
    assert lines[-2].strip().startswith("return ")
    body = lines[1:-2]
    assert len(body) == len(graph.nodes) >= 3
    for node, line in zip(graph.nodes, body):
        assert line.strip().startswith(f"{node.outputs[0].name}: ")
        assert f"= {node.op.name}(" in line
    assert any("float32[5, 4]" in line and "fc1-weight" in line for line in body)
    assert any("float32[3, 5]" in line for line in body)
    assert "float32[3]" in body[-1]
    assert model(np.ones((3, 4), np.float32)).shape == (3,)


def test_graph_of_a_train_job_shows_the_updates(capsys):
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = const_var("w", 1.0)
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(0.1).minimize(loss)
        return loss

    print(train.graph)
    out = capsys.readouterr().out
    assert "momentum_update(" in out and "increment(" in out
    assert "graph train(x: float32[2])" in out


# ------------------------------------------------------------------------- many calls

def test_a_job_can_be_called_many_times():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = const_var("w", 0.0)
        loss = flow.math.reduce_sum(flow.math.square(w - x))
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss

    target = np.array([1.0, -2.0], np.float32)
    losses = [float(np.asarray(train(target)).reshape(-1)[0]) for _ in range(60)]
    assert losses[0] == pytest.approx(5.0)
    assert all(b < a for a, b in zip(losses, losses[1:]))
    np.testing.assert_allclose(flow.get_all_variables()["w"], target, atol=1e-4)
    assert flow.get_all_variables()["System-Train-TrainStep-train"] == 60


# ------------------------------------------------------------------------- sharing

def test_two_jobs_share_variables_by_name():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 2)), y: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
        pred = flow.layers.dense(x, 1, name="lin", kernel_initializer=flow.zeros_initializer())
        loss = flow.math.square(pred - y)
        flow.optimizer.SGD(0.1, momentum=0).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        return flow.layers.dense(x, 1, name="lin")

    x = np.array([[0, 1], [1, 0], [1, 1], [2, 1]], np.float32)
    y = x @ np.array([[2.0], [-1.0]], np.float32) + 0.5
    flow.train.CheckPoint().init()  # the seeds' order: compiles both, in definition order
    np.testing.assert_array_equal(predict(x), np.zeros((4, 1)))  # train's initializer
    for _ in range(300):
        train(x, y)
    variables = flow.get_all_variables()
    expected = x @ variables["lin-weight"].T + variables["lin-bias"]
    np.testing.assert_allclose(predict(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(predict(x), y, atol=1e-2)


def test_a_job_defined_after_others_ran_works_and_initializes_its_new_variables():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = const_var("w", 1.0)
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(1.0, momentum=0).minimize(loss)
        return loss

    x = np.array([1.0, 2.0], np.float32)
    train(x)
    train(x)
    trained = flow.get_all_variables()["w"]
    np.testing.assert_allclose(trained, [-1.0, -3.0])

    @flow.global_function(type="predict")
    def late(x: tp.Numpy.Placeholder((2,))) -> Tuple[tp.Numpy, tp.Numpy]:
        return x * const_var("w", 1.0), x + const_var("fresh", 10.0)

    scaled, shifted = late(x)
    np.testing.assert_allclose(scaled, x * trained)  # sees trained w, not its initializer
    np.testing.assert_array_equal(shifted, x + 10)
    values = flow.get_all_variables()
    np.testing.assert_array_equal(values["fresh"], [10.0, 10.0])
    np.testing.assert_allclose(values["w"], trained)  # defining it reset nothing
    train(x)
    np.testing.assert_allclose(flow.get_all_variables()["w"], [-2.0, -5.0])


def test_late_job_variables_exist_for_checkpoint_apis_before_its_first_call():
    @flow.global_function(type="predict")
    def first(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + const_var("a", 1.0)

    first(np.zeros(2, np.float32))

    @flow.global_function(type="predict")
    def second(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + const_var("b", 2.0)

    assert sorted(flow.get_all_variables()) == ["a", "b"]
    flow.load_variables({"b": np.array([5.0, 6.0], np.float32)})
    np.testing.assert_array_equal(second(np.zeros(2, np.float32)), [5, 6])


def test_same_variable_name_with_another_shape_is_a_clear_error():
    @flow.global_function(type="predict")
    def first(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * const_var("w", 1.0, shape=(2,))

    @flow.global_function(type="predict")
    def second(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x * const_var("w", 1.0, shape=(3,)) + const_var("only_second", 0.0, shape=(3,))

    np.testing.assert_array_equal(first(np.ones(2, np.float32)), [1, 1])
    with pytest.raises(ValueError, match=r"variable 'w' already exists as float32\[2\].*"
                                         r"float32\[3\]") as caught:
        second(np.ones(3, np.float32))
    # in a test suite, the fix: a fresh session per test
    assert "`flow_session` fixture" in str(caught.value)
    assert "flow.clear_default_session()" in str(caught.value)
    # the failed trace left nothing behind and the first job still runs
    assert "only_second" not in default_session().variables
    np.testing.assert_array_equal(first(np.ones(2, np.float32)), [1, 1])


def test_same_variable_name_with_another_dtype_is_a_clear_error():
    @flow.global_function(type="predict")
    def first(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * const_var("w", 1.0)

    @flow.global_function(type="predict")
    def second(x: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return x * flow.get_variable("w", shape=(2,), dtype=flow.int32)

    first(np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"'w'.*float32\[2\].*int32\[2\]"):
        second(np.ones(2, np.int32))


# ------------------------------------------------------------------------- sessions

def test_clear_default_session_retraces_old_jobs_in_the_new_session():
    traces = []

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        traces.append(1)
        w = const_var("w", 1.0)
        flow.optimizer.SGD(1.0, momentum=0).minimize(flow.math.reduce_sum(w * x))
        return w

    x = np.array([1.0, 2.0], np.float32)
    train(x)
    np.testing.assert_array_equal(train(x), [0.0, -1.0])
    assert len(traces) == 1
    flow.clear_default_session()
    np.testing.assert_array_equal(train(x), [1.0, 1.0])  # fresh variables
    assert len(traces) == 2
    assert flow.get_all_variables()["System-Train-TrainStep-train"] == 1


def test_clear_default_session_forgets_variables_and_jobs():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x + const_var("gone", 1.0)

    job(np.zeros(2, np.float32))
    flow.clear_default_session()
    assert flow.get_all_variables() == {}  # old jobs are not compiled into the new session


def test_predict_job_defined_before_and_called_after_a_reset_sees_new_variables():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * const_var("w", 3.0)

    flow.load_variables({"w": np.array([7.0, 7.0], np.float32)})
    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [7, 7])
    flow.clear_default_session()
    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [3, 3])


def test_results_are_c_contiguous_even_when_a_kernel_returns_a_transposed_view():
    # matmul computes a dense layer's x @ w.T as (w @ x.T).T, a Fortran-ordered view
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def dense(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.matmul(x, flow.get_variable("w", (5, 3), initializer=flow.ones_initializer()),
                           transpose_b=True)

    flow.train.CheckPoint().init()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = dense(x)
    assert out.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(out, x @ np.ones((3, 5), np.float32))
    flow.clear_default_session()
