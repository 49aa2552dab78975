"""Harness of the op test matrix: run a user-facing function on numpy data through real
jobs (public API), and check its forward value and its gradient.

* :func:`run` builds a ``predict`` job whose parameters are placeholders shaped like the
  given arrays, applies ``fn`` to them and returns the result(s) as numpy arrays.
* :func:`check_forward` compares :func:`run` with an independent numpy reference (value,
  shape and dtype).
* :func:`analytic_grads` makes the inputs variables of a ``train`` job minimizing
  ``reduce_sum(fn(vars) * cotangent)`` with ``SGD(1.0, momentum=0)``; after one step the
  gradient is ``old value - new value``.
* :func:`numeric_grads` takes central differences of the same loss computed by a
  ``predict`` job (or by a numpy function); :func:`check_grad` compares the two.

Every job built here is also *instrumented*: each kernel's outputs are checked against the
shape and dtype its op's shape rule declared (a float32 op returning float64 fails, in the
forward and in the gradient graph alike) and pure kernels must not write into their
inputs; :func:`assert_ops` checks that the ops a case claims to test really are in the
compiled graph. These two use the compiled job's graph
and plan (``JobFunction.compiled_for``), the only internals the harness touches.
"""
from __future__ import annotations

import inspect
import itertools
from typing import Callable, Sequence, Tuple

import numpy as np

import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.engine import session as _session
from aioflow.ops import REGISTRY

_counter = itertools.count()

FLOAT_TOL = {np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
             np.dtype(np.float64): dict(rtol=1e-11, atol=1e-12)}


# -- building jobs -----------------------------------------------------------------------


FLOW_DTYPES = {np.dtype(d.numpy): d for d in (flow.float16, flow.float32, flow.float64,
                                              flow.int8, flow.int32, flow.int64, flow.uint8)}


def flow_dtype(numpy_dtype):
    """``flow.float32`` for ``np.float32`` and so on."""
    return FLOW_DTYPES[np.dtype(numpy_dtype)]


def _spec(array) -> tp.PlaceholderSpec:
    return tp.Numpy.Placeholder(np.shape(array), dtype=flow_dtype(array.dtype))


def make_job(body: Callable, specs: Sequence[tp.PlaceholderSpec], *, job_type="predict",
             returns=tp.Numpy, name=None):
    """A job ``name(x0, x1, ...)`` with one placeholder parameter per spec; ``body`` gets
    the placeholder Blobs and returns what the job returns (``returns`` annotates it)."""
    name = name or f"{job_type}_job_{next(_counter)}"

    def job(*blobs):
        return body(*blobs)

    params = [inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=s) for i, s in enumerate(specs)]
    job.__signature__ = inspect.Signature(params, return_annotation=returns)
    job.__annotations__ = {**{p.name: p.annotation for p in params}, "return": returns}
    job.__name__ = job.__qualname__ = name
    compiled = flow.global_function(type=job_type)(job)
    return compiled


def _compiled(job):
    return job.compiled_for(_session.default_session())


def ops_in(job) -> set[str]:
    """Names of the ops in ``job``'s compiled graph (compiles it if needed)."""
    return {node.op.name for node in _compiled(job).graph.nodes}


def assert_ops(job, expected_ops: Sequence[str]) -> None:
    """Fail unless each op of ``expected_ops`` is in ``job``'s compiled graph."""
    present = ops_in(job)
    backend = _compiled(job).backend.name
    cpu_only = [op for op in expected_ops if not REGISTRY[op].has_kernel(backend)]
    if cpu_only:   # e.g. the fused convolution + pooling, a CPU kernel the compiler
        pytest.skip(f"{cpu_only} have no kernel for the {backend} backend")  # uses there
    missing = [op for op in expected_ops if op not in present]
    assert not missing, (f"case claims to test ops {missing}, but job {job.__name__!r} "
                         f"only contains {sorted(present)}")


