"""What the zoo's training scripts share: their function config, their optimizer (SGD
with momentum, a warm-up then a decay, L2 regularization on the weights), and a check
that the loss of a few steps on one fixed batch falls.

No ``from __future__ import annotations`` here: ``classifier_job``'s placeholder annotations
use its arguments, which only an annotation evaluated at once can see."""
import numpy as np

import aioflow as flow
import aioflow.typing as tp


def train_config():
    """``job_function_util.py``'s function config, as the zoo sets it."""
    config = flow.FunctionConfig()
    config.default_logical_view(flow.scope.consistent_view())
    config.default_data_type(flow.float)
    config.cudnn_conv_heuristic_search_algo(False)
    config.enable_fuse_model_update_ops(True)
    config.enable_fuse_add_to_output(True)
    return config


def sgd_with_warmup(lr=0.05, warmup_steps=2, decay_steps=100):
    """``optimizer_util.py``'s shape: a linear warm-up into a cosine decay, momentum."""
    warmup = flow.optimizer.warmup.linear(warmup_steps, 0.1)
    schedule = flow.optimizer.CosineScheduler(lr, decay_steps, warmup=warmup)
    return flow.optimizer.SGD(schedule, momentum=0.9)


def classifier_job(model, batch, image, lr=0.05, schedule=True):
    """The zoo's image classifier train job: ``model(images)`` -> logits on ``batch`` images
    of 3 x ``image`` x ``image``, the mean sparse softmax cross entropy against int32
    labels, SGD with momentum under :func:`sgd_with_warmup`, or with ``schedule=False`` at
    a constant rate (a CUDA graph bakes the rate in). Returns the per-sample losses."""
    @flow.global_function(type="train", function_config=train_config())
    def TrainNet(images: tp.Numpy.Placeholder((batch, 3, image, image), dtype=flow.float),
                 labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, model(images),
                                                                name="softmax_loss")
        optimizer = (sgd_with_warmup(lr=lr) if schedule
                     else flow.optimizer.SGD(lr, momentum=0.9))
        optimizer.minimize(loss)
        return loss
    return TrainNet


def batch(shape, classes, seed=0):
    """A fixed synthetic batch: images and int32 labels."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal(shape).astype(np.float32)
    labels = rng.integers(0, classes, size=shape[0]).astype(np.int32)
    return images, labels


def losses_of(job, *inputs, steps):
    return [float(np.mean(job(*inputs))) for _ in range(steps)]


def assert_falls(losses):
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], f"the loss did not fall: {losses}"
