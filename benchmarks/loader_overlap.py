"""A training loop fed by an I/O-bound loader whose wait equals one LeNet train step:
sync loop vs Callback loop vs ``async for`` + ``await`` (issue 11's case).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/loader_overlap.py

Each batch "loads" by sleeping as long as one measured LeNet step (``time.sleep``
releases the GIL, as file and socket reads do). Perfect overlap makes a loop take the
larger of the two per step, 0.50 of the sync loop's sum. Prints ms per step and each
loop's fraction of the sync loop's time, over interleaved rounds.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp
from models import BATCH, flow_jobs, lenet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    blocking, _ = flow_jobs("lenet")

    @flow.global_function(type="train")
    def callback_train(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
                       labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)
                       ) -> tp.Callback[tp.Numpy]:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, lenet(images))
        flow.optimizer.SGD(0.01, momentum=0).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    x = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    for _ in range(3):
        blocking(x, y)
    callback_train(x, y)(lambda _: None)
    flow.sync_default_session()
    start = time.perf_counter()
    for _ in range(5):
        blocking(x, y)
    load_s = (time.perf_counter() - start) / 5
    steps = args.steps

    def batches():
        for _ in range(steps):
            time.sleep(load_s)
            yield x, y

    def sync_loop():
        for images, labels in batches():
            blocking(images, labels)

    def callback_loop():
        for images, labels in batches():
            callback_train(images, labels)(lambda _: None)
        flow.sync_default_session()

    def await_loop():
        async def main_():
            async for images, labels in flow.data.Loader(batches(), prefetch=2):
                await blocking(images, labels)
        asyncio.run(main_())

    loops = {"sync": sync_loop, "Callback": callback_loop, "async for + await": await_loop}
    times = {name: [] for name in loops}
    for _ in range(args.rounds):
        for name, loop in loops.items():
            start = time.perf_counter()
            loop()
            times[name].append((time.perf_counter() - start) / steps)
            time.sleep(0.3)
    print(f"load per batch = one LeNet step = {1000 * load_s:.1f} ms")
    for name, values in times.items():
        fractions = [v / s for v, s in zip(values, times["sync"])]
        print(f"{name:18} {1000 * statistics.median(values):7.1f} ms/step  of sync: "
              f"{statistics.median(fractions):.2f} [{min(fractions):.2f}-{max(fractions):.2f}]")


if __name__ == "__main__":
    main()