def _checking(kernel, node):
    """Wrap ``kernel`` so its outputs must match the shape/dtype that node's op declared,
    and (but for update ops) it must leave its input arrays alone: all but one whose
    memory the memory plan handed it as ``out=`` (an input that dies at this op), and
    then the kernel must return that very ``out`` array."""

    def checked(ctx, *args, **attrs):
        if node.op.side_effect:
            return kernel(ctx, *args, **attrs)
        out = attrs.get("out")
        # Device arrays (CuPy, the strict backend) come to the host through the backend:
        # this check reads them, the kernel under test must not.
        host = [_host(ctx, a) for a in args]
        produced = kernel(ctx, *args, **attrs)
        if out is not None:
            assert produced is out, f"op {node.op.name}: given out=, returned another array"
        for i, (arg, old) in enumerate(zip(args, host)):
            if out is not None and _shares_memory(ctx, arg, out):
                continue  # the plan's in-place reuse of a dead input
            assert np.array_equal(_host(ctx, arg), old, equal_nan=arg.dtype.kind == "f"), (
                f"op {node.op.name} ({node.name}) modified its input {i} in place")
        if not node.outputs:
            return produced
        values = (produced,) if len(node.outputs) == 1 else tuple(produced)
        assert len(values) == len(node.outputs), (
            f"op {node.op.name}: kernel returned {len(values)} outputs, its shape rule "
            f"declared {len(node.outputs)}")
        for i, (value, blob) in enumerate(zip(values, node.outputs)):
            assert (isinstance(value, np.ndarray) or ctx.backend.owns(value)
                    or (ctx.backend.name == "numpy" and isinstance(value, np.generic))), (
                f"op {node.op.name} ({node.name}) output {i}: the kernel returned a "
                f"{type(value).__name__}, not an array of the {ctx.backend.name} backend")
            value = _host(ctx, value)
            assert value.shape == blob.shape and value.dtype == blob.dtype.numpy, (
                f"op {node.op.name} ({node.name}) output {i}: the kernel produced "
                f"{value.dtype}{list(value.shape)}, the shape rule declared "
                f"{blob.dtype.name}{list(blob.shape)}")
        return produced

    return checked


def _host(ctx, array) -> np.ndarray:
    """A numpy copy of a kernel's input or output, wherever it lives."""
    return array.copy() if isinstance(array, np.ndarray) else ctx.backend.to_host(array)


def _shares_memory(ctx, a, b) -> bool:
    if isinstance(a, np.ndarray) != isinstance(b, np.ndarray):
        return False    # a host value (learning rate, step counter) and a device array
    return bool(ctx.xp.shares_memory(a, b))


def instrument(job):
    """Compile ``job`` and make every kernel check its outputs against its shape rule."""
    compiled = _compiled(job)
    for node, ins in zip(compiled.graph.nodes, compiled.plan.instructions, strict=True):
        assert ins.name == node.name, "plan and graph are out of step"
        if not getattr(ins.kernel, "_harness_checked", False):
            ins.kernel = _checking(ins.kernel, node)
            ins.kernel._harness_checked = True
    return job


# -- forward -----------------------------------------------------------------------------


def run(fn: Callable, *arrays, n_outputs=1, expect_ops=()):
    """``fn`` applied to placeholders fed with ``arrays``, in a fresh predict job."""
    returns = tp.Numpy if n_outputs == 1 else Tuple[(tp.Numpy,) * n_outputs]
    job = instrument(make_job(fn, [_spec(a) for a in arrays], returns=returns))
    assert_ops(job, expect_ops)
    return job(*arrays)


def tolerance(dtype, rtol=None, atol=None) -> dict:
    base = FLOAT_TOL.get(np.dtype(dtype), dict(rtol=0, atol=0))
    return dict(rtol=base["rtol"] if rtol is None else rtol,
                atol=base["atol"] if atol is None else atol)


def check_forward(fn: Callable, ref: Callable, inputs: Sequence[np.ndarray], *,
                  expect_ops=(), out_dtype=None, rtol=None, atol=None):
    """``run(fn, *inputs)`` equals ``ref(*inputs)`` in value, shape and dtype.

    ``ref`` gets float inputs upcast to float64 (so it is the more precise one); the
    result must have ``out_dtype`` (default: the dtype of the first input).
    """
    got = run(fn, *inputs, expect_ops=expect_ops)
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]
    want = np.asarray(ref(*wide))
    out_dtype = np.dtype(out_dtype or inputs[0].dtype)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == out_dtype, f"dtype: got {got.dtype}, expected {out_dtype}"
    assert got.shape == want.shape, f"shape: got {got.shape}, expected {want.shape}"
    tol = tolerance(out_dtype, rtol, atol)
    if out_dtype.kind == "f":
        np.testing.assert_allclose(got, want, **tol)
    else:
        np.testing.assert_array_equal(got, want)
    return got


# -- gradients ---------------------------------------------------------------------------


def cotangent(shape, seed, dtype=np.float64) -> np.ndarray:
    """The fixed random weights of the scalar loss ``sum(f(x) * cotangent)``."""
    return np.random.default_rng(1000 + seed).standard_normal(shape).astype(dtype)


def _weighted_loss(y, seed):
    cot = cotangent(y.shape, seed, y.dtype.numpy)
    return flow.math.reduce_sum(y * flow.constant(cot, dtype=y.dtype))


