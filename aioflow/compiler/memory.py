"""The memory plan: which ops write into which preallocated buffer, chosen by liveness.

Ops whose kernels take ``out=`` (``OpDef.writes_out``: the elementwise ufunc ops,
``bias_add``, ``relu_grad``) get a buffer instead of allocating a fresh array every step.
A buffer is an array of one (shape, dtype) owned by the plan and kept from step to step,
so a steady-state step allocates none of these intermediates again. Buffers are shared
between ops whose values are never alive at the same time:

* a buffer is *held* by the blob written into it and by every blob that may alias it.
  Any op that does not write into ``out=`` may return a view of its inputs (``reshape``,
  ``transpose``, ``identity``, ``cast`` without a copy), so its outputs are taken to hold
  every buffer its inputs hold: conservative, never wrong;
* a buffer is free again after the last use of its last holder; the job's outputs hold
  theirs for the whole step (they are copied out when the pure ops are done);
* an op may write into a buffer freed by its own inputs (an in-place ``relu`` over
  ``bias_add``'s result): ufuncs read each element before writing it. Only when every
  holder among the inputs is the buffer's direct writer, never a view with other strides.

>>> from aioflow.ir import Graph, tracing
>>> from aioflow import ops
>>> from aioflow import dtypes
>>> g = Graph("demo")
>>> x = g.add_placeholder((4, 3), dtypes.float32, "x")
>>> with tracing(g):
...     y = ops.elementwise.exp(x)                 # buffer 0
...     z = ops.elementwise.relu(y)                # y dies here: in place, buffer 0
...     w = ops.elementwise.add_op(z, z)           # z dies here: buffer 0 again
>>> g.outputs = [w]
>>> plan_buffers(g)[0]
[0, 0, 0]
"""
from __future__ import annotations

from ..ir import Graph

__all__ = ["plan_buffers"]


def plan_buffers(graph: Graph) -> tuple[list[int | None], list[tuple[tuple, object]]]:
    """For each node of ``graph``: the buffer its output is written into, or None.

    Returns ``(buffer_of_node, buffers)``, ``buffers[i]`` being ``(shape, dtype)`` of
    buffer ``i`` (an aioflow dtype).
    """
    nodes = graph.nodes
    forever = len(nodes)
    last_use: dict[int, int] = {}
    for index, node in enumerate(nodes):
        for blob in node.inputs:
            last_use[blob.id] = index
    for blob in graph.outputs:
        last_use[blob.id] = forever

    holds: dict[int, frozenset[int]] = {}    # blob id -> buffers it may point into
    direct: dict[int, int] = {}              # blob id -> the buffer it was written into
    busy_until: dict[int, int] = {}          # buffer -> last use of its holders so far
    free: dict[tuple, list[int]] = {}        # (shape, dtype) -> free buffers
    buffers: list[tuple[tuple, object]] = []
    buffer_of_node: list[int | None] = []
    releases: dict[int, list[int]] = {}      # node index -> buffers free after it

    def hold(buffer: int, blob_id: int) -> None:
        # Entries left in ``releases`` by an earlier, shorter hold are stale: a buffer
        # is only freed at the node equal to its current ``busy_until``.
        end = last_use.get(blob_id, -1)
        if end > busy_until.get(buffer, -1):
            busy_until[buffer] = end
            releases.setdefault(end, []).append(buffer)

    for index, node in enumerate(nodes):
        inherited = frozenset().union(*(holds.get(b.id, frozenset()) for b in node.inputs))
        chosen = None
        if node.op.writes_out and len(node.outputs) == 1:
            out = node.outputs[0]
            key = (tuple(out.shape), out.dtype)
            dying_here = [b for b in releases.get(index, ())
                          if busy_until.get(b) == index
                          and _only_direct_holders(b, node, holds, direct)]
            candidates = free.setdefault(key, [])
            for b in dying_here:  # in place over an input that dies at this op
                if buffers[b] == key:
                    chosen = b
                    break
            if chosen is None and candidates:
                chosen = candidates.pop()
            if chosen is None:
                chosen = len(buffers)
                buffers.append(key)
            holds[out.id] = frozenset((chosen,))
            direct[out.id] = chosen
            busy_until[chosen] = -1
            hold(chosen, out.id)
        else:
            for blob in node.outputs:
                holds[blob.id] = inherited
                for b in inherited:
                    hold(b, blob.id)
        buffer_of_node.append(chosen)
        for b in releases.pop(index, ()):
            if busy_until.get(b) == index and b != chosen:
                free.setdefault(buffers[b], []).append(b)
    return buffer_of_node, buffers


def _only_direct_holders(buffer: int, node, holds, direct) -> bool:
    """True if every input of ``node`` that points into ``buffer`` was written into it
    directly (same layout as the output), so an elementwise op may overwrite it."""
    for blob in node.inputs:
        if buffer in holds.get(blob.id, ()) and direct.get(blob.id) != buffer:
            return False
    return True
