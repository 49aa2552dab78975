"""Every ``FunctionConfig`` and ``flow.config`` setter of OneFlow v0.3.4 is accepted:
applied where aioflow has the mechanism, else checked, warned about once and without
effect (issue 24). The names below are OneFlow's (``function_util.py`` and
``config_util.py`` at tag v0.3.4), with a value each accepts."""
from __future__ import annotations

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.engine import session as session_mod
from aioflow.engine.function import _compile_options

# OneFlow v0.3.4's FunctionConfig setters (dotted: grouped), each with a valid value.
FUNCTION_SETTERS = {
    "default_initializer_conf": {"constant_conf": {"value": 0.5}},
    "exp_run_conf": {}, "use_memory_allocation_algorithm_v2": True,
    "static_mem_alloc_policy_white_list.add": "use_time_line_algo",
    "static_mem_alloc_policy_white_list.remove": "use_time_line_algo",
    "enable_cudnn": True, "cudnn_buf_limit_mbyte": 1024, "cudnn_conv_force_fwd_algo": 0,
    "cudnn_conv_force_bwd_data_algo": 1, "cudnn_conv_force_bwd_filter_algo": 1,
    "cudnn_conv_heuristic_search_algo": False, "enable_cudnn_fused_normalization_add_relu": True,
    "enable_fuse_add_to_output": True, "enable_fuse_cast_scale": True,
    "cudnn_conv_use_deterministic_algo_only": True, "enable_reused_mem": True,
    "enable_inplace": True, "enable_inplace_in_reduce_struct": True, "enable_nccl": True,
    "use_nccl_inter_node_communication": True, "use_boxing_v2": True,
    "do_parallel_cast_before_widening_type_cast": True, "enable_all_reduce_group": True,
    "all_reduce_group_num": 8, "all_reduce_lazy_ratio": 0.5, "all_reduce_group_min_mbyte": 16,
    "all_reduce_group_size_warmup": 2.0, "all_reduce_fp16": False,
    "optimizer_placement_optimization_mode": "distributed_split",
    "train.optimizer_placement_optimization_mode": "non_distributed",
    "optimizer_placement_optimization_threshold": 1024,
    "train.optimizer_placement_optimization_threshold": 1024,
    "enable_non_distributed_optimizer": True, "disable_all_reduce_sequence": True,
    "prune_parallel_cast_ops": True, "prune_cast_to_static_shape_ops": True,
    "non_distributed_optimizer_group_size_mbyte": 32, "enable_true_half_config_when_conv": True,
    "cudnn_conv_enable_true_half": True, "cudnn_conv_enable_pseudo_half": True,
    "enable_cudnn_conv_pseudo_half": True, "enable_float_compute_for_half_gemm": True,
    "enable_quantization_aware_training": True, "enable_qat": True,
    "qat.per_channel_weight_quantization": True, "qat.symmetric": False,
    "qat.moving_min_max_momentum": 0.95, "qat.moving_min_max_stop_update_after_iters": 1000,
    "enable_auto_mixed_precision": True, "enable_keep_header_only": True,
    "concurrency_width": 4,
    "indexed_slices_optimizer_conf": {"include_op_names": {"op_name": ["wide_embedding"]}},
    "enable_fuse_model_update_ops": True, "enable_gradients_stats_aggregation": True,
    "train.loss_scale_factor": 1024.0, "train.primary_lr": 0.1, "train.secondary_lr": 0.1,
    "train.model_update_conf": {"naive_conf": {}},
    "use_xla_jit": True, "use_tensorrt": True, "tensorrt.use_fp16": True,
    "tensorrt.use_int8": True, "tensorrt.int8_calibration": "/calibration",
    "allow_cpu_return_op": True, "default_data_type": flow.float,
}

