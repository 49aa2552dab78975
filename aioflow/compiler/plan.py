"""A Plan: the flat list of kernel calls a compiled job runs each step.

Values live in a list indexed by slot; each instruction names its input and output
slots, and the slots freed after it (by liveness), so intermediate arrays die early.
Results are copied out before the in-place updates run (a returned variable shows its
value from before the step). Ops that can write into ``out=`` get a buffer from the
memory plan (:mod:`aioflow.compiler.memory`): arrays allocated at the first step and
reused by every later one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..ir import Graph
from ..kernels import parallel
from . import gradient_buffers
from .memory import plan_buffers
from .._core import dtypes
from .launch_fusion import launches_per_step
from .. import backends


@dataclass
class Instruction:
    kernel: Callable
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: dict[str, Any]
    name: str
    release: tuple[int, ...] = ()
    buffer: int | None = None  # the memory plan's buffer the output is written into
    op_name: str = ""          # the registry name of the op (launch counting, capture)


@dataclass
class Plan:
    instructions: list[Instruction]
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    fetch_at: int  # index of the first instruction with side effects
    num_slots: int
    constants: dict[int, Any] = field(default_factory=dict)
    buffers: list[tuple[tuple, Any]] = field(default_factory=list)  # (shape, aioflow dtype)
    split_kernels: bool = False  # hold the BLAS at one thread; kernels split their batch
    # Bytes of every value a step produces or reads (placeholders, constants, variables,
    # op outputs): a bound on the memory traffic of a step, known at compile time. The
    # runtime runs an awaited step this small on the caller's event loop (runtime/calls).
    bytes_touched: int = 0
    # A train step with the non-finite guard (ops/state.py ``all_finite``): it reports
    # NaN and infinity itself, so numpy's floating-point warnings inside it are muted
    # (with pytest's "error" filter they would even abort the step the guard would skip).
    guarded: bool = False
    # Some op waits for other ranks (aioflow.distributed): never run on an event loop.
    communicates: bool = False
    _bound: bool = False

    @property
    def launches_per_step(self) -> int:
        """Kernel launches one step issues on a device (see
        :func:`aioflow.compiler.launch_fusion.launches_per_step`)."""
        return launches_per_step(self)

    def _bind_buffers(self, ctx) -> None:
        """Allocate the memory plan's buffers (once) and hand each to its writers."""
        arrays = [ctx.xp.empty(shape, dtype=dtypes.as_numpy(dtype))
                  for shape, dtype in self.buffers]
        for ins in self.instructions:
            if ins.buffer is not None:
                ins.attrs = {**ins.attrs, "out": arrays[ins.buffer]}
        self._bound = True

    @property
    def buffer_bytes(self) -> int:
        """Bytes the memory plan's buffers take (allocated at the first step)."""
        return sum(math.prod(shape) * dtypes.as_numpy(dtype).itemsize
                   for shape, dtype in self.buffers)

    def run(self, ctx, inputs, slots: list | None = None, end: int | None = None) -> list:
        """Execute one step; returns fresh copies of the output values.

        Steps of one plan must not run concurrently (the session's lock sees to it): the
        memory plan's buffers are shared by every step. ``end``: run only the
        instructions before it, into the caller's ``slots`` list (a captured CUDA graph
        runs the step's host-side tail apart, :mod:`aioflow.backends.graph_capture`).
        """
        if not self._bound:
            self._bind_buffers(ctx)
        if self.guarded:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return self._run_threaded(ctx, inputs, slots, end)
        return self._run_threaded(ctx, inputs, slots, end)

    def run_tail(self, ctx, slots: list, start: int) -> None:
        """The instructions from ``start`` on, over ``slots`` left by ``run(end=start)``."""
        for ins in self.instructions[start:]:
            ins.kernel(ctx, *[slots[i] for i in ins.inputs], **ins.attrs)

    def _run_threaded(self, ctx, inputs, slots, end) -> list:
        if self.split_kernels:
            with parallel.single_blas_thread():
                return self._run(ctx, inputs, slots, end)
        return self._run(ctx, inputs, slots, end)

    def _run(self, ctx, inputs, slots=None, end=None) -> list:
        if slots is None:
            slots = [None] * self.num_slots
        for slot, value in zip(self.input_slots, inputs):
            slots[slot] = value
        for slot, value in self.constants.items():
            slots[slot] = value
        results = None
        instructions = self.instructions if end is None else self.instructions[:end]
        for index, ins in enumerate(instructions):
            if index == self.fetch_at:
                results = self._copy_outputs(ctx, slots)
            try:
                produced = ins.kernel(ctx, *[slots[i] for i in ins.inputs], **ins.attrs)
            except Exception as exc:
                exc.add_note(f"(while running op {ins.name} of this job)")
                raise
            if len(ins.outputs) == 1:
                slots[ins.outputs[0]] = produced
            elif ins.outputs:
                for slot, value in zip(ins.outputs, produced):
                    slots[slot] = value
            for slot in ins.release:
                slots[slot] = None
        if results is None:
            results = self._copy_outputs(ctx, slots)
        return results

    def _copy_outputs(self, ctx, slots) -> list:
        """Private, C-ordered copies of the outputs: later steps reuse the buffers. A host
        value (a tensor buffer: a numpy object array) stays a host copy on every backend."""
        return [np.array(value, copy=True) if _is_host_value(value)
                else ctx.xp.array(value, copy=True, order="C")
                for value in (slots[s] for s in self.output_slots)]


