"""OneFlow v0.3.4 names whose ops keep state in variables across steps (``assign``,
the ordinal encoder, the moving-average quantization observer) or that a row of the op
matrix cannot express (the straight-through gradient of fake quantization, the micro-batch
ops' warnings and refusals, results of data-dependent length, refused inputs).

References are plain numpy or Python written from OneFlow's documented kernels.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from . import harness as H


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


# -- assign -------------------------------------------------------------------------------


def test_assign_takes_effect_after_the_step():
    @flow.global_function(type="predict")
    def accumulate(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        total = flow.get_variable("total", shape=(3,), initializer=flow.zeros_initializer())
        flow.assign(total, total + x)
        return total * 1          # the value this step read: from before the step

    H.instrument(accumulate)
    H.assert_ops(accumulate, ["assign", "variable"])
    x = np.array([1.0, 2.0, -0.5], np.float32)
    seen = [accumulate(x) for _ in range(3)]
    np.testing.assert_array_equal(seen, [0 * x, x, 2 * x])
    np.testing.assert_array_equal(flow.get_all_variables()["total"], 3 * x)


def test_system_assign_returns_ref_and_works_in_train_jobs():
    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((2,), dtype=flow.float64)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), dtype=flow.float64,
                              initializer=flow.ones_initializer())
        seen = flow.get_variable("seen", shape=(2,), dtype=flow.float64,
                                 initializer=flow.zeros_initializer(), trainable=False)
        assert flow.system.assign(seen, x) is seen
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(0.5, momentum=0).minimize(loss)
        return loss

    x = np.array([2.0, -4.0])
    step(x)
    values = flow.get_all_variables()
    np.testing.assert_array_equal(values["seen"], x)
    np.testing.assert_array_equal(values["w"], 1 - 0.5 * x)


def test_a_train_step_skipped_as_non_finite_assigns_nothing():
    def body(x):
        w = flow.get_variable("w", shape=(2,), dtype=flow.float64,
                              initializer=flow.ones_initializer())
        seen = flow.get_variable("seen", shape=(2,), dtype=flow.float64,
                                 initializer=flow.zeros_initializer(), trainable=False)
        flow.assign(seen, x * 2)
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(0.5, momentum=0).minimize(loss)
        return loss

    step = H.make_job(body, [tp.Numpy.Placeholder((2,), dtype=flow.float64)],
                      job_type="train")
    H.assert_ops(step, ["all_finite", "assign"])
    step(np.array([1.0, 3.0]))
    flow.config.check_finite_inputs(False)
    try:
        with pytest.warns(flow.train.NonFiniteStepWarning):
            step(np.array([np.nan, 1.0]))
    finally:
        flow.config.check_finite_inputs(True)
    np.testing.assert_array_equal(flow.get_all_variables()["seen"], [2.0, 6.0])


@pytest.mark.parametrize("make, match", [
    (lambda x, v: flow.assign(x, x), "ref must be a variable"),
    (lambda x, v: flow.assign(v, x[:1]), r"value \(float32\[1\]\) must match"),
    (lambda x, v: flow.system.assign(v, flow.cast(x, flow.float64)), "must match"),
])
def test_assign_refuses_what_it_cannot_assign(make, match):
    def body(x):
        v = flow.get_variable("v", shape=(2,), initializer=flow.zeros_initializer())
        make(x, v)
        return x

    with pytest.raises((TypeError, ValueError), match=match):
        H.make_job(body, [tp.Numpy.Placeholder((2,))])(np.zeros(2, np.float32))


# -- the categorical ordinal encoder ------------------------------------------------------


def _reference_encoder(capacity, batches):
    """OneFlow's kernel, element by element: open addressing, key 0 = empty slot."""
    table, size, outs = [0] * (2 * capacity), 0, []
    for batch in batches:
        out = []
        for key in batch.reshape(-1).tolist():
            for probe in range(capacity):
                slot = 2 * (((key + probe) % 2 ** 64) % capacity)
                if table[slot] == key:
                    out.append(table[slot + 1])
                    break
                if table[slot] == 0:
                    size += 1
                    table[slot], table[slot + 1] = key, size
                    out.append(size)
                    break
        outs.append(np.array(out).reshape(batch.shape))
    return outs, np.array(table), size


@pytest.mark.parametrize("dtype", [flow.int32, flow.int64])
def test_categorical_ordinal_encoder_remembers_across_steps(dtype):
    encode = H.instrument(H.make_job(
        lambda x: flow.layers.categorical_ordinal_encoder(x, 13, name="enc"),
        [tp.Numpy.Placeholder((2, 5), dtype=dtype)]))
    H.assert_ops(encode, ["categorical_ordinal_encode", "assign"])
    rng = np.random.default_rng(0)
    batches = [rng.integers(-4, 6, (2, 5)).astype(dtype.numpy) for _ in range(3)]
    batches[0][0, :3] = [7, 0, 7]
    want, table, size = _reference_encoder(13, batches)
    for batch, expected in zip(batches, want):
        got = encode(batch)
        assert got.dtype == dtype.numpy
        np.testing.assert_array_equal(got, expected)
    state = flow.get_all_variables()
    np.testing.assert_array_equal(state["enc-Table"], table)
    assert state["enc-Size"].tolist() == [size]


