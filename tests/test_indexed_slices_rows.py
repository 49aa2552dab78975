"""The row-sparse updates of ``function_config.indexed_slices_optimizer_conf`` (SGD,
momentum, Adam) computed on the rows a step touched (aioflow/ops/row_updates.py) give the
values of the whole-table computation, bit for bit.

The semantics are the ones aioflow has had since the setting existed: a row (first axis)
of a listed variable changes, as a whole, when its gradient has a touched element
(``|g| >= 1e-12``); every other row keeps its values exactly, the optimizer's slots and
weight decay included. The reference is plain numpy: each rule on the whole table, in the
variable's dtype and the kernel's order of operations, then those rows kept (so equality
is exact, not within a tolerance). The same steps run the ways the op can take: with the
gather's indices (``row_hints``), without them (on the host the gradient is searched for
its non-zero rows; on a device the whole table is computed), and with the whole-table path
forced (``ROW_FRACTION = -1``: the previous full-copy computation). Cases: repeated
indices, rows touched then untouched, elements below 1e-12 inside a touched row, a
gathered row all of whose elements are below it, a step with no touched row, weight
decay, momentum's velocity, Adam's moments with and without bias correction, float32 and
float64, a table of three axes, the non-finite guard refusing a step (host and device
flags), indices outside the table, and the strict backend (the GPU's code path: no host
reads, no data-dependent shapes).
"""
import types
from unittest import mock

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.backends.strict import StrictBackend
from aioflow.ops import row_updates
from aioflow.ops.state import adam_update, momentum_update, sgd_update
from aioflow.session import default_session

LR, BETA, B1, B2, EPS = 0.25, 0.8, 0.8, 0.9, 1e-8
N, D, BATCH = 100, 3, 4         # 4 (or 8) of 100 rows: under ROW_FRACTION, the row path


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.config.check_finite_inputs(True)
    flow.clear_default_session()


@pytest.fixture
def paths(monkeypatch):
    """Spies on the row and the whole-table paths of the indexed-slices updates (LazyAdam
    keeps its own names: ops/lazy_adam.py); ``paths()``: their calls so far."""
    spies = {key: mock.Mock(wraps=getattr(row_updates, f"update_{key}"))
             for key in ("rows", "dense")}
    for key, spy in spies.items():
        monkeypatch.setattr(row_updates, f"update_{key}", spy)
    return lambda: {key: spy.call_count for key, spy in spies.items()}


# -- the reference: each rule on the whole table, then the touched rows kept ---------------

class Rule:
    """One optimizer rule: its op, slots, attributes and numpy reference."""

    def __init__(self, name, op, slots, attrs, reference, make_optimizer):
        self.name, self.op, self.slots, self.attrs = name, op, slots, attrs
        self.reference, self.make_optimizer = reference, make_optimizer

    def __repr__(self):
        return self.name


def sgd_reference(g, step, w, *, weight_decay=0.0):
    t = w.dtype.type
    d = g + w * t(weight_decay) if weight_decay else g
    return (w - d * t(LR),)


def momentum_reference(g, step, w, velocity, *, weight_decay=0.0):
    """OneFlow's: v = beta v - lr g; w += v - lr decay w (the old w)."""
    t = w.dtype.type
    new_velocity = velocity * t(BETA) - g * t(LR)
    new_w = w + new_velocity
    if weight_decay:
        new_w = new_w - w * t(LR * weight_decay)
    return new_w, new_velocity


def adam_reference(g, step, w, m, v, *, weight_decay=0.0, bias=False):
    t = w.dtype.type
    n = step + 1.0
    c1, c2 = 1 - B1 ** n, (1 - B2 ** n) ** 0.5
    if weight_decay:    # AdamW's decoupled decay, at OneFlow's rate for the whole step
        w = w - w * t((LR * c2 / c1 if bias else LR) * weight_decay)
    m = m * t(B1) + g * t(1 - B1)
    v = v * t(B2) + g * g * t(1 - B2)
    if bias:
        w = w - m / (np.sqrt(v) * t(1 / c2) + t(EPS)) * t(LR / c1)
    else:
        w = w - m / (np.sqrt(v) + t(EPS)) * t(LR)
    return w, m, v


