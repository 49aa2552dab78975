"""Two update rules as OneFlow's kernels apply them (``model_update_kernel_util.h``):

* momentum with weight decay: ``v = beta * v - lr * g``, then ``w += v - lr * decay * w``
  (the decay stays out of the velocity);
* ``function_config.indexed_slices_optimizer_conf``: a listed variable (an embedding
  table read by ``flow.gather``) updates only the rows the step gathered, its decay and
  moments included; the others keep their values.

The references are numpy loops over those formulas."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _train(optimizer, ids, indexed_slices):
    config = flow.FunctionConfig()
    if indexed_slices:
        config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["table"])))

    @flow.global_function(type="train", function_config=config)
    def step(i: tp.Numpy.Placeholder(ids.shape, dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", shape=(6, 2),
                                  initializer=flow.constant_initializer(1.0))
        loss = flow.math.reduce_sum(flow.gather(table * 2.0, i))
        optimizer().minimize(loss)
        return table
    return step


def _reference(rows_only, ids, steps, lr, beta, decay):
    w, v = np.ones((6, 2)), np.zeros((6, 2))
    g = np.zeros((6, 2))
    np.add.at(g, ids.reshape(-1), 2.0)     # d sum(gather(2 w)) / d w, per row
    g /= 1.0                                # the loss is a scalar: one instance
    touched = np.zeros(6, bool)
    touched[ids.reshape(-1)] = True
    for _ in range(steps):
        new_v = beta * v - lr * g
        new_w = w + new_v - lr * decay * w
        rows = touched if rows_only else np.ones(6, bool)
        v[rows], w[rows] = new_v[rows], new_w[rows]
    return w


@pytest.mark.parametrize("indexed_slices", [False, True])
@pytest.mark.parametrize("beta", [0.0, 0.9])
def test_sgdw_decay_stays_out_of_the_velocity_and_listed_tables_update_gathered_rows(
        indexed_slices, beta):
    ids = np.array([[0, 3], [3, 5]], np.int32)
    step = _train(lambda: flow.optimizer.SGDW(flow.optimizer.PiecewiseConstantScheduler(
        [], [0.1]), momentum=beta, weight_decay=0.5), ids, indexed_slices)
    for _ in range(4):
        step(ids)
    got = flow.get_all_variables()["table"]
    np.testing.assert_allclose(got, _reference(indexed_slices, ids, 4, 0.1, beta, 0.5),
                               rtol=1e-5)
    if indexed_slices:   # rows 1, 2 and 4 were never gathered: not even decayed
        np.testing.assert_array_equal(got[[1, 2, 4]], 1.0)


def test_adamw_on_a_listed_table_leaves_ungathered_rows_alone():
    ids = np.array([1, 4], np.int32)
    step = _train(lambda: flow.optimizer.AdamW(flow.optimizer.PiecewiseConstantScheduler(
        [], [0.1]), weight_decay=0.5), ids, True)
    for _ in range(3):
        step(ids)
    got = flow.get_all_variables()["table"]
    np.testing.assert_array_equal(got[[0, 2, 3, 5]], 1.0)
    assert np.all(got[[1, 4]] < 1.0)
