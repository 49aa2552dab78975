"""OneFlow v0.3.4's whole exported surface (every @oneflow_export of its Python sources,
eager and experimental names included: docs/api/oneflow_exports_v0.3.4.txt) resolves
under aioflow, except the names docs/api/oneflow_exports_left_out.txt gives a reason for;
and the names added from that list behave as OneFlow's."""
from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

API = pathlib.Path(__file__).resolve().parent.parent / "docs" / "api"


def _lines(name):
    return [line.split()[0] for line in (API / name).read_text().splitlines()
            if line.strip() and not line.startswith("#")]


EXPORTS = _lines("oneflow_exports_v0.3.4.txt")
LEFT_OUT = set(_lines("oneflow_exports_left_out.txt"))


def _resolve(name):
    obj = flow
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_every_export_resolves_but_those_left_out_with_a_reason():
    assert len(EXPORTS) > 500 and LEFT_OUT <= set(EXPORTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # deprecated modules may say so on access
        missing = []
        for name in EXPORTS:
            try:
                _resolve(name)
            except AttributeError:
                missing.append(name)
    assert sorted(missing) == sorted(LEFT_OUT)


def test_clip_aliases_are_clip_by_value():
    for alias in (flow.clip, flow.clamp, flow.clip_by_scalar, flow.math.clip_by_value):
        assert alias is flow.clip_by_value


def test_square_sum_and_logical_slices():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3)), patch: tp.Numpy.Placeholder((1, 2))
            ) -> tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(2, 3), initializer=flow.zeros_initializer())
        flow.experimental.logical_slice_assign(w, patch, [(1, 2, 1), (0, 3, 2)])
        part = flow.experimental.logical_slice(x, [(None, None, None), (1, 3, 1)])
        return flow.experimental.square_sum(x), part

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    total, part = job(x, np.array([[7, 9]], np.float32))
    assert total.shape == (1,) and total[0] == pytest.approx(float((x ** 2).sum()))
    np.testing.assert_array_equal(part, x[:, 1:3])
    want = np.zeros((2, 3), np.float32)
    want[1, 0::2] = [7, 9]
    np.testing.assert_array_equal(flow.get_all_variables()["w"], want)
    with pytest.raises(ValueError, match="logical_slice_assign|slice_update"):
        @flow.global_function(type="predict")
        def bad(p: tp.Numpy.Placeholder((1, 3))) -> tp.Numpy:
            w = flow.get_variable("w", shape=(2, 3), initializer=flow.zeros_initializer())
            flow.experimental.logical_slice_assign(w, p, [(0, 1, 1), (0, 2, 1)])
            return p
        bad(np.zeros((1, 3), np.float32))


def test_interface_blob_values_are_the_variables_by_name():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("scale", shape=(2,),
                                     initializer=flow.constant_initializer(3.0))

    job(np.ones(2, np.float32))
    np.testing.assert_array_equal(flow.experimental.get_interface_blob_value("scale"),
                                  [3.0, 3.0])
    flow.experimental.set_interface_blob_value("scale", np.array([1.0, 2.0]))  # float64
    np.testing.assert_array_equal(job(np.ones(2, np.float32)), [1.0, 2.0])
    with pytest.raises(KeyError, match="no variable named 'nope'.*scale"):
        flow.experimental.get_interface_blob_value("nope")
    with pytest.raises(ValueError, match="scale"):
        flow.experimental.set_interface_blob_value("scale", np.ones(3, np.float32))
    np.testing.assert_array_equal(flow.get_all_variables()["scale"], [1.0, 2.0])  # unchanged


@pytest.mark.anyio
async def test_interface_blob_values_are_awaitable_in_async_code():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x * flow.get_variable("scale", shape=(2,),
                                     initializer=flow.constant_initializer(3.0))

    await job(np.ones(2, np.float32))
    await flow.experimental.set_interface_blob_value("scale", np.array([5.0, 6.0], np.float32))
    assert (await flow.experimental.get_interface_blob_value("scale")).tolist() == [5.0, 6.0]


def test_name_scope_is_namespace_with_a_deprecation():
    assert flow.is_deprecated(flow.name_scope) and not flow.is_deprecated(flow.scope.namespace)
    assert flow.experimental.name_scope is flow.name_scope is flow.deprecated.variable_scope

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with pytest.warns(FutureWarning, match="flow.scope.namespace") as caught:
            with flow.name_scope("block"):
                w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        assert caught[0].filename == __file__
        return x * w

    job(np.ones(2, np.float32))
    assert "block-w" in flow.get_all_variables()


def test_is_deprecated_names_what_oneflow_deprecated():
    for name in ["distribute.mirrored_strategy", "distribute.consistent_strategy",
                 "distribute.mirrored_strategy_enabled", "distribute.consistent_strategy_enabled",
                 "env.grpc_use_no_signal", "scope.current_scope", "data.decode_ofrecord",
                 "optimizer.PolynomialSchduler"]:
        assert flow.is_deprecated(_resolve(name)), name
    assert flow.is_deprecated(flow.FunctionConfig.default_distribute_strategy)
    assert not flow.is_deprecated(flow.global_function)
    assert not flow.is_deprecated([])     # unhashable: False, as OneFlow's


def test_eager_execution_is_refused_lazy_mode_accepted():
    flow.enable_eager_execution(False)
    with pytest.raises(NotImplementedError, match="lazy mode only"):
        flow.enable_eager_execution()
    with pytest.raises(TypeError, match="val must be a bool"):
        flow.enable_eager_execution("yes")
    flow.experimental.enable_typing_check(True)
    flow.experimental.enable_typing_check(False)
    with pytest.raises(TypeError, match="val must be a bool"):
        flow.experimental.enable_typing_check(1)


def test_clip_by_value_is_one_op_whose_gradient_keeps_the_bounds():
    seen = {}

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(5,), initializer=flow.zeros_initializer())
        flow.watch_diff(w, lambda d: seen.setdefault("d", d))
        y = flow.clip_by_value(x + w, 0.0, 6.0)
        flow.optimizer.SGD(0.0, momentum=0).minimize(flow.math.reduce_sum(y))
        return y

    y = job(np.array([-1, 0, 3, 6, 7], np.float32))
    flow.sync_default_session()
    assert y.tolist() == [0, 0, 3, 6, 6]
    assert seen["d"].tolist() == [0, 1, 1, 1, 0]     # OneFlow: min <= x <= max passes
    ops = [node.op.name for node in job.graph.nodes]
    assert "clip_by_scalar" in ops and "maximum" not in ops and "minimum" not in ops

    @flow.global_function(type="predict")
    def bad(x: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        with pytest.raises(ValueError, match="cannot both be None"):
            flow.clip_by_value(x)
        with pytest.raises(TypeError, match="max_value must be a number"):
            flow.clip_by_value(x, 0.0, "6")
        return x
    bad(np.zeros(5, np.float32))