RULES = [
    Rule("sgd", sgd_update, (), {}, sgd_reference,
         lambda: flow.optimizer.SGD(LR, momentum=0)),
    Rule("sgdw", sgd_update, (), {"weight_decay": 0.5},
         lambda *a: sgd_reference(*a, weight_decay=0.5),
         lambda: flow.optimizer.SGDW(LR, momentum=0, weight_decay=0.5)),
    Rule("momentum", momentum_update, ("momentum",), {"beta": BETA, "weight_decay": 0.5},
         lambda *a: momentum_reference(*a, weight_decay=0.5),
         lambda: flow.optimizer.SGDW(LR, momentum=BETA, weight_decay=0.5)),
    Rule("adam", adam_update, ("m", "v"),
         {"beta1": B1, "beta2": B2, "epsilon": EPS, "do_bias_correction": False},
         adam_reference, lambda: flow.optimizer.Adam(LR, beta1=B1, beta2=B2, epsilon=EPS)),
    Rule("adamw-bias", adam_update, ("m", "v"),
         {"beta1": B1, "beta2": B2, "epsilon": EPS, "do_bias_correction": True,
          "weight_decay": 0.5},
         lambda *a: adam_reference(*a, weight_decay=0.5, bias=True),
         lambda: flow.optimizer.AdamW(LR, beta1=B1, beta2=B2, epsilon=EPS,
                                      do_bias_correction=True, weight_decay=0.5)),
]


def reference_step(rule, state, g, step):
    """New (table, *slots): the rows of ``g`` with a touched element take the rule's values,
    the others keep theirs."""
    new = rule.reference(g, float(step), *state)
    t = state[0].dtype.type
    touched = (np.abs(g) >= t(1e-12)).reshape(len(g), -1).any(axis=1)
    mask = touched.reshape((-1,) + (1,) * (g.ndim - 1))
    return tuple(np.where(mask, after, before) for after, before in zip(new, state))


def reference(rule, table, grads, skipped=()):
    """The states after each step; a skipped step changes nothing and does not count."""
    state = (table,) + tuple(np.zeros_like(table) for _ in rule.slots)
    out, step = [], 0
    for i, g in enumerate(grads):
        if i not in skipped:
            state = reference_step(rule, state, g, step)
            step += 1
        out.append(state)
    return out


def gathered_gradient(ids, values, rows=N):
    """What gather_grad makes of a gather's output gradient: repeats summed in order; an
    index outside the table adds 0 * value to row 0."""
    valid = (ids >= 0) & (ids < rows)
    g = np.zeros((rows,) + values.shape[1:], values.dtype)
    scale = valid.reshape((-1,) + (1,) * (values.ndim - 1)).astype(values.dtype)
    with np.errstate(invalid="ignore"):    # 0 * inf: NaN, as in the kernel
        np.add.at(g, np.where(valid, ids, 0), values * scale)
    return g


def batches(dtype, row_shape=(D,)):
    """(ids, values) per step: d loss / d table is ``gathered_gradient(ids, values)``."""
    rng = np.random.default_rng(7)
    values = [rng.standard_normal((BATCH,) + row_shape).astype(dtype) for _ in range(5)]
    values[2][:] = 0                                # a step with no touched row
    values[3][1].reshape(-1)[1] = 1e-13             # row 9: beside touched elements
    values[3][2] = 0                                # row 11: gathered, every element
    values[3][2].reshape(-1)[:2] = [1e-13, -1e-13]  # below 1e-12: untouched
    ids = [[0, 2, 2, 5],                            # row 2 twice: its gradient is the sum
           [2, 7, 7, 7],                            # 0 and 5 touched before, untouched now
           [1, 3, 4, 6],
           [0, 9, 11, 0],                           # row 9: 1e-13 beside touched elements
           [5, 5, 99, 1]]
    return [(np.array(i, np.int32), v) for i, v in zip(ids, values)]


