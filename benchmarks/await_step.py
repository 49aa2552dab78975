"""The awaited train step against the blocking one, same job, on a GPU (issue 27's target:
``await job(x, y)`` within 5% of ``job(x, y)``).

    python benchmarks/await_step.py --device gpu              # MLP and LeNet, batch 100
    python benchmarks/await_step.py --device strict --models mlp:10 --rounds 2 --steps 3

One job per model, compiled as users get it (launch fusion, CUDA graphs on), timed in
interleaved rounds: ``--steps`` blocking calls in plain code (each returns the per-sample
losses on the host), then ``--steps`` awaited calls inside a running event loop (the clock
starts inside the loop, so starting the loop is not counted). Prints per model the median
ms per step of each form [range over rounds], the median [range] of the per-round ratio
awaited / blocking, the host CPU ms per step of each form (process CPU time, every
thread's, over the same steps) and how the job's steps ran (graph replays).
"""
from __future__ import annotations

import asyncio
import statistics
import time

from step_variants import compile_variant, graph_note, restore_defaults
from zoo_steps import base_parser, describe, flow_job, inputs_of


def _blocking(job, inputs, steps):
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        job(*inputs)
    return time.perf_counter() - wall, time.process_time() - cpu


async def _awaited(job, inputs, steps):
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        await job(*inputs)
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(name, batch, args):
    """Per-round ``(wall s, cpu s)`` of each form, and the compiled job."""
    (job,), compiled = compile_variant(lambda: (flow_job(name, batch, args),), args.device,
                                       "graph")
    inputs = inputs_of(name, batch, args)
    forms = {"blocking": lambda: _blocking(job, inputs, args.steps),
             "awaited": lambda: asyncio.run(_awaited(job, inputs, args.steps))}
    _blocking(job, inputs, args.warmup)     # compile, capture
    asyncio.run(_awaited(job, inputs, args.warmup))
    rounds = {form: [] for form in forms}
    for _ in range(args.rounds):
        for form, run in forms.items():
            rounds[form].append(run())
            time.sleep(args.pause)
    return rounds, compiled


def _ms(values, steps):
    return [1000 * v / steps for v in values]


def main(argv=None):
    parser = base_parser(__doc__, [("mlp", 100), ("lenet", 100)])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=50, help="steps per form per round")
    parser.add_argument("--warmup", type=int, default=3, help="steps of each form first")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds after each round")
    args = parser.parse_args(argv)
    print(f"device: {describe(args)}; {args.rounds} rounds of {args.steps} steps per form",
          flush=True)
    print("| model | batch | blocking ms | awaited ms | awaited / blocking | host ms "
          "blocking | host ms awaited | graph |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    try:
        for name, batch in args.models:
            rounds, compiled = measure(name, batch, args)
            walls = {form: _ms([w for w, _ in runs], args.steps) for form, runs in rounds.items()}
            cpus = {form: statistics.median(_ms([c for _, c in runs], args.steps))
                    for form, runs in rounds.items()}
            ratios = [a / b for a, b in zip(walls["awaited"], walls["blocking"])]
            cells = [f"{statistics.median(w):.3f} [{min(w):.3f}-{max(w):.3f}]"
                     for w in walls.values()]
            print(f"| {name} | {batch} | {cells[0]} | {cells[1]} | "
                  f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] | "
                  f"{cpus['blocking']:.3f} | {cpus['awaited']:.3f} | {graph_note(compiled)} |",
                  flush=True)
    finally:
        restore_defaults()


if __name__ == "__main__":
    main()
