"""Collective ops inside a compiled job of several ranks, and the rewrites that add them.

* Gradient averaging (:func:`average_gradients`, called by ``optimizer.build_training``
  before gradient clipping, which must see the averaged gradients): the gradients are
  grouped into buckets in the order the backward pass produces them (at most
  :data:`BUCKET_BYTES` each, one dtype). Each bucket's ``allreduce_start`` op is moved
  right after the op producing its last gradient, so its ``Iallreduce`` runs on the
  communication thread while the backward pass goes on; one ``allreduce_wait`` per bucket
  sits after the whole backward pass, before the first update.
* Gathered results (:func:`gather_outputs`): a ``tp.ListNumpy`` (mirrored-view) result
  becomes every rank's value stacked, so each rank gets the same list.

The ops are not in the op registry (nor in its test matrix): they only exist in jobs of
several ranks, and ``tests/distributed`` runs them under ``mpiexec``.
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .._core.system_names import train_step_name
from ..ir import current_graph
from ..ops.registry import OpDef
from . import collectives, state
from .batch_split import FREE, MEAN, SUM, Unsupported, analyse

BUCKET_BYTES = 1 << 20   # gradients per all-reduce: a few buckets overlap the backward pass


class StepCounter:
    """Names the step in a collective's timeout message: the job's train-step counter
    when it has one, else how many steps of the job started a collective."""

    def __init__(self, job: str, step_variable: str | None):
        self.job = job
        self.step_variable = step_variable
        self.count = 0

    def describe(self, ctx, first: bool, what: str) -> str:
        if first:
            self.count += 1
        step = self.count
        if self.step_variable is not None:
            step = int(np.ravel(ctx.session.variables[self.step_variable].value)[0]) + 1
        return f"{what} of job {self.job!r} (step {step})"

    def __repr__(self) -> str:
        return f"StepCounter({self.job!r})"


def _start_infer(*grads, counter, bucket, first):
    return [((), dtypes.int32)]


def _on_host(ctx) -> bool:
    return ctx.backend.name == "numpy"


def _start_kernel(ctx, *grads, counter, bucket, first):
    what = counter.describe(ctx, first, f"the gradient all-reduce of bucket {bucket}")
    ctx._pending_allreduce = getattr(ctx, "_pending_allreduce", {})
    key = (counter.job, bucket)
    if _on_host(ctx):
        future = collectives.allreduce_mean_start(list(grads), what)
    else:
        if not hasattr(ctx, "_device_buckets"):
            ctx._device_buckets = collectives.DeviceBuckets()
        future = ctx._device_buckets.start(ctx.backend, key, list(grads), what)
    ctx._pending_allreduce[key] = future
    return ctx.xp.zeros((), np.int32)


def _wait_infer(token, *, counter, bucket, specs):
    return list(specs)


def _wait_kernel(ctx, token, *, counter, bucket, specs):
    averaged = state.communicator().wait(ctx._pending_allreduce.pop((counter.job, bucket)))
    if not _on_host(ctx):
        averaged = collectives.DeviceBuckets.finish(ctx.backend, averaged, specs)
    return averaged[0] if len(averaged) == 1 else tuple(averaged)


def _host(ctx, x):
    """A result's value on the host, for MPI (device results are small: one sync)."""
    return x if _on_host(ctx) else ctx.backend.to_host(x)


def _device(ctx, x):
    return x if _on_host(ctx) else ctx.backend.to_device(x)


def _gather_infer(x, *, counter, first):
    return [((state.world().size,) + tuple(x.shape), x.dtype)]


def _gather_kernel(ctx, x, *, counter, first):
    return _device(ctx, collectives.allgather_stacked(
        _host(ctx, x), counter.describe(ctx, first, "gathering a result")))


def _concat_infer(x, *, counter, first, axis):
    shape = list(x.shape)
    shape[axis] *= state.world().size
    return [(tuple(shape), x.dtype)]


def _concat_kernel(ctx, x, *, counter, first, axis):
    stacked = collectives.allgather_stacked(
        _host(ctx, x), counter.describe(ctx, first, "gathering a batched result"))
    return _device(ctx, np.concatenate(list(stacked), axis=axis))


def _reduce_infer(x, *, counter, first, mean):
    return [(tuple(x.shape), x.dtype)]


def _reduce_kernel(ctx, x, *, counter, first, mean):
    what = counter.describe(ctx, first, "all-reducing a result reduced over the batch")
    summed = collectives.allreduce_sum(_host(ctx, x), what)
    return _device(ctx, summed / summed.dtype.type(state.world().size) if mean else summed)


allreduce_start = OpDef("allreduce_start", _start_infer, _start_kernel, differentiable=False)
allreduce_wait = OpDef("allreduce_wait", _wait_infer, _wait_kernel, differentiable=False)
allgather_result = OpDef("allgather_result", _gather_infer, _gather_kernel,
                         differentiable=False)
allgather_concat = OpDef("allgather_concat", _concat_infer, _concat_kernel,
                         differentiable=False)
allreduce_result = OpDef("allreduce_result", _reduce_infer, _reduce_kernel,
                         differentiable=False)
COLLECTIVE_OPS = ("allreduce_start", "allreduce_wait", "allgather_result",
                  "allgather_concat", "allreduce_result")
_RESULT_OPS = (allgather_result, allgather_concat, allreduce_result)


def _counter(graph) -> StepCounter:
    counter = graph.step_counter
    if counter is None:
        step_variable = None
        if graph.job_type == "train":
            step_variable = train_step_name(graph.name)
        counter = graph.step_counter = StepCounter(graph.name, step_variable)
    return counter


