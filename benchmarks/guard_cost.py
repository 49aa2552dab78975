"""What the train step's non-finite guard costs: the seed MLP's train step with the guard
on and off, for SGD, momentum and Adam (numpy backend, batch 100, 2 BLAS threads).

    python benchmarks/guard_cost.py [--steps 300] [--rounds 7]
    python benchmarks/guard_cost.py --check-only

Prints the median ms per step of each case and the guard's share. Rounds alternate guard
on and off, so drift of the machine hits both alike. ``--check-only`` times the guard's
check alone on the MLP's loss and gradient shapes (the best of 7 runs of 300, so a busy
machine distorts it less): the squares check of issue 28 (one BLAS dot per array) beside
the isfinite pass it replaced.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import aioflow as flow  # noqa: E402
from models import flow_jobs  # noqa: E402

OPTIMIZERS = {
    "sgd": lambda: flow.optimizer.SGD(0.01, momentum=0),
    "momentum": lambda: flow.optimizer.SGD(0.01, momentum=0.9),
    "adam": lambda: flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [1e-3])),
}


def _ms_per_step(name: str, guard: bool, steps: int, x, y) -> float:
    flow.config.skip_nonfinite_steps(guard)
    train, _ = flow_jobs("mlp", OPTIMIZERS[name])
    flow.train.CheckPoint().init()
    for _ in range(10):
        train(x, y)
    start = time.perf_counter()
    for _ in range(steps):
        train(x, y)
    return 1000 * (time.perf_counter() - start) / steps


MLP_GRADIENTS = [(100,), (784, 512), (512,), (512, 10), (10,)]   # the loss, then gradients


def check_only(repeat: int = 7, number: int = 300) -> None:
    from aioflow.ops.state import _squares_finite
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in MLP_GRADIENTS]
    cases = {"isfinite (before)": lambda: all(np.isfinite(a).all() for a in arrays),
             "squares (after)": lambda: all(_squares_finite(np, a) for a in arrays)}
    for name, check in cases.items():
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                check()
            best = min(best, (time.perf_counter() - start) / number)
        print(f"{name:18s} {best * 1e6:6.1f} us per step", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--check-only", action="store_true")
    args = parser.parse_args()
    if args.check_only:
        check_only()
        return
    rng = np.random.default_rng(0)
    x = rng.random((100, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 100).astype(np.int32)
    for name in OPTIMIZERS:
        times = {True: [], False: []}
        for _ in range(args.rounds):
            for guard in (True, False):
                times[guard].append(_ms_per_step(name, guard, args.steps, x, y))
        on, off = statistics.median(times[True]), statistics.median(times[False])
        print(f"{name:9s} guard on {on:.3f} ms  off {off:.3f} ms  guard {1000 * (on - off):+.0f} us "
              f"({100 * (on - off) / off:+.1f}%)", flush=True)
    flow.config.skip_nonfinite_steps(True)


if __name__ == "__main__":
    main()
