"""The seed LeNet with a chosen optimizer, built the same way on every backend, and the
data the backend tests feed it."""
import numpy as np

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends

BATCH = 100

OPTIMIZERS = {
    "sgd": lambda: flow.optimizer.SGD(0.1, momentum=0),
    "momentum": lambda: flow.optimizer.SGD(0.05, momentum=0.9),
    "adam": lambda: flow.optimizer.Adam(1e-3),
}


def lenet(images):
    conv1 = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv1")
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv2")
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, name="dense1")
    return flow.layers.dense(hidden, 10, name="dense2")


def lenet_jobs(optimizer: str = "sgd", batch: int = BATCH):
    """A fresh session's LeNet train job (per-sample loss) and predict job (logits)."""
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((batch, 1, 28, 28)),
              labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, lenet(images))
        OPTIMIZERS[optimizer]().minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(images: tp.Numpy.Placeholder((batch, 1, 28, 28))) -> tp.Numpy:
        return lenet(images)

    return train, predict


def batches(steps: int, batch: int = BATCH, seed: int = 0, learnable: bool = True):
    """``steps`` batches of random images. ``learnable``: the class is the brightest of
    ten image bands, so a net learns it within a few dozen steps; otherwise the labels
    are noise, and the loss stays near log(10) (a trajectory that stays in the regime
    where two float32 runs of the same arithmetic stay close: once a net fits its data,
    its steps amplify rounding differences, measured 3x per step from step 12 on)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        images = rng.random((batch, 1, 28, 28), dtype=np.float32) * 0.5
        labels = rng.integers(0, 10, batch).astype(np.int32)
        if learnable:
            for i, label in enumerate(labels):
                images[i, 0, 2 * label + 4:2 * label + 6] += 0.5
        out.append((images, labels))
    return out


def train_losses(backend: str, optimizer: str, data, initial=None):
    """Mean loss of each step of the LeNet trained on ``backend`` from ``initial``
    variables (default: the session's own initialization); returns (losses, variables
    after training, the train and predict jobs)."""
    with backends.use(backend):
        train, predict = lenet_jobs(optimizer)
        if initial is not None:
            flow.load_variables(initial)
        losses = [float(train(x, y).mean()) for x, y in data]
        return losses, flow.get_all_variables(), (train, predict)