def initial_table(dtype, row_shape=(D,)):
    return np.random.default_rng(3).standard_normal((N,) + row_shape).astype(dtype)


def assert_same(got, want):
    for step, (have, expected) in enumerate(zip(got, want)):
        assert len(have) == len(expected)
        for i, (a, b) in enumerate(zip(have, expected)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b, err_msg=f"step {step}: array {i}")


def test_the_batches_hold_the_cases():
    g = [gathered_gradient(i, v) for i, v in batches(np.float32)]
    assert not g[2].any()
    assert 0 < abs(g[3][9, 1]) < 1e-12 and np.abs(g[3][9]).max() >= 1e-12
    assert g[3][11].any() and np.abs(g[3][11]).max() < 1e-12
    want = reference(RULES[2], initial_table(np.float32), g)
    assert not np.array_equal(want[3][0][9], want[2][0][9])     # the whole row moved
    np.testing.assert_array_equal(want[3][0][11], initial_table(np.float32)[11])
    np.testing.assert_array_equal(want[1][1][0], want[0][1][0])  # the velocity kept


# -- the op alone -------------------------------------------------------------------------

def kernel(xp, rule, state, grad, step, hints=(), flag=()):
    """One update of copies of ``state`` (table, *slots); returns the new arrays on the
    host."""
    backend = StrictBackend() if xp is not np else None
    put = (lambda a: backend.to_device(np.array(a))) if backend else np.array
    targets = [put(a) for a in state]
    ctx = types.SimpleNamespace(xp=xp)
    step_input = (np.asarray(step, np.int64),) if rule.op is adam_update else ()
    rule.op.forward(ctx, targets[0], put(grad), np.asarray(LR, np.float64), *targets[1:],
                    *step_input, *map(put, hints), *map(put, flag), sparse_rows=True,
                    row_hints=len(hints), **rule.attrs)
    return tuple(backend.to_host(a) for a in targets) if backend else tuple(targets)


def run_kernel(xp, rule, table, data, use_hints, flags=None):
    state = (table,) + tuple(np.zeros_like(table) for _ in rule.slots)
    out, step = [], 0
    for i, (ids, values) in enumerate(data):
        flag = () if flags is None else (np.asarray(flags[i], np.int8),)
        state = kernel(xp, rule, state, gathered_gradient(ids, values), step,
                       (ids,) if use_hints else (), flag)
        step += flags is None or flags[i]
        out.append(state)
    return out


XPS = [pytest.param(np, id="numpy"), pytest.param(StrictBackend.xp, id="strict")]


