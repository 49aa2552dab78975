"""The global seed and the seeds derived from it (``flow.random.seed``'s state).

Below every other layer: the session draws its generator here, loaders and readers their
derived seeds. ``flow.random.seed`` (:mod:`aioflow.random`) sets it; the engine registers
:func:`on_reseed` to reseed its default session at once.

>>> set_seed(3); get_seed(), loader_seed() == loader_seed()
(3, False)
>>> set_seed(None); get_seed() is None
True
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

__all__ = ["set_seed", "get_seed", "on_reseed", "session_generator", "loader_seed",
           "derived_op_seed"]

_lock = threading.Lock()   # guards the counters below (loaders are made on any thread)
_seed: int | None = None
_loaders_seeded = 0  # loaders that took a derived seed since the last seed()
_gen_seeds = 0       # flow.random.gen_seed() calls since the last seed()
_reseed_hooks: list[Callable[[int | None], None]] = []


def set_seed(n: int | None) -> None:
    """Seed with ``n`` (already checked) or unseed (None); restart the derived sequences
    and tell the hooks (the default session reseeds its generator)."""
    global _seed, _loaders_seeded, _gen_seeds
    with _lock:
        _seed = n
        _loaders_seeded = 0
        _gen_seeds = 0
    for hook in _reseed_hooks:
        hook(n)


def on_reseed(hook: Callable[[int | None], None]) -> None:
    """Call ``hook(seed)`` after every :func:`set_seed`."""
    _reseed_hooks.append(hook)


def get_seed() -> int | None:
    """The seed given last, or None."""
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


def derived_op_seed() -> int | None:
    """The next seed of ``flow.random.gen_seed``'s sequence derived from the global seed,
    or None when there is no global seed."""
    global _gen_seeds
    with _lock:
        if _seed is None:
            return None
        k = _gen_seeds
        _gen_seeds += 1
    state = np.random.SeedSequence(_seed, spawn_key=(2, k)).generate_state(1, np.uint32)
    return int(state[0] >> 1)
