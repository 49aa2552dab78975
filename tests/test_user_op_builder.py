"""flow.user_op_builder and siblings: every OneFlow op type of the table, built by its
OneFlow input/output/attribute names, against a numpy reference; errors name what is
wrong."""
import math
import warnings
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.oneflow_ops.user_op_table import USER_OPS

rng = np.random.default_rng(7)
F = np.float32


def _u(low, high, shape=(2, 3)):
    return rng.uniform(low, high, shape).astype(F)


_erf = np.vectorize(math.erf)
UNARY = {  # op type -> (reference, input)
    "abs": (np.abs, _u(-2, 2)), "acos": (np.arccos, _u(-0.9, 0.9)),
    "acosh": (np.arccosh, _u(1.1, 3)), "asin": (np.arcsin, _u(-0.9, 0.9)),
    "asinh": (np.arcsinh, _u(-2, 2)), "atan": (np.arctan, _u(-2, 2)),
    "atanh": (np.arctanh, _u(-0.9, 0.9)), "ceil": (np.ceil, _u(-2, 2)),
    "cos": (np.cos, _u(-2, 2)), "cosh": (np.cosh, _u(-2, 2)), "erf": (_erf, _u(-2, 2)),
    "erfc": (lambda x: 1 - _erf(x), _u(-2, 2)), "exp": (np.exp, _u(-2, 2)),
    "expm1": (np.expm1, _u(-2, 2)), "floor": (np.floor, _u(-2, 2)),
    "log": (np.log, _u(0.1, 3)), "log1p": (np.log1p, _u(-0.5, 3)),
    "log_sigmoid": (lambda x: -np.log1p(np.exp(-x)), _u(-2, 2)),
    "negative": (np.negative, _u(-2, 2)), "reciprocal": (lambda x: 1 / x, _u(0.5, 2)),
    "reciprocal_no_nan": (lambda x: 1 / x, _u(0.5, 2)),
    "rint": (np.rint, np.array([-1.7, -0.2, 0.4, 1.6, 2.2, 3.9], F)),
    "round": (np.round, np.array([-1.7, -0.2, 0.4, 1.6, 2.2, 3.9], F)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), _u(0.5, 2)), "sign": (np.sign, _u(-2, 2)),
    "sin": (np.sin, _u(-2, 2)), "sinh": (np.sinh, _u(-2, 2)),
    "softplus": (lambda x: np.log1p(np.exp(x)), _u(-2, 2)), "sqrt": (np.sqrt, _u(0.1, 3)),
    "square": (np.square, _u(-2, 2)), "tan": (np.tan, _u(-1, 1)), "tanh": (np.tanh, _u(-2, 2)),
    "sigmoid_v2": (lambda x: 1 / (1 + np.exp(-x)), _u(-2, 2)),
}
CASES = {op: (dict(x=[x]), ["y"], {}, lambda ins, ref=ref: ref(ins["x"][0]))
         for op, (ref, x) in UNARY.items()}

a, b = _u(-2, 2), _u(0.5, 2)
BINARY = {"broadcast_add": np.add, "broadcast_sub": np.subtract, "broadcast_mul": np.multiply,
          "broadcast_div": np.divide, "broadcast_maximum": np.maximum,
          "broadcast_minimum": np.minimum, "broadcast_pow": lambda x, y: np.abs(x) ** y,
          "broadcast_equal": np.equal, "broadcast_not_equal": np.not_equal,
          "broadcast_greater": np.greater, "broadcast_greater_equal": np.greater_equal,
          "broadcast_less": np.less, "broadcast_less_equal": np.less_equal,
          "broadcast_logical_and": np.logical_and}
for op, ref in BINARY.items():
    x = np.abs(a) if op == "broadcast_pow" else a
    y = b[:1] if op != "broadcast_logical_and" else (b[:1] > 1).astype(F)
    CASES[op] = (dict(x=[x], y=[y]), ["z"], {}, lambda ins, ref=ref: ref(ins["x"][0],
                                                                           ins["y"][0]))

