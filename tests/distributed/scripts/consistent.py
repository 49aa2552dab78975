"""The consistent view: tp.Numpy placeholders hold the whole batch, split over the
devices: the ranks, times argv[2] devices per rank (default 1, on the CPU). Rank 0 writes
each step's results and variables to argv[1] (.npz); then each rank reports how two jobs
that cannot be split exactly are refused."""
import sys
from typing import Tuple

import numpy as np

import aioflow as flow
import aioflow.typing as tp

BATCH = 8
flow.random.seed(0)
DEVICES = int(sys.argv[2]) if len(sys.argv) > 2 else 1
if DEVICES > 1:   # devices per machine: the ranks on this host share them
    flow.config.gpu_device_num(0)
    flow.config.cpu_device_num(DEVICES * flow.distributed.world().local_size)


@flow.global_function(type="train")
def train(x: tp.Numpy.Placeholder((BATCH, 1, 28, 28), dtype=flow.float64),
          y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
          scale: tp.Numpy.Placeholder((1,), dtype=flow.float64, batch_axis=None),
          ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
    flat = flow.reshape(x, [x.shape[0], -1]) * scale
    hidden = flow.layers.dense(flat, 64, activation=flow.nn.relu, name="hidden")
    logits = flow.layers.dense(hidden, 10, name="output")
    per_sample = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
    loss = flow.math.reduce_mean(per_sample)
    flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [1e-3])).minimize(loss)
    return per_sample, loss, logits, flow.math.reduce_sum(per_sample)


rng = np.random.default_rng(1)
images = rng.random((BATCH, 1, 28, 28))
labels = rng.integers(0, 10, BATCH).astype(np.int32)
record = {}
for step in range(4):
    for name, value in zip(("per_sample", "mean", "logits", "sum"),
                           train(images, labels, np.array([0.5]))):
        record[f"{name}/{step}"] = value
    for name, value in flow.get_all_variables().items():
        record[f"var/{step}/{name}"] = value
if flow.distributed.rank() == 0:
    np.savez(sys.argv[1], **record)

rank = flow.distributed.rank()


@flow.global_function(type="predict")
def batch_max(x: tp.Numpy.Placeholder((BATCH, 3))) -> tp.Numpy:
    return flow.math.reduce_max(x, axis=0)


@flow.global_function(type="predict")
def odd_batch(x: tp.Numpy.Placeholder((BATCH + 1, 3))) -> tp.Numpy:
    return x * 2


for job in (batch_max, odd_batch):
    try:
        job(np.ones(job.parameters[0].spec.shape, np.float32))
    except (NotImplementedError, ValueError) as exc:
        print(f"rank {rank} {job.__name__} refused: {type(exc).__name__}: {exc}", flush=True)
    else:
        print(f"rank {rank} {job.__name__} accepted", flush=True)
