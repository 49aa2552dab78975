"""The rest of OneFlow v0.3.4's ``FunctionConfig`` setters (``function_util.py``).

Scripts of the v0.3 model zoo set them routinely (``enable_fuse_add_to_output(True)``,
``indexed_slices_optimizer_conf({...})``, ``cudnn_conv_heuristic_search_algo(False)``).
Each is accepted with OneFlow's signature: a bool setting called without an argument sets
True, as OneFlow's did; a setting that needs a value and gets none raises ``TypeError``.
The value is checked (type, and the choices OneFlow asserted) and recorded; then either

* it is **applied**: ``enable_reused_mem`` (the job's memory plan),
  ``enable_fuse_model_update_ops`` (one fused update per optimizer),
  ``default_initializer_conf`` (the initializer of variables declared without one) and
  ``train.loss_scale_factor`` (the loss scale of the old ``add_loss`` API); or
* it has **no effect** in aioflow, and its first use warns once (a ``RuntimeWarning`` at
  the user's line) saying why. ``docs/porting.md`` lists each, with the same reason.

>>> import aioflow as flow
>>> config = flow.FunctionConfig()
>>> config.enable_reused_mem(False)
>>> config.setting("enable_reused_mem")
False
>>> config.cudnn_buf_limit_mbyte("1024")
Traceback (most recent call last):
...
TypeError: function_config.cudnn_buf_limit_mbyte: expected an int, got '1024'
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable
from .. import initializers as init

__all__ = ["Setting", "SETTINGS", "no_effect_rows", "check_initializer_conf",
           "initializer_from_conf"]

_REQUIRED = object()   # a setter whose value has no default: calling it bare is an error


@dataclass(frozen=True)
class Setting:
    """One setter: its dotted name, how its value is checked, the value a bare call sets
    (``_REQUIRED``: none), the value before any call, and, for a setting aioflow does not
    act on, why (``why`` empty: applied)."""

    name: str
    check: Callable[[str, Any], Any]
    bare: Any = _REQUIRED
    initial: Any = None
    why: str = ""


# -- value checks: each takes the public name (for the message) and the value ----------------

def _type_name(kind) -> str:
    return {bool: "a bool", int: "an int", float: "a float", str: "a str",
            dict: "a dict"}[kind]


def _of(kind):
    """OneFlow's ``assert type(value) is kind`` (its C++ fields would refuse the rest); a
    bool is no int, an int is a fine float."""
    def check(name, value):
        accepted = (numbers.Real,) if kind is float else (kind,)
        if not isinstance(value, accepted) or (kind is not bool and isinstance(value, bool)):
            raise TypeError(f"{name}: expected {_type_name(kind)}, got {value!r}")
        return float(value) if kind is float else value
    return check


def _non_negative_int(name, value):
    value = _of(int)(name, value)
    if value < 0:
        raise ValueError(f"{name}: expected an int >= 0, got {value!r}")
    return value


def _one_of(*choices):
    def check(name, value):
        if value not in choices:
            raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, "
                             f"got {value!r}")
        return value
    return check


def _anything(name, value):
    """OneFlow's deprecated setters printed a notice and ignored their argument."""
    return value


def _op_name_list(name, value):
    """``{"op_name": ["embedding", ...]}`` (OneFlow's ``OpNameSet``)."""
    if not isinstance(value, dict) or set(value) - {"op_name"}:
        raise ValueError(f"{name}: expected {{'op_name': [op names]}}, got {value!r}")
    names = value.get("op_name", [])
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{name}['op_name']: expected a list of str, got {names!r}")
    return {"op_name": list(names)}


def _indexed_slices_conf(name, value):
    """OneFlow's ``IndexedSlicesOptimizerConf``: ``include_op_names`` / ``exclude_op_names``,
    each ``{"op_name": [...]}``, and ``enable``."""
    _of(dict)(name, value)
    unknown = set(value) - {"enable", "include_op_names", "exclude_op_names"}
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {sorted(unknown)}; expected enable, "
                         "include_op_names or exclude_op_names")
    out = {key: _op_name_list(f"{name}[{key!r}]", value[key])
           for key in ("include_op_names", "exclude_op_names") if key in value}
    if "enable" in value:
        out["enable"] = _of(bool)(f"{name}['enable']", value["enable"])
    return out


def _plain_dict(name, value):
    return dict(_of(dict)(name, value))


# -- default_initializer_conf: OneFlow's InitializerConf as a dict ---------------------------

_NORMS = {"kFanIn": "fan_in", "kFanOut": "fan_out", "kAverage": "fan_avg", 0: "fan_in",
          1: "fan_out", 2: "fan_avg"}
_DISTRIBUTIONS = {"kRandomUniform": "random_uniform", "kRandomNormal": "random_normal",
                  "kTruncatedNormal": "truncated_normal", 0: "random_uniform",
                  1: "random_normal", 2: "truncated_normal"}


