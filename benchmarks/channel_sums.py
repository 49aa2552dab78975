"""Batch norm's per-channel sums: numpy's reductions over axes (0, 2, 3) against
``aioflow.ops.channel_sums`` (einsums of the array seen as (N, C, rest)), on MobileNet-v2's
layer shapes, float32; median of interleaved rounds, milliseconds per call:

    python benchmarks/channel_sums.py [--rounds 7]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from aioflow.ops.channel_sums import channel_dot, channel_sum  # noqa: E402

SHAPES = [(8, 32, 112, 112), (8, 96, 112, 112), (8, 144, 56, 56), (8, 576, 14, 14),
          (8, 1280, 7, 7), (32, 96, 56, 56)]


def main(rounds: int) -> None:
    rng = np.random.default_rng(0)
    print(f"started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for shape in SHAPES:
        x = rng.standard_normal(shape, dtype=np.float32)
        calls = {
            "sum: numpy": lambda: x.sum(axis=(0, 2, 3), dtype=np.float32),
            "channel_sum": lambda: channel_sum(np, x, 1),
            "sum of products: numpy": lambda: (x * x).sum(axis=(0, 2, 3), dtype=np.float32),
            "channel_dot": lambda: channel_dot(np, x, x, 1),
        }
        times = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
        print(" x ".join(map(str, shape)), "  ".join(
            f"{name} {1e3 * sorted(t)[len(t) // 2]:.2f}" for name, t in times.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    main(parser.parse_args().rounds)