m, n = _u(-1, 1, (2, 3)), _u(-1, 1, (3, 4))
bm, bn = _u(-1, 1, (2, 2, 3)), _u(-1, 1, (2, 4, 3))
ids = np.array([2, 0, 2], np.int32)
CASES.update({
    "multiply": (dict(x=[a], y=[b]), ["out"], {}, lambda i: i["x"][0] * i["y"][0]),
    "relu": (dict(**{"in": [a]}), ["out"], {}, lambda i: np.maximum(i["in"][0], 0)),
    "sigmoid": (dict(**{"in": [a]}), ["out"], {}, lambda i: 1 / (1 + np.exp(-i["in"][0]))),
    "gelu": (dict(**{"in": [a]}), ["out"], {},
             lambda i: 0.5 * i["in"][0] * (1 + _erf(i["in"][0] / np.sqrt(2)))),
    "argmax": (dict(**{"in": [a]}), ["out"], {}, lambda i: np.argmax(i["in"][0], -1)),
    "softmax": (dict(**{"in": [a]}), ["out"], {},
                lambda i: np.exp(i["in"][0]) / np.exp(i["in"][0]).sum(-1, keepdims=True)),
    "leaky_relu": (dict(x=[a]), ["y"], {"alpha": 0.25},
                   lambda i: np.where(i["x"][0] > 0, i["x"][0], 0.25 * i["x"][0])),
    "identity": (dict(**{"in": [a]}), ["out"], {}, lambda i: i["in"][0]),
    "cast": (dict(**{"in": [a]}), ["out"], {"dtype": flow.int32},
             lambda i: i["in"][0].astype(np.int32)),
    "reshape": (dict(**{"in": [a]}), ["out"], {"shape": (3, 2)},
                lambda i: i["in"][0].reshape(3, 2)),
    "expand_dims": (dict(**{"in": [a]}), ["out"], {"axis": 1},
                    lambda i: i["in"][0][:, None]),
    "squeeze": (dict(**{"in": [a[:1]]}), ["out"], {"axes": [0]}, lambda i: i["in"][0][0]),
    "flatten": (dict(**{"in": [bm]}), ["out"], {"start_dim": 1},
                lambda i: i["in"][0].reshape(2, 6)),
    "transpose": (dict(input=[bm]), ["output"], {"perm": [2, 0, 1]},
                  lambda i: i["input"][0].transpose(2, 0, 1)),
    "zeros_like": (dict(like=[a]), ["out"], {}, lambda i: np.zeros_like(i["like"][0])),
    "ones_like": (dict(like=[a]), ["out"], {}, lambda i: np.ones_like(i["like"][0])),
    "scalar_add": (dict(**{"in": [a]}), ["out"], {"has_float_operand": True,
                                                   "float_operand": 1.5},
                   lambda i: i["in"][0] + 1.5),
    "scalar_mul": (dict(**{"in": [a]}), ["out"], {"has_int_operand": True, "int_operand": 3},
                   lambda i: i["in"][0] * 3),
    "reduce_sum": (dict(input_tensor=[bm]), ["output_tensor"], {"axis": [0, 2]},
                   lambda i: i["input_tensor"][0].sum((0, 2))),
    "reduce_max": (dict(input_tensor=[bm]), ["output_tensor"], {"axis": [1],
                                                                 "keepdims": True},
                   lambda i: i["input_tensor"][0].max(1, keepdims=True)),
    "reduce_min": (dict(input_tensor=[bm]), ["output_tensor"], {"axis": [1]},
                   lambda i: i["input_tensor"][0].min(1)),
    "reduce_prod": (dict(input_tensor=[bm]), ["output_tensor"], {"axis": [2]},
                    lambda i: i["input_tensor"][0].prod(2)),
    "reduce_any": (dict(input_tensor=[(bm > 0.5).astype(np.int8)]), ["output_tensor"],
                   {"axis": [2]}, lambda i: i["input_tensor"][0].any(2)),
    "reduce_all": (dict(input_tensor=[(bm > -0.5).astype(np.int8)]), ["output_tensor"],
                   {"axis": [2]}, lambda i: i["input_tensor"][0].all(2)),
    "matmul": (dict(a=[m.T.copy()], b=[n]), ["out"], {"transpose_a": True, "alpha": 2.0},
               lambda i: 2.0 * i["a"][0].T @ i["b"][0]),
    "batch_matmul": (dict(a=[bm], b=[bn]), ["out"], {"transpose_b": True},
                     lambda i: i["a"][0] @ i["b"][0].transpose(0, 2, 1)),
    "bias_add": (dict(a=[bm], b=[_u(-1, 1, (2,))]), ["out"], {"axis": 1},
                 lambda i: i["a"][0] + i["b"][0][None, :, None]),
    "add_n": (dict(**{"in": [a, b, a]}), ["out"], {}, lambda i: sum(i["in"])),
    "concat": (dict(**{"in": [a, b]}), ["out"], {"axis": 1, "max_dim_size": 6},
               lambda i: np.concatenate(i["in"], 1)),
    "gather": (dict(**{"in": [m.T.copy()], "indices": [ids]}), ["out"], {"axis": 0},
               lambda i: i["in"][0][i["indices"][0]]),
    "where": (dict(condition=[(a > 0).astype(np.int8)], x=[a], y=[b]), ["out"], {},
              lambda i: np.where(i["condition"][0], i["x"][0], i["y"][0])),
    "multi_square_sum": (dict(x=[a, bm, b]), ["y"], {},
                         lambda i: np.array([sum(float(np.sum(x.astype(np.float64) ** 2))
                                                 for x in i["x"])])),
    # OneFlow's cast-scale fusion: x cast to scalar's dtype, times scalar
    "fused_cast_scale": (dict(x=[a.astype(np.float64)], scalar=[np.array([1.5], np.float32)]),
                         ["y"], {}, lambda i: i["x"][0].astype(np.float32) * np.float32(1.5)),
})
# Op types with several outputs, or none: tested on their own below.
SPECIAL = {"split_like", "dynamic_loss_scale_schedule",
           # OneFlow's test op types: tested on their own below
           "TestSource", "TestSourceMultiGpuFixedOutNum", "TestRandomSource",
           "TestListDataTypeAndListShapeAndListStringAttr", "test_user_op_attr_auto_type",
           "cpu_only_relu_test"}


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _run(op_type, inputs, outputs, attrs):
    names = [(name, k) for name, blobs in inputs.items() for k in range(len(blobs))]
    arrays = [inputs[name][k] for name, k in names]
    specs = [tp.Numpy.Placeholder(x.shape, dtype=flow.dtypes.convert(x.dtype) if x.dtype != np.bool_
                                  else flow.int8) for x in arrays]

    def body(*blobs):
        builder = flow.user_op_builder("case").Op(op_type)
        for name in inputs:
            builder.Input(name, [blob for (n, _), blob in zip(names, blobs) if n == name])
        for name in outputs:
            builder.Output(name)
        for key, value in attrs.items():
            builder.Attr(key, value)
        return builder.Build().InferAndTryRun().SoleOutputBlob()

    params = ", ".join(f"x{i}" for i in range(len(arrays)))
    scope = {"body": body, "tp": tp}
    exec(f"def job({params}) -> tp.Numpy:\n    return body({params})", scope)  # noqa: S102
    job = scope["job"]
    job.__annotations__.update({f"x{i}": spec for i, spec in enumerate(specs)})
    return flow.global_function(type="predict")(job)(*arrays)


