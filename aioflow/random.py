"""``flow.random.seed(n)``: one number that makes a run repeat itself.

OneFlow v0.3 had no global seed (``flow.random.gen_seed`` only made seeds for single
ops); aioflow adds ``flow.random.seed`` under the name numpy and TensorFlow users look
for. After ``flow.random.seed(n)``:

* variables are initialized from a generator seeded with ``n`` (in definition order),
  so ``check_point.init()`` gives the same values on every run;
* unseeded dropout draws its masks from that generator, so they repeat too;
* a :class:`flow.data.Loader` made with ``shuffle=True`` and no ``seed`` gets one
  derived from ``n`` (the k-th such loader the k-th derived seed), so its order repeats;
* :func:`flow.clear_default_session` starts the new session from ``n`` again.

Call it before the first job call or ``check_point.init()``: values already drawn are
not redrawn. Results then repeat on the same machine and library versions; another BLAS
may round float sums differently, so figures can differ in the last digits elsewhere.

>>> import numpy as np, aioflow as flow
>>> flow.random.seed(0)
>>> flow.random.get_seed()
0
>>> first = [x.tolist() for (x,) in flow.data.Loader((np.arange(8),), 4, shuffle=True)]
>>> flow.random.seed(0)
>>> again = [x.tolist() for (x,) in flow.data.Loader((np.arange(8),), 4, shuffle=True)]
>>> first == again, sorted(first[0] + first[1])
(True, [0, 1, 2, 3, 4, 5, 6, 7])
>>> flow.random.seed(None)     # back to fresh randomness on every run
"""
from __future__ import annotations

import numbers
import threading

import numpy as np

__all__ = ["seed", "get_seed"]

_lock = threading.Lock()
_seed: int | None = None
_loaders_seeded = 0  # loaders that took a derived seed since the last seed()


def seed(n) -> None:
    """Seed aioflow's randomness (initializers, dropout, shuffling loaders) with ``n``,
    an int >= 0; ``None`` goes back to unseeded. Reseeds the default session now."""
    global _seed, _loaders_seeded
    if n is not None and (isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral)
                          or n < 0):
        raise ValueError(f"flow.random.seed: n must be an int >= 0 or None, got {n!r}")
    with _lock:
        _seed = None if n is None else int(n)
        _loaders_seeded = 0
        globals()["_gen_seeds"] = 0
    from .engine.session import default_session
    default_session().reseed(_seed)


def get_seed() -> int | None:
    """The seed given to :func:`seed` last, or None."""
    return _seed


def session_generator() -> np.random.Generator:
    """A new session's generator: seeded from the global seed when there is one."""
    return np.random.default_rng(_seed)


def loader_seed() -> int | None:
    """A seed for a loader made without one: None when no global seed was set, else the
    next of a sequence derived from it (independent of the session's generator)."""
    global _loaders_seeded
    with _lock:
        if _seed is None:
            return None
        k = _loaders_seeded
        _loaders_seeded += 1
    return int(np.random.SeedSequence(_seed, spawn_key=(1, k)).generate_state(1, np.uint64)[0])


# -- OneFlow v0.3.4's random ops (issue 18) --------------------------------------------------
__all__ += ["bernoulli", "coin_flip", "CoinFlip", "generate_random_batch_permutation_indices",
            "shuffle", "gen_seed"]


def _check_seed(op_name, op_seed):
    if op_seed is not None and (isinstance(op_seed, bool) or
                                not isinstance(op_seed, numbers.Integral) or op_seed < 0):
        raise ValueError(f"{op_name}: seed must be an int >= 0 or None, got {op_seed!r}")
    return None if op_seed is None else int(op_seed)


def bernoulli(x, seed=None, dtype=None, name=None):
    """1 with probability ``x`` (a float Blob of probabilities), else 0; ``dtype``
    defaults to ``x``'s. A new draw every step; a ``seed`` fixes the sequence."""
    from ._core import dtypes
    from .ops import random_ops
    dtype = x.dtype if dtype is None else dtypes.convert(dtype)
    return random_ops.bernoulli_op(x, seed=_check_seed("bernoulli", seed), dtype=dtype,
                                   name=name)


def coin_flip(batch_size=1, seed=None, probability=0.5, distribute=None, name=None):
    """``batch_size`` int8 coin flips, 1 with ``probability``. ``distribute`` is accepted
    for OneFlow's signature and ignored (one device)."""
    from .ops import random_ops
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
    from .ops import random_ops
    return random_ops.random_permutation_op(
        value, seed=_check_seed("generate_random_batch_permutation_indices", seed), name=name)


def shuffle(value, seed=None, name=None):
    """``value`` with its first axis in a random order (new every step); gradients go back
    to each row's place."""
    from .ops import indexing
    order = generate_random_batch_permutation_indices(value, seed=seed)
    return indexing.gather_op(value, order, axis=0, name=name)


def gen_seed(seed=None):
    """``(has_seed, seed)`` as OneFlow's helper: ``(True, seed)`` if given, else ``False``
    and a fresh seed: random, or after :func:`seed` the next of a sequence derived from
    it (so a seeded run repeats)."""
    global _gen_seeds
    if seed is not None:
        return True, _check_seed("gen_seed", seed)
    with _lock:
        if _seed is None:
            return False, int(np.random.default_rng().integers(2 ** 31))
        k = _gen_seeds
        _gen_seeds += 1
    state = np.random.SeedSequence(_seed, spawn_key=(2, k)).generate_state(1, np.uint32)
    return False, int(state[0] >> 1)


_gen_seeds = 0
