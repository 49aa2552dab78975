"""The OneFlow op types that ``flow.user_op_builder`` can build, with OneFlow's input,
output and attribute names, each mapped onto aioflow's own ops (which bring their shape
checks and gradients).

An entry: op type -> :class:`UserOpSpec`. ``build(inputs, attrs, name)`` receives the
inputs as {input name: [Blob, ...]} and the attributes with defaults filled in, and returns
{output name: [Blob, ...]}.
"""
from __future__ import annotations

from . import math_api, nn_api, ops_api
from .array_ops import gather
from .dynamic_api import where
from .user_op_spec import REQUIRED, UserOpSpec
from .user_op_system import SYSTEM_USER_OPS
from .user_op_test_ops import TEST_USER_OPS

__all__ = ["UserOpSpec", "USER_OPS", "REQUIRED"]


def _unary(function_name: str, inputs=("x",), outputs=("y",)) -> UserOpSpec:
    fn = getattr(math_api, function_name)

    def build(ins, attrs, name):
        return {outputs[0]: [fn(ins[inputs[0]][0], name=name)]}
    return UserOpSpec(inputs, outputs, build)


def _binary(function_name: str, inputs=("x", "y"), outputs=("z",)) -> UserOpSpec:
    fn = getattr(math_api, function_name)

    def build(ins, attrs, name):
        return {outputs[0]: [fn(ins[inputs[0]][0], ins[inputs[1]][0], name=name)]}
    return UserOpSpec(inputs, outputs, build)


def _scalar(function_name: str) -> UserOpSpec:
    fn = getattr(math_api, function_name)

    def build(ins, attrs, name):
        if attrs["has_float_operand"]:
            operand = float(attrs["float_operand"])
        elif attrs["has_int_operand"]:
            operand = int(attrs["int_operand"])
        else:
            raise ValueError(f"user op {function_name!r}: set has_float_operand or "
                             "has_int_operand to True")
        return {"out": [fn(ins["in"][0], operand, name=name)]}
    return UserOpSpec(("in",), ("out",), build,
                      {"has_int_operand": False, "has_float_operand": False,
                       "int_operand": 0, "float_operand": 0.0})


def _reduce(function_name: str) -> UserOpSpec:
    fn = getattr(math_api, function_name)

    def build(ins, attrs, name):
        return {"output_tensor": [fn(ins["input_tensor"][0], axis=list(attrs["axis"]),
                                     keepdims=bool(attrs["keepdims"]), name=name)]}
    return UserOpSpec(("input_tensor",), ("output_tensor",), build,
                      {"axis": REQUIRED, "keepdims": False})


def _matmul(ins, attrs, name):
    return {"out": [ops_api.matmul(ins["a"][0], ins["b"][0], bool(attrs["transpose_a"]),
                                   bool(attrs["transpose_b"]), float(attrs["alpha"]),
                                   name=name)]}


def _bias_add(ins, attrs, name):
    a, b = ins["a"][0], ins["b"][0]
    axis = int(attrs["axis"]) % max(a.ndim, 1)
    shape = [1] * a.ndim
    shape[axis] = b.size
    return {"out": [math_api.add(a, ops_api.reshape(b, shape), name=name)]}


def _one(function, in_name="in", out_name="out", **attr_of_kw):
    """An op with one input and one output that maps onto ``function(x, **kwargs)``;
    ``attr_of_kw``: the function's keyword -> the OneFlow attribute giving its value."""
    def build(ins, attrs, name):
        kwargs = {kw: attrs[attr] for kw, attr in attr_of_kw.items()}
        return {out_name: [function(ins[in_name][0], name=name, **kwargs)]}
    return build


_MATH_UNARY = ("abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos",
               "cosh", "erf", "erfc", "exp", "expm1", "floor", "log", "log1p", "log_sigmoid",
               "negative", "reciprocal", "reciprocal_no_nan", "rint", "round", "rsqrt", "sign",
               "sin", "sinh", "softplus", "sqrt", "square", "tan", "tanh")
_BROADCAST = {"broadcast_add": "add", "broadcast_sub": "subtract", "broadcast_mul": "multiply",
              "broadcast_div": "divide", "broadcast_maximum": "maximum",
              "broadcast_minimum": "minimum", "broadcast_pow": "pow",
              "broadcast_equal": "equal", "broadcast_not_equal": "not_equal",
              "broadcast_greater": "greater", "broadcast_greater_equal": "greater_equal",
              "broadcast_less": "less", "broadcast_less_equal": "less_equal",
              "broadcast_logical_and": "logical_and"}

