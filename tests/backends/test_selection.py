"""How a job's backend is chosen, and the errors when it cannot be (no GPU needed)."""
import warnings

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow import backends
from aioflow.backends.numpy_backend import NumpyBackend
from aioflow.ops.registry import MissingKernelError
from aioflow.engine.session import default_session

NO_GPU = backends.gpu_unusable_reason()


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _double():
    @flow.global_function(type="predict")
    def double(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x * 2
    return double


X3 = np.arange(3, dtype=np.float32)


def test_unplaced_jobs_run_on_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.delenv("AIOFLOW_DEVICE", raising=False)
    double = _double()
    np.testing.assert_array_equal(double(X3), [0, 2, 4])
    expected = "numpy" if NO_GPU else "cupy"
    assert double.compiled_for(default_session()).backend.name == expected


def test_the_cpu_override_wins_over_gpu_placement(monkeypatch):
    import aioflow.engine.session as session_mod
    monkeypatch.setattr(session_mod.warn_once, "__defaults__", (set(),))  # a new process
    monkeypatch.setenv("AIOFLOW_DEVICE", "cpu")

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with flow.scope.placement("gpu", "0:0"):
                return x + 1

    np.testing.assert_array_equal(job(X3), [1, 2, 3])
    assert job.compiled_for(default_session()).backend.name == "numpy"


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_asking_for_the_gpu_without_one_fails_before_any_compute(monkeypatch):
    monkeypatch.setenv("AIOFLOW_DEVICE", "gpu")
    double = _double()
    with pytest.raises(backends.BackendUnavailable, match="AIOFLOW_DEVICE=gpu asks for the GPU"):
        double(X3)
    monkeypatch.setenv("AIOFLOW_DEVICE", "cpu")
    np.testing.assert_array_equal(double(X3), [0, 2, 4])   # the job is still usable


def test_an_unknown_device_override_is_refused(monkeypatch):
    monkeypatch.setenv("AIOFLOW_DEVICE", "tpu")
    with pytest.raises(ValueError, match="AIOFLOW_DEVICE: expected 'cpu' or 'gpu', got 'tpu'"):
        _double()(X3)


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_gpu_placement_without_a_gpu_warns_once_at_the_users_line(monkeypatch):
    import aioflow.engine.session as session_mod
    monkeypatch.setattr(session_mod.warn_once, "__defaults__", (set(),))  # a new process
    monkeypatch.delenv("AIOFLOW_DEVICE", raising=False)   # the CPU, not chosen: warned
    with pytest.warns(RuntimeWarning, match="no usable GPU here") as caught:
        with flow.scope.placement("gpu", "0:0"):   # the line the warning must name
            pass
    assert caught[0].filename == __file__


def test_gpu_placement_runs_silently_when_the_user_chose_the_cpu(monkeypatch):
    """AIOFLOW_DEVICE=cpu is the user's choice: no "no usable GPU" warning (warnings are
    errors in this suite), and the job runs on the CPU."""
    import aioflow.engine.session as session_mod
    monkeypatch.setattr(session_mod.warn_once, "__defaults__", (set(),))  # a new process
    monkeypatch.setattr(backends, "gpu_unusable_reason", lambda: "no GPU in this test")
    monkeypatch.setenv("AIOFLOW_DEVICE", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with flow.scope.placement("gpu", "0:0"):
            pass
        np.testing.assert_array_equal(_double()(X3), [0, 2, 4])
    monkeypatch.delenv("AIOFLOW_DEVICE")
    with pytest.warns(RuntimeWarning, match="no usable GPU here"):   # not chosen: warned
        with flow.scope.placement("gpu", "0:0"):
            pass


class _LimitedBackend(NumpyBackend):
    """numpy arrays under a backend name that only generic kernels serve."""
    name = "limited"


def test_an_op_without_a_kernel_for_the_backend_fails_at_compile_naming_both():
    from aioflow.ops.registry import register

    try:
        @register("cpu_only_test_op", infer=lambda x: [(x.shape, x.dtype)],
                  backends=("numpy",))
        def cpu_only(ctx, x):
            return x

        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            return cpu_only(x)

        with backends.use(_LimitedBackend()):
            with pytest.raises(MissingKernelError,
                               match="op 'cpu_only_test_op' has no kernel for the 'limited'"):
                job(X3)
        with backends.use("numpy"):
            np.testing.assert_array_equal(job(X3), X3)
    finally:
        from aioflow.ops.registry import REGISTRY
        REGISTRY.pop("cpu_only_test_op", None)


def test_fusion_is_only_applied_where_the_backend_has_the_fused_kernel():
    from .models import lenet_jobs
    with backends.use(_LimitedBackend()):
        _, predict = lenet_jobs()
        ops = {n.op.name for n in predict.compiled_for(default_session()).graph.nodes}
    assert "conv2d_max_pool2d" not in ops and "conv2d" in ops
    with backends.use("numpy"):
        _, predict = lenet_jobs()
        ops = {n.op.name for n in predict.compiled_for(default_session()).graph.nodes}
    assert "conv2d_max_pool2d" in ops


def test_the_step_counter_lives_on_the_host():
    from .models import lenet_jobs
    train, _ = lenet_jobs("adam", batch=4)
    train.compiled_for(default_session())
    records = default_session().variables
    step = [r for n, r in records.items() if "TrainStep" in n][0]
    assert step.on_host and isinstance(step.value, np.ndarray)


class _StandInGpu(NumpyBackend):
    """numpy arrays, under the CuPy backend's name and device tag (selection tests)."""
    name = "cupy"
    device_tag = "gpu"


@pytest.fixture
def a_usable_gpu(monkeypatch):
    """As on a machine with a GPU: the selection logic sees one (numpy computes)."""
    gpu = _StandInGpu()
    real_named = backends.named
    monkeypatch.setattr(backends, "gpu_unusable_reason", lambda: None)
    monkeypatch.setattr(backends, "named",
                        lambda name: gpu if name == "cupy" else real_named(name))
    monkeypatch.delenv("AIOFLOW_DEVICE", raising=False)
    yield gpu
    flow.config.gpu_device_num(1)


def _placed(tag):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        if tag is None:
            return x + 1
        with flow.scope.placement(tag, "0:0"):
            return x + 1
    return job


@pytest.mark.parametrize("tag, gpu_num, expected", [
    (None, 1, "cupy"),      # OneFlow's default placement: the GPU when there is one
    (None, 0, "numpy"),     # ... unless flow.config.gpu_device_num(0)
    ("cpu", 1, "numpy"),
    ("gpu", 0, "cupy"),     # an explicit placement wins over the count
])
def test_placement_and_gpu_device_num_choose_the_backend(a_usable_gpu, tag, gpu_num,
                                                         expected):
    flow.config.gpu_device_num(gpu_num)
    job = _placed(tag)
    np.testing.assert_array_equal(job(X3), X3 + 1)
    assert job.compiled_for(default_session()).backend.name == expected