def test_the_cases_cover_the_whole_table():
    assert set(CASES) | SPECIAL == set(USER_OPS)


def test_split_like_cuts_along_the_likes_and_its_gradient_flows_back():
    x = _u(-1, 1, (5, 3))
    diffs = []

    @flow.global_function(type="train")
    def job(x_: tp.Numpy.Placeholder((5, 3))) -> tp.Numpy:
        x_ = x_ + flow.get_variable("zero", shape=(1,), initializer=flow.zeros_initializer())
        flow.watch_diff(x_, diffs.append)
        likes = [flow.constant(0.0, shape=(2,)), flow.constant(0.0, shape=(3, 7))]
        y0, y1 = (flow.user_op_builder("split").Op("split_like").Input("in", [x_])
                  .Input("like", likes).Output("out", 2).Attr("axis", 0).Build()
                  .InferAndTryRun().RemoteBlobList())
        flow.optimizer.SGD(0.0, momentum=0).minimize(y0)
        return flow.concat([y1, y0], axis=0)

    np.testing.assert_array_equal(job(x), np.concatenate([x[2:], x[:2]]))
    np.testing.assert_array_equal(diffs[0].numpy(), np.r_[np.ones((2, 3)), np.zeros((3, 3))])


@pytest.mark.parametrize("count, counter, period, scale, want_counter, want_scale", [
    (1, 1, 1, 100.0, 0, 50.0),     # a non-finite step: scale / multiplier
    (0, 1, 1, 100.0, 0, 200.0),    # the period reached: scale * multiplier
    (0, 1, 10, 100.0, 2, 100.0),   # counting up
    (3, 5, 10, 1.5, 0, 1.0),       # never below 1
])
def test_dynamic_loss_scale_schedule_updates_its_variables_as_oneflows_kernel(
        count, counter, period, scale, want_counter, want_scale):
    def variables():
        return (flow.get_variable("counter", shape=(1,), dtype=flow.int64,
                                  initializer=flow.constant_initializer(counter, flow.int64)),
                flow.get_variable("scale", shape=(1,),
                                  initializer=flow.constant_initializer(scale)))

    @flow.global_function(type="predict")
    def schedule(n: tp.Numpy.Placeholder((1,), dtype=flow.int64)) -> None:
        good, loss_scale = variables()
        (flow.user_op_builder("schedule").Op("dynamic_loss_scale_schedule")
         .Input("count_not_finite", [n]).Input("loss_scale", [loss_scale])
         .Input("good_step_counter", [good]).Attr("increment_period", period)
         .Attr("multiplier", 2.0).Build().InferAndTryRun())

    schedule(np.array([count], np.int64))
    flow.sync_default_session()
    values = flow.get_all_variables()
    assert values["counter"].tolist() == [want_counter]
    assert values["scale"].tolist() == [want_scale]


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_user_op_matches_numpy(op_type):
    inputs, outputs, attrs, reference = CASES[op_type]
    got = _run(op_type, inputs, outputs, attrs)
    want = np.asarray(reference(inputs))
    assert got.shape == want.shape
    if want.dtype == np.bool_:
        want = want.astype(got.dtype)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_user_ops_differentiate():
    @flow.global_function(type="train")
    def fit() -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), dtype=flow.float64,
                              initializer=flow.constant_initializer(2.0))
        sq = (flow.user_op_builder("sq").Op("square").Input("x", [w]).Output("y").Build()
              .InferAndTryRun().SoleOutputBlob())
        loss = flow.math.reduce_sum(sq)
        flow.optimizer.SGD(0.25, momentum=0).minimize(loss)
        return loss

    fit()
    np.testing.assert_allclose(flow.get_all_variables()["w"], [1.0, 1.0, 1.0])   # w -= .25*2w


