"""No silent poisoning at the call boundary: overflowing and non-finite inputs."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()
    flow.config.check_finite_inputs(True)


def _jobs():
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((4, 3)),
            y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 2, name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.Adam(0.1).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 2, name="fc")

    return fit, predict


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
Y = np.array([0, 1, 1, 0], np.int32)


def _unchanged(before):
    after = flow.get_all_variables()
    return all(np.array_equal(after[n], before[n]) for n in before)


@pytest.mark.parametrize("job", ["fit", "predict"])
def test_float64_beyond_float32_is_refused_like_wrapping_ints(job):
    fit, predict = _jobs()
    flow.train.CheckPoint().init()
    before = flow.get_all_variables()
    x = X.astype(np.float64)
    x[2, 1] = -1e39
    call = (lambda a: fit(a, Y)) if job == "fit" else predict
    # pytest turns numpy's RuntimeWarning into an error: a ValueError means it never came
    with pytest.raises(ValueError, match=r"argument 'x': -1e\+39 at index \(2, 1\) does not "
                                         r"fit in float32"):
        call(x)
    assert _unchanged(before)
    x[2, 1] = 3.4028235e38      # rounds to float32's largest value: fits
    with np.errstate(over="ignore"):   # the random weights may overflow the product
        assert predict(x).shape == (4, 2)


def test_nan_input_to_a_train_job_is_refused_and_changes_nothing():
    fit, predict = _jobs()
    fit(X, Y)
    before = flow.get_all_variables()
    bad = X.copy()
    bad[1, 2], bad[3, 0] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"fit\(\) argument 'x': nan at index \(1, 2\) \(the "
                                         r"first of 2 non-finite values\).*check_finite_inputs"):
        fit(bad, Y)
    with pytest.raises(ValueError, match=r"argument 'x': inf at index \(0, 0\)"):
        fit(np.where(np.eye(4, 3, dtype=bool), np.inf, X).astype(np.float64), Y)
    assert _unchanged(before)
    assert np.isfinite(fit(X, Y)).all()


def test_predict_jobs_accept_nan():
    fit, predict = _jobs()
    bad = X.copy()
    bad[0, 0] = np.nan
    assert np.isnan(predict(bad)[0]).all()


def test_the_check_can_be_turned_off():
    fit, predict = _jobs()
    fit(X, Y)
    bad = X.copy()
    bad[0, 0] = np.nan
    flow.config.check_finite_inputs(False)
    assert flow.config.get("check_finite_inputs") is False
    with pytest.warns(flow.train.NonFiniteStepWarning):   # the step's guard still holds
        fit(bad, Y)


@pytest.mark.parametrize("order", [">", "<"])
def test_other_byte_orders_convert_exactly(order):
    fit, predict = _jobs()
    flow.train.CheckPoint().init()
    swapped = X.astype(X.dtype.newbyteorder(order))
    np.testing.assert_array_equal(predict(swapped), predict(X))
    fit(swapped, Y.astype(Y.dtype.newbyteorder(order)))
    big = X.astype(">f8")
    big[0, 0] = 1e300
    with pytest.raises(ValueError, match="does not fit in float32"):
        predict(big)
