"""Median step times of the seed MLP and LeNet, aioflow vs PyTorch eager, in one process.

    python benchmarks/train_step.py                       # the BLAS as configured here
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/train_step.py
                                                          # as on users' machines

Both frameworks use 2 threads, float32, batch 100, the same data; rounds are
interleaved so machine drift hits both alike. Prints ms per step (medians over rounds),
their ratio, and the median and range of the per-round ratios: on a host whose speed
drifts within seconds, each round's aioflow and PyTorch figures were taken moments apart,
so the per-round ratio is the steadier figure.

    python benchmarks/train_step.py --rounds 20 --lenet-steps 3   # finer interleaving

With ``--device cpu|gpu`` it measures instead one epoch through the data loader per case:
aioflow eager, fused and CUDA-graph steps beside PyTorch eager and ``torch.compile``
(``mode="reduce-overhead"``), batch 100 and 1000 (``benchmarks/step_variants.py``):

    python benchmarks/train_step.py --device gpu
    python benchmarks/train_step.py --device cpu --images 6000

Each round ends with a pause (``--pause``, 0.3 s) before the next case starts: a BLAS or
OpenMP pool keeps its threads spinning on the cores for a while after its last call, and
without the pause whichever framework ran just before slowed the next one down (the
PyTorch MLP train step measured 1.42 ms alone and 1.99 ms right after aioflow's rounds,
while aioflow's was 1.38 and 1.40 ms: the earlier, pause-less figures favoured aioflow).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import aioflow as flow
from models import BATCH, flow_jobs, torch_model, torch_train_step


def _blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    return ", ".join(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} "
                     f"threads={i.get('num_threads')}" for i in threadpool_info()
                     if i.get("user_api") == "blas")


def _torch_steps(model: str):
    import torch
    net = torch_model(model)
    train = torch_train_step(net, torch.optim.SGD(net.parameters(), lr=0.01))

    def predict(x):
        with torch.no_grad():
            return net(x).numpy()

    return train, predict


def _median_ms(fn, steps):
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return 1000 * (time.perf_counter() - start) / steps


def measure(model: str, rounds: int = 5, steps: int | None = None,
            pause: float = 0.3) -> dict[str, list]:
    """Per-round ms per step of each case: ``{"aioflow train": [...], ...}``."""
    import torch
    torch.set_num_threads(2)
    steps = steps or (200 if model == "mlp" else 10)
    rng = np.random.default_rng(0)
    x = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y).long()
    f_train, f_predict = flow_jobs(model)
    t_train, t_predict = _torch_steps(model)
    cases = {
        "aioflow train": lambda: f_train(x, y), "torch train": lambda: t_train(tx, ty),
        "aioflow predict": lambda: f_predict(x), "torch predict": lambda: t_predict(tx),
    }
    for fn in cases.values():
        fn()
        fn()
    samples = {k: [] for k in cases}
    for _ in range(rounds):
        for key, fn in cases.items():
            samples[key].append(_median_ms(fn, steps))
            time.sleep(pause)   # let the thread pools that just ran go idle
    flow.clear_default_session()
    return samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "gpu"), default=None,
                        help="one epoch per case through the loader (step_variants.py)")
    parser.add_argument("--images", type=int, default=60000, help="with --device")
    parser.add_argument("--batches", type=int, nargs="+", default=[100, 1000],
                        help="with --device")
    parser.add_argument("--models", nargs="+", choices=("mlp", "lenet"),
                        default=["mlp", "lenet"], help="with --device")
    parser.add_argument("--cases", nargs="+", default=None,
                        help="with --device: a subset of " + ", ".join(
                            f"'{c}'" for c in ("aioflow eager", "aioflow fused",
                                               "aioflow graph", "torch eager",
                                               "torch compile")))
    parser.add_argument("--threads", type=int, default=2, help="with --device cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mlp-steps", type=int, default=200, help="steps per round")
    parser.add_argument("--lenet-steps", type=int, default=10, help="steps per round")
    parser.add_argument("--pause", type=float, default=0.3,
                        help="seconds between rounds, for spinning thread pools to idle")
    args = parser.parse_args()
    if args.device is not None:
        import step_variants
        args.cases = args.cases or list(step_variants.CASES)
        step_variants.main(args)
        return
    print(f"BLAS: {_blas_info()}")
    print(f"{'model':6} {'step':8} {'aioflow ms':>11} {'torch ms':>9} {'ratio':>6}  "
          f"per-round ratio: median [min-max]")
    for model in ("mlp", "lenet"):
        steps = args.mlp_steps if model == "mlp" else args.lenet_steps
        samples = measure(model, args.rounds, steps, args.pause)
        for step in ("train", "predict"):
            ours, theirs = samples[f"aioflow {step}"], samples[f"torch {step}"]
            paired = [a / b for a, b in zip(ours, theirs)]
            ours_ms, theirs_ms = statistics.median(ours), statistics.median(theirs)
            print(f"{model:6} {step:8} {ours_ms:11.2f} {theirs_ms:9.2f} "
                  f"{ours_ms / theirs_ms:6.2f}  {statistics.median(paired):.2f} "
                  f"[{min(paired):.2f}-{max(paired):.2f}]")


if __name__ == "__main__":
    main()