def _is_host_value(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def build_plan(graph: Graph, constant_values: dict[int, Any] | None = None,
               memory_plan: bool = True, kernel_threading: str = "blas",
               options: dict[str, Any] | None = None, backend=None) -> Plan:
    """The plan of ``graph``; ``memory_plan=False`` lets every op allocate its output
    afresh each step (the reference the memory plan is tested against);
    ``kernel_threading`` as :func:`aioflow.config.kernel_threading`; ``options``: values
    of the settings ops take as compile options (``OpDef.compile_options``), e.g.
    ``{"conv_algorithm": "gemm"}``; a setting left out keeps the kernel's default;
    ``backend``: whose kernels the plan calls (default: numpy)."""
    if backend is None:
        backend = backends.named("numpy")
    options = options or {}
    split = backend.splits_on_host_threads and (kernel_threading == "split" or (
        kernel_threading == "auto" and any(n.op.splits_batch for n in graph.nodes)))
    buffer_of_node, buffers = plan_buffers(graph) if memory_plan else (
        [None] * len(graph.nodes), [])
    slot_of: dict[int, int] = {}

    def slot(blob_id: int) -> int:
        if blob_id not in slot_of:
            slot_of[blob_id] = len(slot_of)
        return slot_of[blob_id]

    input_slots = tuple(slot(b.id) for b in graph.placeholders)
    last_use: dict[int, int] = {}
    for index, node in enumerate(graph.nodes):
        for blob in node.inputs:
            last_use[blob.id] = index
    keep = {b.id for b in graph.outputs}
    fetch_at = next((i for i, n in enumerate(graph.nodes) if n.op.side_effect), len(graph.nodes))
    instructions = []
    for index, node in enumerate(graph.nodes):
        release = tuple(
            slot_of[b.id] for b in node.inputs
            if last_use.get(b.id) == index and b.id not in keep
        )
        instructions.append(Instruction(
            kernel=node.op.kernel(backend.kernel_set),
            inputs=tuple(slot(b.id) for b in node.inputs),
            outputs=tuple(slot(b.id) for b in node.outputs),
            attrs={**node.attrs, **{kw: options[key]
                                    for kw, key in node.op.compile_options.items()
                                    if key in options}},
            name=node.name,
            release=tuple(sorted(set(release))),
            buffer=buffer_of_node[index],
            op_name=node.op.name,
        ))
    gradient_buffers.attach(graph, instructions, backend)
    blobs = {b.id: b for b in graph.placeholders}
    for node in graph.nodes:
        blobs.update((b.id, b) for b in node.outputs)
    bytes_touched = sum(math.prod(b.shape) * dtypes.as_numpy(b.dtype).itemsize
                        for b in blobs.values())
    return Plan(
        bytes_touched=bytes_touched,
        instructions=instructions,
        input_slots=input_slots,
        output_slots=tuple(slot(b.id) for b in graph.outputs),
        fetch_at=fetch_at,
        num_slots=len(slot_of),
        constants={slot_of[k]: v for k, v in (constant_values or {}).items() if k in slot_of},
        buffers=buffers,
        split_kernels=split,
        guarded=any(n.op.name == "all_finite" for n in graph.nodes),
    )
