"""The update op of ``flow.optimizer.LazyAdam``: Adam that leaves alone every element whose
gradient is zero in this step.

OneFlow's dense ``lazy_adam`` kernel skips each element with ``|g| < 1e-12``: its weight and
both moments keep their values (an embedding row no batch looked up is not decayed), and the
others take an Adam step with the bias correction folded into the rate,
``lr * sqrt(1 - beta2^t) / (1 - beta1^t)``, ``t`` the number of updates applied so far plus
one (OneFlow keeps ``beta1^t`` and ``beta2^t`` in two state variables; here they come from
the job's step counter, which counts the same updates: a skipped step counts neither).

The cost follows the rows a step touched, not the table. aioflow's gradients are dense (an
embedding's is ``gather_grad``'s zero-filled table), so the op finds the rows that can hold
a touched element and computes on those rows alone:

* from the gather's indices, when the optimizer passes them (``row_hints``: the gradient
  is a ``gather_grad`` along axis 0, maybe scaled or summed; ``aioflow/optimizer/
  gathered_rows.py`` proves it from the graph): no pass over the table at all, and no
  data-dependent shape, so it runs the same on a device;
* on the host otherwise, from one pass over the gradient (its non-zero elements);
* on a device otherwise, not at all: counting the rows would read a device value on the
  host, a stall per step, so the whole table is updated there (the dense kernel).

The row path computes each element with the very operations of the dense kernel
(:func:`_lazy_step`), so its values are the dense kernel's bit for bit; where the rows are
more than :data:`ROW_FRACTION` of the table the dense kernel is cheaper and runs instead.
"""
from __future__ import annotations

import numpy as np

from .registry import register
from .state import _on_host

# Below this magnitude a gradient element counts as "not touched" (OneFlow's threshold).
UNTOUCHED = 1e-12

# The row path runs when the rows to update are at most this fraction of the table's rows.
# Each row costs it seven random accesses (four gathers, three scatters) where the dense
# kernel streams through memory. Measured (benchmarks/lazy_adam_rows.py --sweep,
# docs/benchmarks.md) on tables of 1,000,000 x 4, 100,000 x 16 and 100,000 x 64: at 20% of
# the rows the row path took 0.35-0.7 of the dense kernel's time, at 50% 0.75-1.2.
ROW_FRACTION = 0.2


def _infer_update(*inputs, **attrs):
    return []


@register("lazy_adam_update", infer=_infer_update, side_effect=True, differentiable=False)
def lazy_adam_update(ctx, param, grad, lr, m, v, step, *extra, beta1, beta2, epsilon,
                     row_hints=0):
    """``extra``: ``row_hints`` index arrays whose valid entries (in [0, rows)) name every
    row where ``grad`` may have a touched element (elsewhere it is 0 or NaN), then the
    step's non-finite flag, if the job has one (``ops/state.py``)."""
    hints, flag = extra[:row_hints], extra[row_hints:]
    keep = _step_mask(flag)
    if keep is False:   # a step the guard refused writes nothing
        return
    xp = ctx.xp
    n = float(step) + 1.0
    rule = _Rule(param.dtype.type, beta1, beta2, epsilon,
                 rate=float(lr) * (1.0 - beta2 ** n) ** 0.5 / (1.0 - beta1 ** n))
    rows = _rows_to_update(xp, grad, hints)
    if rows is None:
        _update_dense(xp, rule, (param, m, v), grad, keep)
    else:
        _update_rows(xp, rule, (param, m, v), grad, rows, keep)


class _Rule:
    """The step's constants, in the variable's dtype ``t``."""

    def __init__(self, t, beta1, beta2, epsilon, rate):
        self.t, self.beta1, self.beta2, self.epsilon, self.rate = t, beta1, beta2, epsilon, rate


def _step_mask(flag):
    """What the step's non-finite flag allows: None (no flag, or a host flag of 1: update),
    False (a host flag of 0: write nothing), or a device boolean to mask the writes with
    (reading it on the host would stall the step)."""
    if not flag:
        return None
    ok, = flag
    if _on_host(ok):
        return None if ok else False
    return ok.astype(bool)