@pytest.mark.parametrize("xp", XPS)
@pytest.mark.parametrize("row_shape", [(D,), (2, 2)], ids=["rows", "rows-of-2x2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_each_path_gives_the_whole_table_values(rule, dtype, row_shape, xp, paths,
                                                monkeypatch):
    data = batches(dtype, row_shape)
    table = initial_table(dtype, row_shape)
    want = reference(rule, table, [gathered_gradient(i, v) for i, v in data])
    assert_same(run_kernel(xp, rule, table, data, use_hints=True), want)
    assert paths() == {"rows": 5, "dense": 0}
    assert_same(run_kernel(xp, rule, table, data, use_hints=False), want)
    # without the indices, the host searches the gradient; a device takes the whole table
    assert paths() == ({"rows": 10, "dense": 0} if xp is np else {"rows": 5, "dense": 5})
    monkeypatch.setattr(row_updates, "ROW_FRACTION", -1.0)     # the whole table, as before
    for use_hints in (True, False):
        assert_same(run_kernel(xp, rule, table, data, use_hints), want)
    untouched = np.setdiff1d(np.arange(N), [0, 1, 2, 5, 7, 9, 99])
    for before, after in zip((table,) + (np.zeros_like(table),) * len(rule.slots), want[-1]):
        np.testing.assert_array_equal(after[untouched], before[untouched])


@pytest.mark.parametrize("xp", XPS)
@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_a_refused_step_writes_nothing_on_every_path(rule, xp, monkeypatch):
    """Step 1's flag is 0: nothing changes there, and the step does not count. On the
    strict backend the flag is a device value, which the op must not read."""
    data = batches(np.float64)
    table = initial_table(np.float64)
    flags = [1, 0, 1, 1, 1]
    want = reference(rule, table, [gathered_gradient(i, v) for i, v in data], skipped={1})
    for fraction in (row_updates.ROW_FRACTION, -1.0):
        monkeypatch.setattr(row_updates, "ROW_FRACTION", fraction)
        for use_hints in (True, False):
            got = run_kernel(xp, rule, table, data, use_hints, flags)
            assert_same(got, want)
            assert_same(got[1:2], got[0:1])


@pytest.mark.parametrize("xp", XPS)
@pytest.mark.parametrize("rule", [RULES[2], RULES[4]], ids=repr)
def test_indices_outside_the_table_and_nan_elements(rule, xp):
    """gather_grad sends an index outside the table to row 0 with 0 * its value (NaN for
    infinity): row 0 has no touched element and stays; row 4 has a NaN beside touched
    elements, so it is updated, NaN and all, as the whole-table computation does."""
    table = initial_table(np.float64)
    ids = np.array([-3, 4, N, 4, 0], np.int32)
    values = np.random.default_rng(1).standard_normal((5, D))
    values[0, :] = np.inf
    values[1, 1] = np.nan
    grad = gathered_gradient(ids, values)
    assert np.isnan(grad[0]).all() and np.isnan(grad[4, 1])
    state = (table, table / 4, table ** 2)[:1 + len(rule.slots)]
    want = reference_step(rule, state, grad, 3)
    np.testing.assert_array_equal(want[0][0], table[0])
    for hints in ((ids,), ()):
        assert_same([kernel(xp, rule, state, grad, 3, hints)], [want])


def test_many_rows_take_the_whole_table(paths):
    rule = RULES[3]
    table = initial_table(np.float32)
    grad = np.random.default_rng(2).standard_normal((N, D)).astype(np.float32)
    grad[::7] = 0
    state = (table, table / 4, table ** 2)
    want = reference_step(rule, state, grad, 1)
    for hints in ((np.arange(N, dtype=np.int32),), ()):
        assert_same([kernel(np, rule, state, grad, 1, hints)], [want])
    assert paths() == {"rows": 0, "dense": 2}


def test_no_rows_and_a_0d_variable():
    rule = RULES[2]
    table = initial_table(np.float32)
    ids = np.zeros((0,), np.int32)           # a batch of no examples: nothing changes
    got = kernel(np, rule, (table, table / 2), np.zeros_like(table), 0, (ids,))
    assert_same([got], [(table, table / 2)])
    scalar = (np.asarray(2.0, np.float32), np.asarray(1.0, np.float32))   # no rows: all
    got = kernel(np, rule, scalar, np.asarray(1e-20, np.float32), 0)
    assert_same([got], [momentum_reference(np.asarray(1e-20, np.float32), 0.0, *scalar,
                                           weight_decay=0.5)])


# -- train jobs -----------------------------------------------------------------------------

def embedding_job(rule, dtype, tables=("table",)):
    """``reduce_sum(gather(t, ids) * weights)`` over ``tables``, each listed in
    indexed_slices_optimizer_conf: d loss / d t is ``gathered_gradient(ids, weights)``."""
    config = flow.FunctionConfig()
    config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=list(tables))))

    @flow.global_function(type="train", function_config=config)
    def fit(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
            weights: tp.Numpy.Placeholder((BATCH, D), dtype=dtype)) -> tp.Numpy:
        loss = None
        for name in tables:
            table = flow.get_variable(name, shape=(N, D), dtype=dtype,
                                      initializer=flow.zeros_initializer())
            term = flow.math.reduce_sum(flow.gather(table, ids) * weights)
            loss = term if loss is None else loss + term
        rule.make_optimizer().minimize(loss)
        return loss
    return fit


