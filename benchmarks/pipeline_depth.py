"""Steps overlapped on a device: an epoch of awaited train steps at pipeline depth 1, 2, 3.

    python benchmarks/pipeline_depth.py --device simulated     # any machine
    python benchmarks/pipeline_depth.py --device gpu           # CuPy on a CUDA GPU

The seed MLP and LeNet (batch 100, SGD) train through ``flow.data.Loader`` with
``async for`` and ``await train(x, y)``, a task per batch so up to the depth are in
flight, at depth 1, 2 and 3 (interleaved rounds). Prints images/s per depth, the worst gap
of a 1 ms heartbeat task on the same loop, and:

* ``--device simulated``: ``aioflow.testing.simulated_gpu`` with ``--copy-ms``,
  ``--compute-ms``, ``--fetch-ms`` (defaults 2, 5, 1), and the ideal rate of each depth
  (depth 1: one step per copy + compute + fetch; deeper: one per slowest stage);
* ``--device gpu``: the fraction of wall time the GPU computed (CUDA events around each
  step's kernels), the host's wall time per step over the GPU's, and PyTorch CUDA
  eager's epoch through the same batches.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.engine.session import default_session
from aioflow.testing import simulated_gpu
from heartbeat import heartbeat
from models import BATCH, lenet, mlp, torch_model


def _batches(count: int):
    rng = np.random.default_rng(0)
    images = rng.random((count * BATCH, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, count * BATCH).astype(np.int32)
    return images, labels


def _device_block(device: str, args):
    if device == "simulated":
        return simulated_gpu(copy_ms=args.copy_ms, compute_ms=args.compute_ms,
                             fetch_ms=args.fetch_ms)
    return backends.use("cupy")


async def _epoch(model: str, depth: int, data, device: str, args):
    """(seconds, worst heartbeat gap, compute device) of one epoch at ``depth``."""
    await flow.clear_default_session()
    flow.config.pipeline_depth(depth)
    build = mlp if model == "mlp" else lenet
    with _device_block(device, args):
        @flow.global_function(type="train")
        def train(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, build(images))
            flow.optimizer.SGD(0.01, momentum=0).minimize(loss)
            return loss
        compiled = train.compiled_for(default_session())
    images, labels = data
    await train(images[:BATCH], labels[:BATCH])      # warm up: allocations, kernels
    gpu = compiled.backend.device
    if device == "gpu":
        gpu.timings = []
    gaps, stop = [], asyncio.Event()
    beat = asyncio.create_task(heartbeat(stop, gaps))
    loader = flow.data.Loader((images, labels), batch_size=BATCH, shuffle=False)
    start = time.perf_counter()
    pending = set()
    async for x, y in loader:
        pending.add(asyncio.ensure_future(train(x, y)))
        if len(pending) >= depth:     # keep up to the depth in flight, as a trainer would
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    await asyncio.gather(*pending)
    seconds = time.perf_counter() - start
    stop.set()
    await beat
    busy = None
    if device == "gpu":
        busy = sum(gpu.elapsed_ms(s, e) for s, e in gpu.timings) / 1000
        gpu.timings = None
    return seconds, max(gaps), busy


def _torch_epoch(model: str, data) -> float:
    import torch
    net = torch_model(model).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    images, labels = torch.from_numpy(data[0]), torch.from_numpy(data[1]).long()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(0, len(images), BATCH):
        x = images[i:i + BATCH].cuda(non_blocking=True)
        y = labels[i:i + BATCH].cuda(non_blocking=True)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["simulated", "gpu"], default="simulated")
    parser.add_argument("--models", default="mlp,lenet")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copy-ms", type=float, default=2.0)
    parser.add_argument("--compute-ms", type=float, default=5.0)
    parser.add_argument("--fetch-ms", type=float, default=1.0)
    args = parser.parse_args()
    data = _batches(args.batches)
    images = args.batches * BATCH
    for model in args.models.split(","):
        results = {depth: [] for depth in (1, 2, 3)}
        torch_times = []
        for _ in range(args.rounds):
            for depth in results:
                results[depth].append(asyncio.run(_epoch(model, depth, data, args.device,
                                                         args)))
                time.sleep(0.2)
            if args.device == "gpu":
                torch_times.append(_torch_epoch(model, data))
        for depth, runs in results.items():
            seconds = [r[0] for r in runs]
            line = (f"{model:5} depth {depth}: {images / statistics.median(seconds):8.0f} "
                    f"images/s [{images / max(seconds):.0f}-{images / min(seconds):.0f}]"
                    f"  worst loop gap {1000 * max(r[1] for r in runs):.1f} ms")
            if args.device == "simulated":
                stages = (args.copy_ms, args.compute_ms, args.fetch_ms)
                step_ms = sum(stages) if depth == 1 else max(stages)
                if step_ms > 0:   # the stream's numpy arithmetic comes on top
                    line += f"  (modelled stages alone: {1000 * BATCH / step_ms:.0f} images/s)"
            else:
                busy = statistics.median(r[2] / r[0] for r in runs)
                per_step = statistics.median(seconds) / args.batches
                gpu_step = statistics.median(r[2] for r in runs) / args.batches
                line += (f"  GPU busy {100 * busy:.0f}%  wall/step {1e3 * per_step:.3f} ms"
                         f" vs GPU/step {1e3 * gpu_step:.3f} ms")
            print(line, flush=True)
        if torch_times:
            print(f"{model:5} PyTorch CUDA eager: "
                  f"{images / statistics.median(torch_times):8.0f} images/s", flush=True)
    flow.config.pipeline_depth(2)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
