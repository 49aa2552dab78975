"""Fault cases for the 2-rank tests: argv[1] names what rank 1 does at step 3 of a
small mirrored training loop: "raise", "kill", "hang", or "mismatch" (rank 1 declares
another layer size, so the job layouts differ at compile time)."""
import os
import signal
import sys
import time

import numpy as np

import aioflow as flow
import aioflow.typing as tp

case = sys.argv[1]
rank = flow.distributed.rank()
flow.config.collective_timeout(3)
units = 9 if (case == "mismatch" and rank == 1) else 8


@flow.global_function(type="train")
def train(x: tp.ListNumpy.Placeholder((4, 3), dtype=flow.float64)) -> tp.ListNumpy:
    loss = flow.math.square(flow.layers.dense(x, units, name="d"))
    flow.optimizer.SGD(0.01, momentum=0).minimize(loss)
    return loss


x = np.ones((4, 3))
try:
    for step in range(1, 6):
        if rank == 1 and step == 3:
            if case == "raise":
                raise ValueError("rank 1 fails on purpose at step 3")
            if case == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if case == "hang":
                time.sleep(60)
        train([x, x])
except ValueError as exc:
    if case == "mismatch":
        print(f"rank {rank} refused: {exc}", flush=True)
        sys.exit(3)
    raise
print(f"rank {rank} finished", flush=True)
