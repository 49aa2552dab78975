"""The event loop's worst gap while awaited calls of a tiny GPU-placed job, gathered at
once, run on a simulated GPU (issue 29):

    python benchmarks/loop_gap.py --rounds 7

A predict job (a 64x32 by 32x32 matmul, placed on "gpu") on
``aioflow.testing.simulated_gpu(copy_ms=2, compute_ms=5, fetch_ms=1)``; each round
gathers ``calls`` awaited calls at once (40 at pipeline depth 2, and 100 at depth 100:
all in flight), while a 1 ms heartbeat task on the same loop records its gaps. Prints,
per case, the worst gap of each round, and the idle loop's worst gap over 0.2 s just
before it (what this machine's scheduler alone does), and the loop's longest iteration in
CPU time of the loop's thread (``time.thread_time`` between two polls of its selector):
the loop's own work, which a loaded host's preemption and other threads' GIL turns do not
inflate; and the most CPU time the loop's thread ran between two beats (a quiet host's
worst gap is about that plus the 1 ms sleep). On a virtual machine, the hypervisor may run other guests while this one's CPUs
want to run (``steal`` in /proc/stat): a thread is then stopped for milliseconds whatever
it runs, so the script also counts the clock ticks stolen during each round and gives the
worst gap of the rounds without any. The garbage collector is held off while measuring, as in the tests: its full
collections are Python's pauses, not aioflow's.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp
from aioflow.engine.session import default_session
from aioflow.testing import simulated_gpu

X = np.ones((64, 32), np.float32)


def _job():
    with simulated_gpu(copy_ms=2, compute_ms=5, fetch_ms=1):
        @flow.global_function(type="predict")
        def predict(x: tp.Numpy.Placeholder((64, 32))) -> tp.Numpy:
            with flow.scope.placement("gpu", "0:0"):
                w = flow.get_variable("w", shape=(32, 32),
                                      initializer=flow.constant_initializer(0.5))
                return flow.matmul(x, w)
        predict.compiled_for(default_session())
    return predict


class _IterationCPU:
    """The loop thread's CPU time per iteration: the selector's poll is where an iteration
    ends, so the time between two polls is what the iteration ran."""

    def __init__(self, loop):
        self.longest = 0.0
        selector = loop._selector            # asyncio's selector loop (not uvloop)
        poll = selector.select
        last = [time.thread_time()]

        def select(timeout=None):
            self.longest = max(self.longest, time.thread_time() - last[0])
            try:
                return poll(timeout)
            finally:
                last[0] = time.thread_time()
        selector.select = select


def _stolen_ticks() -> int:
    """The time the hypervisor ran other guests while this VM's CPUs wanted to run, in
    clock ticks (10 ms), all CPUs together: the ``steal`` column of /proc/stat (0 where
    there is none: bare metal, or not Linux)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8])
    except (OSError, IndexError, ValueError):
        return 0


async def _heartbeat(stop: asyncio.Event, gaps: list, cpu: list) -> None:
    """heartbeat.heartbeat, also appending the loop thread's CPU time of each gap (s)."""
    last, last_cpu = time.perf_counter(), time.thread_time()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now, now_cpu = time.perf_counter(), time.thread_time()
        gaps.append(now - last)
        cpu.append(now_cpu - last_cpu)
        last, last_cpu = now, now_cpu


async def _round(predict, calls: int, iterations: _IterationCPU):
    """(worst gap with the calls running, worst gap of the idle loop just before, longest
    iteration's CPU time while the calls ran, the most CPU the loop ran between two beats,
    ms; clock ticks stolen while the calls ran)."""
    gaps, cpu, stop = [], [], asyncio.Event()
    beat = asyncio.create_task(_heartbeat(stop, gaps, cpu))
    await asyncio.sleep(0.2)
    idle = max(gaps)
    gaps.clear()
    cpu.clear()
    iterations.longest = 0.0
    stolen = _stolen_ticks()
    await asyncio.gather(*(predict(X) for _ in range(calls)))
    stolen = _stolen_ticks() - stolen
    longest = iterations.longest
    stop.set()
    await beat
    return 1e3 * max(gaps), 1e3 * idle, 1e3 * longest, 1e3 * max(cpu), stolen


def _spread(values) -> str:
    return f"{statistics.median(values):.1f} ms [{min(values):.1f}-{max(values):.1f}]"


async def main(args) -> None:
    for calls, depth in ((40, 2), (100, 100)):
        await flow.clear_default_session()
        flow.config.pipeline_depth(depth)
        predict = _job()
        await predict(X)                       # compile and warm up
        results = []
        cpu = _IterationCPU(asyncio.get_running_loop())
        gc.collect()
        gc.disable()
        try:
            for _ in range(args.rounds):
                results.append(await _round(predict, calls, cpu))
        finally:
            gc.enable()
        busy, idle, longest, between, stolen = zip(*results)
        print(f"{calls} calls at depth {depth}: worst gap {_spread(busy)}; idle loop "
              f"{_spread(idle)}; longest iteration (loop CPU) {_spread(longest)}; "
              f"most loop CPU between two beats {_spread(between)}")
        unstolen = [gap for gap, ticks in zip(busy, stolen) if ticks == 0]
        print(f"  clock ticks stolen by the hypervisor per round: {list(stolen)}; worst gap "
              f"of the {len(unstolen)} rounds with none: "
              f"{_spread(unstolen) if unstolen else '-'}")
    await flow.clear_default_session()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"started {started}")
    asyncio.run(main(parser.parse_args()))