def train(rule, dtype, data, backend, tables=("table",)):
    """The first table and its slots after each step of ``data``."""
    out = []
    with backends.use(backend):
        fit = embedding_job(rule, dtype, tables)
        flow.load_variables({name: initial_table(dtype) for name in tables})
        for ids, weights in data:
            fit(ids, weights)
            state = flow.get_all_variables()
            out.append((state["table"],) + tuple(state[f"table-{s}"] for s in rule.slots))
    return out


def update_attrs(job):
    """The attributes of the job's update ops (fused or not)."""
    plan = job.compiled_for(default_session()).plan
    return [ins.attrs for ins in plan.instructions if ins.op_name.endswith(
        ("sgd_update", "momentum_update", "adam_update"))]


@pytest.mark.parametrize("backend", ["numpy", "strict"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_a_listed_table_updates_its_gathered_rows_as_before(rule, dtype, backend, paths):
    data = batches(dtype)
    want = reference(rule, initial_table(dtype), [gathered_gradient(i, w) for i, w in data])
    assert_same(train(rule, dtype, data, backend), want)
    assert paths() == {"rows": 5, "dense": 0}       # the job passed the gather's indices
    flow.clear_default_session()
    with backends.use(backend):
        attrs, = update_attrs(embedding_job(rule, dtype))
    assert (attrs["sparse_rows"], attrs["row_hints"]) == (True, 1)


@pytest.mark.parametrize("backend", ["numpy", "strict"])
@pytest.mark.parametrize("rule", [RULES[2], RULES[4]], ids=repr)
def test_a_step_the_guard_refuses_writes_nothing(rule, backend, paths):
    data = batches(np.float32)
    data[1][1][0, 0] = np.nan     # step 1's gradient is not finite: the guard skips it
    flow.config.check_finite_inputs(False)
    with pytest.warns(flow.train.NonFiniteStepWarning):
        got = train(rule, np.float32, data, backend)
    grads = [gathered_gradient(i, w) for i, w in data]
    assert_same(got, reference(rule, initial_table(np.float32), grads, skipped={1}))
    assert_same(got[1:2], got[0:1])
    # On the host the refused step returns before choosing a path; on a device the flag
    # is not read, so the rows are computed and every write masked.
    assert paths()["rows"] == (4 if backend == "numpy" else 5)


def test_tables_gathered_by_the_same_indices_share_one_fused_update(paths):
    """On a backend that fuses the step's updates (strict, as CuPy) two listed tables
    with the same indices and rule become one multi-tensor op; the indices travel with
    it to each table's update."""
    rule = RULES[2]
    data = batches(np.float32)
    got = train(rule, np.float32, data, "strict", tables=("table", "other"))
    want = reference(rule, initial_table(np.float32),
                     [gathered_gradient(i, w) for i, w in data])
    assert_same(got, want)
    assert paths() == {"rows": 10, "dense": 0}
    flow.clear_default_session()
    with backends.use("strict"):
        plan = embedding_job(rule, np.float32, ("table", "other")).compiled_for(
            default_session()).plan
    ops = [ins.op_name for ins in plan.instructions]
    assert "multi_momentum_update" in ops and "momentum_update" not in ops


def test_a_table_not_listed_keeps_the_whole_table_update():
    rule = RULES[0]
    config = flow.FunctionConfig()
    config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["other"])))

    @flow.global_function(type="train", function_config=config)
    def fit(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", shape=(N, D), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(flow.gather(table, ids))
        rule.make_optimizer().minimize(loss)
        return loss
    attrs, = update_attrs(fit)
    assert attrs["sparse_rows"] is False and "row_hints" not in attrs
