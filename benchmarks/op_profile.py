"""Where one eager train step's time goes, op by op (issue 27's per-kernel profile): the
seeds' LeNet at batch 1000 and the zoo's ResNet-50 at batch 32 on a GPU.

    python benchmarks/op_profile.py --device gpu                   # lenet:1000 resnet50:32
    python benchmarks/op_profile.py --device gpu --models bert_base:32 --top 15
    python benchmarks/op_profile.py --device strict --tiny --models lenet:20 resnet50:2

The job is compiled eagerly (no launch fusion, no CUDA graph), so a step runs its compiled
plan one op at a time. The profile wraps each op of the plan (the compiled plan's
``instructions``, each holding the op's kernel function: nothing in aioflow changes) for
two passes of ``--steps`` blocking steps each:

* host: the host clock around each op's call, nothing else added (on the GPU: the time to
  issue the op, its launch cost, plus any wait for the GPU where an op reads a device
  value on the host; on the CPU: the op itself);
* device (GPU only): a CUDA event on the compute stream before and after each op, with a
  one-thread kernel holding the GPU before the first op (``--hold``, by default 3x the
  unprofiled step plus 20 ms), so the host has queued the step before the GPU reaches it
  and the time between an op's events is its kernels' own, without the gaps where the GPU
  waited for the host. The script checks that the host started the last op within the
  hold, and says so where it did not (an op that waited for the GPU on the host).

Per model: the unprofiled step (median wall ms of ``--steps`` blocking steps, and its
device ms from CUDA events around the whole step, gaps included), then one markdown table
by op type (calls per step, host ms per step, device ms per step, share of the ops' device
time; on the CPU of their host time), sorted by that share, and the ``--top`` single ops
with their output shapes.
"""
from __future__ import annotations

import collections
import statistics
import time

from step_variants import compile_variant, device_timer, restore_defaults
from zoo_steps import base_parser, describe, flow_job, inputs_of

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
    """Wraps every instruction of ``plan`` while in use (``with``): sums per instruction the
    host seconds of its call or, with ``cupy``, the device ms between CUDA events around it
    (after a kernel holding the GPU ``hold_ms`` before the first op)."""

    def __init__(self, plan, cupy=None, hold_ms: float = 0.0):
        self.instructions = plan.instructions
        self.cupy = cupy
        count = len(self.instructions)
        self.host = [0.0] * count
        self.device = [0.0] * count
        self.shapes: list = [None] * count
        self.queued: list[float] = []   # host s from the first op to the last op's start
        self.steps = 0
        self.hold_ms = 0.0
        self.no_hold = "no hold asked for"
        self._hold = None
        if cupy is not None:
            self.starts = [cupy.cuda.Event() for _ in range(count)]
            self.ends = [cupy.cuda.Event() for _ in range(count)]
            if hold_ms > 0:
                try:
                    kernel = cupy.RawKernel(HOLD_KERNEL, "hold")
                    kernel((1,), (1,), (cupy.uint64(0),))    # compiled now, not in a step
                    cupy.cuda.Device().synchronize()
                except Exception as exc:  # noqa: BLE001 - profile without it, say why
                    self.no_hold = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                else:
                    ns = cupy.uint64(int(hold_ms * 1e6))
                    self._hold = lambda: kernel((1,), (1,), (ns,))
                    self.hold_ms = hold_ms
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
        events = self.cupy is not None

        def timed(ctx, *args, **kwargs):
            if index == 0:
                if self._hold is not None:
                    self._hold()
                self._first = time.perf_counter()
            if events:
                self.starts[index].record()
            start = time.perf_counter()
            if last:
                self.queued.append(start - self._first)
            out = kernel(ctx, *args, **kwargs)
            self.host[index] += time.perf_counter() - start
            if events:
                self.ends[index].record()
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            self.shapes[index] = getattr(first, "shape", None)
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


def _per_step(timer, values, scale=1.0):
    return [scale * v / timer.steps for v in values] if timer else [None] * len(values)


