"""The mirrored-view example of OneFlow's "consistent and mirrored view" guide: two
devices, each computing on its half of the batch of 100.

    python examples/mirrored_mlp.py                            # 2 devices in one process
    python -m aioflow.launch -n 2 examples/mirrored_mlp.py     # 2 ranks of one device

As in OneFlow, ``flow.config.gpu_device_num(2)`` sets two devices per machine (run on the
CPU where no GPU is usable). Alone, the process runs both: the batch is cut in two
ListNumpy halves, device d computes on half d, the gradients are averaged and the
variables updated once (docs/distributed.md, "Several devices in one process"). Under the
launcher the ranks on the host share the machine's devices, one each, and the ListNumpy
loss comes back from both, so every rank prints the same. Both train alike.
"""
import argparse

import numpy as np

import aioflow as flow
import aioflow.typing as tp

BATCH_SIZE = 100
RANKS = flow.distributed.size()
DEVICES = max(2, RANKS)   # the world's devices: two in one process, or one per rank
BATCH_SIZE_PER_DEVICE = BATCH_SIZE // DEVICES


def get_train_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.default_logical_view(flow.scope.mirrored_view())
    return config


@flow.global_function(type="train", function_config=get_train_config())
def train_job(
    images: tp.ListNumpy.Placeholder((BATCH_SIZE_PER_DEVICE, 1, 28, 28), dtype=flow.float),
    labels: tp.ListNumpy.Placeholder((BATCH_SIZE_PER_DEVICE,), dtype=flow.int32),
) -> tp.ListNumpy:
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu,
                               kernel_initializer=initializer, name="hidden")
    logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="output")
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits,
                                                           name="softmax_loss")
    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


def main(steps: int) -> None:
    # devices per machine, shared by the ranks on it
    flow.config.gpu_device_num(DEVICES // RANKS * flow.distributed.world().local_size)
    flow.random.seed(0)
    check_point = flow.train.CheckPoint()
    check_point.init()
    (train_images, train_labels), _ = flow.data.load_mnist(BATCH_SIZE)
    for i, (images, labels) in enumerate(zip(train_images, train_labels)):
        if i == steps:
            break
        per = BATCH_SIZE_PER_DEVICE
        imgs_list = [images[d * per:(d + 1) * per] for d in range(DEVICES)]
        labels_list = [labels[d * per:(d + 1) * per] for d in range(DEVICES)]
        loss = train_job(imgs_list, labels_list)
        total_loss = np.array([*np.concatenate(loss)])
        if i % 10 == 0:
            print(f"rank {flow.distributed.rank()}: step {i} loss {total_loss.mean():.6f}",
                  flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=90)
    main(parser.parse_args().steps)
