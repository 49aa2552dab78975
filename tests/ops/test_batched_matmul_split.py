"""Stacked matrix products large enough to be split over the parallel workers
(ops/linalg.py ``_split_batched_matmul``) give numpy's products, every transpose, forward
and gradients."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.kernels import parallel
from aioflow.ops import linalg

SHAPE_A, SHAPE_B = (4, 6, 128, 64), (4, 6, 64, 128)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_split_products_match_numpy_forward_and_backward(ta, tb, monkeypatch):
    calls = []
    real = parallel.run_chunks
    monkeypatch.setattr(parallel, "run_chunks", lambda fn, chunks: calls.append(1) or
                        real(fn, chunks))
    rng = np.random.default_rng(0)
    a_shape = SHAPE_A[:2] + SHAPE_A[2:][::-1] if ta else SHAPE_A
    b_shape = SHAPE_B[:2] + SHAPE_B[2:][::-1] if tb else SHAPE_B
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    g = rng.standard_normal(SHAPE_A[:3] + SHAPE_B[3:]).astype(np.float32)

    seen = {}

    @flow.global_function(type="train")
    def product(seed: tp.Numpy.Placeholder(g.shape)) -> tp.Numpy:
        x = flow.get_variable("a", shape=a_shape, initializer=flow.zeros_initializer())
        y = flow.get_variable("b", shape=b_shape, initializer=flow.zeros_initializer())
        flow.watch_diff(x, lambda d: seen.setdefault("a", d))
        flow.watch_diff(y, lambda d: seen.setdefault("b", d))
        out = flow.matmul(x, y, transpose_a=ta, transpose_b=tb)
        flow.optimizer.SGD(0.0, momentum=0).minimize(flow.math.reduce_sum(out * seed))
        return out

    flow.load_variables({"a": a, "b": b})
    out_got = product(g)
    flow.sync_default_session()
    got = np.concatenate([out_got.ravel(), seen["a"].ravel(), seen["b"].ravel()])
    a64, b64, g64 = (v.astype(np.float64) for v in (a, b, g))
    op_a = np.swapaxes(a64, -1, -2) if ta else a64
    op_b = np.swapaxes(b64, -1, -2) if tb else b64
    out = op_a @ op_b
    d_op_a, d_op_b = g64 @ np.swapaxes(op_b, -1, -2), np.swapaxes(op_a, -1, -2) @ g64
    want = np.concatenate([out.ravel(),
                           (np.swapaxes(d_op_a, -1, -2) if ta else d_op_a).ravel(),
                           (np.swapaxes(d_op_b, -1, -2) if tb else d_op_b).ravel()])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    backend = product.compiled_for(flow.session.default_session()).backend.name
    if parallel.workers() > 1 and backend == "numpy":   # forward and both gradients split
        assert len(calls) >= 3


def test_small_or_broadcast_stacks_are_left_to_numpy():
    small = np.ones((2, 3, 4, 4), np.float32)
    assert not linalg._splits_batched(np, small, small, False)
    big = np.ones(SHAPE_A, np.float32)
    assert not linalg._splits_batched(np, big, np.ones(SHAPE_B[1:], np.float32), False)
