"""Optimizer updates whose cost follows the rows a step touched, not the table.

aioflow's gradients are dense: an embedding table's is ``gather_grad``'s zero-filled table
with the batch's rows filled in. Two updates change only some rows of such a table:
``flow.optimizer.LazyAdam`` (``ops/lazy_adam.py``: each element whose gradient is touched,
``|g| >= 1e-12``) and the row-sparse updates of ``function_config.
indexed_slices_optimizer_conf`` (``ops/state.py``: every element of each row with a
touched element). Both work here on the rows that can hold a touched element:

* found (:func:`rows_to_update`) from the gather's indices, when the optimizer passes them
  (``row_hints``: the gradient is a ``gather_grad`` along axis 0, maybe scaled or summed;
  ``aioflow/optimizer/gathered_rows.py`` proves it from the graph): no pass over the table
  at all, and no data-dependent shape, so it runs the same on a device;
* on the host otherwise, from one pass over the gradient (its non-zero elements);
* on a device otherwise, not at all: counting the rows would read a device value on the
  host, a stall per step, so the whole table is updated there (:func:`update_dense`).

The rows are gathered, updated by the rule's own elementwise operations and scattered back
(:func:`update_rows`): the same operations in the same order as on the whole table, so the
values are the dense update's bit for bit. Where the rows are more than
:data:`ROW_FRACTION` of the table the dense update is cheaper and runs instead.

A rule is a *step*, ``step(grad, *targets) -> (where, new values)``: new arrays for the
targets (the variable and its optimizer slots, all of the gradient's shape, or their
gathered rows) and where to write them (a boolean array that broadcasts to the targets).
"""
from __future__ import annotations

import numpy as np

# Below this magnitude a gradient element counts as "not touched" (OneFlow's threshold).
UNTOUCHED = 1e-12

# The row path runs when the rows to update are at most this fraction of the table's rows.
# Each row costs it random accesses (a gather per target and the gradient, a scatter per
# target) where the dense update streams through memory. Measured for LazyAdam
# (benchmarks/lazy_adam_rows.py --sweep, docs/benchmarks.md) on tables of 1,000,000 x 4,
# 100,000 x 16 and 100,000 x 64: at 20% of the rows the row path took 0.35-0.7 of the dense
# kernel's time, at 50% 0.75-1.2. Each op module reads its own copy (``lazy_adam.
# ROW_FRACTION``, this one for the indexed-slices updates), so that a test or a benchmark
# can force one op's path without the other's.
ROW_FRACTION = 0.2


def rows_to_update(xp, grad, hints, fraction):
    """The first-axis indices of the rows that may hold a touched element of ``grad``
    (repeats allowed), or None for the dense update: a 0-d or empty gradient, more rows
    than ``fraction`` of the table, or no way to find them without a stall. ``hints``:
    index arrays whose valid entries (in [0, rows)) name every row where ``grad`` may
    have a touched element (elsewhere it is 0 or NaN)."""
    if grad.ndim == 0 or grad.size == 0:
        return None
    if grad.dtype.type(UNTOUCHED) == 0:
        # float16: the threshold rounds to 0, so a zero counts as touched (every element
        # but NaN is): no row can be left out.
        return None
    if hints:
        return _hinted_rows(xp, hints, grad.shape[0], fraction)
    if xp is np:
        return _nonzero_rows(grad, fraction)
    return None


def _hinted_rows(xp, hints, n, fraction):
    """The rows the gather's indices name (see :func:`rows_to_update`)."""
    indices = xp.concatenate([h.reshape(-1) for h in hints]) if len(hints) > 1 \
        else hints[0].reshape(-1)
    if indices.size > fraction * n:   # the indices' count is static: no device read
        return None
    valid = (indices >= 0) & (indices < n)
    if xp is np:
        # On the host, each row once (repeats, common in real batches, would redo its work),
        # in order (neighbouring rows share cache lines). np.sort rather than np.unique:
        # numpy 2.4's unique took 10-30 times as long on 10^4-10^5 indices.
        return each_row_once(indices[valid])
    # On a device, a shape that does not depend on the values (choosing the valid indices
    # or the unique ones would read their count on the host): an index outside [0, n)
    # becomes row 0, as gather_grad sends it there. Row 0's update is then computed from
    # its own values, so it changes only what row 0's own gradient touched.
    return xp.where(valid, indices, 0)


