"""OneFlow's scope, env and utility names: current_scope, current_global_function_desc,
env.init / current_resource, the no-effect runtime knobs, MirroredTensorListDef,
convert_oneflow_dtype_to_numpy_dtype, util.unique_str, object_bbox_flip / _scale."""
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_current_scope_follows_placement_and_namespaces():
    seen = {}

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0"), flow.scope.namespace("block"):
            seen["inner"] = flow.current_scope()
        w = flow.get_variable("w", shape=(2,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(0.1).minimize(loss)
        return loss

    fit(np.ones(2, np.float32))
    inner = seen["inner"]
    assert inner.device_parallel_desc_symbol.device_tag == "cpu"
    assert inner.device_parallel_desc_symbol.parallel_num == 1
    assert inner.scope_op_name_prefixes == ["block"]
    assert inner.job_desc_symbol.IsTrainable() is True
    assert inner.job_desc_symbol.job_func is fit
    outside = flow.current_scope()
    assert outside.job_desc_symbol is None and outside.scope_op_name_prefixes == []
    assert outside.device_parallel_desc_symbol.device_tag in ("cpu", "gpu")


def test_scope_current_scope_is_the_deprecated_spelling():
    with pytest.warns(DeprecationWarning, match="flow.current_scope") as record:
        scope = flow.scope.current_scope()
    assert record[0].filename == __file__
    assert type(scope) is type(flow.current_scope())


def test_current_global_function_desc_reads_the_jobs_config():
    seen = {}
    config = flow.function_config()
    config.default_data_type(flow.float64)

    @flow.global_function(type="predict", function_config=config)
    def job(x: tp.Numpy.Placeholder((2,), dtype=flow.float64)) -> tp.Numpy:
        desc = flow.current_global_function_desc()
        seen.update(trainable=desc.IsTrainable(), dtype=desc.default_data_type,
                    has=(desc.HasAttr("default_data_type"), desc.HasAttr("no_such")))
        with pytest.raises(AttributeError, match="no setting 'no_such'"):
            desc.no_such
        return x

    job(np.ones(2))
    assert seen == {"trainable": False, "dtype": flow.float64, "has": (True, False)}
    with pytest.raises(RuntimeError, match="only available inside a job function"):
        flow.current_global_function_desc()


def test_env_init_and_current_resource():
    assert flow.env.init() is False     # aioflow's environment is up once imported
    flow.config.gpu_device_num(1)
    flow.config.cpu_device_num(1)
    resource = flow.current_resource()
    assert (resource.machine_num, resource.gpu_device_num, resource.cpu_device_num) == (1, 1, 1)
    assert flow.env.current_resource is flow.current_resource


@pytest.mark.parametrize("knob, good, bad", [
    (lambda v: flow.env.grpc_use_no_signal(v), True, 1),
    (lambda v: flow.env.logtostderr(v), 1, True),
    (lambda v: flow.env.logbuflevel(v), 0, "0"),
    (lambda v: flow.config.save_downloaded_file_to_local_fs(v), True, "yes"),
    (lambda v: flow.inter_job_reuse_mem_strategy(v), "reuse_mem_priority", "fastest"),
], ids=["grpc_use_no_signal", "logtostderr", "logbuflevel",
        "save_downloaded_file_to_local_fs", "inter_job_reuse_mem_strategy"])
def test_no_effect_knobs_warn_once_at_the_users_line(knob, good, bad, monkeypatch):
    from aioflow.engine import session
    monkeypatch.setattr(session.warn_once, "__defaults__", (set(),))   # a new process
    with pytest.warns(RuntimeWarning, match="has no effect in aioflow") as record:
        knob(good)
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        knob(good)                                       # once: no second warning
    with pytest.raises((TypeError, ValueError)):
        knob(bad)


def test_custom_parallelism_needs_job_name_groups():
    with pytest.raises(ValueError, match="job_name_groups"):
        flow.inter_job_reuse_mem_strategy("custom_parallelism")


def test_old_api_placeholders_and_placement():
    spec = flow.MirroredTensorListDef((2, 3), dtype=flow.int32)
    assert spec.kind == "list_list_numpy" and spec.shape == (2, 3)
    assert flow.device_prior_placement is flow.scope.placement


@pytest.mark.parametrize("dtype", [flow.float16, flow.float32, flow.float64, flow.int8,
                                   flow.int32, flow.int64, flow.uint8])
def test_convert_oneflow_dtype_to_numpy_dtype(dtype):
    numpy_type = flow.convert_oneflow_dtype_to_numpy_dtype(dtype)
    assert np.dtype(numpy_type) == dtype.numpy and isinstance(numpy_type, type)


def test_convert_oneflow_dtype_refuses_other_things():
    with pytest.raises(TypeError, match="flow data type"):
        flow.convert_oneflow_dtype_to_numpy_dtype("float32")


def test_unique_str_never_repeats():
    names = {flow.util.unique_str("op_") for _ in range(100)}
    assert len(names) == 100 and all(n.startswith("op_") for n in names)
    with pytest.raises(TypeError, match="prefix"):
        flow.util.unique_str(3)


def _flip_ref(boxes, sizes, codes):
    """OneFlow's FlipBoxes, box by box."""
    out = boxes.copy()
    for i, (width, height) in enumerate(sizes):
        for box in out[i]:
            if codes[i] & 0x01:
                box[0], box[2] = width - box[2] - 1, width - box[0] - 1
            if codes[i] & 0x10:
                box[1], box[3] = height - box[3] - 1, height - box[1] - 1
    return out


def test_object_bbox_flip_and_scale_match_oneflows_kernels():
    rng = np.random.default_rng(3)
    boxes = rng.uniform(0, 50, (4, 3, 4)).astype(np.float32)
    sizes = np.array([[64, 48], [100, 80], [32, 32], [50, 70]], np.int32)
    codes = np.array([0, 1, 16, 17], np.int8)
    scale = rng.uniform(0.5, 2, (4, 2)).astype(np.float32)

    @flow.global_function(type="predict")
    def job(b: tp.Numpy.Placeholder((4, 3, 4)),
            s: tp.Numpy.Placeholder((4, 2), dtype=flow.int32),
            c: tp.Numpy.Placeholder((4,), dtype=flow.int8),
            k: tp.Numpy.Placeholder((4, 2))):
        return (flow.object_bbox_flip(b, s, c), flow.object_bbox_flip(b, s, 17),
                flow.object_bbox_scale(b, k))

    flipped, both, scaled = job(boxes, sizes, codes, scale).get()
    # Pixel coordinates below 100: a few float32 roundings stay under 1e-5.
    np.testing.assert_allclose(flipped.numpy(), _flip_ref(boxes, sizes, codes), atol=1e-5)
    np.testing.assert_array_equal(flipped.numpy()[0], boxes[0])      # code 0: untouched
    np.testing.assert_allclose(both.numpy(), _flip_ref(boxes, sizes, [17] * 4), atol=1e-5)
    want = boxes * scale[:, None, [0, 1, 0, 1]]
    np.testing.assert_allclose(scaled.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("make, match", [
    (lambda b, s: flow.object_bbox_flip(flow.reshape(b, (2, 4)), s, 1), "bbox"),
    (lambda b, s: flow.object_bbox_flip(b, flow.reshape(s, (4,)), 1), "image_size"),
    (lambda b, s: flow.object_bbox_flip(b, s, 300), "flip_code"),
    (lambda b, s: flow.object_bbox_scale(b, b), "scale"),
])
def test_object_bbox_bad_arguments(make, match):
    @flow.global_function(type="predict")
    def job(b: tp.Numpy.Placeholder((2, 1, 4)),
            s: tp.Numpy.Placeholder((2, 2), dtype=flow.int32)) -> tp.Numpy:
        return make(b, s)

    with pytest.raises(ValueError, match=match):
        job(np.zeros((2, 1, 4), np.float32), np.zeros((2, 2), np.int32))


def test_object_bbox_gradients_match_central_differences():
    from ops import harness as H   # tests/ is on sys.path (tests/conftest.py)
    rng = np.random.default_rng(5)
    boxes = rng.uniform(0, 20, (2, 3, 4))
    sizes = np.array([[30, 40], [25, 25]], np.int32)
    codes = np.array([17, 1], np.int8)
    scale = rng.uniform(0.5, 2, (2, 2))
    H.check_grad(lambda b, s, c: flow.object_bbox_flip(b, s, c), [boxes, sizes, codes],
                 wrt=[0])
    H.check_grad(lambda b, k: flow.object_bbox_scale(b, k), [boxes, scale])
