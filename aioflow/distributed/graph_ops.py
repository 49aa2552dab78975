"""The rewrites of a job of several devices (of one process, of several ranks, or both),
and the collective ops they put into it among ranks.

* Gradient averaging (:func:`average_gradients`, called by ``optimizer.build_training``
  before gradient clipping, which must see the averaged gradients). The devices of one
  process: ``build_training`` sums the gradients of every device part's loss, and this
  divides the sum by the devices. Among ranks: the gradients are grouped into buckets in
  the order the backward pass produces them (at most :data:`BUCKET_BYTES` each, one
  dtype). Each bucket's ``allreduce_start`` op is moved right after the op producing its
  last gradient, so its ``Iallreduce`` runs on the communication thread while the
  backward pass goes on; one ``allreduce_wait`` per bucket sits after the whole backward
  pass, before the first update.
* Gathered results (:func:`gather_outputs`): a ``tp.ListNumpy`` (mirrored-view) result
  becomes every device's value (each stacked over the ranks), so each rank gets the same
  list; a consistent job's results are combined over the devices as one device would
  have computed them on the whole batch.

The collective ops are not in the op registry (nor in its test matrix): they only exist
in jobs of several ranks, and ``tests/distributed`` runs them under ``mpiexec``.
"""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .._core.system_names import train_step_name
from ..ir import current_graph
from ..ops.registry import OpDef
from ..ops.shape import concat
from . import collectives, state
from .devices import one
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


def _start_infer(*grads, counter, bucket, first, devices=1):
    return [((), dtypes.int32)]


def _on_host(ctx) -> bool:
    return ctx.backend.name == "numpy"


def _start_kernel(ctx, *grads, counter, bucket, first, devices=1):
    """(``grads``: sums over this rank's ``devices``; the average is over every device.)"""
    what = counter.describe(ctx, first, f"the gradient all-reduce of bucket {bucket}")
    ctx._pending_allreduce = getattr(ctx, "_pending_allreduce", {})
    key = (counter.job, bucket)
    if _on_host(ctx):
        future = collectives.allreduce_mean_start(list(grads), what, devices)
    else:
        if not hasattr(ctx, "_device_buckets"):
            ctx._device_buckets = collectives.DeviceBuckets()
        future = ctx._device_buckets.start(ctx.backend, key, list(grads), what, devices)
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


_LIST_KINDS = ("list_numpy", "list_list_numpy")


def devices_of(graph):
    """The devices the job traced into ``graph`` runs on (one where none were set)."""
    return graph.devices or one()


def gather_outputs(graph, per_device: list[list], kinds) -> tuple[list, tuple]:
    """The job's results as its world of devices returns them; called while tracing,
    after every device's part (``per_device``: each device's result blobs, in the order
    of ``kinds``). Returns the outputs and their layout, for
    :func:`aioflow.distributed.views.device_values`.

    A mirrored-view (``list_numpy``) result is every device's value: one output per
    device of this process, each stacked over the ranks. In a job with consistent-view
    placeholders split over the devices, a ``tp.Numpy`` result is combined over this
    process's devices and then over the ranks as one device would have computed it on the
    whole batch: concatenated along its batch axis, or averaged / summed where it was
    reduced over the batch (:mod:`aioflow.distributed.batch_split` says which, and checks
    the training loss). In a job without them, a ``tp.Numpy`` result is this rank's own
    value; with several devices in the process, it must be the same on each."""
    devices = devices_of(graph)
    ranks = state.world().size
    split = graph.split_axes
    states = _check_split_job(graph, split, devices) if split else {}
    varying = _varying(graph) if devices.count > 1 and not split else {}
    counter = _counter(graph) if ranks > 1 else None
    outputs, leaves = [], []
    for index, kind in enumerate(kinds):
        parts = [blobs[index] for blobs in per_device]
        if kind in _LIST_KINDS:
            at = []
            for blob in parts:
                if ranks > 1:
                    blob = allgather_result(blob, counter=counter, first=_first(graph),
                                            name=f"allgather-{blob.name}")
                at.append(len(outputs))
                outputs.append(blob)
            leaves.append(tuple(at))
            continue
        blob = parts[0]
        if split:
            value = states.get(blob.id, FREE)
            blob = _combine_devices(graph, parts, value, index, devices)
            if ranks > 1:
                blob = _consistent_result(graph, blob, value, counter, index, devices)
        elif varying.get(blob.id, FREE) != FREE:
            what = ("is annotated tp.Numpy" if kind == "numpy"
                    else "is one value (the old API's result, without an annotation)")
            raise TypeError(
                f"job {graph.name!r}: result {index} ({blob.name}) {what}, but in the "
                f"mirrored view each of the {devices.describe()} computes a value of its "
                "own; annotate it tp.ListNumpy to get every device's value")
        leaves.append(len(outputs))
        outputs.append(blob)
    return outputs, (ranks, tuple(leaves))


