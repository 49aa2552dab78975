"""An embedding's gradient kept from step to step (aioflow/compiler/gradient_buffers.py): a
``gather_grad`` whose output only the updates and the non-finite guard read writes into
one table per plan, clearing only the rows the previous step wrote, and the guard reads
only those rows. Every value must be the fresh-table computation's bit for bit, over steps
whose rows differ (the rows of step k, not written in step k+1, must read as zeros
again), with repeated and out-of-range indices, a step the guard refuses, and every
optimizer that takes the path; anything else that reads the gradient keeps the fresh
table. The reference is the same job with the buffers switched off (``ENABLED``)."""
import math

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.compiler import gradient_buffers
from aioflow.ops import indexing
from aioflow.ops.indexing import RowsBuffer
from aioflow.ops.state import _rows_squares_finite, _squares_finite
from aioflow.session import default_session

N, D, BATCH, LR = 64, 3, 6, 0.1


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.config.check_finite_inputs(True)
    flow.clear_default_session()


def batches(dtype=np.float32, steps=6):
    """(ids, weights) per step: rows repeated within a step, rows written in one step and
    not the next, an index outside the table (its 0 * weight goes to row 0)."""
    rng = np.random.default_rng(5)
    ids = [[3, 3, 10, 20, 3, 40],
           [1, 2, 5, 7, 7, 63],          # none of step 0's rows
           [3, 10, 11, 11, 11, 0],
           [60, 61, 62, 63, 64, -1],     # 64 and -1: outside the table
           [9, 9, 9, 9, 9, 9],
           [2, 4, 6, 8, 10, 12]][:steps]
    return [(np.array(i, np.int32), rng.standard_normal((BATCH, D)).astype(dtype))
            for i in ids]


def dynamic_scale():
    return flow.optimizer.loss_scale.dynamic_loss_scale(
        initial_loss_scale=2.0 ** 100, increment_period=2, multiplier=2.0)


OPTIMIZERS = {
    "lazy_adam": (lambda: flow.optimizer.LazyAdam(LR), False),
    "lazy_adam_scaled": (lambda: flow.optimizer.LazyAdam(LR, loss_scale_policy=flow.optimizer.
                                                         loss_scale.static_loss_scale(4.0)),
                         False),
    "sgd_scaled": (lambda: flow.optimizer.SGD(LR, loss_scale_policy=flow.optimizer.
                                              loss_scale.static_loss_scale(4.0)), False),
    "adam_dynamic_scale": (lambda: flow.optimizer.Adam(LR, loss_scale_policy=dynamic_scale()),
                           True),
    "sgd": (lambda: flow.optimizer.SGD(LR), False),
    "adam": (lambda: flow.optimizer.Adam(LR), False),
    "sliced_sgd": (lambda: flow.optimizer.SGD(LR), True),
    "sliced_momentum": (lambda: flow.optimizer.SGD(LR, momentum=0.9), True),
    "sliced_adam": (lambda: flow.optimizer.Adam(LR, do_bias_correction=True), True),
}


def embedding_job(name, dtype=np.float32, watch=None, per_sample=False):
    make, sliced = OPTIMIZERS[name]
    config = flow.FunctionConfig()
    if sliced:
        config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["table"])))

    @flow.global_function(type="train", function_config=config)
    def fit(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
            weights: tp.Numpy.Placeholder((BATCH, D), dtype=dtype)) -> tp.Numpy:
        table = flow.get_variable("table", shape=(N, D), dtype=dtype,
                                  initializer=flow.random_normal_initializer(seed=1))
        if watch is not None:
            flow.watch_diff(table, watch)
        rows = flow.gather(table, ids) * weights
        loss = flow.math.reduce_sum(rows, axis=1) if per_sample else flow.math.reduce_sum(rows)
        make().minimize(loss)
        return loss
    return fit


def train(name, data, enabled, monkeypatch, backend="numpy", **job):
    """Every variable (table and slots) after each step, and the job's RowsBuffers."""
    monkeypatch.setattr(gradient_buffers, "ENABLED", enabled)
    flow.clear_default_session()
    out = []
    with backends.use(backend):
        fit = embedding_job(name, data[0][1].dtype, **job)
        for ids, weights in data:
            fit(ids, weights)
            out.append(flow.get_all_variables())
        plan = fit.compiled_for(default_session()).plan
    buffers = [ins.attrs["rows_buffer"] for ins in plan.instructions
               if isinstance(ins.attrs.get("rows_buffer"), RowsBuffer)]
    return out, buffers, plan


def scaled(plan):
    return [ins.attrs["rows_scale"] for ins in plan.instructions if "rows_scale" in ins.attrs]


