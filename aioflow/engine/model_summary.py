"""``flow.summary(job)`` (``job.summary()`` once JobFunction delegates to it): what a compiled job computes, op by op, and what it costs.

One row per op of the compiled graph (after fusion; ``variable`` and ``constant`` reads
are left out): its name, op, output shape, the parameters it reads (trainable
variables fed to it directly) and its FLOPs per step. Below: the total parameter count,
FLOPs per step, and the plan's peak memory.

FLOPs: a multiply-add counts 2 (matmul, the convolutions and their two gradients);
every other op counts one per output element, a rough figure for elementwise work.
Peak memory: the memory plan's buffers (allocated once, reused every step) plus the
largest total of the other values alive at one time as the plan runs its instructions
(it frees each value after its last reader); values that are views are counted as if
they were copies, so it is an upper bound. Variables are counted apart.

>>> import numpy as np, aioflow as flow, aioflow.typing as tp
>>> @flow.global_function(type="predict")
... def mlp(x: tp.Numpy.Placeholder((100, 784), dtype=flow.float)) -> tp.Numpy:
...     hidden = flow.layers.dense(x, 512, activation=flow.nn.relu, name="hidden")
...     return flow.layers.dense(hidden, 10, name="output")
>>> s = flow.summary(mlp, print_=False)
>>> s.params                    # 784*512 + 512 + 512*10 + 10
407050
>>> s.flops == 2*100*784*512 + 2*100*512*10 + 100*512*2 + 100*10
True
>>> print(s)                   # doctest: +ELLIPSIS
job mlp (predict), 5 ops
name             op        output      params  FLOPs/step
hidden-matmul    matmul    [100, 512]  401408  80281600
hidden-bias_add  bias_add  [100, 512]  512     51200
relu             relu      [100, 512]  0       51200
output-matmul    matmul    [100, 10]   5120    1024000
output-bias_add  bias_add  [100, 10]   10      1000
parameters: 407,050 (1.6 MB)   FLOPs per step: 81.4 M   peak memory: ... (of which ... reused buffers)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .._core import dtypes
from .session import default_session

__all__ = ["summary", "Summary"]

_MULTIPLY_ADD = {"matmul", "conv2d", "conv2d_max_pool2d", "conv2d_backward_data",
                 "conv2d_backward_filter"}


@dataclass
class Row:
    name: str
    op: str
    output: tuple
    params: int
    flops: int


@dataclass
class Summary:
    job: str
    job_type: str
    rows: list
    params: int
    param_bytes: int
    flops: int
    peak_bytes: int
    buffer_bytes: int

    def __str__(self) -> str:
        head = ("name", "op", "output", "params", "FLOPs/step")
        body = [(r.name, r.op, str(list(r.output)), str(r.params), str(r.flops)) for r in self.rows]
        widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
        fmt = "  ".join("{:<%d}" % w for w in widths)
        lines = [f"job {self.job} ({self.job_type}), {len(self.rows)} ops",
                 fmt.format(*head).rstrip()]
        lines += [fmt.format(*line).rstrip() for line in body]
        lines.append(f"parameters: {self.params:,} ({_size(self.param_bytes)})   "
                     f"FLOPs per step: {_count(self.flops)}   "
                     f"peak memory: {_size(self.peak_bytes)} "
                     f"(of which {_size(self.buffer_bytes)} reused buffers)")
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _count(n: int) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return str(n)


def _nbytes(blob) -> int:
    return math.prod(blob.shape) * dtypes.as_numpy(blob.dtype).itemsize


def _conv_flops(out_elements: int, w_shape, groups: int) -> int:
    _, in_per_group, kh, kw = w_shape
    return 2 * out_elements * in_per_group * kh * kw


def _flops(node) -> int:
    op, ins, outs, attrs = node.op.name, node.inputs, node.outputs, node.attrs
    if op == "matmul":
        a, b, out = (math.prod(x.shape) for x in (ins[0], ins[1], outs[0]))
        batch = math.prod(outs[0].shape[:-2])
        return 2 * out * round(math.sqrt(a * b / out / batch))
    if op in ("conv2d", "conv2d_max_pool2d"):
        x, w = ins[0].shape, ins[1].shape
        (pt, pb), (pl, pr) = attrs["pads"]
        (sh, sw), (dh, dw) = attrs["strides"], attrs["dilations"]
        oh = (x[2] + pt + pb - dh * (w[2] - 1) - 1) // sh + 1
        ow = (x[3] + pl + pr - dw * (w[3] - 1) - 1) // sw + 1
        return _conv_flops(x[0] * w[0] * oh * ow, w, attrs.get("groups", 1))
    if op == "conv2d_backward_data":
        return _conv_flops(math.prod(ins[0].shape), ins[1].shape, attrs.get("groups", 1))
    if op == "conv2d_backward_filter":
        return _conv_flops(math.prod(ins[0].shape), attrs["w_shape"], attrs.get("groups", 1))
    if not outs:  # in-place updates: one multiply-add per element of what they update
        return 2 * math.prod(ins[0].shape) if ins else 0
    return sum(math.prod(b.shape) for b in outs)


def _peak(graph, plan) -> int:
    """Buffers plus the most bytes of unbuffered values alive at once (plan order)."""
    if len(plan.instructions) != len(graph.nodes):
        return plan.buffer_bytes + plan.bytes_touched  # no instruction-level view: bound
    size = {}
    for slot, blob in zip(plan.input_slots, graph.placeholders):
        size[slot] = _nbytes(blob)
    for ins, node in zip(plan.instructions, graph.nodes):
        for slot, blob in zip(ins.outputs, node.outputs):
            # variables are counted apart; a buffered output lives in its buffer
            counted = node.op.name != "variable" and not (
                ins.buffer is not None and slot == ins.outputs[0])
            size[slot] = _nbytes(blob) if counted else 0
    live = set(plan.input_slots)
    current = peak = sum(size.get(s, 0) for s in live)
    for ins in plan.instructions:
        for slot in ins.outputs:
            if slot not in live:
                live.add(slot)
                current += size.get(slot, 0)
        peak = max(peak, current)
        for slot in ins.release:
            if slot in live:
                live.discard(slot)
                current -= size.get(slot, 0)
    return plan.buffer_bytes + peak


def summary(job, print_: bool = True) -> Summary:
    """Compile ``job`` in the default session (if not yet) and describe it; prints the
    table unless ``print_=False``; returns a :class:`Summary` (``rows``, ``params``,
    ``flops``, ``peak_bytes``, ...)."""
    # A job function is what has compiled_for (engine/function.py imports this module).
    if not callable(getattr(job, "compiled_for", None)):
        raise TypeError("flow.summary: expected a job function (decorated with "
                        f"@flow.global_function), got {type(job).__name__}")
    compiled = job.compiled_for(default_session())
    graph, plan = compiled.graph, compiled.plan
    variables = default_session().variables
    trainable = {name for name, record in variables.items() if record.trainable
                 and not record.is_state} if variables else set()
    var_of_blob = {blob.id: name for name, blob in graph.variable_blobs.items()}
    rows = []
    for node in graph.nodes:
        if node.op.name in ("variable", "constant"):
            continue
        params = sum(math.prod(b.shape) for b in node.inputs
                     if var_of_blob.get(b.id) in trainable and node.outputs)
        rows.append(Row(node.name, node.op.name,
                        tuple(node.outputs[0].shape) if node.outputs else (),
                        params, _flops(node)))
    used = [graph.variable_blobs[n] for n in graph.variable_blobs if n in trainable]
    result = Summary(job.__name__, job.job_type, rows,
                     params=sum(math.prod(b.shape) for b in used),
                     param_bytes=sum(_nbytes(b) for b in used),
                     flops=sum(r.flops for r in rows),
                     peak_bytes=_peak(graph, plan), buffer_bytes=plan.buffer_bytes)
    if print_:
        print(result)
    return result
