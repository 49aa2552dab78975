"""What OneFlow's blobs tell about themselves beyond shape and dtype, followed through a
traced graph: ``is_dynamic`` (the shape follows a dynamic input, or is data-dependent)
and ``batch_axis`` (the axis that indexes the samples of a batch, or
``INVALID_BATCH_AXIS``). Each fact is set where it starts (placeholders, casts) and
carried from an op's inputs to its outputs, memoized per graph.
"""
from __future__ import annotations

__all__ = ["INVALID_BATCH_AXIS", "is_dynamic", "batch_axis", "ParallelConf", "parallel_conf",
           "on_default_device_tag"]

# OneFlow's value for "no batch axis" (oneflow_api.INVALID_BATCH_AXIS), not None: its
# users compare against the constant.
INVALID_BATCH_AXIS = -22


def _memo(graph, name: str) -> dict:
    memo = graph.__dict__.get(name)
    if memo is None:
        memo = graph.__dict__[name] = {}
    return memo


def _follow(blob, memo: dict, start, carry):
    """``start(blob)`` where a fact starts (not None), else ``carry(blob, input facts)``
    over the producer's inputs; iterative, so deep graphs do not recurse."""
    stack = [blob]
    while stack:
        current = stack[-1]
        if current.id in memo:
            stack.pop()
            continue
        known = start(current)
        if known is not None:
            memo[current.id] = known
            stack.pop()
            continue
        inputs = current.producer.inputs
        pending = [b for b in inputs if b.id not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[current.id] = carry(current, [(b, memo[b.id]) for b in inputs])
        stack.pop()
    return memo[blob.id]


def is_dynamic(blob) -> bool:
    """True where the blob's shape follows a dynamic (mirrored) input or is data-dependent
    (argwhere's), until ``flow.cast_to_static_shape``."""
    graph = blob.graph

    def start(b):
        if b.id in graph.static_casts:
            return False
        if b.id in graph.dynamic_inputs or b.id in graph.dynamic_dims:
            return True
        return False if b.producer is None or not b.producer.inputs else None

    return _follow(blob, _memo(graph, "_is_dynamic_memo"), start,
                   lambda b, facts: any(fact for _, fact in facts))


def batch_axis(blob) -> int:
    """The placeholder's declared batch axis, carried to an op's output when the output
    keeps that axis as it was (same rank, same length there); an op that reduces, moves
    or reshapes it, a variable and a constant have ``INVALID_BATCH_AXIS``."""
    graph = blob.graph

    def start(b):
        if b.producer is None or b.id in graph.batch_axes:
            # a placeholder's declared axis, or a source op's (OneFlow's batch-axis rule of
            # an op without inputs, such as its TestSource)
            axis = graph.batch_axes.get(b.id)
            return INVALID_BATCH_AXIS if axis is None else axis
        return INVALID_BATCH_AXIS if not b.producer.inputs else None

    def carry(b, facts):
        for source, axis in facts:
            if (axis != INVALID_BATCH_AXIS and source.ndim == b.ndim
                    and source.shape[axis] == b.shape[axis]):
                return axis
        return INVALID_BATCH_AXIS

    return _follow(blob, _memo(graph, "_batch_axis_memo"), start, carry)


_default_device_tag = [lambda: "cpu"]


def on_default_device_tag(hook) -> None:
    """Where ops outside any ``flow.scope.placement`` run ("cpu" or "gpu"): the engine,
    which knows the configured GPUs, registers ``hook`` (settings flow one way)."""
    _default_device_tag[0] = hook


class ParallelConf:
    """OneFlow's ``Blob.parallel_conf``, as far as one process has it: ``device_tag()``
    and ``device_name()`` of the devices the producing op runs on."""

    def __init__(self, device_tag: str):
        self._device_tag = device_tag

    def device_tag(self) -> str:  # OneFlow's protobuf getter
        return self._device_tag

    def device_name(self) -> list[str]:
        return ["0:0"]

    def __repr__(self) -> str:
        return f'device_tag: "{self._device_tag}" device_name: "0:0"'


def parallel_conf(blob) -> ParallelConf:
    """The producing op's placement (``flow.scope.placement``'s, or the default)."""
    device = getattr(blob.producer, "device", "default")
    return ParallelConf(device if device in ("cpu", "gpu") else _default_device_tag[0]())