def _field(name, conf, key, default, table=None):
    value = conf.get(key, default)
    if table is None:
        return value
    if value not in table:
        raise ValueError(f"{name}[{key!r}]: expected one of {sorted(map(str, table))}, "
                         f"got {value!r}")
    return table[value]


def _initializer_builders():

    def scaling(name, conf, scale=None, distribution=None):
        return init.variance_scaling_initializer(
            scale=conf.get("scale", 1.0) if scale is None else scale,
            mode=_field(name, conf, "variance_norm", "kFanIn", _NORMS),
            distribution=distribution or _field(name, conf, "distribution",
                                                "kRandomUniform", _DISTRIBUTIONS),
            data_format=conf.get("data_format", ""))

    return {
        "constant_conf": lambda n, c: init.constant_initializer(c.get("value", 0)),
        "constant_int_conf": lambda n, c: init.constant_initializer(c.get("value", 0)),
        "random_uniform_conf": lambda n, c: init.random_uniform_initializer(
            c.get("min", 0), c.get("max", 1)),
        "random_uniform_int_conf": lambda n, c: init.random_uniform_initializer(
            c.get("min", 0), c.get("max", 1)),
        "random_normal_conf": lambda n, c: init.random_normal_initializer(
            c.get("mean", 0.0), c.get("std", 1.0)),
        "truncated_normal_conf": lambda n, c: init.truncated_normal_initializer(
            c.get("mean", 0.0), c.get("std", 0.05)),
        # Xavier: uniform of variance 1/fan; MSRA: normal of variance 2/fan (OneFlow's
        # kernels: bounds sqrt(3/fan), standard deviation sqrt(2/fan)).
        "xavier_conf": lambda n, c: scaling(n, c, 1.0, "random_uniform"),
        "msra_conf": lambda n, c: scaling(n, c, 2.0, "random_normal"),
        "variance_scaling_conf": scaling,
    }


def initializer_from_conf(name: str, conf: dict):
    """The initializer an ``InitializerConf`` dict (``{"random_normal_conf": {"std":
    0.02}}``) describes; ``name`` names the setting in errors."""
    builders = _initializer_builders()
    if not isinstance(conf, dict) or len(conf) != 1 or next(iter(conf)) not in builders:
        raise ValueError(f"{name}: expected a dict of one of {', '.join(builders)} to its "
                         f"fields, got {conf!r}")
    (kind, fields), = conf.items()
    if not isinstance(fields, dict):
        raise TypeError(f"{name}[{kind!r}]: expected a dict of fields, got {fields!r}")
    return builders[kind](f"{name}[{kind!r}]", fields)


def check_initializer_conf(name, value):
    """A dict, or an ``InitializerConf`` message (``aioflow.core.job.initializer_conf_pb2``)
    turned into one; built once now so that a bad conf fails at the setter."""
    if hasattr(value, "WhichOneof"):
        from google.protobuf.json_format import MessageToDict
        value = MessageToDict(value, preserving_proto_field_name=True)
    initializer_from_conf(name, value)
    return dict(value)


# -- the table -------------------------------------------------------------------------------

_GPU = "it chooses among cuDNN / CUDA kernels; aioflow's kernels are its own"
_MEMORY = ("aioflow plans each job's buffers itself (flow.config.enable_memory_plan, "
           "function_config.enable_reused_mem)")
_DEPRECATED = "deprecated in OneFlow v0.3.4 too, where it had no effect either"
_PLACEMENT = ("it spreads optimizer state or casts over OneFlow's devices; aioflow keeps "
              "whole variables on each device and all-reduces gradients")
_HALF = "aioflow computes in the job's data type; it has no float16 compute modes"
_XRT = "aioflow has no XLA or TensorRT backend"
_QAT = ("aioflow has no quantization-aware training pass; flow.quantization offers the "
        "fake-quantization ops to build one by hand")
_GRAPH = "an option of OneFlow's graph compiler that aioflow's compiler has no counterpart of"

_bool, _int, _float, _str = _of(bool), _of(int), _of(float), _of(str)

