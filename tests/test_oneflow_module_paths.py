"""OneFlow's module paths import under ``aioflow`` with the values scripts read (issue 24),
and ``flow.distribute`` behaves as OneFlow's."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


def test_data_type_pb2_numbers_match_the_dtypes():
    import aioflow.core.common.data_type_pb2 as data_type_util
    assert (data_type_util.kFloat, data_type_util.kInt32, data_type_util.kInt8) == (2, 5, 4)
    assert flow.float.oneflow_proto_dtype == data_type_util.kFloat
    assert flow.dtypes.from_proto(data_type_util.kInt64) is flow.int64
    assert data_type_util.DataType.Name(data_type_util.kDouble) == "kDouble"
    with pytest.raises(ValueError, match="no OneFlow data type numbered 99"):
        flow.dtypes.from_proto(99)


def test_op_conf_pb2_activation_types():
    import aioflow.core.operator.op_conf_pb2 as op_conf_util
    assert (op_conf_util.kNone, op_conf_util.kTanH, op_conf_util.kSigmoid,
            op_conf_util.kRelu) == (0, 1, 2, 3)


def test_initializer_conf_message_configures_a_jobs_default_initializer():
    import aioflow.core.job.initializer_conf_pb2 as initializer_conf_util
    conf = initializer_conf_util.InitializerConf()
    conf.constant_conf.value = 0.75
    assert conf.WhichOneof("type") == "constant_conf"
    config = flow.function_config()
    config.default_initializer_conf(conf)
    flow.clear_default_session()

    @flow.global_function(type="predict", function_config=config)
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("scale", shape=(2,))

    np.testing.assert_allclose(job(np.ones(2, np.float32)), [0.75, 0.75])
    flow.clear_default_session()


def test_record_pb2_messages_round_trip():
    import aioflow.core.record.record_pb2 as of_record
    record = of_record.OFRecord(feature={
        "label": of_record.Feature(int64_list=of_record.Int64List(value=[3])),
        "image": of_record.Feature(bytes_list=of_record.BytesList(value=[b"\x01\x02"]))})
    parsed = of_record.OFRecord.FromString(record.SerializeToString())
    assert list(parsed.feature["label"].int64_list.value) == [3]
    assert parsed.feature["image"].bytes_list.value[0] == b"\x01\x02"


@pytest.mark.parametrize("path, name, target", [
    ("aioflow.python.framework.distribute", "split", "distribute.split"),
    ("aioflow.python.ops.nn_ops", "conv2d", "nn.conv2d"),
    ("aioflow.python.ops.initializer_util", "truncated_normal_initializer",
     "truncated_normal_initializer"),
    ("aioflow.python.ops.layers", "dense", "layers.dense"),
    ("aioflow.python.ops.math_ops", "add", "math.add"),
])
def test_python_ops_and_framework_modules_resolve_to_aioflow(path, name, target):
    module = importlib.import_module(path)
    expected = flow
    for part in target.split("."):
        expected = getattr(expected, part)
    assert getattr(module, name) is expected


def test_from_python_ops_import_form_and_unknown_names():
    from aioflow.python.ops import math_ops
    with pytest.raises(AttributeError, match="has no attribute 'no_such_op'"):
        math_ops.no_such_op


def test_distribute_schemes_are_checked():
    assert flow.distribute.split(0) == flow.distribute.split(0) != flow.distribute.split(1)
    with pytest.raises(TypeError, match="axis must be an int, got True"):
        flow.distribute.split(True)
    with pytest.raises(TypeError, match="expected flow.distribute.split"):
        flow.distribute.assert_is_valid_distribute("split")


def test_distribute_hints_leave_values_unchanged():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer(),
                              distribute=flow.distribute.split(0))
        return x.with_distribute(flow.distribute.broadcast()) * w

    np.testing.assert_allclose(job(np.full((2, 3), 2, np.float32)), np.full((2, 3), 2))
    flow.clear_default_session()


def test_mirrored_and_consistent_strategies_are_context_managers():
    with pytest.warns(DeprecationWarning, match="use flow.scope.mirrored_view"):
        strategy = flow.distribute.mirrored_strategy()
    assert flow.scope.consistent_view_enabled()
    with strategy:
        assert flow.scope.mirrored_view_enabled()
        with pytest.warns(DeprecationWarning):
            inner = flow.distribute.consistent_strategy()
        with inner:
            assert flow.scope.consistent_view_enabled()
        assert flow.scope.mirrored_view_enabled()
    assert not flow.scope.mirrored_view_enabled()
    config = flow.function_config()
    with pytest.warns(DeprecationWarning):
        config.default_logical_view(flow.distribute.mirrored_strategy())
    assert config.default_logical_view().kind == "mirrored"


def test_transpose_util_helpers_by_oneflows_module_path():
    # OneFlow's ops and op tests import these helpers by path; they are no flow.* names
    import importlib.util
    from aioflow.python.ops.transpose_util import (get_inversed_perm,
                                                   get_perm_when_transpose_axis_to_last_dim)
    perm = get_perm_when_transpose_axis_to_last_dim(4, 1)
    assert perm == (0, 2, 3, 1) and get_inversed_perm(perm) == (0, 3, 1, 2)
    x = np.arange(24).reshape(2, 3, 4, 1)
    assert np.array_equal(x.transpose(perm).transpose(get_inversed_perm(perm)), x)
    # the module and its synthetic package have specs, as importlib's finders expect
    assert importlib.util.find_spec("aioflow.python.ops.transpose_util") is not None
    assert importlib.util.find_spec("aioflow.python.ops.nn_ops") is not None
