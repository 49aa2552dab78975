"""The seed documents' MLP and LeNet in aioflow and in PyTorch, built the same way for
every benchmark (same layer names, shapes and padding), and one train step of each.

No ``from __future__ import annotations`` here: the jobs' placeholder annotations use
``flow_jobs``'s ``batch`` argument, which only an annotation evaluated at once can see."""
import aioflow as flow
import aioflow.typing as tp

BATCH = 100

# aioflow layer names of each model, in the order of PyTorch's weighted layers.
LAYER_NAMES = {"mlp": ["hidden", "output"], "lenet": ["conv1", "conv2", "dense1", "dense2"]}


def mlp(images):
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, name="hidden")
    return flow.layers.dense(hidden, 10, name="output")


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


def flow_jobs(model: str, make_optimizer=lambda: flow.optimizer.SGD(0.01, momentum=0),
              batch: int = BATCH):
    """A fresh session with the model's train job (returns the per-sample loss) and
    predict job (returns logits), for batches of ``batch`` images."""
    build = mlp if model == "mlp" else lenet
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((batch, 1, 28, 28)),
              labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, build(images))
        make_optimizer().minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(images: tp.Numpy.Placeholder((batch, 1, 28, 28))) -> tp.Numpy:
        return build(images)

    return train, predict


def torch_model(model: str):
    import torch
    nn = torch.nn
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(7 * 7 * 64, 512), nn.ReLU(), nn.Linear(512, 10))


def torch_train_step(net, optimizer):
    """``step(x, y)``: one PyTorch train step on the mean cross entropy; returns the
    per-sample losses as numpy, like the aioflow train job."""
    import torch

    def step(x, y):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y, reduction="none")
        loss.mean().backward()
        optimizer.step()
        return loss.detach().numpy()

    return step
