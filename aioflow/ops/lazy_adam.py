"""The update op of ``flow.optimizer.LazyAdam``: Adam that leaves alone every element whose
gradient is zero in this step.

OneFlow's dense ``lazy_adam`` kernel skips each element with ``|g| < 1e-12``: its weight and
both moments keep their values (an embedding row no batch looked up is not decayed), and the
others take an Adam step with the bias correction folded into the rate,
``lr * sqrt(1 - beta2^t) / (1 - beta1^t)``, ``t`` the number of updates applied so far plus
one (OneFlow keeps ``beta1^t`` and ``beta2^t`` in two state variables; here they come from
the job's step counter, which counts the same updates: a skipped step counts neither).

The cost follows the rows a step touched, not the table (``ops/row_updates.py``: the rows
come from the gather's indices, a host search of the gradient, or on a device without
indices the whole table). The row path computes each element with the very operations of
the dense kernel (:func:`_lazy_step`), so its values are the dense kernel's bit for bit;
where the rows are more than :data:`ROW_FRACTION` of the table the dense kernel runs.
"""
from __future__ import annotations

import functools

from . import row_updates
from .registry import register
from .row_updates import UNTOUCHED
from .state import _step_mask

# This op's own copy of the shared threshold (row_updates.ROW_FRACTION says why), so that
# a test or a benchmark can force its dense kernel or its row path alone.
ROW_FRACTION = row_updates.ROW_FRACTION

# The two paths, module attributes so that tests can count their calls.
_update_dense = row_updates.update_dense
_update_rows = row_updates.update_rows


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
    lazy_step = functools.partial(_lazy_step, xp, rule)
    targets = (param, m, v)
    rows = row_updates.rows_to_update(xp, grad, hints, ROW_FRACTION)
    if rows is None:
        _update_dense(xp, targets, grad, lazy_step, keep)
    else:
        _update_rows(xp, targets, grad, rows, lazy_step, keep)


class _Rule:
    """The step's constants, in the variable's dtype ``t``."""

    def __init__(self, t, beta1, beta2, epsilon, rate):
        self.t, self.beta1, self.beta2, self.epsilon, self.rate = t, beta1, beta2, epsilon, rate


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
