"""Inputs at call time: arity, type, shape and dtype are checked where the job is called,
with messages naming the parameter; a refused call changes nothing."""
import re

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.engine.session import default_session

B = 4


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def make_predict():
    @flow.global_function(type="predict")
    def predict(images: tp.Numpy.Placeholder((B, 1, 2, 2), dtype=flow.float),
                labels: tp.Numpy.Placeholder((B,), dtype=flow.int32)) -> tp.Numpy:
        return flow.reshape(images, (B, 4)) * flow.cast(flow.reshape(labels, (B, 1)),
                                                        flow.float)
    return predict


def make_train():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((B, 3)),
              y: tp.Numpy.Placeholder((B,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 5, name="fc",
                                   kernel_initializer=flow.random_normal_initializer())
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(0.5).minimize(loss)
        return loss
    return train


IMAGES = np.arange(B * 4, dtype=np.float32).reshape(B, 1, 2, 2)
LABELS = np.array([1, 2, 3, 4], np.int32)
EXPECTED = IMAGES.reshape(B, 4) * LABELS[:, None]
TX = np.linspace(-1, 1, B * 3, dtype=np.float32).reshape(B, 3)
TY = np.array([0, 1, 2, 3], np.int32)


# ------------------------------------------------------------------------- arity

def test_positional_and_keyword_calls_agree():
    job = make_predict()
    np.testing.assert_array_equal(job(IMAGES, LABELS), EXPECTED)
    np.testing.assert_array_equal(job(labels=LABELS, images=IMAGES), EXPECTED)
    np.testing.assert_array_equal(job(IMAGES, labels=LABELS), EXPECTED)


def test_too_many_arguments():
    job = make_predict()
    with pytest.raises(TypeError, match=r"predict\(\) takes 2 arguments \(images, labels\), "
                                        r"got 3"):
        job(IMAGES, LABELS, LABELS)


def test_missing_argument():
    job = make_predict()
    with pytest.raises(TypeError, match=r"predict\(\) missing argument\(s\): labels"):
        job(IMAGES)


def test_unknown_keyword():
    job = make_predict()
    with pytest.raises(TypeError, match=r"predict\(\) got an unexpected argument 'label'"):
        job(IMAGES, label=LABELS)


def test_argument_given_twice():
    job = make_predict()
    with pytest.raises(TypeError, match="multiple values for argument 'images'"):
        job(IMAGES, LABELS, images=IMAGES)


# ------------------------------------------------------------------------- type, shape

@pytest.mark.parametrize("value", [IMAGES.tolist(), 3.0, None])
def test_non_ndarray_is_refused(value):
    job = make_predict()
    with pytest.raises(TypeError, match=r"'images': expected float32 array of shape "
                                        r"\(4, 1, 2, 2\) \(numpy.ndarray\), got "):
        job(value, LABELS)


def test_wrong_shape_names_the_parameter_and_shows_both_shapes():
    @flow.global_function(type="predict")
    def job(images: tp.Numpy.Placeholder((100, 1, 28, 28), dtype=flow.float)) -> tp.Numpy:
        return images

    with pytest.raises(ValueError) as info:
        job(np.zeros((99, 1, 28, 28), np.float32))
    assert ("images': expected float32 array of shape (100, 1, 28, 28), got float32 array "
            "of shape (99, 1, 28, 28)") in str(info.value)


def test_wrong_rank_is_refused():
    job = make_predict()
    with pytest.raises(ValueError, match=r"'labels'.*shape \(4,\).*shape \(4, 1\)"):
        job(IMAGES, LABELS.reshape(B, 1))


# ------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("param, bad", [
    ("images", np.int32),     # int for float
    ("images", np.float16),   # narrower float: not converted silently
    ("images", np.int64),
    ("images", np.uint8),
    ("labels", np.uint8),     # other int kind
    ("labels", np.float32),   # float for int
    ("labels", np.float64),
    ("labels", np.bool_),
])
def test_wrong_dtype_is_refused_with_expected_and_received(param, bad):
    job = make_predict()
    args = {"images": IMAGES, "labels": LABELS}
    args[param] = args[param].astype(bad)
    want = "float32" if param == "images" else "int32"
    with pytest.raises(TypeError, match=rf"'{param}': expected {want} array.*got "
                                        rf"{np.dtype(bad).name} array"):
        job(**args)