CONFIG_SETTERS = {
    "load_library": "libcustom.so", "load_library_now": "libcustom.so", "machine_num": 1,
    "gpu_device_num": 1, "cpu_device_num": 1, "comm_net_worker_num": 4,
    "max_mdsave_worker_num": 8, "enable_numa_aware_cuda_malloc_host": True,
    "compute_thread_pool_size": 2, "rdma_mem_block_mbyte": 8, "rdma_recv_msg_buf_mbyte": 6,
    "reserved_host_mem_mbyte": 0, "reserved_device_mem_mbyte": 0, "use_rdma": False,
    "thread_enable_local_message_queue": True, "enable_debug_mode": False,
    "save_downloaded_file_to_local_fs": False, "persistence_buf_byte": 1 << 20,
    "enable_legacy_model_io": True, "enable_model_io_v2": True, "collect_act_event": True,
    "enable_tensor_float_32_compute": True,
    "collective_boxing.enable_fusion": True, "collective_boxing.num_callback_threads": 4,
    "collective_boxing.nccl_num_streams": 2, "collective_boxing.nccl_fusion_threshold_mb": 16,
    "collective_boxing.nccl_fusion_all_reduce_use_buffer": False,
    "collective_boxing.nccl_fusion_all_reduce": True,
    "collective_boxing.nccl_fusion_reduce_scatter": True,
    "collective_boxing.nccl_fusion_all_gather": True, "collective_boxing.nccl_fusion_reduce": True,
    "collective_boxing.nccl_fusion_broadcast": True, "collective_boxing.nccl_fusion_max_ops": 64,
    "collective_boxing.nccl_enable_all_to_all": True,
    "collective_boxing.nccl_enable_mixed_fusion": True,
}


def _resolve(root, dotted):
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    flow.clear_default_session()
    monkeypatch.setattr(session_mod.warn_once, "__defaults__", (set(),))   # a new process
    yield
    flow.clear_default_session()


