"""Where one eager train step's time goes, op by op (issue 27's per-kernel profile): the
seeds' LeNet at batch 1000 and the zoo's ResNet-50 at batch 32 on a GPU.

    python benchmarks/op_profile.py --device gpu                   # lenet:1000 resnet50:32
    python benchmarks/op_profile.py --device gpu --models bert_base:32 --top 15
    python benchmarks/op_profile.py --device strict --tiny --models lenet:20 resnet50:2

The job is compiled eagerly (no launch fusion, no CUDA graph), so a step runs its compiled
plan one op at a time. The profile wraps each op of the plan (the compiled plan's
``instructions``, each holding the op's kernel function: nothing in aioflow changes) with
the host clock around the call and, on the GPU, a CUDA event on the compute stream before
and after it. Before the first op a one-thread kernel holds the GPU (``--hold``, by
default 3x the unprofiled step plus 20 ms), so the host has queued the whole step before
the GPU reaches it: the time between an op's events is then its kernels' own, without the
gaps where the GPU waited for the host (the script checks that the host finished queuing
within the hold, and says so where it did not: an op that waits for the GPU on the host).

Per model: the unprofiled step (median wall ms of ``--steps`` blocking steps, and its
device ms from CUDA events around the whole step, gaps included), then one markdown table
by op type (calls per step, host ms per step: on the GPU the time to issue the op, its
launch cost; device ms per step; share of the ops' device time), sorted by device time
(host time off the GPU), and the ``--top`` single ops with their output shapes.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import time

from step_variants import compile_variant, device_timer, restore_defaults
from zoo_steps import describe, flow_job, inputs_of, parse_model

HOLD_KERNEL = r"""
extern "C" __global__ void hold(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""


class OpTimer:
    """Wraps every instruction of ``plan`` while in use (``with``); sums per instruction the
    host seconds of its call and, with ``cupy``, the device ms between its events."""

    def __init__(self, plan, cupy=None, hold_ms: float = 0.0):
        self.instructions = plan.instructions
        self.cupy = cupy
        count = len(self.instructions)
        self.host = [0.0] * count
        self.device = [0.0] * count
        self.shapes: list = [None] * count
        self.queued: list[float] = []     # host seconds from the first op to the last
        self.steps = 0
        self._hold = None
        if cupy is not None:
            self.starts = [cupy.cuda.Event() for _ in range(count)]
            self.ends = [cupy.cuda.Event() for _ in range(count)]
            if hold_ms > 0:
                kernel = cupy.RawKernel(HOLD_KERNEL, "hold")
                ns = cupy.uint64(int(hold_ms * 1e6))
                self._hold = lambda: kernel((1,), (1,), (ns,))
        self.hold_ms = hold_ms if self._hold else 0.0
        self._originals = [ins.kernel for ins in self.instructions]
        self._first = 0.0

    def __enter__(self):
        for index, ins in enumerate(self.instructions):
            ins.kernel = self._timed(index, ins.kernel)
        return self

    def __exit__(self, *exc):
        for ins, kernel in zip(self.instructions, self._originals):
            ins.kernel = kernel

    def _timed(self, index, kernel):
        last = index == len(self.instructions) - 1

        def timed(ctx, *args, **kwargs):
            if index == 0:
                if self._hold is not None:
                    self._hold()
                self._first = time.perf_counter()
            if self.cupy is not None:
                self.starts[index].record()
            start = time.perf_counter()
            out = kernel(ctx, *args, **kwargs)
            end = time.perf_counter()
            if self.cupy is not None:
                self.ends[index].record()
            self.host[index] += end - start
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            self.shapes[index] = getattr(first, "shape", None)
            if last:
                self.queued.append(end - self._first)
            return out
        return timed

    def step_done(self) -> None:
        """After a step has completed: add its device times."""
        self.steps += 1
        if self.cupy is None:
            return
        self.ends[-1].synchronize()
        for index, (start, end) in enumerate(zip(self.starts, self.ends)):
            self.device[index] += self.cupy.cuda.get_elapsed_time(start, end)


def by_type(timer: OpTimer):
    """``{op type: [calls, host ms, device ms]}`` per step."""
    rows = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for ins, host, device in zip(timer.instructions, timer.host, timer.device):
        row = rows[ins.op_name or ins.name]
        row[0] += 1
        row[1] += 1000 * host / timer.steps
        row[2] += device / timer.steps
    return rows


def report(name, batch, timer: OpTimer, step_ms, device_ms, top: int) -> None:
    on_gpu = timer.cupy is not None
    rows = by_type(timer)
    device_total = sum(timer.device) / timer.steps
    host_total = 1000 * sum(timer.host) / timer.steps
    print(f"\n### {name} batch {batch}: eager step, {len(timer.instructions)} ops")
    line = f"unprofiled step {step_ms:.2f} ms"
    if device_ms is not None:
        line += f" (device {device_ms:.2f} ms, gaps included)"
    line += f"; ops' host time {host_total:.2f} ms per step"
    if on_gpu:
        queued = 1000 * max(timer.queued)
        line += f", ops' device time {device_total:.2f} ms per step"
        if timer.hold_ms:
            held = "within" if queued < timer.hold_ms else "NOT within (gaps included)"
            line += f"; the host queued a step in {queued:.1f} ms, {held} the " \
                    f"{timer.hold_ms:.0f} ms hold"
        else:
            line += " (no hold: the device times include the host's gaps)"
    print(line)
    key = 2 if on_gpu else 1
    total = device_total if on_gpu else host_total
    print("\n| op type | calls | host ms | device ms | share |")
    print("|---|---|---|---|---|")
    for op, (calls, host, device) in sorted(rows.items(), key=lambda r: -r[1][key]):
        share = 100 * (device if on_gpu else host) / total if total else 0.0
        print(f"| {op} | {calls} | {host:.3f} | "
              f"{f'{device:.3f}' if on_gpu else '-'} | {share:.1f}% |")
    print("\n| top op | type | output shape | host ms | device ms |")
    print("|---|---|---|---|---|")
    costs = timer.device if on_gpu else timer.host
    order = sorted(range(len(costs)), key=lambda i: -costs[i])[:top]
    for i in order:
        ins = timer.instructions[i]
        shape = timer.shapes[i]
        shape = "-" if shape is None else "x".join(map(str, shape)) or "scalar"
        device = f"{timer.device[i] / timer.steps:.3f}" if on_gpu else "-"
        print(f"| {ins.name} | {ins.op_name} | {shape} | "
              f"{1000 * timer.host[i] / timer.steps:.3f} | {device} |", flush=True)


def profile(name, batch, args) -> None:
    (job,), compiled = compile_variant(lambda: (flow_job(name, batch, args),), args.device,
                                       "eager")
    inputs = inputs_of(name, batch, args)
    device_ms = device_timer(compiled, skip=2)
    times = []
    for _ in range(2 + args.steps):     # 2 warm-up steps: kernels compiled, buffers bound
        start = time.perf_counter()
        job(*inputs)
        times.append(time.perf_counter() - start)
    step_ms = 1000 * statistics.median(times[2:])
    device_ms = device_ms() if device_ms else None
    cupy = None
    if args.device == "gpu":
        import cupy
    hold = args.hold if args.hold is not None else 3 * step_ms + 20
    with OpTimer(compiled.plan, cupy, hold if cupy is not None else 0.0) as timer:
        for _ in range(args.steps):
            job(*inputs)
            timer.step_done()
    report(name, batch, timer, step_ms, device_ms, args.top)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("gpu", "strict", "simulated", "cpu"),
                        default="gpu")
    parser.add_argument("--models", nargs="+", type=parse_model,
                        default=[("lenet", 1000), ("resnet50", 32)],
                        help="name:batch (lenet, mlp, resnet50, bert_base)")
    parser.add_argument("--steps", type=int, default=3, help="profiled steps per model")
    parser.add_argument("--top", type=int, default=12, help="single ops listed")
    parser.add_argument("--hold", type=float, default=None,
                        help="ms the GPU is held before each profiled step")
    parser.add_argument("--tiny", action="store_true", help="zoo models at dry-run sizes")
    args = parser.parse_args(argv)
    args.dropout = 0.0
    print(f"device: {describe(args)}; {args.steps} profiled steps per model", flush=True)
    try:
        for name, batch in args.models:
            profile(name, batch, args)
    finally:
        restore_defaults()


if __name__ == "__main__":
    main()