def _first(graph) -> bool:
    """Whether no collective result op was traced yet (it numbers the step)."""
    return not any(n.op in _RESULT_OPS for n in graph.nodes)


def _varying(graph) -> dict:
    """Blob id -> FREE where a value is the same on every device of a mirrored job: it
    depends on no mirrored placeholder (each device's own array)."""
    own = graph.dynamic_inputs | graph.tensor_list_inputs
    return analyse(graph, {b.id: 0 for b in graph.placeholders if b.id in own})


def _check_split_job(graph, split, devices) -> dict:
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
                f"{devices.describe()} exactly ({why}); minimize a per-sample loss or its "
                "reduce_mean, or use the mirrored view (tp.ListNumpy)")
    return states


def _inexact(graph, blob, value, index, devices) -> NotImplementedError:
    return NotImplementedError(
        f"job {graph.name!r}: result {index} ({blob.name}) cannot be computed from batch "
        f"slices on {devices.describe()} exactly: {value}. Return per-sample "
        "values or their reduce_mean/reduce_sum, or use the mirrored view (tp.ListNumpy)")


def _combine_devices(graph, parts, value, index, devices):
    """A consistent result from this process's device parts: what one device would give
    for the batch of all of them."""
    blob = parts[0]
    if len(parts) == 1 or value == FREE:
        return blob
    if isinstance(value, int):
        if any(part.id in graph.dynamic_dims for part in parts):
            raise NotImplementedError(
                f"job {graph.name!r}: result {index} ({blob.name}) has a data-dependent "
                f"length; it cannot be concatenated from {devices.describe()}")
        return concat(*parts, axis=value, name=f"devices-concat-{blob.name}")
    if value in (MEAN, SUM):
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total / float(len(parts)) if value == MEAN else total
    raise _inexact(graph, blob, value, index, devices)


def _consistent_result(graph, blob, value, counter, index, devices):
    """A consistent result of this process (its devices combined) combined over the
    ranks."""
    first = _first(graph)
    if value == FREE:
        return blob
    if isinstance(value, int):
        return allgather_concat(blob, counter=counter, first=first, axis=value,
                                name=f"allgather-{blob.name}")
    if value in (MEAN, SUM):
        return allreduce_result(blob, counter=counter, first=first, mean=value == MEAN,
                                name=f"allreduce-{blob.name}")
    raise _inexact(graph, blob, value, index, devices)


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
    world's devices; called while ``graph`` is traced. ``grad`` is the sum over this
    process's device parts (``build_training`` sums the gradients of every part's loss):
    divided here by their count; among several ranks the bucket ops added to ``graph``
    then average over the ranks. Returns them in the order given."""
    devices = devices_of(graph).count
    if state.world().size == 1:
        # as the ranks' all-reduce: the sum, divided (with two, (a + b) / 2 either way)
        return pairs if devices == 1 else [(name, param, grad / float(devices))
                                           for name, param, grad in pairs]
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
        token = allreduce_start(*grads, counter=counter, bucket=index, devices=devices,
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