SETTINGS: dict[str, Setting] = {s.name: s for s in [
    # applied
    Setting("enable_reused_mem", _bool, True, True),
    Setting("enable_fuse_model_update_ops", _bool, True),
    Setting("default_initializer_conf", check_initializer_conf),
    Setting("train.loss_scale_factor", _float),
    # no effect
    Setting("exp_run_conf", _plain_dict, why=_GRAPH),
    Setting("use_memory_allocation_algorithm_v2", _bool, why=_MEMORY),
    Setting("enable_cudnn", _bool, True, True, why=_GPU),
    Setting("cudnn_buf_limit_mbyte", _non_negative_int, why=_GPU),
    Setting("cudnn_conv_force_fwd_algo", _int, why=_GPU),
    Setting("cudnn_conv_force_bwd_data_algo", _int, why=_GPU),
    Setting("cudnn_conv_force_bwd_filter_algo", _int, why=_GPU),
    Setting("cudnn_conv_heuristic_search_algo", _bool, why=_GPU),
    Setting("cudnn_conv_use_deterministic_algo_only", _bool, why=_GPU),
    Setting("enable_cudnn_fused_normalization_add_relu", _bool, why=_GPU),
    Setting("enable_fuse_add_to_output", _bool, why="aioflow has no add-to-output fusion; "
            "its compiler's own fusions follow flow.config.enable_fusion"),
    Setting("enable_fuse_cast_scale", _bool, why="aioflow has no cast-scale fusion (the "
            "jobs compute in one data type)"),
    Setting("enable_inplace", _bool, True, True, why=_MEMORY),
    Setting("do_parallel_cast_before_widening_type_cast", _bool, True, True, why=_PLACEMENT),
    Setting("optimizer_placement_optimization_mode",
            _one_of("non_distributed", "distributed_split"), why=_PLACEMENT),
    Setting("optimizer_placement_optimization_threshold", _int, why=_PLACEMENT),
    Setting("enable_non_distributed_optimizer", _bool, True, why=_PLACEMENT),
    Setting("prune_parallel_cast_ops", _bool, True, why=_PLACEMENT),
    Setting("prune_cast_to_static_shape_ops", _bool, True, why=_GRAPH),
    Setting("enable_true_half_config_when_conv", _bool, True, why=_HALF),
    Setting("cudnn_conv_enable_true_half", _bool, True, why=_HALF),
    Setting("cudnn_conv_enable_pseudo_half", _bool, why=_HALF),
    Setting("enable_cudnn_conv_pseudo_half", _bool, why=_HALF),
    Setting("enable_float_compute_for_half_gemm", _bool, True, why=_HALF),
    Setting("enable_auto_mixed_precision", _bool, True, why="aioflow has no automatic mixed "
            "precision: the job computes in its default_data_type"),
    Setting("enable_quantization_aware_training", _bool, True, why=_QAT),
    Setting("enable_qat", _bool, True, why=_QAT),
    Setting("qat.per_channel_weight_quantization", _bool, True, why=_QAT),
    Setting("qat.symmetric", _bool, True, why=_QAT),
    Setting("qat.moving_min_max_momentum", _float, why=_QAT),
    Setting("qat.moving_min_max_stop_update_after_iters", _int, why=_QAT),
    Setting("enable_keep_header_only", _bool, True, why=_GRAPH),
    Setting("concurrency_width", _int, why="steps of a job run in order; "
            "flow.config.pipeline_depth bounds how many are in flight"),
    # applied by the optimizers: a listed variable updates only the rows with a gradient
    Setting("indexed_slices_optimizer_conf", _indexed_slices_conf),
    Setting("enable_gradients_stats_aggregation", _bool, True, why=_GRAPH),
    Setting("train.secondary_lr", _float, why="the old API's second learning rate "
            "(for biases) is not applied: train.primary_lr applies to every variable"),
    Setting("train.optimizer_placement_optimization_mode",
            _one_of("non_distributed", "distributed_split"), why=_PLACEMENT),
    Setting("train.optimizer_placement_optimization_threshold", _int, why=_PLACEMENT),
    Setting("use_xla_jit", _bool, True, why=_XRT),
    Setting("use_tensorrt", _bool, True, why=_XRT),
    Setting("tensorrt.use_fp16", _bool, True, why=_XRT),
    Setting("tensorrt.use_int8", _bool, True, why=_XRT),
    Setting("tensorrt.int8_calibration", _str, why=_XRT),
    Setting("allow_cpu_return_op", _bool, why="results always come back to the host"),
    Setting("enable_ssp", _bool, True, False),   # flow.experimental.scope.config reads it
    Setting("ssp_partition_strategy", _one_of("naive_sequantial", "disable"),
            initial="naive_sequantial", why=_GRAPH),
    Setting("static_mem_alloc_policy_white_list.add", _str, why=_MEMORY),
    Setting("static_mem_alloc_policy_white_list.remove", _str, why=_MEMORY),
] + [Setting(name, _anything, None, why=_DEPRECATED) for name in (
    "enable_inplace_in_reduce_struct", "enable_nccl", "use_nccl_inter_node_communication",
    "use_boxing_v2", "enable_all_reduce_group", "all_reduce_group_num",
    "all_reduce_lazy_ratio", "all_reduce_group_min_mbyte", "all_reduce_group_size_warmup",
    "all_reduce_fp16", "disable_all_reduce_sequence",
    "non_distributed_optimizer_group_size_mbyte")]}

# OneFlow's names of its static memory allocation policies (read by the white list's
# ``has`` / ``add`` / ``remove``).
MEMORY_POLICIES = ("use_mem_size_first_algo", "use_mutual_exclusion_first_algo",
                   "use_time_line_algo")


def no_effect_rows() -> list[tuple[str, str]]:
    """(``function_config.<name>``, why) of each setting aioflow does not act on."""
    return [(f"function_config.{s.name}", s.why) for s in SETTINGS.values() if s.why]