def test_categorical_ordinal_encode_on_given_variables_and_a_full_table():
    @flow.global_function(type="predict")
    def encode(x: tp.Numpy.Placeholder((3,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("t", shape=(4,), dtype=flow.int32,
                                  initializer=flow.zeros_initializer(), trainable=False)
        size = flow.get_variable("s", shape=(1,), dtype=flow.int32,
                                 initializer=flow.zeros_initializer(), trainable=False)
        return flow.categorical_ordinal_encode(table, size, x)

    assert encode(np.array([5, 9, 5], np.int32)).tolist() == [1, 2, 1]
    with pytest.raises(RuntimeError, match="table is full"):
        encode(np.array([3, 5, 9], np.int32))


# -- the moving-average observer ----------------------------------------------------------


def _moving_reference(batches, bit, scheme, formula, momentum=0.95):
    high_ = low_ = 0.0
    results = []
    weight = float(np.float32(momentum))
    for x in batches:
        high, low = x.max(), x.min()
        if formula == "cambricon" or scheme == "symmetric":
            high = low = max(abs(high), abs(low))
        high_ = high if high_ == 0 else high_ * weight + high * (1 - weight)
        low_ = low if low_ == 0 else low_ * weight + low * (1 - weight)
        if formula == "cambricon":
            results.append((np.floor(np.log2(high_)) - (bit - 2), 0.0))
        elif scheme == "symmetric":
            results.append((high_ / (2 ** (bit - 1) - 1), 0.0))
        else:
            scale = (high_ - low_) / (2 ** bit - 1)
            results.append((scale, -low_ / scale))
    return results


@pytest.mark.parametrize("bit, scheme, formula", [(8, "symmetric", "google"),
                                                  (5, "affine", "google"),
                                                  (8, "symmetric", "cambricon")])
def test_moving_average_observer_follows_train_steps_only(bit, scheme, formula):
    attrs = dict(quantization_bit=bit, quantization_scheme=scheme,
                 quantization_formula=formula)

    def body(x):
        w = flow.get_variable("w", shape=(1,), dtype=flow.float64,
                              initializer=flow.ones_initializer())
        scale, zero = flow.quantization.moving_average_min_maxObserver(x * w, name="obs",
                                                                       **attrs)
        return scale, zero

    def train_body(x):
        scale, zero = body(x)
        flow.optimizer.SGD(0.0, momentum=0).minimize(
            flow.math.reduce_sum(flow.get_variable("w", shape=(1,), dtype=flow.float64)))
        return scale, zero

    spec = [tp.Numpy.Placeholder((3, 4), dtype=flow.float64)]
    train = H.instrument(H.make_job(train_body, spec, job_type="train",
                                    returns=Tuple[tp.Numpy, tp.Numpy]))
    predict = H.instrument(H.make_job(body, spec, returns=Tuple[tp.Numpy, tp.Numpy]))
    H.assert_ops(train, ["moving_average_min_max_observer", "assign"])
    rng = np.random.default_rng(1)
    batches = [rng.uniform(-2, 1.5, (3, 4)) * (i + 1) for i in range(3)]
    for batch, (scale, zero) in zip(batches, _moving_reference(batches, bit, scheme,
                                                               formula)):
        got_scale, got_zero = train(batch)
        np.testing.assert_allclose(got_scale, [scale], rtol=1e-12)
        np.testing.assert_allclose(got_zero, [zero], rtol=1e-12, atol=1e-12)
    state = {k: v.copy() for k, v in flow.get_all_variables().items()}
    assert state["obs-current_train_step"].tolist() == [0]
    again = predict(rng.uniform(-50, 50, (3, 4)))        # a predict step moves nothing
    np.testing.assert_allclose(again[0], got_scale, rtol=1e-12)
    for name in ("obs-moving_max", "obs-moving_min"):
        np.testing.assert_array_equal(flow.get_all_variables()[name], state[name])


# -- gradients and refusals a row cannot express --------------------------------------------


def test_fake_quantization_gradient_passes_straight_through():
    x = np.random.default_rng(2).uniform(-1, 1, (3, 4))

    def fn(v):
        scale, zero = flow.quantization.min_max_observer(v, quantization_bit=3)
        return flow.quantization.fake_quantization(v, scale, zero, quantization_bit=3)

    (grad,), _, _ = H.analytic_grads(fn, [x], [0], expect_ops=["fake_quantization"])
    np.testing.assert_allclose(grad, H.cotangent(x.shape, 0), rtol=1e-12)


def test_unpack_and_pack_warn_and_acc_of_micro_batches_is_refused():
    def packed(x):
        return flow.pack(flow.unpack(x, 2) * 2, 2)

    with pytest.warns(RuntimeWarning, match="micro-batches"):
        got = H.run(packed, np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(got, np.arange(4) * 2)
    with pytest.raises(NotImplementedError, match="acc: its input is computed from "
                                                  "flow.unpack"):
        H.run(lambda x: flow.acc(flow.unpack(x, 2) + 1, 2), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="unpack: axis 0"):
        H.run(lambda x: flow.unpack(x, 3), np.zeros(4, np.float32))


def test_argwhere_inside_a_job_sees_the_padded_maximum():
    seen = []

    def body(x):
        found = flow.argwhere(x)
        assert found.shape == (6, 2)
        flow.watch(found, seen.append)        # a watch gets the static, padded blob
        return flow.gather_nd(x, found)       # rows of -1 gather zeros

    x = np.array([[0, 3, 0], [5, 0, 0]], np.float32)
    np.testing.assert_array_equal(H.run(body, x), [3, 5, 0, 0, 0, 0])
    np.testing.assert_array_equal(seen[0], [[0, 1], [1, 0]] + [[-1, -1]] * 4)


def test_cast_to_current_logical_view_is_the_blob_itself_and_char_is_int8():
    def body(x):
        assert flow.cast_to_current_logical_view(x) is x
        return flow.cast(x, flow.char)

    got = H.run(body, np.array([1.7, -2.2], np.float32))
    assert got.dtype == np.int8 and got.tolist() == [1, -2]
    assert flow.char is flow.int8


@pytest.mark.parametrize("fn, specs, exc, match", [
    (lambda i, u: flow.scatter_nd(i, u, (4,)), [((2, 1), np.int32), ((3,), np.float32)],
     ValueError, r"scatter_nd: updates must have shape \(2,\)"),
    (lambda i, u: flow.scatter_nd(i, u, (4,)), [((2, 1), np.float32), ((2,), np.float32)],
     TypeError, "scatter_nd: indices must be an integer Blob"),
    (lambda p, i, u: flow.tensor_scatter_nd_add(p, i, u),
     [((4,), np.float32), ((2, 1), np.int32), ((2,), np.float64)], TypeError,
     r"updates \(float64\) must have params' dtype"),
    (lambda d, i: flow.unsorted_segment_sum(d, i, 0), [((3,), np.float32), ((3,), np.int32)],
     ValueError, "num_segments must be a positive int"),
    (lambda d, i: flow.unsorted_segment_sum(d, i, 2), [((3,), np.float32), ((2,), np.int32)],
     ValueError, "segment_ids of shape"),
    (lambda x: flow.slice_v2(x, [(0, 9, 1)]), [((4,), np.float32)], ValueError,
     r"stop 9 of axis 0 must lie in \[-5, 4\]"),
    (lambda x: flow.slice_v2(x, [(0, 2, 0)]), [((4,), np.float32)], ValueError,
     "step of axis 0 must not be 0"),
    (lambda x, u: flow.slice_update(x, u, [(0, 2, 1)]), [((4,), np.float32),
                                                        ((3,), np.float32)],
     ValueError, r"update must have the slice's shape \(2,\)"),
    (lambda x: flow.math.lgamma(x), [((2,), np.int32)], TypeError, "lgamma:"),
    (lambda x: flow.argwhere(x, dtype=flow.float32), [((2,), np.float32)], TypeError,
     "argwhere: dtype must be int32 or int64"),
    (lambda x, n: flow.sync_dynamic_resize(x, n), [((3,), np.float32), ((2,), np.int32)],
     TypeError, r"size must be an integer Blob of shape \(1,\)"),
    (lambda x: flow.quantization.min_max_observer(x, quantization_bit=9),
     [((2,), np.float32)], ValueError, r"quantization_bit must be an int in \[2, 8\]"),
    (lambda x: flow.quantization.min_max_observer(x, quantization_scheme="odd"),
     [((2,), np.float32)], ValueError, "quantization_scheme must be one of"),
    (lambda x: flow.quantization.min_max_observer(
        x, quantization_formula="cambricon", per_layer_quantization=False),
     [((2, 3), np.float32)], NotImplementedError, "per-channel mode"),
    (lambda x, lab: flow.combined_margin_loss(x, lab), [((2, 3), np.float32),
                                                       ((3,), np.int32)],
     ValueError, r"label \(batch,\)"),
    (lambda x: flow.count_not_finite(x), [((2,), np.int32)], TypeError,
     "count_not_finite: x\\[0\\] must be floating point"),
    (lambda x, y: flow.broadcast_to_compatible_with(x, [y]), [((2,), np.float32),
                                                             ((3,), np.float32)],
     ValueError, "do not broadcast together"),
])
def test_bad_inputs_are_refused(fn, specs, exc, match):
    with pytest.raises(exc, match=match):
        H.run(fn, *[np.zeros(shape, dtype) for shape, dtype in specs])
