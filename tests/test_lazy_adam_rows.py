"""LazyAdam's update on the rows a step touched (aioflow/ops/lazy_adam.py, aioflow/optimizer/
gathered_rows.py) gives the values of OneFlow's dense lazy_adam formula, bit for bit.

The reference is plain numpy, in the variable's dtype and in the kernel's order of
operations (so equality is exact, not within a tolerance). The same steps run three ways:
the default (the gather's indices name the rows; on the host a gradient with no gather
behind it is searched for its non-zero rows), the dense kernel forced
(``ROW_FRACTION = -1``: every element computed, as before the row path existed), and the
reference. Cases: repeated indices, rows touched then untouched, a step whose gradient is
all zero, gradient elements below 1e-12 inside a touched row, float32 and float64, a step
the non-finite guard refuses (it writes nothing), indices outside the table, and the
strict backend (the GPU's code path: a device flag, no host reads).
"""
import types

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.backends.strict import StrictBackend
from aioflow.ops import lazy_adam
from aioflow.session import default_session

LR, B1, B2, EPS = 0.25, 0.8, 0.9, 1e-8
N, D, BATCH = 100, 3, 4         # 4 (or 8) of 100 rows: under ROW_FRACTION, the row path


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.config.check_finite_inputs(True)
    flow.clear_default_session()


@pytest.fixture
def paths(monkeypatch):
    """Counts the calls of the row and the dense kernels."""
    calls = {"rows": 0, "dense": 0}
    for name, key in (("_update_rows", "rows"), ("_update_dense", "dense")):
        original = getattr(lazy_adam, name)

        def counted(*args, _original=original, _key=key):
            calls[_key] += 1
            return _original(*args)
        monkeypatch.setattr(lazy_adam, name, counted)
    return calls


def reference_step(w, m, v, g, step):
    """OneFlow's dense lazy_adam on numpy arrays of one dtype (new arrays): ``step``
    updates applied before this one."""
    t = w.dtype.type
    n = step + 1.0
    rate = LR * (1.0 - B2 ** n) ** 0.5 / (1.0 - B1 ** n)
    touched = np.abs(g) >= t(1e-12)
    new_m = m * t(B1) + g * t(1 - B1)
    new_v = v * t(B2) + g * g * t(1 - B2)
    new_w = w - new_m / (np.sqrt(new_v) + t(EPS)) * t(rate)
    return tuple(np.where(touched, new, old) for new, old in ((new_w, w), (new_m, m),
                                                              (new_v, v)))


def gathered_gradient(ids, values, rows=N):
    """What gather_grad makes of a gather's output gradient: repeats summed in order; an
    index outside the table adds 0 * value to row 0."""
    valid = (ids >= 0) & (ids < rows)
    g = np.zeros((rows,) + values.shape[1:], values.dtype)
    with np.errstate(invalid="ignore"):    # 0 * inf: NaN, as in the kernel
        np.add.at(g, np.where(valid, ids, 0), values * valid[:, None].astype(values.dtype))
    return g


def batches(dtype):
    """(ids, weights) per step: d loss / d table is ``gathered_gradient(ids, weights)``."""
    rng = np.random.default_rng(7)
    weights = [rng.standard_normal((BATCH, D)).astype(dtype) for _ in range(5)]
    weights[2][:] = 0                      # a step whose gradient is all zero
    weights[3][1, 2] = 1e-13               # untouched, inside a touched row
    weights[3][2, 0] = -1e-13
    ids = [[0, 2, 2, 5],                   # row 2 twice: its gradient is the sum
           [2, 7, 7, 7],                   # 0 and 5 touched before, untouched now
           [1, 3, 4, 6],
           [0, 9, 11, 0],
           [5, 5, 99, 1]]
    return [(np.array(i, np.int32), w) for i, w in zip(ids, weights)]


def embedding_job(dtype):
    @flow.global_function(type="train")
    def fit(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
            weights: tp.Numpy.Placeholder((BATCH, D), dtype=dtype)) -> tp.Numpy:
        table = flow.get_variable("table", shape=(N, D), dtype=dtype,
                                  initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(flow.gather(table, ids) * weights)
        flow.optimizer.LazyAdam(LR, beta1=B1, beta2=B2, epsilon=EPS).minimize(loss)
        return loss
    return fit


def initial_table(dtype):
    return np.random.default_rng(3).standard_normal((N, D)).astype(dtype)


def train(job, table, data, backend="numpy"):
    """The table, m and v after each step of ``data``."""
    out = []
    with backends.use(backend):
        fit = job()
        flow.load_variables({"table": table})
        for ids, weights in data:
            fit(ids, weights)
            state = flow.get_all_variables()
            out.append((state["table"], state["table-m"], state["table-v"]))
    return out


def reference(table, grads, skipped=()):
    w, m, v = table, np.zeros_like(table), np.zeros_like(table)
    out, step = [], 0
    for i, g in enumerate(grads):
        if i not in skipped:
            w, m, v = reference_step(w, m, v, g, step)
            step += 1
        out.append((w, m, v))
    return out


def assert_same(got, want):
    for step, (have, expected) in enumerate(zip(got, want)):
        for name, a, b in zip(("table", "m", "v"), have, expected):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b, err_msg=f"step {step}: {name}")


