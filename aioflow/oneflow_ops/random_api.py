"""OneFlow v0.3.4's random ops (``flow.random.bernoulli`` and friends, issue 18) and its
seed helper ``gen_seed``; re-exported by :mod:`aioflow.random`."""
from __future__ import annotations

import numbers

import numpy as np

from .._core import dtypes, seeds
from ..ops import indexing, random_ops

__all__ = ["bernoulli", "coin_flip", "CoinFlip", "generate_random_batch_permutation_indices",
           "shuffle", "gen_seed"]


def _check_seed(op_name, op_seed):
    if op_seed is not None and (isinstance(op_seed, bool) or
                                not isinstance(op_seed, numbers.Integral) or op_seed < 0):
        raise ValueError(f"{op_name}: seed must be an int >= 0 or None, got {op_seed!r}")
    return None if op_seed is None else int(op_seed)


def bernoulli(x, seed=None, dtype=None, name=None):
    """1 with probability ``x`` (a float Blob of probabilities), else 0; ``dtype``
    defaults to ``x``'s. A new draw every step; a ``seed`` fixes the sequence."""
    dtype = x.dtype if dtype is None else dtypes.convert(dtype)
    return random_ops.bernoulli_op(x, seed=_check_seed("bernoulli", seed), dtype=dtype,
                                   name=name)


def coin_flip(batch_size=1, seed=None, probability=0.5, distribute=None, name=None):
    """``batch_size`` int8 coin flips, 1 with ``probability``. ``distribute`` is accepted
    for OneFlow's signature and ignored (one device)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or \
            batch_size <= 0:
        raise ValueError(f"coin_flip: batch_size must be a positive int, got {batch_size!r}")
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"coin_flip: probability must be in [0, 1], got {probability!r}")
    return random_ops.coin_flip_op(batch_size=int(batch_size),
                                   seed=_check_seed("coin_flip", seed),
                                   probability=float(probability), name=name)


CoinFlip = coin_flip   # OneFlow exported the function under both names


def generate_random_batch_permutation_indices(value, seed=None, name=None):
    """A random permutation (int32) of ``range(value.shape[0])``, new every step."""
    return random_ops.random_permutation_op(
        value, seed=_check_seed("generate_random_batch_permutation_indices", seed), name=name)


def shuffle(value, seed=None, name=None):
    """``value`` with its first axis in a random order (new every step); gradients go back
    to each row's place."""
    order = generate_random_batch_permutation_indices(value, seed=seed)
    return indexing.gather_op(value, order, axis=0, name=name)


def gen_seed(seed=None):
    """``(has_seed, seed)`` as OneFlow's helper: ``(True, seed)`` if given, else ``False``
    and a fresh seed: random, or after :func:`seed` the next of a sequence derived from
    it (so a seeded run repeats)."""
    if seed is not None:
        return True, _check_seed("gen_seed", seed)
    derived = seeds.derived_op_seed()
    if derived is None:
        return False, int(np.random.default_rng().integers(2 ** 31))
    return False, derived
