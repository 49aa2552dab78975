"""Random ops: Bernoulli draws, coin flips, permutations. Each draws from the step's
device generator (``ctx.rng_for(seed)``): a fresh draw every step, the same sequence
for a given ``seed`` (or after ``flow.random.seed``)."""
from __future__ import annotations

import numpy as np

from .._core import dtypes
from .registry import register, require_float


def _draw(ctx, seed, shape, dtype):
    # Generator.random draws float32/float64 only: narrower floats compare float32 draws.
    draw = dtype if np.dtype(dtype).itemsize >= 4 else np.float32
    return ctx.rng_for(seed).random(shape, dtype=draw)


def _infer_bernoulli(p, *, seed, dtype):
    require_float("bernoulli", p, "x")
    return [(p.shape, dtype)]


@register("bernoulli", infer=_infer_bernoulli, differentiable=False)
def bernoulli_op(ctx, p, *, seed, dtype):
    """1 with probability ``p`` (elementwise), else 0."""
    return (_draw(ctx, seed, p.shape, p.dtype) < p).astype(dtypes.as_numpy(dtype))


def _infer_coin_flip(*, batch_size, seed, probability):
    return [((batch_size,), dtypes.int8)]


@register("coin_flip", infer=_infer_coin_flip, differentiable=False)
def coin_flip_op(ctx, *, batch_size, seed, probability):
    return (_draw(ctx, seed, (batch_size,), np.float64) < probability).astype(np.int8)


def _infer_permutation(x, *, seed):
    if not x.ndim:
        raise ValueError("random permutation: value must have a batch axis, got a 0-d Blob")
    return [((x.shape[0],), dtypes.int32)]


@register("random_permutation", infer=_infer_permutation, differentiable=False)
def random_permutation_op(ctx, x, *, seed):
    """A uniformly random permutation of ``range(x.shape[0])`` (``x`` gives the size only):
    the order of as many uniform draws, so it is the same kernel on every backend."""
    keys = _draw(ctx, seed, (x.shape[0],), np.float64)
    return ctx.xp.argsort(keys).astype(np.int32)


def _infer_mt19937(*, seed, key, count):
    return [((count,), dtypes.float32)]


def mt19937_draws(ctx, seed: int, key, count: int) -> np.ndarray:
    """``count`` float32 draws in [0, 1) from C++'s ``std::mt19937(seed)`` through
    ``std::uniform_real_distribution<float>`` (one 32-bit output each, divided by 2^32),
    the stream of ``key`` going on from step to step: OneFlow's CPU ``RandomGenerator``,
    one per op (its kernel state)."""
    def make():
        generator = np.random.MT19937()
        generator._legacy_seeding(seed & 0xFFFFFFFF)   # init_genrand, as std::mt19937(seed)
        return generator
    raw = ctx.kernel_state(("mt19937", key, seed), make).random_raw(count)
    draws = raw.astype(np.float32) / np.float32(2.0 ** 32)
    return np.minimum(draws, np.nextafter(np.float32(1), np.float32(0)))


@register("mt19937_uniform", infer=_infer_mt19937, differentiable=False)
def mt19937_uniform_op(ctx, *, seed, key, count):
    """OneFlow's ``TestRandomSource``: ``count`` draws a step of :func:`mt19937_draws`.
    ``key`` names the op's own stream."""
    return ctx.xp.asarray(mt19937_draws(ctx, seed, key, count))
