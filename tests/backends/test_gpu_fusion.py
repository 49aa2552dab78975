"""The CuPy backend's fused kernels and CUDA-graph replay on a real GPU (issue 14), against
the generic kernels and eager steps. Skipped without a GPU (CI never has one): these are
what a session with a GPU runs to verify what was built without one:

    python -m pytest tests/backends/test_gpu_fusion.py -v
"""
import types

import numpy as np
import pytest

import aioflow as flow
from aioflow import backends
from aioflow.kernels import pool as pool_kernels
from aioflow.ops import fused
from aioflow.ops.state import adam_update, momentum_update, sgd_update
from aioflow.engine.session import default_session

from .models import OPTIMIZERS, batches, lenet_jobs

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch):
    monkeypatch.delenv("AIOFLOW_DEVICE", raising=False)
    flow.clear_default_session()
    yield
    flow.config.launch_fusion("auto")
    flow.config.enable_cuda_graphs(True)
    flow.clear_default_session()


@pytest.fixture
def gpu():
    """(cupy, a kernel context on the CuPy backend)."""
    import cupy
    backend = backends.named("cupy")
    return cupy, types.SimpleNamespace(xp=cupy, backend=backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_add_relu_kernel(gpu, dtype):
    cupy, ctx = gpu
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 5, 3, 4)).astype(dtype)
    b = rng.standard_normal(5).astype(dtype)
    kernel = fused.bias_add_relu.kernel("cupy")
    got = kernel(ctx, cupy.asarray(x), cupy.asarray(b), axis=1)
    np.testing.assert_allclose(got.get(), np.maximum(x + b.reshape(1, 5, 1, 1), 0), rtol=1e-6)
    out = cupy.empty(x.shape, dtype)
    assert kernel(ctx, cupy.asarray(x), cupy.asarray(b), axis=1, out=out) is out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_with_its_gradient_kernel(gpu, dtype):
    cupy, ctx = gpu
    rng = np.random.default_rng(1)
    logits = (rng.standard_normal((9, 10)) * 4).astype(dtype)
    labels = rng.integers(0, 10, 9).astype(np.int32)
    gy = np.full(9, 1 / 9, dtype)
    np_ctx = types.SimpleNamespace(xp=np)
    want_loss, want_grad = fused.sparse_softmax_ce_train.forward(np_ctx, labels, logits, gy)
    loss, grad = fused.sparse_softmax_ce_train.kernel("cupy")(
        ctx, cupy.asarray(labels), cupy.asarray(logits), cupy.asarray(gy))
    np.testing.assert_allclose(loss.get(), want_loss, rtol=1e-5)
    np.testing.assert_allclose(grad.get(), want_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("ksize, strides, pads", [
    ((2, 2), (2, 2), ((0, 0), (0, 0))),
    ((2, 2), (2, 2), ((0, 1), (0, 1))),      # SAME on an odd size
    ((3, 3), (1, 1), ((1, 1), (1, 1))),      # overlapping windows
    ((3, 3), (2, 2), ((1, 1), (1, 1))),
])
def test_max_pool_kernels(gpu, ksize, strides, pads):
    cupy, ctx = gpu
    from aioflow.ops.conv import max_pool2d_grad, max_pool2d_op
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 9, 9)).astype(np.float32)
    want_y, want_arg = pool_kernels.max_pool2d_forward(x, ksize, strides, pads)
    y, arg = max_pool2d_op.kernel("cupy")(ctx, cupy.asarray(x), ksize=ksize,
                                          strides=strides, pads=pads)
    np.testing.assert_array_equal(y.get(), want_y)
    np.testing.assert_array_equal(arg.get(), want_arg)
    dy = rng.standard_normal(want_y.shape).astype(np.float32)
    want_dx = pool_kernels.max_pool2d_backward(dy, want_arg, x.shape, ksize, strides, pads)
    dx = max_pool2d_grad.kernel("cupy")(ctx, cupy.asarray(dy), arg, x_shape=x.shape,
                                        ksize=ksize, strides=strides, pads=pads)
    # Overlapping windows add several dy into one dx element; the GPU adds them in another
    # order than the CPU loop (measured on an H200: 1.4e-6 relative, one element of 972).
    np.testing.assert_allclose(dx.get(), want_dx, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("single, attrs", [
    (sgd_update, {"weight_decay": 0.01}),
    (momentum_update, {"beta": 0.9}),
    (adam_update, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "do_bias_correction": True}),
])
@pytest.mark.parametrize("ok", [1, 0])
def test_multi_tensor_update_kernels(gpu, single, attrs, ok):
    cupy, ctx = gpu
    multi_name, slots, reads_step = fused.MULTI_UPDATES[single.name]
    rng = np.random.default_rng(3)
    sizes = (300, 7, 1000)
    params = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    slot_arrays = [[np.abs(rng.standard_normal(n)).astype(np.float32) for n in sizes]
                   for _ in range(slots)]
    step = np.asarray(3, np.int64)
    flag = cupy.asarray(np.int8(ok))
    want = [cupy.asarray(p) for p in params], [[cupy.asarray(s) for s in row]
                                               for row in slot_arrays]
    single_kernel = single.kernel("cupy")
    for i in range(len(sizes)):
        extra = [row[i] for row in want[1]] + ([step] if reads_step else [])
        single_kernel(ctx, want[0][i], cupy.asarray(grads[i]), np.float64(0.05), *extra,
                      flag, **attrs)
    got = [cupy.asarray(p) for p in params], [[cupy.asarray(s) for s in row]
                                              for row in slot_arrays]
    columns = [got[0], [cupy.asarray(g) for g in grads], *got[1]]
    getattr(fused, multi_name).kernel("cupy")(
        ctx, *[a for column in columns for a in column], np.float64(0.05),
        *([step] if reads_step else []), flag, count=len(sizes), **attrs)
    for a, b in zip(got[0] + sum(got[1], []), want[0] + sum(want[1], [])):
        np.testing.assert_allclose(a.get(), b.get(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_the_captured_gemm_path_equals_matmul(gpu, transpose_a, transpose_b):
    cupy, ctx = gpu
    from aioflow.backends.cupy import capture_gemm as cupy_capture_gemm
    rng = np.random.default_rng(4)
    a = rng.standard_normal((33, 17) if transpose_a else (17, 33)).astype(np.float32)
    b = rng.standard_normal((9, 33) if transpose_b else (33, 9)).astype(np.float32)
    backend = ctx.backend
    with cupy_capture_gemm.capturing(cupy.cuda.device.get_cublas_handle(), backend.stream):
        got = cupy_capture_gemm._matmul(ctx, cupy.asarray(a), cupy.asarray(b),
                                        transpose_a=transpose_a, transpose_b=transpose_b)
    backend.synchronize()
    want = (a.T if transpose_a else a) @ (b.T if transpose_b else b)
    np.testing.assert_allclose(got.get(), want, rtol=1e-4, atol=1e-5)


def _lenet_run(optimizer, data, initial, launch_fusion="auto", cuda_graphs=True):
    flow.config.launch_fusion(launch_fusion)
    flow.config.enable_cuda_graphs(cuda_graphs)
    with backends.use("cupy"):
        train, _ = lenet_jobs(optimizer)
        compiled = train.compiled_for(default_session())
        flow.load_variables(initial)
        losses = [float(train(x, y).mean()) for x, y in data]
    return losses, compiled


def _initial():
    with backends.use("numpy"):
        lenet_jobs("sgd")[0].compiled_for(default_session())
        return flow.get_all_variables()


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_fused_lenet_tracks_the_unfused_one(optimizer):
    data, initial = batches(10, learnable=False), _initial()
    unfused, plain = _lenet_run(optimizer, data, initial, launch_fusion=False,
                                cuda_graphs=False)
    fused_, compiled = _lenet_run(optimizer, data, initial, cuda_graphs=False)
    np.testing.assert_allclose(fused_, unfused, rtol=2e-4)
    assert compiled.plan.launches_per_step < plain.plan.launches_per_step


@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_graph_replay_tracks_eager_steps(optimizer):
    data, initial = batches(10, learnable=False), _initial()
    eager, _ = _lenet_run(optimizer, data, initial, cuda_graphs=False)
    replayed, compiled = _lenet_run(optimizer, data, initial)
    step = compiled.captured
    assert step is not None and step.refused is None, step and step.refused
    assert (step.captures, step.replays) == (1, 9)
    np.testing.assert_allclose(replayed, eager, rtol=2e-4)
