"""A compiled step replayed as one captured graph (CUDA graphs on the CuPy backend).

A step of a compiled plan issues the same kernels on the same shapes every time: on a
GPU it can be captured once (CUDA stream capture) and then replayed with a single graph
launch, instead of tens of launches each costing microseconds of host time.
:class:`CapturedStep` does the bookkeeping, the same for every backend that offers a
*capturer* (``Backend.graph_capturer()``):

1. the first step runs eagerly (kernels compiled, the memory plan's buffers bound, and
   on CuPy the private memory pool filled with the blocks a step needs, so capturing
   allocates nothing new);
2. the next step copies its inputs into fixed device buffers and captures the plan on
   them (a capture runs nothing), then launches the graph;
3. every later step copies its inputs into those buffers and launches the graph; its
   outputs are copied out of the graph's fixed output arrays (the pipeline may still be
   fetching them when the next replay overwrites them).

What a graph cannot hold stays outside it: the host-side tail of a train step (the step
counter, which reads the non-finite flag on the host) runs after each launch. Values the
graph bakes in are checked before each replay, and a change captures again: the learning
rate (a host scalar in the update kernels) and the variables' arrays (a checkpoint load
or a move between backends replaces them). Plans that cannot be captured run eagerly,
with the reason in :attr:`CapturedStep.refused` (:func:`refusal`): random ops (a replay
would repeat their draws), Adam's bias correction and LazyAdam's (a host value that
changes every step), the layer-wise optimizers and collectives (not reviewed for
capture). A capture that fails (e.g. a CuPy version that refuses a library call while
capturing) warns once and the job runs eagerly from then on.

The CuPy capturer (:class:`aioflow.backends.cupy.backend.CupyGraphCapturer`) ran on an
H200 (issue 26); the simulated GPU's recording capturer runs this module's logic in CI.
"""
from __future__ import annotations

import contextlib
import warnings

# Host-side ops at the end of a train step, run after the graph's launch.
HOST_TAIL_OPS = frozenset({"increment"})
RANDOM_OPS = frozenset({"dropout", "bernoulli", "coin_flip", "random_permutation"})
UNREVIEWED_OPS = frozenset({"lamb_update", "lars_update"})
# Tensor buffers and lists are host containers: their ops run on the host at every step.
HOST_VALUE_OPS = frozenset({"tensor_to_tensor_buffer", "tensor_buffer_to_tensor",
                            "tensor_buffer_to_tensor_list", "tensor_list_to_tensor_buffer",
                            "tensor_list_split"})
# After this many captures of one job (the baked values keep changing: a learning rate
# that decays every step), capturing costs more than it saves: the job runs eagerly.
MAX_CAPTURES = 8


def refusal(plan) -> str | None:
    """Why ``plan`` cannot be replayed from a captured graph, or None."""
    if plan.communicates:
        return "the step waits for other ranks (collectives are not captured)"
    for ins in plan.instructions:
        if ins.op_name in RANDOM_OPS:
            return f"op {ins.name} draws random numbers (a replay would repeat its draws)"
        # (LazyAdam's rule is always bias-corrected.)
        if ins.op_name == "lazy_adam_update" or (
                ins.op_name in ("adam_update", "multi_adam_update")
                and ins.attrs.get("do_bias_correction")):
            return ("Adam's bias correction reads the step counter on the host, a value "
                    "that changes every step")
        if ins.op_name in HOST_VALUE_OPS:
            return f"op {ins.name} ({ins.op_name}) works on host values (tensor buffers)"
        if ins.op_name in UNREVIEWED_OPS:
            return f"op {ins.name} ({ins.op_name}) is not reviewed for capture"
    return None


def _tail_start(plan) -> int:
    """Index of the first instruction of the step's host-side tail."""
    start = len(plan.instructions)
    while start and plan.instructions[start - 1].op_name in HOST_TAIL_OPS:
        start -= 1
    return start