USER_OPS: dict[str, UserOpSpec] = {
    **{op: _unary(op) for op in _MATH_UNARY},
    "sigmoid_v2": _unary("sigmoid"),
    **{op: _binary(fn) for op, fn in _BROADCAST.items()},
    "multiply": _binary("multiply", outputs=("out",)),
    "relu": _unary("relu", ("in",), ("out",)),
    "sigmoid": _unary("sigmoid", ("in",), ("out",)),
    "gelu": _unary("gelu", ("in",), ("out",)),
    "argmax": _unary("argmax", ("in",), ("out",)),
    "scalar_add": _scalar("add"),
    "scalar_mul": _scalar("multiply"),
    **{op: _reduce(op) for op in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                                  "reduce_any", "reduce_all")},
    "softmax": UserOpSpec(("in",), ("out",), _one(nn_api.softmax)),
    "leaky_relu": UserOpSpec(("x",), ("y",), _one(nn_api.leaky_relu, "x", "y",
                                                  alpha="alpha"), {"alpha": REQUIRED}),
    "identity": UserOpSpec(("in",), ("out",), _one(ops_api.identity)),
    "cast": UserOpSpec(("in",), ("out",), _one(ops_api.cast, dtype="dtype"),
                       {"dtype": REQUIRED}),
    "reshape": UserOpSpec(("in",), ("out",), _one(ops_api.reshape, shape="shape"),
                          {"shape": REQUIRED}),
    "expand_dims": UserOpSpec(("in",), ("out",), _one(ops_api.expand_dims,
                                                      axis="axis"), {"axis": REQUIRED}),
    "squeeze": UserOpSpec(("in",), ("out",), _one(ops_api.squeeze, axis="axes"),
                          {"axes": REQUIRED}),
    "flatten": UserOpSpec(("in",), ("out",), _one(ops_api.flatten,
                                                  start_dim="start_dim", end_dim="end_dim"),
                          {"start_dim": 0, "end_dim": -1}),
    "transpose": UserOpSpec(("input",), ("output",), _one(ops_api.transpose, "input",
                                                          "output", perm="perm"),
                            {"perm": REQUIRED}),
    "zeros_like": UserOpSpec(("like",), ("out",), _one(ops_api.zeros_like, "like")),
    "ones_like": UserOpSpec(("like",), ("out",), _one(ops_api.ones_like, "like")),
    "matmul": UserOpSpec(("a", "b"), ("out",), _matmul,
                         {"transpose_a": False, "transpose_b": False, "alpha": 1.0}),
    "batch_matmul": UserOpSpec(("a", "b"), ("out",), _matmul,
                               {"transpose_a": False, "transpose_b": False, "alpha": 1.0}),
    "bias_add": UserOpSpec(("a", "b"), ("out",), _bias_add, {"axis": REQUIRED}),
    "add_n": UserOpSpec(("in",), ("out",),
                        lambda ins, attrs, name: {"out": [math_api.add_n(ins["in"],
                                                                             name=name)]},
                        list_inputs=("in",)),
    "concat": UserOpSpec(("in",), ("out",),
                         lambda ins, attrs, name: {"out": [ops_api.concat(
                             ins["in"], axis=attrs["axis"], name=name)]},
                         {"axis": REQUIRED, "max_dim_size": 0}, list_inputs=("in",)),
    "gather": UserOpSpec(("in", "indices"), ("out",),
                         lambda ins, attrs, name: {"out": [gather(
                             ins["in"][0], ins["indices"][0], axis=attrs["axis"],
                             name=name)]}, {"axis": 0}),
    "where": UserOpSpec(("condition", "x", "y"), ("out",),
                        lambda ins, attrs, name: {"out": [where(
                            ins["condition"][0], ins["x"][0], ins["y"][0], name=name)]}),
    # The op types of OneFlow's own job passes (loss scaling, clipping, split gradients).
    **SYSTEM_USER_OPS,
    # The op types OneFlow's library registers for its own tests (TestSource, ...).
    **TEST_USER_OPS,
}
