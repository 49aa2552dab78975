"""flow.random.seed(n): initializers, dropout and shuffling loaders repeat themselves."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def unseeded():
    flow.clear_default_session()
    yield
    flow.random.seed(None)
    flow.clear_default_session()


def define_jobs():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 64), dtype=flow.float)) -> tp.Numpy:
        hidden = flow.layers.dense(x, 32, kernel_initializer=flow.truncated_normal(0.1),
                                   name="hidden")
        dropped = flow.nn.dropout(hidden, rate=0.5)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0).minimize(flow.math.reduce_mean(dropped))
        return dropped

    return train


def first_run():
    """Initial weights and the dropout pattern of three steps in a fresh session."""
    flow.clear_default_session()
    train = define_jobs()
    flow.train.CheckPoint().init()
    weights = flow.get_all_variables()["hidden-weight"].copy()
    x = np.ones((8, 64), np.float32)
    masks = [train(x) == 0 for _ in range(3)]
    return weights, masks


def test_seed_repeats_initial_values_and_dropout():
    flow.random.seed(123)
    w1, m1 = first_run()
    flow.random.seed(123)
    w2, m2 = first_run()
    np.testing.assert_array_equal(w1, w2)  # same generator, same draws: exact
    for a, b in zip(m1, m2):
        np.testing.assert_array_equal(a, b)  # which units dropout zeroed
    assert 0.3 < np.mean(m1[0]) < 0.7
    assert not np.array_equal(m1[0], m1[1])  # masks still change from step to step


def test_cleared_session_restarts_from_the_seed():
    flow.random.seed(5)
    w1, _ = first_run()
    w2, _ = first_run()  # first_run clears the session: it starts from seed 5 again
    np.testing.assert_array_equal(w1, w2)


def test_other_seed_or_no_seed_differs():
    flow.random.seed(1)
    w1, m1 = first_run()
    flow.random.seed(2)
    w2, _ = first_run()
    assert not np.array_equal(w1, w2)
    flow.random.seed(None)
    w3, _ = first_run()
    w4, _ = first_run()
    assert not np.array_equal(w3, w4)


def test_loaders_without_their_own_seed_repeat():
    data = (np.arange(100),)
    flow.random.seed(7)
    first = [b[0].tolist() for b in flow.data.Loader(data, 10, shuffle=True, epochs=2)]
    second = [b[0].tolist() for b in flow.data.Loader(data, 10, shuffle=True, epochs=2)]
    assert first != second  # two loaders get two derived seeds
    flow.random.seed(7)
    assert [b[0].tolist() for b in flow.data.Loader(data, 10, shuffle=True, epochs=2)] == first
    # an explicit seed still wins
    a = [b[0].tolist() for b in flow.data.Loader(data, 10, shuffle=True, seed=3)]
    flow.random.seed(8)
    assert [b[0].tolist() for b in flow.data.Loader(data, 10, shuffle=True, seed=3)] == a


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match=r"flow.random.seed: n must be an int >= 0 or None, got"):
        flow.random.seed(bad)