class CapturedStep:
    """``step(device_inputs) -> device_outputs`` for a plan, replayed from a captured
    graph where it can be (see the module docstring). Counters for tests and
    benchmarks: :attr:`captures`, :attr:`replays`, :attr:`eager_steps`."""

    def __init__(self, plan, ctx, capturer, job_name: str = "job"):
        self.plan = plan
        self.ctx = ctx
        self.capturer = capturer
        self.job_name = job_name
        self.refused: str | None = refusal(plan)
        self.tail_start = _tail_start(plan)
        self._producer = {slot: ins for ins in plan.instructions for slot in ins.outputs}
        self._variables = [ins.attrs["var"] for ins in plan.instructions
                           if ins.op_name == "variable"]
        self._rates = [(ins.attrs["schedule"], self._producer[ins.inputs[0]].attrs["var"])
                       for ins in plan.instructions if ins.op_name == "learning_rate"]
        self.graph = None
        self._baked = None
        self._static_inputs: list = []
        self.captures = 0
        self.replays = 0
        self.eager_steps = 0

    def __call__(self, inputs) -> list:
        if self.refused is not None:
            self.eager_steps += 1
            return self.plan.run(self.ctx, inputs)
        baked = self._baked_values()
        if self.graph is not None and self._same(baked):
            self._copy_into_static(inputs)
            return self._launch()
        if self.eager_steps == 0:   # the warm-up step
            self.eager_steps += 1
            with self.capturer.allocation():
                return self.plan.run(self.ctx, inputs)
        if self.captures >= MAX_CAPTURES:
            self._give_up(f"captured {self.captures} times: the values it bakes in (the "
                          "learning rate, the variables' arrays) keep changing")
            return self.plan.run(self.ctx, inputs)
        return self._capture(inputs, baked)

    # -- what a graph bakes in ---------------------------------------------------------------
    def _baked_values(self):
        variables = self.ctx.session.variables
        arrays = tuple(variables[name].value for name in self._variables)
        rates = tuple(schedule.lr(int(variables[var].value)) for schedule, var in self._rates)
        return arrays, rates

    def _same(self, baked) -> bool:
        arrays, rates = baked
        old_arrays, old_rates = self._baked
        return rates == old_rates and all(a is b for a, b in zip(arrays, old_arrays))

    # -- capture and replay --------------------------------------------------------------------
    def _capture(self, inputs, baked) -> list:
        xp = self.ctx.xp
        with self.capturer.allocation():
            self._static_inputs = [xp.empty_like(a) for a in inputs]
        self._copy_into_static(inputs)
        plan, ctx, static, end = self.plan, self.ctx, self._static_inputs, self.tail_start

        def step():
            slots = [None] * plan.num_slots
            return plan.run(ctx, static, slots=slots, end=end), slots
        try:
            self.graph = self.capturer.capture(
                step, tuple(ins.op_name for ins in plan.instructions[:end]))
        except Exception as exc:  # noqa: BLE001 - any failure: run eagerly, say why once
            self.graph = None
            self._give_up(f"capturing failed: {type(exc).__name__}: {exc}")
            return self.plan.run(self.ctx, inputs)
        self._baked = baked   # the graph holds the arrays and rates of this moment
        self.captures += 1
        return self._launch()

    def _copy_into_static(self, inputs) -> None:
        xp = self.ctx.xp
        for buffer, value in zip(self._static_inputs, inputs):
            xp.copyto(buffer, value)

    def _launch(self) -> list:
        graph = self.graph
        self.capturer.launch(graph)
        self.replays += 1
        self.plan.run_tail(self.ctx, graph.slots, self.tail_start)
        xp = self.ctx.xp
        return [xp.array(out, copy=True) for out in graph.outputs]

    def _give_up(self, why: str) -> None:
        self.refused = why
        warnings.warn(f"job {self.job_name!r}: CUDA graphs off for this job, it runs "
                      f"eagerly: {why} (flow.config.enable_cuda_graphs(False) silences "
                      "this)", RuntimeWarning, stacklevel=2)


class RecordedGraph:
    """A captured step as the recording capturer keeps it: the step function and the op
    sequence it stands for; each launch runs the step (numpy has no graphs to replay)."""

    def __init__(self, step, ops: tuple):
        self.step = step
        self.ops = ops
        self.outputs: list = []
        self.slots: list = []
        self.launches = 0


class RecordingCapturer:
    """A capturer without a GPU (the simulated GPU's): capturing runs nothing, as stream
    capture runs nothing, and records the plan's op sequence; a launch runs the recorded
    step on the fixed input buffers."""

    def __init__(self):
        self.graphs: list[RecordedGraph] = []

    def allocation(self):
        return contextlib.nullcontext()

    def capture(self, step, ops: tuple) -> RecordedGraph:
        graph = RecordedGraph(step, ops)
        self.graphs.append(graph)
        return graph

    def launch(self, graph: RecordedGraph) -> None:
        graph.outputs, graph.slots = graph.step()
        graph.launches += 1