def assert_same(got, want):
    assert len(got) == len(want)
    for step, (have, expected) in enumerate(zip(got, want)):
        assert have.keys() == expected.keys()
        for key in have:
            np.testing.assert_array_equal(have[key], expected[key],
                                          err_msg=f"step {step}: {key}")
            assert have[key].dtype == expected[key].dtype


@pytest.mark.parametrize("fraction", [1.0, -1.0], ids=["scaled-rows", "scaled-whole"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_the_kept_gradient_gives_the_fresh_tables_values(name, dtype, fraction, monkeypatch):
    """(``fraction``: a scaled table's rows computed alone, or the whole table, each step)"""
    monkeypatch.setattr(indexing, "SCALED_ROW_FRACTION", fraction)
    data = batches(dtype)
    if name == "adam_dynamic_scale":   # 2^100 overflows at first: steps refused, scale cut
        flow.config.check_finite_inputs(False)
    want, none, _ = train(name, data, False, monkeypatch)
    got, buffers, plan = train(name, data, True, monkeypatch)
    assert none == [] and len(buffers) == 1
    assert_same(got, want)
    assert len(scaled(plan)) == (1 if name.endswith(("_scaled", "_scale"))
                                 else 0)
    # the last step's rows are all the buffer holds: the rest are zeros, as in a fresh table
    table = buffers[0].array
    rows = np.unique(buffers[0].rows)
    assert set(rows) == {2, 4, 6, 8, 10, 12}
    assert not np.any(np.delete(table, rows, axis=0))
    guard, = [ins for ins in plan.instructions if ins.op_name == "all_finite"]
    assert (scaled(plan) or buffers)[0] in guard.attrs["row_buffers"]


def test_rows_not_cleared_would_leave_old_gradients(monkeypatch):
    """The equality above depends on the clearing: without it, step 1 would still see step
    0's rows (and apply them again)."""
    data = batches()
    want, _, _ = train("sliced_sgd", data, False, monkeypatch)
    monkeypatch.setattr(indexing, "clear_rows", lambda array, rows: None)
    got, buffers, _ = train("sliced_sgd", data, True, monkeypatch)
    assert len(buffers) == 1
    np.testing.assert_array_equal(got[0]["table"], want[0]["table"])   # step 0 is alike
    with pytest.raises(AssertionError):
        assert_same(got, want)


@pytest.mark.parametrize("name", ["lazy_adam", "sliced_adam", "sgd"])
def test_steps_the_guard_refuses(name, monkeypatch):
    data = batches()
    data[1][1][0, 0] = np.nan            # a NaN: the guard reads the rows, sees it
    data[3][1][2, 1] = np.inf            # an infinity
    data[4][1][:] = 1e19                 # finite, but the squares overflow float32
    flow.config.check_finite_inputs(False)
    with pytest.warns(flow.train.NonFiniteStepWarning):
        want, _, _ = train(name, data, False, monkeypatch)
    with pytest.warns(flow.train.NonFiniteStepWarning):
        got, buffers, _ = train(name, data, True, monkeypatch)
    assert len(buffers) == 1
    assert_same(got, want)
    for skipped in (1, 3, 4):
        assert_same(got[skipped:skipped + 1], got[skipped - 1:skipped])
    assert not np.array_equal(got[5]["table"], got[4]["table"])   # then it trains again


def test_the_guard_reads_the_rows_only_where_its_answer_is_the_same():
    """Sums of squares around float32's maximum (3.4e38): the rows' answer, where it
    answers, is the whole table's; near the maximum it reads the whole table."""
    rng = np.random.default_rng(0)
    for scale in [1.0, 1e18, 5e18, 1e19, 1.3e19, 1.84e19, 1.845e19, 1.9e19, 3e19]:
        for _ in range(20):
            table = np.zeros((50, 4), np.float32)
            rows = rng.integers(0, 50, 5)
            np.add.at(table, rows, (rng.random((5, 4)) * scale).astype(np.float32))
            with np.errstate(over="ignore", invalid="ignore"):
                assert _rows_squares_finite(table, rows) == bool(_squares_finite(np, table))
    half = np.zeros((8, 2), np.float16)          # float16: finiteness only
    half[3] = [np.inf, 1]
    assert not _rows_squares_finite(half, np.array([3]))
    assert _rows_squares_finite(half, np.array([2]))   # (rows the caller vouches for)


def test_the_rows_test_reads_the_whole_table_near_the_maximum(monkeypatch):
    calls = []
    from aioflow.ops import state
    real = state._squares_finite
    monkeypatch.setattr(state, "_squares_finite",
                        lambda xp, a: calls.append(a.shape) or real(xp, a))
    table = np.zeros((10, 2), np.float32)
    table[4] = [1e3, 1]
    assert _rows_squares_finite(table, np.array([4, 4]))
    assert calls == []
    big = math.sqrt(np.finfo(np.float32).max / 2.01)
    table[4] = [big, big]
    with np.errstate(over="ignore"):
        _rows_squares_finite(table, np.array([4]))
    assert calls == [(10, 2)]


def test_a_watched_gradient_keeps_the_fresh_table(monkeypatch):
    """flow.watch_diff on the table fetches its gradient: a job output, so no buffer
    (the fetch must not be a table a later step clears and refills)."""
    data = batches()
    seen = []
    got, buffers, _ = train("sliced_sgd", data, True, monkeypatch,
                            watch=lambda g: seen.append(np.array(g)))
    assert buffers == []
    assert len(seen) == len(data)
    for (ids, weights), g in zip(data, seen):
        valid = (ids >= 0) & (ids < N)
        want = np.zeros((N, D), np.float32)
        np.add.at(want, np.where(valid, ids, 0), weights * valid[:, None])
        np.testing.assert_array_equal(g, want)


def test_a_scaled_gradient_keeps_its_table_and_the_strict_backend_a_fresh_one(monkeypatch):
    monkeypatch.setattr(indexing, "SCALED_ROW_FRACTION", 1.0)   # the rows alone
    data = batches()
    data[2][1][1, 1] = np.nan            # a refused step: the guard reads the product
    flow.config.check_finite_inputs(False)
    # a per-sample loss: minimize divides the table's gradient by the batch (a multiply)
    with pytest.warns(flow.train.NonFiniteStepWarning):
        want, _, _ = train("lazy_adam", data, False, monkeypatch, per_sample=True)
    with pytest.warns(flow.train.NonFiniteStepWarning):
        got, buffers, plan = train("lazy_adam", data, True, monkeypatch, per_sample=True)
    assert len(buffers) == 1 and len(scaled(plan)) == 1
    assert scaled(plan)[0].source is buffers[0]
    assert_same(got, want)
    # on the strict backend (as on CuPy) no buffer at all
    _, strict_buffers, _ = train("lazy_adam", batches(steps=3), True, monkeypatch,
                                 backend="strict")
    assert strict_buffers == []


def test_a_kernel_call_without_a_plan_fills_a_fresh_table():
    """gather_grad called alone (no rows_buffer) is unchanged, and with one it clears
    exactly the previous call's rows."""
    class Ctx:
        xp = np
    gy = np.ones((3, 2), np.float32)
    buffer = RowsBuffer()
    first = indexing.gather_grad.forward(Ctx, gy, np.array([1, 1, 4]), axis=0, shape=(6, 2),
                                         rows_buffer=buffer)
    fresh = indexing.gather_grad.forward(Ctx, gy, np.array([1, 1, 4]), axis=0, shape=(6, 2))
    np.testing.assert_array_equal(first, fresh)
    assert first is buffer.array
    second = indexing.gather_grad.forward(Ctx, gy, np.array([0, 2, 9]), axis=0,
                                          shape=(6, 2), rows_buffer=buffer)
    assert second is first
    np.testing.assert_array_equal(
        second, indexing.gather_grad.forward(Ctx, gy, np.array([0, 2, 9]), axis=0,
                                             shape=(6, 2)))


def test_several_devices_in_one_process_keep_a_table_each(monkeypatch):
    """flow.config.cpu_device_num(2): each device part has its own gather_grad, whose
    tables are summed and averaged before the update; each keeps a buffer of its own."""
    from aioflow._core import settings
    saved = settings.get("gpu_device_num"), settings.get("cpu_device_num")

    def run(enabled):
        monkeypatch.setattr(gradient_buffers, "ENABLED", enabled)
        flow.clear_default_session()
        flow.config.gpu_device_num(0)
        flow.config.cpu_device_num(2)
        config = flow.function_config()
        config.default_logical_view(flow.scope.mirrored_view())

        @flow.global_function(type="train", function_config=config)
        def fit(ids: tp.ListNumpy.Placeholder((3,), dtype=flow.int32),
                weights: tp.ListNumpy.Placeholder((3, D))) -> tp.ListNumpy:
            table = flow.get_variable("table", shape=(N, D),
                                      initializer=flow.random_normal_initializer(seed=1))
            loss = flow.math.reduce_sum(flow.gather(table, ids) * weights)
            flow.optimizer.LazyAdam(LR).minimize(loss)
            return loss
        out = []
        with backends.use("numpy"):
            for ids, weights in batches():
                fit([ids[:3], ids[3:]], [weights[:3], weights[3:]])
                out.append(flow.get_all_variables())
            plan = fit.compiled_for(default_session()).plan
        return out, [ins for ins in plan.instructions if "rows_buffer" in ins.attrs]
    try:
        want, _ = run(False)
        got, buffered = run(True)
    finally:
        flow.clear_default_session()
        settings.put("gpu_device_num", saved[0])
        settings.put("cpu_device_num", saved[1])
    assert len(buffered) == 2
    assert buffered[0].attrs["rows_buffer"] is not buffered[1].attrs["rows_buffer"]
    assert_same(got, want)


@pytest.mark.parametrize("fraction", [1.0, 0.3, -1.0])
@pytest.mark.parametrize("ufunc", ["multiply", "divide"])
def test_a_scaled_table_follows_its_operand(ufunc, fraction, monkeypatch):
    """The kept product of a kept table and one element equals the ufunc's whole-table
    result bit for bit as the rows and the operand change: its sign (0 * -1 is -0), 0
    (0 / 0 is NaN), infinity and NaN rewrite the background."""
    monkeypatch.setattr(indexing, "SCALED_ROW_FRACTION", fraction)   # 0.3: both paths

    class Ctx:
        xp = np
    source = RowsBuffer()
    state = indexing.ScaledRows(source, ufunc)
    rng = np.random.default_rng(2)
    for b in [0.5, 0.5, -2.0, -2.0, np.inf, 3.0, 0.0, np.nan, 1.0, 0.25]:
        count = rng.choice([2, 4, 6])
        ids = rng.integers(0, 12, count)
        gy = rng.standard_normal((count, 2)).astype(np.float32)
        table = indexing.gather_grad.forward(Ctx, gy, ids, axis=0, shape=(12, 2),
                                             rows_buffer=source)
        operand = np.asarray(b, np.float32)
        with np.errstate(all="ignore"):
            got = indexing.scaled_rows(Ctx, table, operand, rows_scale=state)
            want = getattr(np, ufunc)(table, operand)
            background = getattr(np, ufunc)(np.float32(0), operand)   # 0, -0 or NaN
        assert got is state.array
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        assert state.zero_elsewhere == (background == 0)
    # another array than the source's table: the ufunc, as the op computes it
    other = np.ones((12, 2), np.float32)
    np.testing.assert_array_equal(
        indexing.scaled_rows(Ctx, other, np.float32(2), rows_scale=state),
        getattr(np, ufunc)(other, np.float32(2)))
    assert state.array is None


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("row_shape", [(), (1,), (5,), (3, 4)])
def test_add_rows_is_add_at_bit_for_bit(dtype, row_shape):
    """gather_grad's accumulation (ops/indexing.py add_rows: one flat add.at over element
    indices on the host) against numpy's add.at on the rows: many repeats, -0, NaN
    (with payloads), infinities, values whose sum depends on the order."""
    rng = np.random.default_rng(11)
    for trial in range(20):
        n = int(rng.integers(1, 30))
        k = int(rng.integers(0, 60))
        rows = rng.integers(0, n, k).astype(rng.choice([np.int32, np.int64, np.uint8]))
        if np.issubdtype(dtype, np.floating):
            with np.errstate(over="ignore"):   # float16: some overflow to infinity
                values = (rng.standard_normal((k,) + row_shape)
                          * 10.0 ** rng.integers(-8, 8, (k,) + row_shape)).astype(dtype)
            if trial % 2:   # finite values only: the flat add.at
                values[~np.isfinite(values)] = 1
            special = np.array([-0.0, np.nan, np.inf, -np.inf, np.finfo(dtype).max], dtype=dtype)
            spots = rng.random(values.shape) < (0.1 if trial % 4 == 0 else 0.0)
            values[spots] = rng.choice(special, int(spots.sum()))
            if spots.any():   # a NaN with a payload of its own
                bits = {2: np.uint16(0x7E01), 4: np.uint32(0x7FC00001),
                        8: np.uint64(0x7FF8000000000001)}[np.dtype(dtype).itemsize]
                values.reshape(-1)[np.flatnonzero(spots.reshape(-1))[0]] = \
                    np.array(bits).view(dtype)
        else:
            values = rng.integers(-100, 100, (k,) + row_shape).astype(dtype)
        want = np.zeros((n,) + row_shape, dtype)
        got = np.zeros((n,) + row_shape, dtype)
        with np.errstate(all="ignore"):
            np.add.at(want, rows, values)
            indexing.add_rows(np, got, rows, values)
        assert got.tobytes() == want.tobytes(), trial
