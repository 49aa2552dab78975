"""flow.random's ops (bernoulli, coin_flip, random permutations, shuffle) and gen_seed.

Random draws have no fixed reference, so they are checked by their laws (values, rates,
permutations) and by repeating under a seed; under tests/ops, so the strict backend runs
them too (they are listed in the op matrix's NOT_DIRECTLY_TESTED with this file's name).
"""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from . import harness as H


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


# -- random ops -------------------------------------------------------------------------


def _draws(body, steps=3):
    p = np.linspace(0.0, 1.0, 400).astype(np.float32)
    job = H.instrument(H.make_job(body, [H._spec(p)]))
    return [job(p) for _ in range(steps)]


def test_bernoulli_follows_its_probabilities_and_changes_per_step():
    draws = _draws(lambda p: flow.random.bernoulli(p), steps=20)
    assert all(d.dtype == np.float32 and set(np.unique(d)) <= {0.0, 1.0} for d in draws)
    mean = np.mean(draws, axis=0)
    p = np.linspace(0.0, 1.0, 400)
    assert mean[0] == 0.0 and mean[-1] == 1.0          # p = 0 never, p = 1 always
    assert abs(mean[:200].mean() - p[:200].mean()) < 0.05
    assert abs(mean[200:].mean() - p[200:].mean()) < 0.05
    assert not np.array_equal(draws[0], draws[1])


def test_seeded_draws_repeat_in_a_new_session():
    first = _draws(lambda p: flow.random.bernoulli(p, seed=7, dtype=flow.int32))
    flow.clear_default_session()
    again = _draws(lambda p: flow.random.bernoulli(p, seed=7, dtype=flow.int32))
    assert first[0].dtype == np.int32
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_the_ops_are_in_the_jobs():
    p = np.zeros(3, np.float32)
    for body, op in [(lambda x: flow.random.bernoulli(x), "bernoulli"),
                     (lambda x: flow.random.coin_flip(2), "coin_flip"),
                     (lambda x: flow.random.shuffle(x), "random_permutation")]:
        H.assert_ops(H.make_job(body, [H._spec(p)]), [op])


def test_coin_flip():
    flips = _draws(lambda p: flow.random.coin_flip(1000, probability=0.25), steps=2)
    assert flips[0].dtype == np.int8 and flips[0].shape == (1000,)
    assert 0.2 < flips[0].mean() < 0.3
    assert flow.random.CoinFlip is flow.random.coin_flip


def test_permutations_and_shuffle():
    perms = _draws(lambda x: flow.random.generate_random_batch_permutation_indices(x))
    for perm in perms:
        assert perm.dtype == np.int32
        np.testing.assert_array_equal(np.sort(perm), np.arange(400))
    assert not np.array_equal(perms[0], perms[1])
    shuffled = _draws(lambda x: flow.random.shuffle(x), steps=1)[0]
    np.testing.assert_array_equal(np.sort(shuffled), np.linspace(0, 1, 400).astype(np.float32))


def test_shuffle_gradient_goes_back_to_each_row():
    w0 = np.arange(6, dtype=np.float64).reshape(3, 2)

    @flow.global_function(type="train")
    def train() -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), dtype=flow.float64,
                              initializer=flow.zeros_initializer())
        s = flow.random.shuffle(w, seed=3)
        loss = flow.math.reduce_sum(s * s)          # d/dw = 2w whatever the order
        flow.optimizer.SGD(0.25, momentum=0).minimize(loss)
        return loss
    flow.load_variables({"w": w0})
    train()
    np.testing.assert_allclose(flow.get_all_variables()["w"], w0 - 0.25 * 2 * w0)


def test_gen_seed():
    assert flow.random.gen_seed(5) == (True, 5)
    flow.random.seed(1)
    try:
        a = [flow.random.gen_seed() for _ in range(2)]
        flow.random.seed(1)
        assert [flow.random.gen_seed() for _ in range(2)] == a
        assert not a[0][0] and a[0][1] != a[1][1]
    finally:
        flow.random.seed(None)


@pytest.mark.parametrize("call, match", [
    (lambda: flow.random.coin_flip(0), "coin_flip: batch_size"),
    (lambda: flow.random.coin_flip(2, probability=1.5), "coin_flip: probability"),
    (lambda: flow.random.gen_seed(-1), "gen_seed: seed"),
])
def test_random_arguments_are_checked(call, match):
    with pytest.raises(ValueError, match=match):
        call()