@pytest.mark.parametrize("backend", ["numpy", "strict"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gathered_rows_update_as_the_dense_formula(dtype, backend, paths, monkeypatch):
    data = batches(dtype)
    want = reference(initial_table(dtype), [gathered_gradient(i, w) for i, w in data])
    assert_same(train(lambda: embedding_job(dtype), initial_table(dtype), data, backend),
                want)
    assert paths == {"rows": 5, "dense": 0}
    monkeypatch.setattr(lazy_adam, "ROW_FRACTION", -1.0)     # the dense kernel, as before
    flow.clear_default_session()
    assert_same(train(lambda: embedding_job(dtype), initial_table(dtype), data, backend),
                want)
    assert paths == {"rows": 5, "dense": 5}
    untouched = np.setdiff1d(np.arange(N), np.concatenate([i for i, _ in data]))
    np.testing.assert_array_equal(want[-1][0][untouched], initial_table(dtype)[untouched])


@pytest.mark.parametrize("backend", ["numpy", "strict"])
def test_a_step_the_guard_refuses_writes_nothing(backend, paths):
    data = batches(np.float32)
    data[1][1][0, 0] = np.nan     # step 1's gradient is not finite: the guard skips it
    flow.config.check_finite_inputs(False)
    with pytest.warns(flow.train.NonFiniteStepWarning):
        got = train(lambda: embedding_job(np.float32), initial_table(np.float32), data,
                    backend)
    grads = [gathered_gradient(i, w) for i, w in data]
    assert_same(got, reference(initial_table(np.float32), grads, skipped={1}))
    assert_same(got[1:2], got[0:1])     # the refused step changed no value
    # On the host the refused step returns before choosing a path; on a device the flag
    # is not read, so the rows are computed and every write masked.
    assert paths["rows"] == (4 if backend == "numpy" else 5)


def one_hot_job():
    """The table's gradient comes from a matmul, not a gather: no indices to pass."""
    @flow.global_function(type="train")
    def fit(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
            weights: tp.Numpy.Placeholder((BATCH, D))) -> tp.Numpy:
        table = flow.get_variable("table", shape=(N, D), initializer=flow.zeros_initializer())
        rows = flow.matmul(flow.one_hot(ids, depth=N, dtype=flow.float32), table)
        loss = flow.math.reduce_sum(rows * weights)
        flow.optimizer.LazyAdam(LR, beta1=B1, beta2=B2, epsilon=EPS).minimize(loss)
        return loss
    return fit


def test_a_dense_gradient_is_searched_for_its_rows_on_the_host(paths, monkeypatch):
    data = batches(np.float32)
    rows = train(one_hot_job, initial_table(np.float32), data)
    assert _row_hints(one_hot_job) == [0]
    assert paths == {"rows": 5, "dense": 0}
    monkeypatch.setattr(lazy_adam, "ROW_FRACTION", -1.0)
    flow.clear_default_session()
    assert_same(rows, train(one_hot_job, initial_table(np.float32), data))
    assert paths == {"rows": 5, "dense": 5}


def _row_hints(make_job):
    """The ``row_hints`` of the job's lazy_adam_update ops, compiled in a fresh session."""
    flow.clear_default_session()
    job = make_job()
    plan = job.compiled_for(default_session()).plan
    return [ins.attrs["row_hints"] for ins in plan.instructions
            if ins.op_name == "lazy_adam_update"]


def _job(body, regularizer=None):
    def make():
        @flow.global_function(type="train")
        def fit(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
            table = flow.get_variable("table", shape=(N, D), regularizer=regularizer,
                                      initializer=flow.ones_initializer())
            loss = body(table, ids)
            flow.optimizer.LazyAdam(LR).minimize(loss)
            return loss
        return fit
    return make


JOBS = [
    (lambda t, i: flow.math.reduce_sum(flow.gather(t, i)), None, 1),
    # a per-sample loss: the gradient is scaled by 1 / BATCH (a multiply)
    (lambda t, i: flow.math.reduce_sum(flow.gather(t * 2.0, i), axis=1), None, 1),
    (lambda t, i: flow.math.reduce_sum(flow.gather(t, i))
     + flow.math.reduce_sum(flow.gather(t, (i + 1) * 3)), None, 2),   # two gathers: a sum
    # a dense gradient joins: the rows are no longer the indices'
    (lambda t, i: flow.math.reduce_sum(flow.gather(t, i)) + flow.math.reduce_sum(t), None, 0),
    (lambda t, i: flow.math.reduce_sum(flow.gather(t, i)), flow.regularizers.l2(0.1), 0),
    (lambda t, i: flow.math.reduce_sum(flow.gather(t, i * 0, axis=1)), None, 0),
]
JOB_IDS = ["gather", "scaled", "gathered-twice", "plus-dense", "l2", "axis-1"]


@pytest.mark.parametrize("body, regularizer, hints", JOBS, ids=JOB_IDS)
def test_the_gathers_indices_go_to_the_update_only_where_they_name_the_rows(
        body, regularizer, hints, monkeypatch):
    assert _row_hints(_job(body, regularizer)) == [hints]
    tables = []
    for fraction in (lazy_adam.ROW_FRACTION, -1.0):      # as it runs, and the dense kernel
        monkeypatch.setattr(lazy_adam, "ROW_FRACTION", fraction)
        flow.clear_default_session()
        fit = _job(body, regularizer)()
        for ids, _ in batches(np.float32)[:3]:
            fit(ids)
        tables.append(flow.get_all_variables()["table"])
    np.testing.assert_array_equal(*tables)


def _kernel(xp, table, grad, step, hints=(), flag=()):
    """One lazy_adam_update on copies of (table, m, v) = (table, table / 4, table ** 2);
    returns the new arrays on the host."""
    backend = StrictBackend() if xp is not np else None
    put = (lambda a: backend.to_device(np.array(a))) if backend else np.array
    targets = [put(table), put(table / 4), put(table ** 2)]
    ctx = types.SimpleNamespace(xp=xp)
    lazy_adam.lazy_adam_update.forward(
        ctx, targets[0], put(grad), np.asarray(LR), targets[1], targets[2],
        np.asarray(step), *map(put, hints), *map(put, flag), beta1=B1, beta2=B2,
        epsilon=EPS, row_hints=len(hints))
    return [backend.to_host(a) for a in targets] if backend else targets


@pytest.mark.parametrize("xp", [np, StrictBackend.xp], ids=["numpy", "strict"])
def test_indices_outside_the_table_and_nan_elements_change_nothing(xp):
    table = initial_table(np.float64)
    ids = np.array([-3, 4, N, 4, 0], np.int32)          # row 0 only through bad indices
    values = np.random.default_rng(1).standard_normal((5, D))
    values[0, :] = np.inf                                # 0 * inf: NaN in row 0
    values[1, 1] = np.nan
    grad = gathered_gradient(ids, values)
    assert np.isnan(grad[0]).all() and np.isnan(grad[4, 1])
    want = reference_step(table, table / 4, table ** 2, grad, 3)
    for hints in ((ids,), ()):
        assert_same([_kernel(xp, table, grad, 3, hints)], [want])
    np.testing.assert_array_equal(want[0][0], table[0])


@pytest.mark.parametrize("xp", [np, StrictBackend.xp], ids=["numpy", "strict"])
@pytest.mark.parametrize("ok", [0, 1])
def test_the_flag_decides_on_every_path(xp, ok, monkeypatch):
    table = initial_table(np.float32)
    ids = np.array([3, 3, 8], np.int32)
    grad = gathered_gradient(ids, np.ones((3, D), np.float32))
    want = reference_step(table, table / 4, table ** 2, grad, 0) if ok else \
        (table, table / 4, table ** 2)
    flag = (np.asarray(ok, np.int8),)
    for fraction in (lazy_adam.ROW_FRACTION, -1.0):
        monkeypatch.setattr(lazy_adam, "ROW_FRACTION", fraction)
        for hints in ((ids,), ()):
            assert_same([_kernel(xp, table, grad, 0, hints, flag)], [want])


def test_many_rows_take_the_dense_kernel(paths):
    table = initial_table(np.float32)
    grad = np.random.default_rng(2).standard_normal((N, D)).astype(np.float32)
    grad[::7] = 0
    want = reference_step(table, table / 4, table ** 2, grad, 1)
    for hints in ((np.arange(N, dtype=np.int32),), ()):
        assert_same([_kernel(np, table, grad, 1, hints)], [want])
    assert paths == {"rows": 0, "dense": 2}


def test_float16_zeros_count_as_touched_as_in_the_dense_kernel(paths):
    # 1e-12 is 0 in float16, so the dense kernel updates every element that is not NaN:
    # the row path must not leave the untouched rows out.
    table = initial_table(np.float16)
    ids = np.array([3, 8], np.int32)
    grad = gathered_gradient(ids, np.ones((2, D), np.float16))
    want = reference_step(table, table / 4, table ** 2, grad, 0)
    assert not np.array_equal(want[0][0], table[0])
    for hints in ((ids,), ()):
        assert_same([_kernel(np, table, grad, 0, hints)], [want])
    assert paths == {"rows": 0, "dense": 2}

