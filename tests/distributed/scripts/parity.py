"""Trains the seed MLP and LeNet with SGD, momentum and Adam on one fixed batch, split
over however many devices run it (mirrored view): the ranks, times argv[3] devices per
rank (default 1, on the CPU); rank 0 writes every step's losses and variables to the .npz
named by argv[1]; every rank writes its final variables to argv[1] + ".rank<r>.npz" (the
test checks the ranks agree). argv[2]: the models (default mlp,lenet); argv[4]: the
optimizers (default all)."""
import sys

import numpy as np

import aioflow as flow
import aioflow.typing as tp

BATCH = 8
STEPS = {"float64": 4, "float32": 20}
DEVICES = int(sys.argv[3]) if len(sys.argv) > 3 else 1


def lenet(images, dtype):
    conv1 = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv1")
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv2")
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    flat = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(flat, 512, activation=flow.nn.relu, name="dense1")
    return flow.layers.dense(hidden, 10, name="dense2")


def mlp(images, dtype):
    flat = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(flat, 512, activation=flow.nn.relu, name="hidden")
    return flow.layers.dense(hidden, 10, name="output")


# Learning rates small enough that 20 float32 steps stay well conditioned: with larger
# ones the last bits of float32 rounding (which differ between a batch of 8 and two of 4)
# are amplified step after step, in one process as much as in two.
OPTIMIZERS = {
    "sgd": lambda scale: flow.optimizer.SGD(
        flow.optimizer.PiecewiseConstantScheduler([], [0.1 * scale]), momentum=0),
    "momentum": lambda scale: flow.optimizer.SGD(
        flow.optimizer.PiecewiseConstantScheduler([], [0.05 * scale]), momentum=0.9),
    "adam": lambda scale: flow.optimizer.Adam(
        flow.optimizer.PiecewiseConstantScheduler([], [1e-3 * scale])),
}
LR_SCALE = {"mlp": 1.0, "lenet": 0.1}


def run(model, optimizer, dtype, images, labels, record):
    flow.clear_default_session()
    flow.random.seed(0)
    parts = flow.distributed.size() * DEVICES   # the world's devices
    per = BATCH // parts
    fdtype = flow.float64 if dtype == "float64" else flow.float32

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((per, 1, 28, 28), dtype=fdtype),
              y: tp.ListNumpy.Placeholder((per,), dtype=flow.int32)) -> tp.ListNumpy:
        logits = {"mlp": mlp, "lenet": lenet}[model](x, fdtype)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        OPTIMIZERS[optimizer](LR_SCALE[model]).minimize(loss)
        return loss

    x = images.astype(dtype)
    key = f"{model}-{optimizer}-{dtype}"
    for step in range(STEPS[dtype]):
        losses = train([x[r * per:(r + 1) * per] for r in range(parts)],
                       [labels[r * per:(r + 1) * per] for r in range(parts)])
        assert len(losses) == parts
        record[f"{key}/loss/{step}"] = np.concatenate(losses)
        for name, value in flow.get_all_variables().items():
            if step in (0, STEPS[dtype] - 1) or dtype == "float64":
                record[f"{key}/var/{step}/{name}"] = value


def main(out):
    flow.config.conv_algorithm("gemm")   # the closest to exact: float32 parity over 20 steps
    if DEVICES > 1:   # devices per machine: the ranks on this host share them
        flow.config.gpu_device_num(0)
        flow.config.cpu_device_num(DEVICES * flow.distributed.world().local_size)
    rng = np.random.default_rng(1)
    images = rng.random((BATCH, 1, 28, 28))
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    record = {}
    models = sys.argv[2].split(",") if len(sys.argv) > 2 else ["mlp", "lenet"]
    optimizers = sys.argv[4].split(",") if len(sys.argv) > 4 else list(OPTIMIZERS)
    for model in models:
        for optimizer in optimizers:
            for dtype in STEPS:
                run(model, optimizer, dtype, images, labels, record)
    rank = flow.distributed.rank()
    if rank == 0:
        np.savez(out, **record)
    np.savez(f"{out}.rank{rank}.npz", **{k: v for k, v in record.items() if "/var/" in k})


if __name__ == "__main__":
    main(sys.argv[1])
