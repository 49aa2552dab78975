"""ResNet-50 and ResNeXt-50 as OneFlow's ``resnet_model.py`` / ``resnext_model.py`` build
them: ``flow.get_variable`` + ``flow.nn.conv2d`` with He-normal weights and L2
regularization, batch norm (fused with relu / add-relu), bottleneck blocks of [3, 4, 6, 3]
per stage; channel widths divided by 8 and 32x32 images so that a step is quick on two
cores (the depth and the block structure are the models')."""
from __future__ import annotations

import os

import numpy as np

import aioflow as flow
import aioflow.typing as tp

from .zoo import assert_falls, batch, classifier_job, losses_of, train_config

BLOCK_COUNTS = [3, 4, 6, 3]
WIDTH_DIVISOR = 8
BATCH, IMAGE, CLASSES = 2, 32, 10


class ResnetBuilder:
    def __init__(self, weight_regularizer, groups=1, training=True):
        self.weight_initializer = flow.variance_scaling_initializer(
            2, "fan_in", "random_normal", data_format="NCHW")
        self.weight_regularizer = weight_regularizer
        self.groups = groups
        self.training = training

    def _conv2d(self, name, input, filters, kernel_size, strides=1, groups=1):
        padding = "SAME" if strides > 1 or kernel_size > 1 else "VALID"
        weight = flow.get_variable(
            name + "-weight", shape=(filters, input.shape[1] // groups, kernel_size,
                                     kernel_size),
            dtype=input.dtype, initializer=self.weight_initializer,
            regularizer=self.weight_regularizer, model_name="weight")
        return flow.nn.conv2d(input, weight, strides, padding, "NCHW", 1, groups=groups,
                              name=name)

    def _bn_args(self, last):
        initializer = flow.zeros_initializer() if last else flow.ones_initializer()
        return dict(axis=1, momentum=0.9, epsilon=1e-5, training=self.training,
                    gamma_initializer=initializer, moving_variance_initializer=initializer,
                    gamma_regularizer=self.weight_regularizer,
                    beta_regularizer=self.weight_regularizer)

    def _batch_norm(self, inputs, name):
        return flow.layers.batch_normalization(inputs, name=name, **self._bn_args(False))

    def _batch_norm_relu(self, inputs, name):
        return flow.layers.batch_normalization_relu(inputs, name=name + "_bn_relu",
                                                    **self._bn_args(False))

    def _batch_norm_add_relu(self, inputs, addend, name):
        return flow.layers.batch_normalization_add_relu(
            inputs, addend=addend, name=name + "_bn_add_relu", **self._bn_args(True))

    def bottleneck(self, input, block_name, filters, filters_inner, strides):
        a = self._batch_norm_relu(self._conv2d(block_name + "_branch2a", input,
                                               filters_inner, 1), block_name + "_branch2a")
        b = self._conv2d(block_name + "_branch2b", a, filters_inner, 3, strides,
                         groups=self.groups)
        b = self._batch_norm_relu(b, block_name + "_branch2b")
        return self._conv2d(block_name + "_branch2c", b, filters, 1)

    def residual_block(self, input, block_name, filters, filters_inner, strides_init):
        if strides_init != 1 or block_name == "res2_0":
            shortcut = self._conv2d(block_name + "_branch1", input, filters, 1, strides_init)
            shortcut = self._batch_norm(shortcut, block_name + "_branch1_bn")
        else:
            shortcut = input
        out = self.bottleneck(input, block_name, filters, filters_inner, strides_init)
        return self._batch_norm_add_relu(out, shortcut, block_name + "_branch2c")

    def resnet_conv_x_body(self, input, inner_widths):
        output = input
        for i, (counts, inner) in enumerate(zip(BLOCK_COUNTS, inner_widths)):
            stage_name = "res%d" % (i + 2)
            with flow.scope.namespace(stage_name):
                for j in range(counts):
                    output = self.residual_block(output, "%s_%d" % (stage_name, j),
                                                 inner * 4 if self.groups == 1 else inner * 2,
                                                 inner, 1 if i == 0 or j else 2)
        return output

    def resnet_stem(self, input):
        conv1 = self._conv2d("conv1", input, 64 // WIDTH_DIVISOR, 7, 2)
        conv1_bn = self._batch_norm_relu(conv1, "conv1")
        return flow.nn.max_pool2d(conv1_bn, ksize=3, strides=2, padding="SAME",
                                  data_format="NCHW", name="pool1")


def resnet50(images, groups=1, training=True):
    builder = ResnetBuilder(flow.regularizers.l2(1.0 / 32768), groups, training)
    inner = ([64, 128, 256, 512] if groups == 1 else [128, 256, 512, 1024])
    inner = [w // WIDTH_DIVISOR for w in inner]
    with flow.scope.namespace("Resnet"):
        paths = builder.resnet_conv_x_body(builder.resnet_stem(images), inner)
        pool5 = flow.nn.avg_pool2d(paths, ksize=paths.shape[2], strides=1, padding="VALID",
                                   data_format="NCHW", name="pool5")
        fc1001 = flow.layers.dense(
            flow.reshape(pool5, (pool5.shape[0], -1)), units=CLASSES, use_bias=True,
            kernel_initializer=flow.variance_scaling_initializer(2, "fan_in",
                                                                 "random_normal"),
            bias_initializer=flow.zeros_initializer(),
            kernel_regularizer=flow.regularizers.l2(1.0 / 32768), name="fc1001")
    return fc1001


def _train_job(groups):
    return classifier_job(lambda images: resnet50(images, groups), BATCH, IMAGE, lr=0.02)


def _predict_job(groups):
    @flow.global_function(type="predict", function_config=train_config())
    def InferenceNet(images: tp.Numpy.Placeholder((BATCH, 3, IMAGE, IMAGE),
                                                  dtype=flow.float)) -> tp.Numpy:
        return flow.nn.softmax(resnet50(images, groups, training=False))
    return InferenceNet


def test_resnet50_trains_and_its_checkpoint_loads_back_bit_for_bit(tmp_path):
    images, labels = batch((BATCH, 3, IMAGE, IMAGE), CLASSES)
    assert_falls(losses_of(_train_job(1), images, labels, steps=6))
    names = set(flow.get_all_variables())
    assert "Resnet-res2-res2_0_branch2a-weight" in names
    assert "Resnet-res5-res5_2_branch2c_bn_add_relu-gamma" in names
    assert "Resnet-fc1001-weight" in names
    predict = _predict_job(1)
    before = predict(images)
    saved = flow.get_all_variables()
    flow.checkpoint.save(str(tmp_path / "snapshot"))
    assert os.path.isfile(tmp_path / "snapshot" / "Resnet-conv1-weight" / "out")
    flow.clear_default_session()
    predict = _predict_job(1)
    flow.load_variables(flow.checkpoint.get(str(tmp_path / "snapshot")))
    for name, value in flow.get_all_variables().items():
        if name in saved:
            assert value.tobytes() == saved[name].tobytes(), name
    np.testing.assert_array_equal(predict(images), before)


def test_resnext50_trains():
    images, labels = batch((BATCH, 3, IMAGE, IMAGE), CLASSES, seed=1)
    assert_falls(losses_of(_train_job(8), images, labels, steps=6))
    weight = flow.get_all_variables()["Resnet-res3-res3_0_branch2b-weight"]
    assert weight.shape == (256 // WIDTH_DIVISOR, 256 // WIDTH_DIVISOR // 8, 3, 3)  # grouped


def test_resnet50_trains_on_the_strict_backend():
    """The GPU's code paths (aioflow/backends/strict.py): no host reads inside the step;
    the first step's loss is numpy's (same seed, same initial weights)."""
    images, labels = batch((BATCH, 3, IMAGE, IMAGE), CLASSES)
    with flow.backends.use("strict"):
        losses = losses_of(_train_job(1), images, labels, steps=6)
    assert_falls(losses)
    flow.clear_default_session()
    flow.random.seed(0)
    with flow.backends.use("numpy"):
        first = losses_of(_train_job(1), images, labels, steps=1)
    np.testing.assert_allclose(losses[0], first[0], rtol=1e-5)
