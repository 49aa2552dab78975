"""Median train-step times of the seed MLP and LeNet on a GPU: aioflow's CuPy backend
against PyTorch CUDA eager, in one process, batch 100 and 1000.

    python benchmarks/train_step_gpu.py                 # both models, both batch sizes
    python benchmarks/train_step_gpu.py --rounds 7 --steps 50

Each round times ``--steps`` steps of one case after the previous case finished (each
framework waits for its device before the clock stops), cases interleaved round by
round; prints the median ms per step, the range over rounds, and the host CPU time per
step (what the Python side spent: process CPU time over wall time of the same steps).
"""

import argparse
import statistics
import time

import numpy as np

import aioflow as flow
from aioflow import backends
from aioflow.engine.session import default_session
from models import flow_jobs, torch_model


def aioflow_step(model: str, batch: int):
    with backends.use("cupy"):
        train, _ = flow_jobs(model, batch=batch)
        train.compiled_for(default_session())   # compiled for the GPU inside the block
    return train


def torch_step(model: str):
    import torch
    net = torch_model(model).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(net(x), y, reduction="none")
        loss.mean().backward()
        opt.step()
        return loss.detach().cpu().numpy()   # the result on the host, as aioflow returns it

    return step


def _time(fn, steps):
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return 1000 * wall / steps, 1000 * cpu / steps


def main():
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    rng = np.random.default_rng(0)
    for batch in (100, 1000):
        x = rng.random((batch, 1, 28, 28), dtype=np.float32)
        y = rng.integers(0, 10, batch).astype(np.int32)
        tx, ty = torch.from_numpy(x).pin_memory(), torch.from_numpy(y).long().pin_memory()
        for model in ("mlp", "lenet"):
            ours, theirs = aioflow_step(model, batch), torch_step(model)
            cases = {"aioflow": lambda: ours(x, y), "torch": lambda: theirs(tx, ty)}
            for fn in cases.values():
                for _ in range(3):
                    fn()
            samples = {k: [] for k in cases}
            for _ in range(args.rounds):
                for key, fn in cases.items():
                    samples[key].append(_time(fn, args.steps))
            line = [f"{model:5} batch {batch:4}"]
            for key, rows in samples.items():
                wall = [w for w, _ in rows]
                cpu = statistics.median(c for _, c in rows)
                line.append(f"{key} {statistics.median(wall):7.3f} ms "
                            f"[{min(wall):.3f}-{max(wall):.3f}] host cpu {cpu:6.3f} ms")
            ratio = statistics.median(w for w, _ in samples["aioflow"]) / statistics.median(
                w for w, _ in samples["torch"])
            print("  ".join(line) + f"  ratio {ratio:.2f}", flush=True)
    flow.clear_default_session()


if __name__ == "__main__":
    main()
