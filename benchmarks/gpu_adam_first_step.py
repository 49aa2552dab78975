"""Where numpy and CuPy part after one Adam step of the seed LeNet (issue 26's parity).

Adam's first update is about ``lr * sign(g)`` for every weight whose gradient is well above
its epsilon, whatever the gradient's size: a weight whose gradient is rounding noise on one
backend can move the other way on the other. This prints, for the first step from the same
variables and batch: how many weights moved differently (by more than lr / 2), and the size
of their gradient (from one SGD step with rate 1 on the CPU) next to the typical one.

    python benchmarks/gpu_adam_first_step.py --device cupy   # strict: the CPU's own check
"""
from __future__ import annotations

import argparse

import numpy as np

import aioflow as flow
from aioflow import backends
from models import flow_jobs


def _one_step(backend: str, optimizer, initial, x, y):
    with backends.use(backend):
        train, _ = flow_jobs("lenet", optimizer, batch=len(y))
        if initial is not None:
            flow.load_variables(initial)
        start = flow.get_all_variables()
        train(x, y)
        after = flow.get_all_variables()
    flow.clear_default_session()
    return start, after


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cupy", "strict"], default="cupy")
    args = parser.parse_args()
    flow.config.conv_algorithm("gemm")
    flow.random.seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((100, 1, 28, 28), dtype=np.float32) * 0.5
    y = rng.integers(0, 10, 100).astype(np.int32)
    lr = 1e-3
    start, cpu = _one_step("numpy", lambda: flow.optimizer.Adam(lr), None, x, y)
    _, device = _one_step(args.device, lambda: flow.optimizer.Adam(lr), start, x, y)
    _, sgd = _one_step("numpy", lambda: flow.optimizer.SGD(1.0, momentum=0), start, x, y)
    print(f"| variable | weights | moved differently (> lr/2) | their median abs gradient "
          f"| median abs gradient of all |")
    print("|---|---|---|---|---|")
    for name in sorted(start):
        if name not in sgd or start[name].dtype.kind != "f" or start[name].ndim == 0:
            continue
        grad = np.abs(start[name] - sgd[name]).ravel()
        apart = np.abs((cpu[name] - start[name]) - (device[name] - start[name])).ravel() > lr / 2
        their = f"{np.median(grad[apart]):.1e}" if apart.any() else "-"
        print(f"| {name} | {grad.size} | {int(apart.sum())} | {their} | {np.median(grad):.1e} |")


if __name__ == "__main__":
    main()
