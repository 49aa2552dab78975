"""``flow.gather(..., batch_dims=k)``: OneFlow v0.3.4's ``batch_gather`` (BERT's masked-LM
head), forward against numpy, gradient against central differences."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from ops import harness as H   # tests/ is on sys.path (tests/conftest.py)
from ops.conftest import unfused_launches  # noqa: F401 - autouse: the op matrix's kernel checks read host values, so no CUDA graphs


def _reference(params, indices):
    """``out[b..., j, r...] = params[b..., indices[b..., j], r...]``, zeros out of range."""
    k = indices.ndim
    out = np.zeros(indices.shape + params.shape[k:], params.dtype)
    for pos in np.ndindex(*indices.shape):
        i = indices[pos]
        if 0 <= i < params.shape[k - 1]:
            out[pos] = params[pos[:-1] + (i,)]
    return out


@pytest.mark.parametrize("params_shape, indices_shape", [
    ((3, 7, 5), (3, 4)),        # BERT: (batch, seq, hidden) by (batch, positions)
    ((2, 3, 6, 2), (2, 3, 5)),  # two batch axes
])
def test_batch_gather_forward_matches_numpy(params_shape, indices_shape):
    rng = np.random.default_rng(0)
    params = rng.standard_normal(params_shape).astype(np.float32)
    k = len(indices_shape)
    indices = rng.integers(-1, params_shape[k - 1] + 1, indices_shape).astype(np.int32)
    # OneFlow only checks that axis equals batch_dims: the gathered axis is k - 1 either way
    H.check_forward(lambda p, i: flow.gather(p, i, axis=k - 1, batch_dims=k - 1),
                    _reference, [params, indices])
    H.check_forward(lambda p, i: flow.gather(p, i, batch_dims=2), _reference,
                    [params, indices])


def test_bert_masked_lm_call_gives_batch_positions_hidden():
    @flow.global_function(type="predict")
    def job(seq: tp.Numpy.Placeholder((2, 6, 3)),
            pos: tp.Numpy.Placeholder((2, 4), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(params=seq, indices=pos, axis=2, batch_dims=2)

    seq = np.arange(36, dtype=np.float32).reshape(2, 6, 3)
    pos = np.array([[0, 5, 5, 2], [1, 0, 3, 4]], np.int32)
    np.testing.assert_array_equal(job(seq, pos), _reference(seq, pos))


def test_batch_gather_gradient_matches_central_differences():
    rng = np.random.default_rng(1)
    params = rng.standard_normal((3, 5, 4))
    indices = np.array([[0, 4, 4], [2, 2, 1], [3, 0, 9]], np.int32)  # repeats, one outside
    H.check_grad(lambda p, i: flow.gather(p, i, axis=2, batch_dims=2), [params, indices],
                 wrt=[0])


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(axis=1, batch_dims=2), AttributeError, "axis \\(1\\) must not be below batch_dims"),
    (dict(axis=2, batch_dims=1), NotImplementedError, "above batch_dims"),
    (dict(batch_dims=-1), ValueError, "batch_dims must be a non-negative int"),
])
def test_bad_batch_dims_are_refused(kwargs, exc, match):
    @flow.global_function(type="predict")
    def job(seq: tp.Numpy.Placeholder((2, 6, 3)),
            pos: tp.Numpy.Placeholder((2, 4), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(seq, pos, **kwargs)

    with pytest.raises(exc, match=match):
        job(np.zeros((2, 6, 3), np.float32), np.zeros((2, 4), np.int32))


def test_batch_axes_must_agree():
    @flow.global_function(type="predict")
    def job(seq: tp.Numpy.Placeholder((2, 6, 3)),
            pos: tp.Numpy.Placeholder((3, 4), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(seq, pos, axis=2, batch_dims=2)

    with pytest.raises(ValueError, match="indices' leading axes"):
        job(np.zeros((2, 6, 3), np.float32), np.zeros((3, 4), np.int32))
