"""Dynamic (mirrored) placeholders, as OneFlow's ``MirroredTensorDef``: an array of the
declared number of axes and at most the declared element count is taken, and the job's
ops see its actual shape (the job traced again for it, aioflow/engine/dynamic_inputs.py)."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _ops_job():
    @flow.global_function(type="predict")
    def job(x: tp.ListNumpy.Placeholder((8, 6)), y: tp.ListNumpy.Placeholder((8, 6))
            ) -> tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy,
                       tp.ListNumpy]:
        w = flow.get_variable("w", shape=(6, 2), initializer=flow.constant_initializer(0.5))
        return (x * y + 1.0,                                  # elementwise
                flow.reshape(x, (-1, 3)),                     # reshape-like
                flow.math.reduce_mean(x, axis=0),             # reduction over the dynamic axis
                flow.matmul(x, w),                            # matmul
                flow.concat([x, y], axis=1),                  # concat
                flow.nn.MSELoss(x, y, reduction="none"))      # a loss
    return job


@pytest.mark.parametrize("rows", [8, 5, 1])
def test_ops_see_the_actual_shape(rows):
    x = rng.standard_normal((rows, 6)).astype(np.float32)
    y = rng.standard_normal((rows, 6)).astype(np.float32)
    product, reshaped, mean, matmul, joined, mse = (r[0] for r in _ops_job()([x], [y]))
    np.testing.assert_allclose(product, x * y + 1, rtol=1e-6)
    np.testing.assert_array_equal(reshaped, x.reshape(-1, 3))
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(matmul, x @ np.full((6, 2), 0.5), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(joined, np.concatenate([x, y], 1))
    np.testing.assert_allclose(mse, (x - y) ** 2, rtol=1e-6)


def test_a_smaller_batch_trains_with_its_own_instance_count():
    # minimize scales the model diff by the loss's actual instance count (OneFlow's
    # dynamic loss instance number): the update is the mean over the rows given.
    seen = []

    @flow.global_function(type="train")
    def fit(x: tp.ListNumpy.Placeholder((8, 3))) -> tp.ListNumpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.zeros_initializer())
        flow.watch_diff(x, seen.append)
        loss = flow.math.reduce_sum(x * w - 1.0, axis=1)   # per-sample
        flow.optimizer.SGD(0.5, momentum=0).minimize(loss)
        return loss

    x = rng.standard_normal((3, 3)).astype(np.float32)
    loss, = fit([x])
    assert loss.shape == (3,)
    np.testing.assert_allclose(flow.get_all_variables()["w"], -0.5 * x.mean(0), rtol=1e-5)
    assert seen[0].numpy_list()[0].shape == (3, 3)   # the watched diff: actual shape too
    x2 = rng.standard_normal((5, 3)).astype(np.float32)
    fit([x2])
    np.testing.assert_allclose(flow.get_all_variables()["w"],
                               -0.5 * x.mean(0) - 0.5 * x2.mean(0), rtol=1e-5)


def test_is_dynamic_and_batch_axis():
    facts = {}

    @flow.global_function(type="predict")
    def job(x: tp.ListNumpy.Placeholder((4, 2)),
            z: tp.Numpy.Placeholder((2, 5), batch_axis=1),
            n: tp.Numpy.Placeholder((3,), batch_axis=None)) -> tp.Numpy:
        y = x * 2.0
        static = flow.cast_to_static_shape(y)
        facts.update(x=(x.is_dynamic, x.batch_axis), y=(y.is_dynamic, y.batch_axis),
                     static=static.is_dynamic, z=(z.is_dynamic, z.batch_axis),
                     total=flow.math.reduce_sum(z).batch_axis, n=n.batch_axis)
        return z

    job([np.ones((4, 2), np.float32)], np.ones((2, 5), np.float32), np.ones(3, np.float32))
    assert facts == {"x": (True, 0), "y": (True, 0), "static": False, "z": (False, 1),
                     "total": flow.INVALID_BATCH_AXIS, "n": flow.INVALID_BATCH_AXIS}


def test_arrays_beyond_the_declared_size_are_refused_naming_the_argument():
    job = _ops_job()
    small = [np.ones((2, 6), np.float32)]
    with pytest.raises(ValueError, match=r"argument 'x': expected float32 array of shape "
                                         r"\(8, 6\) or smaller .* got float32 array of shape "
                                         r"\(9, 6\)"):
        job([np.ones((9, 6), np.float32)], small)
    with pytest.raises(ValueError, match=r"takes 2 axes"):
        job([np.ones(6, np.float32)], small)


def test_an_op_that_cannot_take_the_actual_shape_says_so():
    @flow.global_function(type="predict")
    def job(x: tp.ListNumpy.Placeholder((8, 6))) -> tp.ListNumpy:
        return flow.reshape(x, (4, 12))   # a fixed shape of the declared size

    assert job([np.ones((8, 6), np.float32)])[0].shape == (4, 12)
    with pytest.raises(ValueError, match=r"job: traced for the actual shapes of its dynamic "
                                         r"\(mirrored\) arguments \(argument 'x' declared "
                                         r"\(8, 6\), got \(5, 6\)\), an op cannot take them"):
        job([np.ones((5, 6), np.float32)])


def test_only_the_actual_shapes_need_to_make_a_valid_job():
    # OneFlow checks ops on the actual shapes: declared maxima that disagree (20 targets,
    # 15 rows of predictions) are fine as long as each call's arrays agree.
    @flow.global_function(type="predict")
    def top(targets: tp.ListNumpy.Placeholder((20,), dtype=flow.int32),
            predictions: tp.ListNumpy.Placeholder((15, 10))) -> tp.ListNumpy:
        return flow.math.in_top_k(targets, predictions, k=1)

    predictions = rng.random((10, 5)).astype(np.float32)
    targets = predictions.argmax(1).astype(np.int32)
    targets[:3] = (targets[:3] + 1) % 5
    got, = top([targets], [predictions])
    np.testing.assert_array_equal(got, np.arange(10) >= 3)
