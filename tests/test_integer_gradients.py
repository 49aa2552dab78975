"""Gradients through integer blobs, as OneFlow's autograd makes them: an integer loss is
seeded with ones of its dtype, each integer blob's diff has that dtype, and ``cast``'s
gradient casts the diff back to its input's dtype whatever the types (OneFlow's cast grad
is ``cast(dy, in.dtype)``). The references below are numpy, written from those rules."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _sgd():
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0)


def test_an_integer_loss_is_differentiated_with_a_diff_of_its_dtype():
    seen = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((3, 3), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(1,), initializer=flow.zeros_initializer())
        x = x + flow.cast(w, flow.int32)
        out = flow.math.tril(x, -1)
        _sgd().minimize(out)
        flow.watch_diff(x, lambda d: seen.setdefault("x", d))
        flow.watch_diff(out, lambda d: seen.setdefault("out", d))
        return out

    x = np.arange(9, dtype=np.int32).reshape(3, 3)
    np.testing.assert_array_equal(job(x), np.tril(x, -1))
    assert seen["out"].dtype == np.int32 and (seen["out"] == 1).all()
    assert seen["x"].dtype == np.int32
    np.testing.assert_array_equal(seen["x"], np.tril(np.ones((3, 3), np.int32), -1))
    # The model diff: the sum of x's diff (3 ones below the diagonal), cast to float and
    # divided by the loss's 9 instances; w -= 0.5 * 3 / 9.
    np.testing.assert_allclose(flow.get_all_variables()["w"], [-0.5 * 3 / 9], rtol=1e-6)


def test_a_diff_passes_through_casts_to_an_integer_type_and_back():
    seen = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((4,)), y: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(1,), initializer=flow.zeros_initializer())
        xi = flow.cast(x + w, flow.int32)
        yi = flow.cast(y + w, flow.int32)
        out = flow.cast(flow.math.multiply(xi, yi), flow.float)
        _sgd().minimize(out)
        flow.watch_diff(xi, lambda d: seen.setdefault("x", d))
        flow.watch_diff(yi, lambda d: seen.setdefault("y", d))
        return out

    x = np.array([1, 2, 3, 4], np.float32)
    y = np.array([5, 0, 7, 2], np.float32)
    np.testing.assert_array_equal(job(x, y), x * y)
    # d out / d xi = yi, of xi's dtype; and the reverse
    assert seen["x"].dtype == np.int32 and seen["x"].tolist() == y.astype(int).tolist()
    assert seen["y"].tolist() == x.astype(int).tolist()
    # w's diff: sum(y + x) through both casts back to float, over 4 instances
    np.testing.assert_allclose(flow.get_all_variables()["w"], [-0.5 * (x + y).sum() / 4],
                               rtol=1e-6)