def _lazy_step(xp, rule, grad, param, m, v):
    """``(touched, (new param, new m, new v))`` for arrays of one shape: OneFlow's formulas.
    Both paths compute with this function, so each element goes through the same
    operations in the same order, and the row path's values are the dense path's."""
    t = rule.t
    touched = xp.abs(grad) >= t(UNTOUCHED)
    new_m = m * t(rule.beta1) + grad * t(1 - rule.beta1)
    new_v = v * t(rule.beta2) + grad * grad * t(1 - rule.beta2)
    new_param = param - new_m / (xp.sqrt(new_v) + t(rule.epsilon)) * t(rule.rate)
    return touched, (new_param, new_m, new_v)


def _update_dense(xp, rule, targets, grad, keep) -> None:
    """The whole table: new values where the gradient touched (and the flag allows)."""
    touched, new = _lazy_step(xp, rule, grad, *targets)
    if keep is not None:
        touched &= keep
    for target, value in zip(targets, new):
        xp.copyto(target, value, where=touched)


def _update_rows(xp, rule, targets, grad, rows, keep) -> None:
    """Only ``rows`` (first-axis indices, repeats allowed): gathered, updated as the dense
    kernel updates them, scattered back. A repeated row is computed from the same values
    each time, so every copy scattered is the same."""
    # xp.take rather than ``target[rows]``: numpy's fancy indexing took 3-4 times as long
    # to gather 13,000 rows of 16 (the scatter below has no such faster form).
    olds = [xp.take(target, rows, axis=0) for target in targets]
    touched, new = _lazy_step(xp, rule, xp.take(grad, rows, axis=0), *olds)
    if keep is not None:
        touched &= keep
    for target, old, value in zip(targets, olds, new):
        xp.copyto(old, value, where=touched)
        target[rows] = old


def _rows_to_update(xp, grad, hints):
    """The first-axis indices of the rows that may hold a touched element, or None for the
    dense kernel (a 0-d variable, too many rows, or no way to find them without a stall)."""
    if grad.ndim == 0 or grad.size == 0:
        return None
    if grad.dtype.type(UNTOUCHED) == 0:
        # float16: the threshold rounds to 0, so a zero counts as touched (every element
        # but NaN is): no row can be left out.
        return None
    if hints:
        return _hinted_rows(xp, hints, grad.shape[0])
    if xp is np:
        return _nonzero_rows(grad)
    return None


def _hinted_rows(xp, hints, n):
    """The rows the gather's indices name (see :func:`lazy_adam_update`)."""
    indices = xp.concatenate([h.reshape(-1) for h in hints]) if len(hints) > 1 \
        else hints[0].reshape(-1)
    if indices.size > ROW_FRACTION * n:   # the indices' count is static: no device read
        return None
    valid = (indices >= 0) & (indices < n)
    if xp is np:
        # On the host, each row once (repeats, common in real batches, would redo its work),
        # in order (neighbouring rows share cache lines). np.sort rather than np.unique:
        # numpy 2.4's unique took 10-30 times as long on 10^4-10^5 indices.
        return _each_once(np.sort(indices[valid]))
    # On a device, a shape that does not depend on the values (choosing the valid indices
    # or the unique ones would read their count on the host): an index outside [0, n)
    # becomes row 0, as gather_grad sends it there. Row 0's update is then computed from
    # its own values, so it changes only what row 0's own gradient touched.
    return xp.where(valid, indices, 0)


def _nonzero_rows(grad):
    """The rows of a host gradient with a non-zero element (a superset of the touched
    ones: NaN and |g| < 1e-12 count too, and the per-element test sorts them out), or None
    when they are too many for the row path. ``grad != 0`` is one byte per element, and
    numpy finds the non-zero entries of a boolean array far faster than of a float one."""
    n = grad.shape[0]
    width = grad.size // n
    nonzero = (grad != 0).reshape(-1)
    if np.count_nonzero(nonzero) > ROW_FRACTION * grad.size:   # at least that many rows
        return None
    rows = _each_once(np.flatnonzero(nonzero) // width)   # each row up to width times
    return None if rows.size > ROW_FRACTION * n else rows


def _each_once(ascending):
    """An ascending host array without its repeats."""
    if ascending.size < 2:
        return ascending
    return ascending[np.concatenate(([True], ascending[1:] != ascending[:-1]))]
