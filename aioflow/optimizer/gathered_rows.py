"""Which rows of a variable its gradient can touch, read off the graph, so that LazyAdam's
update and the indexed-slices updates of ``function_config.indexed_slices_optimizer_conf``
work on those rows only (``aioflow/ops/row_updates.py``).

An embedding table's gradient is ``gather_grad(dy, indices)`` along axis 0: a zero table
with the rows the indices name filled in (repeats summed). Before the update, the
training pass may scale it (the loss's instance count, loss scaling, clipping: a
``multiply`` or ``divide`` by anything) or add another such gradient (a table gathered
twice, several losses). None of these puts a touched element (``|g| >= 1e-12``) outside
the named rows: there every element stays 0 or NaN (``0 * x``, ``0 / x`` and ``0 + 0``
are 0 or NaN, NaN stays NaN), and neither counts as touched (``|NaN| >= 1e-12`` is
false). So the gathers' indices name every row the update must look at; anything else on
the way (a regularizer's dense gradient added, an average over devices) ends the walk,
and the update finds the rows itself.

This is the walk of OneFlow's ``IndexedSlicesOptimizerRewritePass`` (from an
``unsorted_segment_sum`` along axis 0, through parallel casts and scalar multiplies, to
the update op), with one difference: OneFlow then updates from the sparse values, while
aioflow's gradients stay dense and the update reads the named rows of the dense
gradient, so its values are the dense update's.
"""
from __future__ import annotations

# Ops whose output is 0 or NaN wherever the named input is (0 * x, 0 / x, the identity):
# op name -> the positions of the inputs that can carry the rows (any one of them will do).
_ZERO_PRESERVING = {"multiply": (0, 1), "divide": (0,), "identity": (0,)}
# Ops whose output is 0 or NaN where both inputs are (0 + 0, 0 - 0): both must carry rows.
_SUMS = frozenset({"add", "subtract"})


def gathered_rows(grad, shape) -> list | None:
    """The index blobs of the axis-0 gathers that ``grad`` (the gradient of a variable of
    ``shape``) is made of, as the module docstring says, or None where the graph does
    not prove that its touched elements lie in their rows."""
    return _rows(grad, tuple(shape), {})


def _rows(blob, shape, seen: dict):
    """:func:`gathered_rows` of ``blob``; ``seen`` (blob id -> answer) keeps the walk
    linear where a gradient reaches a sum along several paths."""
    if blob.id not in seen:
        seen[blob.id] = _rows_of_producer(blob, shape, seen)
    return seen[blob.id]


def _rows_of_producer(blob, shape, seen):
    node = blob.producer
    if node is None or tuple(blob.shape) != shape:   # an operand broadcast up: no rows
        return None
    name = node.op.name
    if name == "gather_grad":
        same = node.attrs["axis"] == 0 and tuple(node.attrs["shape"]) == shape
        return [node.inputs[1]] if same else None
    if name in _ZERO_PRESERVING:
        for position in _ZERO_PRESERVING[name]:
            found = _rows(node.inputs[position], shape, seen)
            if found is not None:
                return found
        return None
    if name in _SUMS:
        parts = [_rows(x, shape, seen) for x in node.inputs]
        return None if None in parts else [index for part in parts for index in part]
    return None
