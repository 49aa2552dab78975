"""What the zoo's training scripts share: their function config, their optimizer (SGD
with momentum, a warm-up then a decay, L2 regularization on the weights), and a check
that the loss of a few steps on one fixed batch falls."""
from __future__ import annotations

import numpy as np

import aioflow as flow


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