def gather_outputs(graph, kinds) -> list:
    """``graph.outputs`` as one process would return them; called while tracing.

    A mirrored-view (``list_numpy``) result becomes every rank's value, stacked. In a job
    with consistent-view placeholders split over the ranks, a ``tp.Numpy`` result is
    gathered along its batch axis or all-reduced if it was reduced over the batch (see
    :mod:`aioflow.distributed.batch_split`, which also checks the training loss)."""
    counter = _counter(graph)
    split = graph.split_axes
    states = _check_split_job(graph, split) if split else {}
    outputs = []
    for index, (blob, kind) in enumerate(zip(graph.outputs, kinds)):
        first = not any(n.op in _RESULT_OPS for n in graph.nodes)
        if kind in ("list_numpy", "list_list_numpy"):
            blob = allgather_result(blob, counter=counter, first=first,
                                    name=f"allgather-{blob.name}")
        elif split:
            blob = _consistent_result(graph, blob, states, counter, first, index)
        outputs.append(blob)
    return outputs


def _check_split_job(graph, split) -> dict:
    states = analyse(graph, split)
    losses = list(graph.legacy_losses)
    if graph.train_target is not None:
        losses += list(graph.train_target[1])
    for loss in losses:
        value = states.get(loss.id, FREE)
        if isinstance(value, Unsupported) or value not in (FREE, MEAN) and \
                not isinstance(value, int):
            why = value if isinstance(value, Unsupported) else "a sum over the batch"
            raise NotImplementedError(
                f"job {graph.name!r}: its training loss cannot be split over "
                f"{state.world().size} ranks exactly ({why}); minimize a per-sample loss "
                "or its reduce_mean, or use the mirrored view (tp.ListNumpy)")
    return states


def _consistent_result(graph, blob, states, counter, first, index):
    value = states.get(blob.id, FREE)
    if value == FREE:
        return blob
    if isinstance(value, int):
        return allgather_concat(blob, counter=counter, first=first, axis=value,
                                name=f"allgather-{blob.name}")
    if value in (MEAN, SUM):
        return allreduce_result(blob, counter=counter, first=first, mean=value == MEAN,
                                name=f"allreduce-{blob.name}")
    raise NotImplementedError(
        f"job {graph.name!r}: result {index} ({blob.name}) cannot be computed from batch "
        f"slices on {state.world().size} ranks exactly: {value}. Return per-sample "
        "values or their reduce_mean/reduce_sum, or use the mirrored view (tp.ListNumpy)")


def buckets_of(pairs, producer_index) -> list[list]:
    """``(name, param, grad)`` triples grouped into all-reduce buckets: in the order their
    gradients are produced, one dtype per bucket, at most :data:`BUCKET_BYTES` (a larger
    gradient gets a bucket of its own)."""
    ordered = sorted(pairs, key=lambda p: (producer_index.get(p[2].id, -1), p[0]))
    buckets, current, size = [], [], 0
    for triple in ordered:
        grad = triple[2]
        nbytes = int(np.prod(grad.shape)) * dtypes.as_numpy(grad.dtype).itemsize
        if current and (size + nbytes > BUCKET_BYTES or current[-1][2].dtype is not grad.dtype):
            buckets.append(current)
            current, size = [], 0
        current.append(triple)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


def average_gradients(graph, pairs) -> list:
    """``pairs`` (name, param, grad) with each gradient replaced by its average over the
    ranks; adds the bucket ops to ``graph`` (being traced). Returns them in the order
    given."""
    if not pairs:
        return pairs
    current_graph()   # must be tracing
    counter = _counter(graph)
    producer_index = {b.id: i for i, node in enumerate(graph.nodes) for b in node.outputs}
    buckets = buckets_of(pairs, producer_index)
    averaged = {}
    first = not any(n.op in (allreduce_start, allgather_result) for n in graph.nodes)
    for index, bucket in enumerate(buckets):
        grads = [g for _, _, g in bucket]
        token = allreduce_start(*grads, counter=counter, bucket=index,
                                first=first and index == 0, name=f"allreduce-start-{index}")
        _move_after_producers(graph, graph.nodes[-1], producer_index)
        graph.allreduce_layout = graph.allreduce_layout + [
            [(name, tuple(g.shape), g.dtype.name) for name, _, g in bucket]]
    for index, bucket in enumerate(buckets):
        token = next(n.outputs[0] for n in graph.nodes
                     if n.op is allreduce_start and n.attrs["bucket"] == index)
        specs = tuple((tuple(g.shape), g.dtype) for _, _, g in bucket)
        outs = allreduce_wait(token, counter=counter, bucket=index, specs=specs,
                              name=f"allreduce-wait-{index}")
        outs = outs if isinstance(outs, tuple) else (outs,)
        for (name, _, _), out in zip(bucket, outs):
            averaged[name] = out
    return [(name, param, averaged[name]) for name, param, _ in pairs]


def _move_after_producers(graph, node, producer_index) -> None:
    """Move ``node`` (the last one traced) right after the last producer of its inputs,
    so its collective starts as soon as they exist."""
    graph.nodes.pop()
    last = max(producer_index.get(b.id, -1) for b in node.inputs)
    position = last + 1
    # after start ops already placed there, to keep buckets in their order
    while position < len(graph.nodes) and graph.nodes[position].op is allreduce_start:
        position += 1
    graph.nodes.insert(position, node)
    for i in range(position, len(graph.nodes)):
        for b in graph.nodes[i].outputs:
            producer_index[b.id] = i
