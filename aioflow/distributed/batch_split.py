"""The consistent view on several devices (of one process, or of several ranks): which
values of a job carry the batch axis.

A ``tp.Numpy`` placeholder with a batch axis holds the logical batch; each device traces
and runs the job on its slice (the batch divided by the devices). To give back what one
device would for the whole batch, every result and the training loss must be one of:

* **batched**: it still has the batch axis (``axis``), row ``i`` computed from sample
  ``i`` alone; gathered from the devices and concatenated along that axis;
* **mean** / **sum**: a ``reduce_mean`` / ``reduce_sum`` over the batch axis of a batched
  value, as the job's last op on it; all-reduced (a mean over equal shards averages
  exactly), and a mean loss trains exactly like one device;
* **free**: computed from variables and constants only (the same on every device).

Anything else (batch statistics used inside the graph, as in batch normalization while
training; an op this analysis does not know applied to batched values) is refused when
the job is compiled, naming the op, rather than silently computing something else than
one device would. Known ops: elementwise and broadcasting ops, ``bias_add``,
``matmul`` of a batched left operand, convolutions and pooling, row-wise softmax and
cross entropies, ``reshape`` keeping the batch axis first, ``transpose``, reductions.
"""
from __future__ import annotations

import math

ELEMENTWISE = {
    "abs", "add", "ceil", "cos", "divide", "exp", "floor", "log", "log1p", "maximum",
    "minimum", "multiply", "negative", "pow", "relu", "sign", "sin", "sqrt", "square",
    "subtract", "tanh", "sigmoid", "softplus", "rsqrt", "safe_log", "cast", "identity",
    "dropout", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "where", "ones_like", "zeros_like", "relu_grad", "bias_add", "batch_norm_inference",
}
BATCH_FIRST = {"conv2d", "max_pool2d", "avg_pool2d", "conv2d_max_pool2d",
               "sparse_softmax_cross_entropy", "softmax_cross_entropy"}
FREE, MEAN, SUM = "free", "mean", "sum"


class Unsupported(Exception):
    """The batch axis is lost at an op the analysis cannot follow exactly."""


def analyse(graph, split: dict[int, int]) -> dict[int, object]:
    """Blob id -> FREE, MEAN, SUM, an int (the batch axis) or an ``Unsupported`` naming
    where exactness was lost. ``split``: placeholder blob id -> its batch axis."""
    state: dict[int, object] = {}
    for blob in graph.placeholders:
        state[blob.id] = split.get(blob.id, FREE)
    for node in graph.nodes:
        inputs = [state.get(b.id, FREE) for b in node.inputs]
        try:
            outs = _rule(node, inputs)
        except Unsupported as exc:
            outs = [exc] * len(node.outputs)
        for blob, value in zip(node.outputs, outs):
            state[blob.id] = value
    return state


def _rule(node, inputs) -> list:
    outputs = node.outputs
    if all(v == FREE for v in inputs):
        return [FREE] * len(outputs)
    bad = next((v for v in inputs if isinstance(v, Unsupported)), None)
    if bad is not None:
        raise bad
    name = node.op.name
    if any(v in (MEAN, SUM) for v in inputs):
        raise Unsupported(f"op {node.name} ({name}) uses a value reduced over the batch "
                          "(batch statistics)")
    axes = {v for v in inputs if isinstance(v, int)}
    if len(axes) != 1:
        raise Unsupported(f"op {node.name} ({name}) combines values batched along "
                          f"different axes {sorted(axes)}")
    axis = axes.pop()
    batched = next(b for b, v in zip(node.inputs, inputs) if isinstance(v, int))
    rows = batched.shape[axis]
    if name in ELEMENTWISE:
        for blob, value in zip(node.inputs, inputs):
            if value == FREE:     # broadcast from the right: must not vary along the batch
                position = axis - (batched.ndim - blob.ndim)
                if position >= 0 and blob.shape[position] != 1 and not (
                        name == "bias_add" and node.attrs.get("axis") != axis):
                    raise Unsupported(f"op {node.name} ({name}) mixes the batch with a "
                                      "value that varies along the batch axis")
        if name == "bias_add" and node.attrs.get("axis") == axis:
            raise Unsupported(f"op {node.name} adds a bias along the batch axis")
        return [_same_axis(node, o, axis, rows) for o in outputs]
    if name in BATCH_FIRST:
        if axis != 0 or any(isinstance(v, int) and v != 0 for v in inputs):
            raise Unsupported(f"op {node.name} ({name}) needs the batch axis first")
        return [_same_axis(node, o, 0, rows) for o in outputs]
    if name in ("softmax", "log_softmax"):
        if node.attrs.get("axis") % batched.ndim == axis:
            raise Unsupported(f"op {node.name} ({name}) normalizes across the batch")
        return [axis]
    if name == "matmul":
        a_state, b_state = inputs
        if (a_state == 0 and b_state == FREE and node.inputs[0].ndim == 2
                and not node.attrs.get("transpose_a")):
            return [0]
        raise Unsupported(f"op {node.name} (matmul) is not a batched left operand times "
                          "a variable")
    if name == "reshape":
        out = outputs[0]
        if axis == 0 and out.ndim >= 1 and out.shape[0] == rows:
            return [0]
        raise Unsupported(f"op {node.name} (reshape) does not keep the batch axis first")
    if name == "transpose":
        return [list(node.attrs["perm"]).index(axis)]
    if name in ("reduce_mean", "reduce_sum"):
        reduced = [a % batched.ndim for a in (node.attrs["axes"] or range(batched.ndim))]
        if axis in reduced:
            return [MEAN if name == "reduce_mean" else SUM]
        keep = node.attrs["keepdims"]
        return [axis if keep else axis - sum(1 for a in reduced if a < axis)]
    raise Unsupported(f"op {node.name} ({name}) on batched values: aioflow cannot tell "
                      "whether splitting the batch over devices changes its result")


def _same_axis(node, blob, axis, rows):
    if blob.ndim <= axis or blob.shape[axis] != rows:
        raise Unsupported(f"op {node.name} ({node.op.name}) changes the batch axis")
    return axis


def local_rows(rows: int, devices, what: str) -> int:
    """The rows of one device's slice of a batch of ``rows`` split over ``devices``'s
    world (a ``JobDevices``); ValueError naming ``what`` where they do not divide."""
    parts = devices.world
    if rows % parts:
        raise ValueError(f"{what}: its batch axis has {rows} rows, which do not split "
                         f"evenly over {devices.describe()}; use a batch that is a "
                         f"multiple of {parts}")
    return rows // parts


def total(shape) -> int:
    return math.prod(shape)