def analytic_grads(fn: Callable, inputs: Sequence[np.ndarray], wrt: Sequence[int], *,
                   seed=0, preload=None, read=(), expect_ops=()):
    """Gradients of ``sum(fn(*inputs) * cotangent(seed))`` w.r.t. ``inputs[i], i in wrt``.

    Those inputs become variables (the others stay placeholders); one SGD step with lr 1
    moves each by minus its gradient. ``preload`` assigns other variables (e.g. a layer's)
    before the step and their gradients, for the names in ``read``, are returned too.
    Returns ``(grads by position, grads of read variables by name, loss value)``.
    """
    tag = next(_counter)
    names = {i: f"grad{tag}_x{i}" for i in wrt}
    fed = [i for i in range(len(inputs)) if i not in names]

    def body(*blobs):
        args, it = [], iter(blobs)
        for i, a in enumerate(inputs):
            if i in names:
                args.append(flow.get_variable(names[i], shape=a.shape,
                                              dtype=flow_dtype(a.dtype),
                                              initializer=flow.zeros_initializer()))
            else:
                args.append(next(it))
        loss = _weighted_loss(fn(*args), seed)
        flow.optimizer.SGD(1.0, momentum=0).minimize(loss)
        return loss

    job = instrument(make_job(body, [_spec(inputs[i]) for i in fed], job_type="train"))
    assert_ops(job, expect_ops)
    before = {names[i]: inputs[i] for i in wrt}
    before.update(preload or {})
    flow.load_variables(before)
    before = {k: v.copy() for k, v in flow.get_all_variables().items()}
    loss = job(*[inputs[i] for i in fed])
    after = flow.get_all_variables()
    grads = [before[names[i]] - after[names[i]] for i in wrt]
    extra = {name: before[name] - after[name] for name in read}
    for g, i in zip(grads, wrt):
        assert g.dtype == inputs[i].dtype
    return grads, extra, loss


def loss_job(fn: Callable, inputs: Sequence[np.ndarray], *, seed=0) -> Callable:
    """A predict job computing ``sum(fn(*inputs) * cotangent(seed))``, as a function of
    the input arrays returning a float."""
    job = instrument(make_job(lambda *blobs: _weighted_loss(fn(*blobs), seed),
                              [_spec(a) for a in inputs]))
    return lambda *arrays: float(np.sum(job(*arrays)))


def numeric_grads(loss: Callable, inputs: Sequence[np.ndarray], wrt: Sequence[int], *,
                  eps=1e-6) -> list[np.ndarray]:
    """Central differences of ``loss(*inputs)`` w.r.t. each input in ``wrt``."""
    inputs = [np.array(a, copy=True) for a in inputs]
    grads = []
    for i in wrt:
        x = inputs[i]
        g = np.zeros(x.shape, np.float64)
        for k in np.ndindex(*x.shape):
            saved = x[k]
            x[k] = saved + eps
            up = loss(*inputs)
            x[k] = saved - eps
            down = loss(*inputs)
            x[k] = saved
            g[k] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def floating_positions(inputs) -> list[int]:
    return [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]


def check_grad(fn: Callable, inputs: Sequence[np.ndarray], *, wrt=None, expect_ops=(),
               numeric_forward=None, seed=0, eps=1e-6, rtol=1e-5, atol=1e-7,
               float32_too=True):
    """The analytic gradient (one SGD step) matches central differences in float64.

    ``inputs`` must be float64 where differentiated. ``numeric_forward`` (a numpy version
    of ``fn``) replaces the predict job for the central differences where a predict job
    cannot compute the loss (e.g. train-mode batch norm). With ``float32_too``, the gradient is taken again
    from float32 copies: it must run (the instrumented kernels catch dtype leaks) and agree
    with the float64 one at float32 precision.
    """
    inputs = [np.asarray(a) for a in inputs]
    wrt = floating_positions(inputs) if wrt is None else list(wrt)
    for i in wrt:
        assert inputs[i].dtype == np.float64, "differentiate float64 inputs"
    analytic, _, loss_value = analytic_grads(fn, inputs, wrt, seed=seed,
                                             expect_ops=expect_ops)
    if numeric_forward is None:
        loss = loss_job(fn, inputs, seed=seed)
    else:
        cot = cotangent(np.shape(numeric_forward(*inputs)), seed)
        loss = lambda *arrays: float(np.sum(numeric_forward(*arrays) * cot))  # noqa: E731
    np.testing.assert_allclose(float(np.sum(loss_value)), loss(*inputs), rtol=1e-10,
                               atol=1e-12, err_msg="train and predict losses differ")
    numeric = numeric_grads(loss, inputs, wrt, eps=eps)
    for i, a, n in zip(wrt, analytic, numeric):
        assert a.shape == inputs[i].shape
        np.testing.assert_allclose(a, n, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")
    if float32_too:
        narrow = [a.astype(np.float32) if a.dtype == np.float64 else a for a in inputs]
        g32, _, _ = analytic_grads(fn, narrow, wrt, seed=seed)
        for i, a, g in zip(wrt, analytic, g32):
            assert g.dtype == np.float32
            scale = max(1.0, float(np.max(np.abs(a), initial=0.0)))
            np.testing.assert_allclose(g, a, rtol=2e-3, atol=2e-4 * scale,
                                       err_msg=f"float32 gradient of input {i}")
    return analytic
