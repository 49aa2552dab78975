"""A finer A/B of the MLP train step: inline blocking vs Callback vs await, in one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/forms_ab.py \\
        [--rounds 30] [--steps 40] [--await-on-loop-ms MS] [--inline-callback-ms MS]

Rounds interleave the forms (each awaited round in its own ``asyncio.run``), with a short
pause after each; prints ms per step and the median and quartiles of the per-round ratio
to the inline form. The forms run as configured (``--await-on-loop-ms`` and
``--inline-callback-ms`` set ``flow.config``'s knobs; default: their defaults), and once
more with both knobs at 0, every step through the compute thread ("queued"): the A/B of
running short steps in the caller.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp
from models import BATCH, flow_jobs, mlp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--await-on-loop-ms", type=float, default=None)
    parser.add_argument("--inline-callback-ms", type=float, default=None)
    args = parser.parse_args()
    if args.await_on_loop_ms is not None:
        flow.config.await_on_loop_ms(args.await_on_loop_ms)
    if args.inline_callback_ms is not None:
        flow.config.inline_callback_ms(args.inline_callback_ms)
    configured = (flow.config.get("await_on_loop_ms"), flow.config.get("inline_callback_ms"))
    rng = np.random.default_rng(0)
    x = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    blocking, _ = flow_jobs("mlp")

    @flow.global_function(type="train")
    def callback_train(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
                       labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)
                       ) -> tp.Callback[tp.Numpy]:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
        flow.optimizer.SGD(0.01, momentum=0).minimize(loss)
        return loss

    steps = args.steps

    def inline():
        for _ in range(steps):
            blocking(x, y)

    def callback():
        for _ in range(steps):
            callback_train(x, y)(lambda loss: None)
        flow.sync_default_session()

    def awaited():
        async def run():
            for _ in range(steps):
                await blocking(x, y)
        asyncio.run(run())

    def queued(run):
        def with_knobs_at_zero():
            flow.config.await_on_loop_ms(0)
            flow.config.inline_callback_ms(0)
            try:
                run()
            finally:
                flow.config.await_on_loop_ms(configured[0])
                flow.config.inline_callback_ms(configured[1])
        return with_knobs_at_zero

    cases = {"inline": inline, "Callback": callback, "await": awaited,
             "Callback queued": queued(callback), "await queued": queued(awaited)}
    for run in cases.values():   # compile, warm up, measure the awaited step's time
        run()
        run()
    samples = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            samples[name].append(1000 * (time.perf_counter() - start) / steps)
            time.sleep(0.1)
    for name, values in samples.items():
        ratios = [v / b for v, b in zip(values, samples["inline"])]
        low, _, high = statistics.quantiles(ratios)
        print(f"mlp {name:15} {statistics.median(values):6.3f} ms  vs inline "
              f"{statistics.median(ratios):.3f} [quartiles {low:.2f}-{high:.2f}]", flush=True)


if __name__ == "__main__":
    main()
