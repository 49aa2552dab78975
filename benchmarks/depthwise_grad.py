"""The input gradient of MobileNet-v2's four stride-2 depthwise 3x3 convolutions (batch 8,
float32): the scatter lowering against the per-phase one (``aioflow/kernels/conv.py``),
interleaved rounds, CPU time of the calling thread for the four layers together:

    python benchmarks/depthwise_grad.py [--rounds 7]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from aioflow.kernels import conv  # noqa: E402

# the inputs of MobileNet-v2's stride-2 depthwise layers at 224x224
SHAPES = [(8, 96, 112, 112), (8, 144, 56, 56), (8, 192, 28, 28), (8, 576, 14, 14)]


def _layers(rng):
    layers = []
    for n, c, h, w in SHAPES:
        pads = (conv.same_padding(h, 3, 2), conv.same_padding(w, 3, 2))
        g = conv._Geom((n, c, h, w), (c, 1, 3, 3), (2, 2), pads, (1, 1), c)
        layers.append((rng.standard_normal((n, c, g.OH, g.OW), dtype=np.float32),
                       rng.standard_normal((c, 1, 3, 3), dtype=np.float32), g))
    return layers


def _seconds(lowering, layers) -> float:
    start = time.thread_time()
    for dy, w, g in layers:
        lowering(dy, w, g)
    return time.thread_time() - start


def main(rounds: int) -> None:
    layers = _layers(np.random.default_rng(0))
    lowerings = {
        "scatter": lambda dy, w, g: conv._backward_data_scatter(np, dy, w, g, np.float32),
        "phases": lambda dy, w, g: conv._backward_data_depthwise_phases(dy, w, g,
                                                                        np.float32),
    }
    times = {name: [] for name in lowerings}
    for lowering in lowerings.values():
        _seconds(lowering, layers)                  # warm-up
    for _ in range(rounds):
        for name, lowering in lowerings.items():
            times[name].append(_seconds(lowering, layers))
    print(f"started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name, t in times.items():
        t = sorted(t)
        print(f"{name}: {1e3 * t[len(t) // 2]:.1f} ms [{1e3 * t[0]:.1f}-{1e3 * t[-1]:.1f}]")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    main(parser.parse_args().rounds)
