"""Embedding gradients kept from step to step: the plan's ``gather_grad`` outputs that only
the updates, the non-finite guard and elementwise arithmetic read.

An embedding table's gradient is ``gather_grad``'s dense table, zero but for the rows the
batch gathered. Filling a fresh zero table each step costs its page faults (a 1,000,000 x
16 float32 table: ~6 ms of a train step whose update touches 512 rows in 0.2 ms), and the
guard's sum of squares reads all of it (~4 ms more). So on the host a ``gather_grad``
along axis 0 whose output is read by nothing but update ops (as their gradient), the
guard and elementwise ops (a scale, a sum) gets a :class:`~aioflow.ops.indexing.
RowsBuffer`: its table is allocated once and, each step, only the rows the previous step
wrote are cleared before this step's rows are added (the same ``np.add.at``, so the same
values). Where the guard reads the table itself it reads only those rows
(``ops/state.py``, with a fallback to the whole table that keeps its answer the same). A
scaled gradient (``gather_grad(...) * (1 / batch)``, a per-sample loss's; loss scaling's
``* (1 / scale)``) is kept the same way when only such readers read it: the ``multiply``
(or ``divide``) by one element computes the source's rows alone (``ScaledRows``: outside
them every element is ``0 * b``, rewritten whole only when that value changes).

Safe because nothing else sees the table: it is not a job output (``flow.watch_diff``
fetches are outputs too), the update ops, the guard and the elementwise ops only read it;
the memory plan never writes into it (it is none of its buffers); and steps of one plan
never overlap (``Plan.run``), which the memory plan's own buffers rely on as well. The
table stays allocated between steps (its size, for the plan's life). Devices (CuPy, the
strict backend) keep the fresh table: clearing is cheap there, and a captured CUDA graph
would replay a buffer's first allocation.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.indexing import RowsBuffer, ScaledRows, scaled_rows

# Off: every gather_grad fills a fresh table (tests compare the two).
ENABLED = True

# Ops that only read their gradient input (position 1) and keep no reference to it.
_UPDATES = frozenset({"sgd_update", "momentum_update", "adam_update", "lazy_adam_update"})
# Elementwise ops (a gradient scaled by the loss's instance count, loss scaling, a sum of
# gradients): they read their inputs and write a new array or a memory-plan buffer, never
# an input that is not one of those buffers (ops/elementwise.py, compiler/memory.py).
_READERS = frozenset({"all_finite", "multiply", "divide", "add", "subtract"})


def attach(graph, instructions, backend) -> None:
    """Give each eligible ``gather_grad`` instruction of ``graph``'s plan (``instructions``,
    one per node) a fresh ``RowsBuffer``, each eligible scale of such a table a
    ``ScaledRows``, and the guard the buffers of its inputs."""
    if not ENABLED or backend.xp is not np:
        return
    outputs = {b.id for b in graph.outputs}
    readers: dict[int, list] = {}
    for node in graph.nodes:
        for position, blob in enumerate(node.inputs):
            readers.setdefault(blob.id, []).append((node, position))

    def only_read(blob) -> bool:
        uses = readers.get(blob.id, [])
        return blob.id not in outputs and bool(uses) and all(
            reader.op.name in _READERS or (reader.op.name in _UPDATES and position == 1)
            for reader, position in uses)

    buffers: dict[int, object] = {}
    for node, ins in zip(graph.nodes, instructions):
        name = node.op.name
        if name == "gather_grad" and node.attrs["axis"] == 0:
            out, = node.outputs
            if only_read(out):
                buffers[out.id] = ins.attrs["rows_buffer"] = RowsBuffer()
        elif name in _SCALES and _scales_a_kept_table(node, buffers) \
                and only_read(node.outputs[0]):
            state = ScaledRows(buffers[node.inputs[0].id], _SCALES[name])
            ins.kernel = scaled_rows
            ins.attrs["rows_scale"] = state
            buffers[node.outputs[0].id] = state
    if not buffers:
        return
    for node, ins in zip(graph.nodes, instructions):
        if node.op.name == "all_finite":
            ins.attrs["row_buffers"] = tuple(buffers.get(b.id) for b in node.inputs)


# ``multiply`` / ``divide`` of a kept table by one element: op name -> ufunc
_SCALES = {"multiply": "multiply", "divide": "divide"}


def _scales_a_kept_table(node, buffers) -> bool:
    """``table * b`` or ``table / b``: the first input a kept table of floats, the second
    one element of no more axes, so that the output has the table's shape."""
    table, operand = node.inputs
    return (table.id in buffers and table.dtype.is_floating
            and math.prod(operand.shape) == 1 and len(operand.shape) <= len(table.shape)
            and tuple(node.outputs[0].shape) == tuple(table.shape))
