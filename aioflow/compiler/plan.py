"""A Plan: the flat list of kernel calls a compiled job runs each step.

Values live in a list indexed by slot; each instruction names its input and output
slots, and the slots freed after it (by liveness), so intermediate arrays die early.
Results are copied out before the in-place updates run (a returned variable shows its
value from before the step).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..ir import Graph


@dataclass
class Instruction:
    kernel: Callable
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: dict[str, Any]
    name: str
    release: tuple[int, ...] = ()


@dataclass
class Plan:
    instructions: list[Instruction]
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    fetch_at: int  # index of the first instruction with side effects
    num_slots: int
    constants: dict[int, Any] = field(default_factory=dict)

    def run(self, ctx, inputs) -> list:
        """Execute one step; returns fresh copies of the output values."""
        slots: list[Any] = [None] * self.num_slots
        for slot, value in zip(self.input_slots, inputs):
            slots[slot] = value
        for slot, value in self.constants.items():
            slots[slot] = value
        results = None
        instructions = self.instructions
        for index, ins in enumerate(instructions):
            if index == self.fetch_at:
                results = [ctx.xp.array(slots[s], copy=True, order="C") for s in self.output_slots]
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
            results = [ctx.xp.array(slots[s], copy=True, order="C") for s in self.output_slots]
        return results


def build_plan(graph: Graph, constant_values: dict[int, Any] | None = None) -> Plan:
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
            kernel=node.op.forward,
            inputs=tuple(slot(b.id) for b in node.inputs),
            outputs=tuple(slot(b.id) for b in node.outputs),
            attrs=dict(node.attrs),
            name=node.name,
            release=tuple(sorted(set(release))),
        ))
    return Plan(
        instructions=instructions,
        input_slots=input_slots,
        output_slots=tuple(slot(b.id) for b in graph.outputs),
        fetch_at=fetch_at,
        num_slots=len(slot_of),
        constants={slot_of[k]: v for k, v in (constant_values or {}).items() if k in slot_of},
    )
