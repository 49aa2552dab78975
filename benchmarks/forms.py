"""Train-step time of each result form side by side, with PyTorch, in one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/forms.py

The seed MLP and LeNet (batch 100, SGD), called as a user would: inline blocking
(``loss = train(x, y)`` in plain code), Callback (``train(x, y)(on_loss)``, then
``flow.sync_default_session()`` after the round) and ``await`` (``await train(x, y)``
inside a running event loop), and PyTorch 2 threads eager. Rounds interleave the four
cases, each followed by a pause so a spinning BLAS/OpenMP pool does not slow whoever
runs next. Prints ms per step (median and range over rounds) and each form's ratio to
the inline blocking form measured in the same rounds (median of per-round ratios), and
the worst gap of a 1 ms heartbeat task on the loop in a separate pass of awaited steps.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp
from heartbeat import heartbeat
from models import BATCH, flow_jobs, torch_model, torch_train_step


def _cases(model: str, steps: int):
    import torch
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    x = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    blocking, _ = flow_jobs(model)

    @flow.global_function(type="train")
    def callback_train(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
                       labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)
                       ) -> tp.Callback[tp.Numpy]:
        from models import lenet, mlp
        logits = (mlp if model == "mlp" else lenet)(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(0.01, momentum=0).minimize(loss)
        return loss

    net = torch_model(model)
    torch_step = torch_train_step(net, torch.optim.SGD(net.parameters(), lr=0.01))
    tx, ty = torch.from_numpy(x), torch.from_numpy(y).long()

    def run_blocking():
        for _ in range(steps):
            blocking(x, y)

    def run_callback():
        for _ in range(steps):
            callback_train(x, y)(lambda loss: None)
        flow.sync_default_session()

    def run_await():
        async def main():
            for _ in range(steps):
                await blocking(x, y)
        asyncio.run(main())

    def run_torch():
        for _ in range(steps):
            torch_step(tx, ty)

    return {"inline blocking": run_blocking, "Callback": run_callback,
            "await": run_await, "PyTorch": run_torch}, (blocking, x, y)


def worst_heartbeat_gap(job, x, y, steps: int) -> float:
    """Seconds: the longest a 1 ms heartbeat task waited while ``steps`` steps of ``job``
    were awaited on the same loop (a separate pass: the heartbeat costs the steps some
    time, so the form ratios above are measured without it)."""
    gaps = []

    async def main():
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(stop, gaps))
        for _ in range(steps):
            await job(x, y)
        stop.set()
        await beat
    asyncio.run(main())
    return max(gaps)


def measure(model: str, rounds: int, steps: int, pause: float):
    """Per-round ms per step of each case, and the worst heartbeat gap (s)."""
    cases, (job, x, y) = _cases(model, steps)
    for run in cases.values():   # compile, warm caches and allocator
        run()
    samples = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            samples[name].append(1000 * (time.perf_counter() - start) / steps)
            time.sleep(pause)
    gap = worst_heartbeat_gap(job, x, y, steps * 3)
    flow.clear_default_session()
    return samples, gap


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--mlp-steps", type=int, default=40)
    parser.add_argument("--lenet-steps", type=int, default=8)
    parser.add_argument("--pause", type=float, default=0.3)
    args = parser.parse_args()
    for model in ("mlp", "lenet"):
        steps = args.mlp_steps if model == "mlp" else args.lenet_steps
        samples, gap = measure(model, args.rounds, steps, args.pause)
        base = samples["inline blocking"]
        for name, values in samples.items():
            ratios = [v / b for v, b in zip(values, base)]
            print(f"{model:5} {name:16} {statistics.median(values):7.2f} ms "
                  f"[{min(values):.2f}-{max(values):.2f}]  vs inline: "
                  f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]",
                  flush=True)
        print(f"{model:5} event loop's worst heartbeat gap while awaiting: "
              f"{1000 * gap:.1f} ms (1 ms heartbeat)", flush=True)


if __name__ == "__main__":
    main()
