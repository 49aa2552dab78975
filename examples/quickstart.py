"""aioflow quickstart: train the seed documents' LeNet on real handwritten digits.

Uses MNIST when ``mnist.npz`` is cached or downloadable, otherwise the 10,000 MNIST
digits bundled with aioflow (no download needed). Seeded (``--seed``, default 0), so two
runs print the same figures. One progress display with one numbering (``epoch 1/2``):
a bar with rate and ETA on a terminal (with tqdm), plain progress lines on stderr where
none is attached; each epoch's mean loss and test accuracy on stdout, then where the
checkpoint was saved; per-step loss and per-epoch accuracy in ``--log-dir`` as CSV.

    python examples/quickstart.py                 # LeNet, a few epochs
    python examples/quickstart.py --model mlp     # the seeds' MLP
    python examples/quickstart.py --summary       # the model's ops, FLOPs and memory first
    python examples/quickstart.py --plot          # curves.png in the log folder (matplotlib)
    python examples/quickstart.py --epochs 1 --checkpoint /tmp/my_model
"""
import argparse
import os
import shutil
from typing import Tuple

import numpy as np

import aioflow as flow
import aioflow.typing as tp

BATCH_SIZE = 100


def lenet(data, train=False):
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(data, 32, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv1", kernel_initializer=initializer)
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv2", kernel_initializer=initializer)
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu,
                               kernel_initializer=initializer, name="dense1")
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5, name="dropout")
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")


def mlp(data, train=False):
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(data, [data.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu,
                               kernel_initializer=initializer, name="hidden")
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="output")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("lenet", "mlp"), default="lenet")
    parser.add_argument("--epochs", type=int, default=None,
                        help="default: 1 on MNIST, 2 on the 9,000 bundled training digits")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--checkpoint", default="./quickstart_model",
                        help="directory to save the trained variables to (replaced)")
    parser.add_argument("--seed", type=int, default=0, help="flow.random.seed (default 0)")
    parser.add_argument("--log-dir", default="./quickstart_log",
                        help="where steps.csv and epochs.csv go")
    parser.add_argument("--plot", action="store_true",
                        help="save the curves as <log-dir>/curves.png (needs matplotlib)")
    parser.add_argument("--summary", action="store_true", help="print the model summary")
    args = parser.parse_args(argv)
    # imported here: examples/serve_mnist.py imports this module for its models only
    from aioflow.progress import TrainingLog, plot
    flow.random.seed(args.seed)
    model = lenet if args.model == "lenet" else mlp

    @flow.global_function(type="train")
    def train_job(
        images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
        labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
    ) -> tp.Numpy:
        logits = model(images, train=True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits,
                                                                name="softmax_loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [args.lr]),
                           momentum=0).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def eval_job(
        images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
        labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
    ) -> Tuple[tp.Numpy, tp.Numpy]:
        return labels, model(images, train=False)

    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(
        BATCH_SIZE, BATCH_SIZE)
    full = len(train_images) * BATCH_SIZE >= 60000
    epochs = args.epochs or (1 if full else 2)
    print(f"data: {'MNIST' if full else 'bundled MNIST subset'}, "
          f"{train_images.shape[0] * BATCH_SIZE} training images; "
          f"model: {args.model}; {epochs} epoch(s)")
    if args.summary:
        flow.summary(train_job)
    flow.train.CheckPoint().init()

    def evaluate():
        correct = total = 0
        for images, labels in zip(test_images, test_labels):
            labels, logits = eval_job(images, labels)
            correct += int(np.sum(np.argmax(logits, 1) == labels))
            total += labels.shape[0]
        return correct, total

    # The progress display (TrainingLog) is the only per-step output; the epoch lines go
    # through log.write so they print above a bar instead of tearing it.
    with TrainingLog(len(train_images), epochs, log_dir=args.log_dir) as log:
        for epoch in range(epochs):
            losses = []
            for images, labels in zip(train_images, train_labels):
                loss = train_job(images, labels)
                log.step(loss)
                losses.append(float(loss.mean()))
            correct, total = evaluate()
            log.epoch_end(accuracy=correct / total)
            log.write(f"epoch {epoch + 1}/{epochs}  mean loss {np.mean(losses):.4f}  "
                      f"test accuracy {100.0 * correct / total:.1f}% ({correct}/{total})")
    print(f"test accuracy: {100.0 * correct / total:.1f}% ({correct}/{total})")
    print(f"per-step loss and per-epoch accuracy: {os.path.abspath(args.log_dir)}")
    if args.plot:
        print(f"curves saved to {plot(args.log_dir, os.path.join(args.log_dir, 'curves.png'))}")

    path = os.path.abspath(args.checkpoint)
    if os.path.isdir(path):
        shutil.rmtree(path)
    flow.checkpoint.save(path)
    print(f"checkpoint saved to {path}")
    return correct / total


if __name__ == "__main__":
    main()