def _nonzero_rows(grad, fraction):
    """The rows of a host gradient with a non-zero element (a superset of the touched
    ones: NaN and |g| < 1e-12 count too, and the rule's own test sorts them out), or None
    when they are too many for the row path. ``grad != 0`` is one byte per element, and
    numpy finds the non-zero entries of a boolean array far faster than of a float one."""
    n = grad.shape[0]
    width = grad.size // n
    nonzero = (grad != 0).reshape(-1)
    if np.count_nonzero(nonzero) > fraction * grad.size:   # at least that many rows
        return None
    rows = _each_once(np.flatnonzero(nonzero) // width)   # each row up to width times
    return None if rows.size > fraction * n else rows


def each_row_once(rows):
    """The first-axis indices ``rows`` (a host array, any shape) sorted, each once."""
    return _each_once(np.sort(rows.reshape(-1)))


def _each_once(ascending):
    """An ascending host array without its repeats."""
    if ascending.size < 2:
        return ascending
    return ascending[np.concatenate(([True], ascending[1:] != ascending[:-1]))]


def update_dense(xp, targets, grad, step, keep) -> None:
    """The whole table: ``step``'s new values where it says (and ``keep``, the step's
    device flag or None, allows)."""
    _write(xp, targets, step(grad, *targets), keep)


def update_rows(xp, targets, grad, rows, step, keep) -> None:
    """Only ``rows`` (first-axis indices, repeats allowed): gathered, updated by ``step``
    as :func:`update_dense` updates them, scattered back. A repeated row is computed from
    the same values each time, so every copy scattered is the same."""
    # xp.take rather than ``target[rows]``: numpy's fancy indexing took 3-4 times as long
    # to gather 13,000 rows of 16 (the scatter below has no such faster form).
    olds = [xp.take(target, rows, axis=0) for target in targets]
    _write(xp, olds, step(xp.take(grad, rows, axis=0), *olds), keep)
    for target, old in zip(targets, olds):
        target[rows] = old


def _write(xp, targets, stepped, keep) -> None:
    where, new = stepped
    if keep is not None:
        where = where & keep
    for target, value in zip(targets, new):
        xp.copyto(target, value, where=xp.broadcast_to(where, target.shape))


# -- indexed_slices_optimizer_conf: whole rows ------------------------------------------------

def update_touched_rows(xp, targets, grad, hints, update, keep) -> None:
    """``update(grad, *targets)`` (in place, elementwise) applied to every row of the
    targets where ``grad`` has a touched element, the whole row; every other row keeps
    its values exactly. ``grad`` has at least one axis; ``hints`` as for
    :func:`rows_to_update`; ``keep``: None, or the step's device flag to mask the writes
    with."""
    if grad.size == 0:
        return
    step = _whole_rows(xp, update)
    rows = rows_to_update(xp, grad, hints, ROW_FRACTION)
    if rows is None:
        update_dense(xp, targets, grad, step, keep)
    else:
        update_rows(xp, targets, grad, rows, step, keep)


def _whole_rows(xp, update):
    """A step of the in-place ``update``: run on copies of the targets, written to the rows
    with a touched gradient element."""
    def step(grad, *targets):
        copies = [target.copy() for target in targets]
        update(grad, *copies)
        return touched_rows(xp, grad), copies
    return step


def touched_rows(xp, grad):
    """Whether each row (first axis) of ``grad`` has a touched element, shaped to broadcast
    against ``grad`` (``(rows, 1, ..., 1)``)."""
    touched = xp.abs(grad) >= grad.dtype.type(UNTOUCHED)
    if grad.ndim == 1:
        return touched
    # any() over the other axes rather than over a (rows, -1) reshape: a gather of no rows
    # gives (0, ...), which cannot be reshaped with -1
    return touched.any(axis=tuple(range(1, grad.ndim)), keepdims=True)