def test_module_builder_is_named_and_fed_per_call():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        module = (flow.user_op_module_builder("leaky_relu").InputSize("x", 1).Output("y")
                  .Attr("alpha", 0.5).CheckAndComplete())
        module.user_op_module.InitOpKernel()
        first = module.OpName("lrelu_a").Input("x", [x]).Build().InferAndTryRun()
        first = first.SoleOutputBlob()
        second = module.OpName("lrelu_b").Input("x", [first]).Build().InferAndTryRun()
        return second.RemoteBlobDict()["y"][0]

    got = job(np.array([-4.0, 1.0, 2.0], F))
    np.testing.assert_array_equal(got, [-1.0, 1.0, 2.0])


def test_consistent_builders_build_the_same_ops():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        y = (flow.consistent_user_op_builder("e").Op("exp").Input("x", [x]).Output("y")
             .Build().InferAndTryRun().RemoteBlobList()[0])
        return (flow.consistent_user_op_module_builder("negative").Input("x", [y]).Output("y")
                .Build().InferAndTryRun().SoleOutputBlob())

    np.testing.assert_allclose(job(np.array([0.0, 1.0], F)), -np.exp([0.0, 1.0]), rtol=1e-6)


def _build(make):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return make(x)
    return job(np.ones(2, F))


@pytest.mark.parametrize("make, exc, match", [
    (lambda x: flow.user_op_builder("u").Op("my_custom_op"), NotImplementedError,
     "op type 'my_custom_op' is not available.*C\\+\\+ custom ops"),
    (lambda x: flow.user_op_builder("u").Op("relu").Input("x", [x]).Output("out").Build()
     .InferAndTryRun(), ValueError, "inputs \\['x'\\] do not match the op type's \\['in'\\]"),
    (lambda x: flow.user_op_builder("u").Op("leaky_relu").Input("x", [x]).Output("y").Build()
     .InferAndTryRun(), ValueError, "set the attributes \\['alpha'\\]"),
    (lambda x: flow.user_op_builder("u").Op("relu").Input("in", [x]).Output("out")
     .Attr("beta", 1.0).Build().InferAndTryRun(), ValueError, "no attribute 'beta'"),
    (lambda x: flow.user_op_builder("u").Op("relu").Input("in", [x]).Output("y").Build()
     .InferAndTryRun(), ValueError, "outputs \\['y'\\] are not outputs"),
    (lambda x: flow.user_op_builder("u").Op("relu").Input("in", [x, x]).Output("out").Build()
     .InferAndTryRun(), ValueError, "input 'in' takes one Blob"),
    (lambda x: flow.user_op_builder("u").Op("relu").Input("in", x), TypeError,
     "expected a list of Blobs"),
    (lambda x: flow.user_op_builder("u").Op("relu").Input("in", [x]).Output("out").Build()
     .RemoteBlobList(), RuntimeError, "InferAndTryRun"),
    (lambda x: flow.user_op_module_builder("relu").Op("relu"), ValueError,
     "can't call '.Op"),
    (lambda x: flow.user_op_module_builder("relu").InputSize("in", 2).Input("in", [x]),
     ValueError, "InputSize said 2"),
    (lambda x: flow.user_op_builder("u").Build(), ValueError, "call .Op"),
])
def test_bad_descriptions_are_refused(make, exc, match):
    with pytest.raises(exc, match=match):
        _build(make)