def test_float64_and_int64_are_converted():
    job = make_predict()
    out = job(IMAGES.astype(np.float64), LABELS.astype(np.int64))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, EXPECTED)


def test_int64_out_of_int32_range_is_refused():
    job = make_predict()
    labels = LABELS.astype(np.int64)
    labels[2] = 2 ** 31
    with pytest.raises(ValueError, match=r"'labels'.*2147483648.*int32"):
        job(IMAGES, labels)
    labels[2] = -(2 ** 31) - 1
    with pytest.raises(ValueError, match=r"'labels'.*int32"):
        job(IMAGES, labels)
    labels[2] = 2 ** 31 - 1  # the edge itself fits
    assert job(IMAGES, labels)[2, 1] == np.float32(IMAGES[2].reshape(-1)[1] * (2 ** 31 - 1))


def test_non_contiguous_arrays_are_accepted():
    job = make_predict()
    wide = np.zeros((B, 1, 2, 4), np.float32)
    wide[..., ::2] = IMAGES
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    labels = np.repeat(LABELS, 2)[::2]
    fortran = np.asfortranarray(IMAGES)
    np.testing.assert_array_equal(job(strided, labels), EXPECTED)
    np.testing.assert_array_equal(job(fortran, LABELS), EXPECTED)
    np.testing.assert_array_equal(job(strided.astype(np.float64), LABELS), EXPECTED)


def test_caller_arrays_are_not_modified_by_conversion_or_the_step():
    job = make_predict()
    images64 = IMAGES.astype(np.float64)
    before = images64.copy()
    job(images64, LABELS)
    np.testing.assert_array_equal(images64, before)
    assert images64.dtype == np.float64


def test_a_step_sees_the_arguments_as_they_were_at_the_call():
    """A callback-form call returns before its step runs: reusing the argument's buffer
    right after the call must not change what the step computes."""
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Callback[tp.Numpy]:
        return x * 2

    got = []
    buffer = np.array([1.0, 2.0, 3.0], np.float32)
    assert job.graph.nodes  # compile now
    session = default_session()
    with session.lock:  # steps run under the session lock: hold them back
        job(buffer)(got.append)
        buffer[:] = -100.0  # the caller reuses its buffer at once
        job(buffer)(got.append)
        buffer[:] = 7.0
    flow.sync_default_session()
    np.testing.assert_array_equal(got[0], [2, 4, 6])
    np.testing.assert_array_equal(got[1], [-200, -200, -200])


# ------------------------------------------------------------------------- nothing changes

def _state():
    return {k: v.copy() for k, v in flow.get_all_variables().items()}


@pytest.mark.parametrize("bad_call", [
    lambda job: job(TX[:3], TY),
    lambda job: job(TX, TY.astype(np.float32)),
    lambda job: job(TX, TY, TY),
    lambda job: job(TX),
    lambda job: job(TX, y=TY, z=TY),
    lambda job: job(TX.tolist(), TY),
    lambda job: job(TX, TY.astype(np.int64) + 2 ** 40),
])
def test_a_refused_call_changes_nothing(bad_call):
    train = make_train()
    flow.train.CheckPoint().init()
    before = _state()
    step_name = "System-Train-TrainStep-train"
    assert before[step_name] == 0
    with pytest.raises((TypeError, ValueError)):
        bad_call(train)
    after = _state()
    assert set(after) == set(before)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    loss = train(TX, TY)  # the next valid call works and is the first step
    assert loss.shape == (B,) and np.all(np.isfinite(loss))
    trained = _state()
    assert trained[step_name] == 1
    assert not np.array_equal(trained["fc-weight"], before["fc-weight"])


def test_a_refused_first_call_compiles_and_initializes_nothing():
    train = make_train()
    with pytest.raises(ValueError, match=re.escape("'x'")):
        train(TX[:2], TY)
    assert default_session().variables == {}
    assert default_session().compiled == {}
    first = train(TX, TY)
    assert flow.get_all_variables()["System-Train-TrainStep-train"] == 1
    second = train(TX, TY)
    assert second.mean() < first.mean()
