"""Awaited job calls under trio against asyncio, and a LeNet step awaited under trio
against blocking (issue 29):

    python benchmarks/trio_calls.py --rounds 5

* a trivial job's awaited round trip (``await job(x)`` of ``x + 1`` on 4 floats, called
  back to back), under ``asyncio.run`` and under ``trio.run``; microseconds per call,
  median of ``--rounds`` interleaved rounds of ``--calls`` calls;
* the seed LeNet's train step (batch 100, SGD) called back to back: blocking, in plain
  code, against awaited in a trio task; milliseconds per step, median of interleaved
  rounds of ``--steps`` steps.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
import trio

import aioflow as flow
import aioflow.typing as tp
from models import BATCH, flow_jobs


def _trivial():
    @flow.global_function(type="predict")
    def add_one(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return x + 1.0
    return add_one


async def _calls(job, x, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await job(x)
    return (time.perf_counter() - start) / n


def round_trips(calls: int, rounds: int) -> dict[str, list[float]]:
    flow.clear_default_session()
    job = _trivial()
    x = np.zeros(4, np.float32)
    job(x)
    out = {"asyncio": [], "trio": []}
    for _ in range(rounds):
        out["asyncio"].append(asyncio.run(_calls(job, x, calls)))
        out["trio"].append(trio.run(_calls, job, x, calls))
    return out


def lenet_steps(steps: int, rounds: int) -> dict[str, list[float]]:
    flow.clear_default_session()
    train, _ = flow_jobs("lenet")
    rng = np.random.default_rng(0)
    images = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    flow.train.CheckPoint().init()
    for _ in range(3):
        train(images, labels)     # compile and warm up

    def blocking() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            train(images, labels)
        return (time.perf_counter() - start) / steps

    out = {"blocking": [], "trio await": []}
    for _ in range(rounds):
        out["blocking"].append(blocking())
        out["trio await"].append(trio.run(_steps, train, images, labels, steps))
    return out


async def _steps(train, images, labels, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await train(images, labels)
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print(f"started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    _report("trivial job, awaited", round_trips(args.calls, args.rounds), 1e6, "us")
    _report("LeNet step", lenet_steps(args.steps, args.rounds), 1e3, "ms")


def _report(what: str, rounds: dict[str, list[float]], scale: float, unit: str) -> None:
    """One line: each way's median, the second way over the first, and every round."""
    (first, a), (second, b) = rounds.items()
    medians = [statistics.median(a), statistics.median(b)]
    print(f"{what}: {first} {scale * medians[0]:.1f} {unit}, {second} "
          f"{scale * medians[1]:.1f} {unit} ({second} / {first} {medians[1] / medians[0]:.3f});"
          f" rounds {first} {[round(scale * v, 1) for v in a]}, {second} "
          f"{[round(scale * v, 1) for v in b]}")

if __name__ == "__main__":
    main()
