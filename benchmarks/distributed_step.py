"""Train-step time of the seed MLP and LeNet (batch 100, float32, SGD) on one rank and
split over the ranks that run this script (mirrored view, gradients all-reduced):

    python benchmarks/distributed_step.py                      # 1 rank
    python -m aioflow.launch -n 2 benchmarks/distributed_step.py   # 2 ranks

Rank 0 prints the median and the spread of the step times after a warm-up.
"""
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 2)[0])
import aioflow as flow  # noqa: E402
import aioflow.typing as tp  # noqa: E402

BATCH, WARMUP, STEPS = 100, 5, 40


def model(name, x):
    if name == "lenet":
        x = flow.layers.conv2d(x, 32, 5, padding="SAME", activation=flow.nn.relu, name="c1")
        x = flow.nn.max_pool2d(x, 2, 2, "SAME")
        x = flow.layers.conv2d(x, 64, 5, padding="SAME", activation=flow.nn.relu, name="c2")
        x = flow.nn.max_pool2d(x, 2, 2, "SAME")
    x = flow.reshape(x, [x.shape[0], -1])
    x = flow.layers.dense(x, 512, activation=flow.nn.relu, name="h")
    return flow.layers.dense(x, 10, name="o")


def measure(name):
    flow.clear_default_session()
    ranks = flow.distributed.size()
    per = BATCH // ranks

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((per, 1, 28, 28)),
              y: tp.ListNumpy.Placeholder((per,), dtype=flow.int32)) -> tp.ListNumpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, model(name, x))
        flow.optimizer.SGD(0.01, momentum=0).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    xs = [rng.random((per, 1, 28, 28), np.float32) for _ in range(ranks)]
    ys = [rng.integers(0, 10, per).astype(np.int32) for _ in range(ranks)]
    times = []
    for step in range(WARMUP + STEPS):
        start = time.perf_counter()
        train(xs, ys)
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    if flow.distributed.rank() == 0:
        q = statistics.quantiles(times, n=4)
        print(f"{name}: {ranks} rank(s), batch {BATCH} ({per} per rank): median "
              f"{statistics.median(times) * 1e3:.1f} ms/step (quartiles "
              f"{q[0] * 1e3:.1f}-{q[2] * 1e3:.1f})", flush=True)


def allreduce_alone():
    """The seed MLP's gradients (1.6 MB of float32) averaged through aioflow's
    communication thread, nothing else running."""
    from aioflow.distributed import collectives, communicator
    grads = np.ones(784 * 512 + 512 + 5120 + 10, np.float32)
    times = []
    for step in range(WARMUP + STEPS):
        start = time.perf_counter()
        communicator().wait(collectives.allreduce_mean_start([grads], "benchmark"))
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    if flow.distributed.rank() == 0:
        print(f"all-reduce of {grads.nbytes / 1e6:.1f} MB alone: median "
              f"{statistics.median(times) * 1e3:.2f} ms", flush=True)


if __name__ == "__main__":
    for name in ("mlp", "lenet"):
        measure(name)
    if flow.distributed.size() > 1:
        allreduce_alone()