def test_outside_a_job_and_deprecated_attr_type():
    with pytest.raises(RuntimeError, match="inside a function decorated"):
        flow.user_op_builder("u")

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return (flow.user_op_builder("u").Op("leaky_relu").Input("x", [x]).Output("y")
                .Attr("alpha", 0.5, "AttrTypeFloat").Build().InferAndTryRun()
                .SoleOutputBlob())

    with pytest.warns(DeprecationWarning, match="attr_type_name"):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            out = job(np.array([-2.0, 2.0], F))
    np.testing.assert_array_equal(out, [-1.0, 2.0])


def test_the_documented_old_path_of_the_table_is_the_same_module():
    # docs/api documented aioflow.user_op_table before the module moved into oneflow_ops
    import aioflow.oneflow_ops.user_op_table as table
    import aioflow.user_op_table as old_path
    from aioflow.user_op_table import USER_OPS as old_table
    assert old_path is table and old_table is USER_OPS


# -- the op types OneFlow's library registers for its tests ------------------------------------
def _source_job(op_type, placement="0:0", **attrs):
    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        with flow.scope.placement("cpu", placement):
            builder = flow.user_op_builder("source").Op(op_type).Output("out")
            for key, value in attrs.items():
                builder.Attr(key, value)
            out = builder.Build().InferAndTryRun().SoleOutputBlob()
        assert out.batch_axis == 0 or op_type == "TestRandomSource"
        return out
    return job


def test_test_sources_count_from_zero_on_each_device():
    np.testing.assert_array_equal(_source_job("TestSource")(), np.arange(5.0))
    flow.clear_default_session()
    # 10 values over 3 devices, OneFlow's BalancedSplitter: 4, 3, 3, each from 0
    got = _source_job("TestSourceMultiGpuFixedOutNum", "0:0-2", out_num=10)()
    np.testing.assert_array_equal(got, [0, 1, 2, 3, 0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize("seed", [0, 7])
def test_test_random_source_continues_one_mt19937_stream_across_steps(seed):
    job = _source_job("TestRandomSource", seed=seed)
    first, second = job(), job()
    # std::mt19937(seed)'s 32-bit outputs over 2^32: numpy's legacy RandomState draws the
    # same outputs for a full-range uint32 (MT19937 seeded by init_genrand)
    raw = np.random.RandomState(seed).randint(0, 2 ** 32, size=10, dtype=np.uint32)
    want = raw.astype(np.float32) / np.float32(2 ** 32)
    np.testing.assert_array_equal(np.concatenate([first, second]), want)
    if seed == 0:   # the values OneFlow's own test expects
        np.testing.assert_allclose(first, [0.5488136, 0.59284467, 0.7151894, 0.8442659,
                                           0.6027634], rtol=1e-5)


def test_list_attrs_make_outputs_of_those_shapes_and_types_and_cpu_only_ops_run_on_cpu():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        outs = (flow.user_op_builder("t").Op("TestListDataTypeAndListShapeAndListStringAttr")
                .Input("in", [x]).Output("out", 2).Attr("out_shapes", [(4, 4), (2,)])
                .Attr("out_types", [flow.int8, flow.double]).Attr("string_list", ["s"])
                .Build().InferAndTryRun().RemoteBlobList())
        relu = (flow.user_op_builder("r").Op("cpu_only_relu_test").Input("in", [x])
                .Output("out").Build().InferAndTryRun().SoleOutputBlob())
        assert relu.parallel_conf.device_tag() == "cpu"
        return outs[0], outs[1], relu

    x = _u(-1, 1, (2, 3))
    a, b, relu = job(x)
    assert a.shape == (4, 4) and a.dtype == np.int8 and b.shape == (2,) and b.dtype == np.float64
    np.testing.assert_array_equal(relu, np.maximum(x, 0))