def report(name, batch, host: OpTimer, device: OpTimer | None, step_ms, device_ms,
           top: int) -> None:
    """Markdown: the step's totals, the ops by type, the costliest ops."""
    host_ms = _per_step(host, host.host, 1000)
    device_ms_op = _per_step(device, device.device if device else host.device)
    cost = device_ms_op if device else host_ms
    total = sum(cost)
    print(f"\n### {name} batch {batch}: eager step, {len(host.instructions)} ops")
    line = f"unprofiled step {step_ms:.2f} ms"
    if device_ms is not None:
        line += f" (device {device_ms:.2f} ms, gaps included)"
    line += f"; ops' host time {sum(host_ms):.2f} ms per step"
    if device:
        line += f", ops' device time {total:.2f} ms per step"
        if device.hold_ms:
            queued = 1000 * max(device.queued)
            held = "within" if queued < device.hold_ms else "NOT within (gaps included)"
            line += f"; the last op started {queued:.1f} ms into the step, {held} the " \
                    f"{device.hold_ms:.0f} ms hold"
        else:
            line += f" (no hold, {device.no_hold}: the device times include the host's gaps)"
    print(line)
    rows = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for ins, h, d, c in zip(host.instructions, host_ms, device_ms_op, cost):
        row = rows[ins.op_name or ins.name]
        row[0] += 1
        row[1] += h
        row[2] += d if device else 0.0
    print("\n| op type | calls | host ms | device ms | share |")
    print("|---|---|---|---|---|")
    for op, (calls, h, d) in sorted(rows.items(), key=lambda r: -r[1][2 if device else 1]):
        share = 100 * (d if device else h) / total if total else 0.0
        print(f"| {op} | {calls} | {h:.3f} | {f'{d:.3f}' if device else '-'} | "
              f"{share:.1f}% |")
    print("\n| top op | type | output shape | host ms | device ms |")
    print("|---|---|---|---|---|")
    for i in sorted(range(len(cost)), key=lambda i: -cost[i])[:top]:
        ins, shape = host.instructions[i], host.shapes[i]
        shape = "-" if shape is None else "x".join(map(str, shape)) or "scalar"
        d = f"{device_ms_op[i]:.3f}" if device else "-"
        print(f"| {ins.name} | {ins.op_name} | {shape} | {host_ms[i]:.3f} | {d} |",
              flush=True)


def _steps(job, inputs, count, timer=None) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        job(*inputs)
        times.append(time.perf_counter() - start)
        if timer is not None:
            timer.step_done()
    return times


def profile(name, batch, args) -> None:
    (job,), compiled = compile_variant(lambda: (flow_job(name, batch, args),), args.device,
                                       "eager")
    inputs = inputs_of(name, batch, args)
    step_device_ms = device_timer(compiled, skip=2)
    step_ms = 1000 * statistics.median(_steps(job, inputs, 2 + args.steps)[2:])   # 2 warm-up
    device_ms = None
    if step_device_ms is not None:
        device_ms = step_device_ms()
        compiled.backend.device.timings = None     # no more events around whole steps
    with OpTimer(compiled.plan) as host:
        _steps(job, inputs, args.steps, host)
    device = None
    if args.device == "gpu":
        import cupy
        hold = args.hold if args.hold is not None else 3 * step_ms + 20
        with OpTimer(compiled.plan, cupy, hold) as device:
            _steps(job, inputs, args.steps, device)
    report(name, batch, host, device, step_ms, device_ms, args.top)


def main(argv=None):
    parser = base_parser(__doc__, [("lenet", 1000), ("resnet50", 32)])
    parser.add_argument("--steps", type=int, default=3, help="profiled steps per model")
    parser.add_argument("--top", type=int, default=12, help="single ops listed")
    parser.add_argument("--hold", type=float, default=None,
                        help="ms the GPU is held before each profiled step")
    args = parser.parse_args(argv)
    print(f"device: {describe(args)}; {args.steps} profiled steps per model", flush=True)
    try:
        for name, batch in args.models:
            profile(name, batch, args)
    finally:
        restore_defaults()


if __name__ == "__main__":
    main()