@pytest.mark.filterwarnings("ignore:.*has no effect in aioflow:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(FUNCTION_SETTERS))
def test_every_function_config_setter_of_oneflow_is_accepted(name):
    config = flow.function_config()
    _resolve(config, name)(FUNCTION_SETTERS[name])


@pytest.mark.filterwarnings("ignore:.*has no effect in aioflow:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CONFIG_SETTERS))
def test_every_flow_config_setter_of_oneflow_is_accepted(name):
    _resolve(flow.config, name)(CONFIG_SETTERS[name])


def test_a_setting_without_effect_warns_once_at_the_users_line():
    config = flow.function_config()
    with pytest.warns(RuntimeWarning, match=r"enable_fuse_add_to_output\(True\) has no "
                                            r"effect in aioflow: .*add-to-output") as record:
        config.enable_fuse_add_to_output(True)
    assert record[0].filename == __file__
    config.enable_fuse_add_to_output(False)   # once per process: no second warning


@pytest.mark.parametrize("call, error, message", [
    (lambda c: c.cudnn_buf_limit_mbyte("1024"), TypeError,
     r"function_config.cudnn_buf_limit_mbyte: expected an int, got '1024'"),
    (lambda c: c.enable_fuse_add_to_output(1), TypeError,
     r"enable_fuse_add_to_output: expected a bool, got 1"),
    (lambda c: c.optimizer_placement_optimization_mode("split"), ValueError,
     r"expected one of 'non_distributed', 'distributed_split', got 'split'"),
    (lambda c: c.indexed_slices_optimizer_conf({"include_op_name": {}}), ValueError,
     r"unknown field\(s\) \['include_op_name'\]"),
    (lambda c: c.indexed_slices_optimizer_conf({"include_op_names": {"op_name": [1]}}),
     TypeError, r"\['op_name'\]: expected a list of str"),
    (lambda c: c.default_initializer_conf({"gaussian_conf": {}}), ValueError,
     r"default_initializer_conf: expected a dict of one of constant_conf"),
    (lambda c: c.qat.moving_min_max_momentum("0.9"), TypeError,
     r"qat.moving_min_max_momentum: expected a float"),
    (lambda c: c.cudnn_buf_limit_mbyte(), TypeError, r"cudnn_buf_limit_mbyte\(\) needs a value"),
    (lambda c: c.static_mem_alloc_policy_white_list.add("fastest"), ValueError,
     r"policy must be one of use_mem_size_first_algo"),
    (lambda c: c.no_such_setting(1), AttributeError, r"no setting 'no_such_setting'"),
])
def test_bad_settings_name_the_setter_and_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call(flow.function_config())


@pytest.mark.parametrize("call, error, message", [
    (lambda: flow.config.comm_net_worker_num(True), TypeError,
     r"flow.config.comm_net_worker_num: expected an int, got True"),
    (lambda: flow.config.reserved_host_mem_mbyte(-1), ValueError, r"expected an int >= 0"),
    (lambda: flow.config.collective_boxing.enable_fusion("yes"), TypeError,
     r"collective_boxing.enable_fusion: expected a bool, got 'yes'"),
    (lambda: flow.config.load_library(), TypeError, r"load_library\(\) needs a value"),
])
def test_bad_config_values_name_the_knob(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_bare_bool_setter_sets_true_and_the_desc_reads_without_setting():
    config = flow.function_config()
    assert config.setting("enable_fuse_model_update_ops") is None
    seen = {}

    @flow.global_function(type="predict", function_config=config)
    def job(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        desc = flow.current_global_function_desc()
        seen["before"] = desc.enable_fuse_model_update_ops
        return x

    job(np.ones(1, np.float32))
    assert seen["before"] is None and config.setting("enable_fuse_model_update_ops") is None
    config.enable_fuse_model_update_ops()
    assert config.setting("enable_fuse_model_update_ops") is True


def test_function_desc_of_a_config_reads_its_settings_as_set():
    # OneFlow: func_config.function_desc.<setting> reads the job config being built
    config = flow.FunctionConfig()
    assert config.function_desc.enable_fuse_model_update_ops is None
    config.enable_fuse_model_update_ops()
    config.default_logical_view(flow.scope.mirrored_view())
    assert config.function_desc.enable_fuse_model_update_ops is True
    with pytest.raises(AttributeError, match="no setting 'not_a_setting'"):
        config.function_desc.not_a_setting


def test_enable_reused_mem_false_turns_the_jobs_memory_plan_off():
    config = flow.function_config()
    assert _compile_options(config)["memory_plan"] is True
    config.enable_reused_mem(False)
    assert _compile_options(config)["memory_plan"] is False


def _trained_ops(fuse):
    config = flow.function_config()
    if fuse is not None:
        config.enable_fuse_model_update_ops(fuse)

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.5, seed=7)
        hidden = flow.layers.dense(x, 5, activation=flow.math.relu, name="fc1",
                                   kernel_initializer=init)
        loss = flow.math.reduce_mean(flow.layers.dense(hidden, 1, name="fc2",
                                                       kernel_initializer=init) ** 2)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0.9).minimize(loss)
        return loss

    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 12
    losses = [float(train(x).item()) for _ in range(3)]
    ops = {node.op.name for node in train.compiled_for(session_mod.default_session()).graph.nodes}
    flow.clear_default_session()
    return ops, losses


def test_enable_fuse_model_update_ops_fuses_the_updates_of_its_job():
    fused_ops, fused_losses = _trained_ops(True)
    plain_ops, plain_losses = _trained_ops(False)
    assert "multi_momentum_update" in fused_ops and "momentum_update" not in fused_ops
    assert "multi_momentum_update" not in plain_ops and "momentum_update" in plain_ops
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5)


def test_default_initializer_conf_initializes_variables_declared_without_one():
    config = flow.function_config()
    config.default_initializer_conf({"constant_conf": {"value": 0.25}})

    @flow.global_function(type="predict", function_config=config)
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,))
        v = flow.get_variable("v", shape=(3,), initializer=flow.ones_initializer())
        return x * w + v

    np.testing.assert_allclose(job(np.ones((2, 3), np.float32)), np.full((2, 3), 1.25))


def test_docs_porting_lists_every_setting_without_effect_with_its_reason():
    import pathlib
    from aioflow.config_knobs import no_effect_rows as knob_rows
    from aioflow.engine.function_settings import no_effect_rows
    page = (pathlib.Path(__file__).parent.parent / "docs" / "porting.md").read_text()
    rows = {line for line in page.splitlines() if line.startswith("| `")}
    for name, why in no_effect_rows() + knob_rows():
        assert any(f"`{name}`" in row and why in row for row in rows), name
