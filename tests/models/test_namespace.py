"""``flow.scope.namespace`` names ops and variables as OneFlow does: ``"<ns>-<name>"``.

OneFlow v0.3's model zoo builds blocks under namespaces (ResNet's ``layer1``, Inception's
``mixed_0``, BERT's ``layer_0``) with the same variable names in each; those must be
distinct variables, and their checkpoint folders carry the prefixed names.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


def _block(x, filters):
    """A conv block written as the zoo writes its blocks: fixed names inside a namespace."""
    return flow.layers.conv2d(x, filters, kernel_size=3, padding="SAME", name="conv1",
                              kernel_initializer=flow.random_normal_initializer(stddev=0.1))


def test_same_named_variables_of_two_namespaces_are_two_variables(tmp_path):
    @flow.global_function(type="predict")
    def two_blocks(x: tp.Numpy.Placeholder((1, 2, 4, 4))) -> tp.Numpy:
        with flow.scope.namespace("layer1"):
            a = _block(x, 2)
        with flow.scope.namespace("layer2"):
            b = _block(a, 2)
        return b

    two_blocks(np.ones((1, 2, 4, 4), np.float32))
    variables = flow.get_all_variables()
    assert {"layer1-conv1-weight", "layer1-conv1-bias", "layer2-conv1-weight",
            "layer2-conv1-bias"} <= set(variables)
    assert "conv1-weight" not in variables
    # Two draws of one initializer: different values, so not one shared variable.
    assert not np.array_equal(variables["layer1-conv1-weight"],
                              variables["layer2-conv1-weight"])
    flow.checkpoint.save(str(tmp_path / "ckpt"))
    folders = set(os.listdir(tmp_path / "ckpt"))
    assert {"layer1-conv1-weight", "layer2-conv1-weight"} <= folders


def test_nested_namespaces_join_with_dashes_and_name_ops_too():
    names = {}

    @flow.global_function(type="predict")
    def nested(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        with flow.scope.namespace("bert"), flow.scope.namespace("layer_0"):
            w = flow.get_variable("weight", shape=(3,), initializer=flow.ones_initializer())
            y = flow.math.relu(x * w, name="act")
            names["op"] = y.op_name
        return y

    nested(np.ones((2, 3), np.float32))
    assert "bert-layer_0-weight" in flow.get_all_variables()
    assert names["op"] == "bert-layer_0-act"


def test_a_variable_reached_again_in_its_namespace_is_shared_by_jobs():
    def model(x):
        with flow.scope.namespace("head"):
            return flow.layers.dense(x, 2, name="fc")

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        loss = flow.math.reduce_mean(model(x) ** 2)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0.9).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return model(x)

    x = np.ones((4, 3), np.float32)
    train(x)
    weights = flow.get_all_variables()
    assert "head-fc-weight-momentum" in weights     # the slot follows its variable's name
    np.testing.assert_allclose(predict(x), x @ weights["head-fc-weight"].T
                               + weights["head-fc-bias"], rtol=1e-6)


def test_namespace_name_must_be_a_string():
    @flow.global_function(type="predict")
    def bad(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        with flow.scope.namespace(3):
            return x

    with pytest.raises(TypeError, match="namespace: name must be a str, got 3"):
        bad(np.ones(1, np.float32))
