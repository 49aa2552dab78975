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

import numpy as np

from ._core import seeds
from ._core.seeds import get_seed as get_seed
from .oneflow_ops.random_api import (CoinFlip as CoinFlip, bernoulli as bernoulli,
                                     coin_flip as coin_flip, gen_seed as gen_seed,
                                     generate_random_batch_permutation_indices as
                                     generate_random_batch_permutation_indices,
                                     shuffle as shuffle)

__all__ = ["seed", "get_seed", "bernoulli", "coin_flip", "CoinFlip",
           "generate_random_batch_permutation_indices", "shuffle", "gen_seed"]


def seed(n) -> None:
    """Seed aioflow's randomness (initializers, dropout, shuffling loaders) with ``n``,
    an int >= 0; ``None`` goes back to unseeded. Reseeds the default session now."""
    if n is not None and (isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral)
                          or n < 0):
        raise ValueError(f"flow.random.seed: n must be an int >= 0 or None, got {n!r}")
    seeds.set_seed(None if n is None else int(n))
