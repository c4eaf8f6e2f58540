"""The items' products kept while a fit runs (:mod:`pyro_memo.families._products`)."""

import gc

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.data import make_batches
from pyro_memo.families import PRODUCT_CACHE, ProductCache
from pyro_memo.families.base import packed_outer


class Counting:
    """``packed_outer``, counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return packed_outer(x)


def test_nothing_is_kept_outside_a_fit():
    cache, make, x = ProductCache(), Counting(), torch.randn(10, 3, dtype=torch.float64)
    assert torch.equal(cache.get(x, make), packed_outer(x))
    cache.get(x, make)
    assert make.calls == 2 and len(cache) == 0 and cache.nbytes == 0


def test_the_same_tensor_is_read_back_and_an_equal_one_is_not():
    cache, make, x = ProductCache(), Counting(), torch.randn(10, 3, dtype=torch.float64)
    with cache.scope():
        first = cache.get(x, make)
        assert cache.get(x, make) is first
        cache.get(x.clone(), make)  # equal values, another tensor
        assert make.calls == 2
    assert len(cache) == 0 and cache.nbytes == 0


def test_an_in_place_change_forms_the_products_again():
    cache, make = ProductCache(), Counting()
    data = torch.randn(20, 3, dtype=torch.float64)
    view = data[:10]
    with cache.scope():
        cache.get(view, make)
        data[3] += 1.0  # through the base tensor: the view's version counter moves too
        again = cache.get(view, make)
        assert make.calls == 2 and torch.equal(again, packed_outer(view))
        assert len(cache) == 1 and cache.nbytes == again.element_size() * again.nelement()


def test_entries_go_with_their_tensor():
    cache = ProductCache()
    with cache.scope():
        x = torch.randn(10, 3, dtype=torch.float64)
        cache.get(x, packed_outer)
        assert len(cache) == 1 and cache.nbytes == 10 * 6 * 8
        del x
        gc.collect()
        assert len(cache) == 0 and cache.nbytes == 0


@pytest.mark.parametrize("seed", range(10))
def test_the_budget_is_never_exceeded(seed):
    rng = np.random.default_rng(seed)
    budget = int(rng.integers(0, 4000))
    cache = ProductCache(budget)
    tensors = [torch.randn(int(rng.integers(1, 30)), int(rng.integers(1, 6)), dtype=torch.float64)
               for _ in range(20)]
    with cache.scope():
        for x in rng.choice(len(tensors), 60):
            assert torch.equal(cache.get(tensors[x], packed_outer), packed_outer(tensors[x]))
            assert cache.nbytes <= budget
            assert cache.nbytes == sum(e[2].element_size() * e[2].nelement() for e in cache._entries.values())


def test_an_inner_scope_keeps_the_outer_entries():
    cache, x = ProductCache(), torch.randn(4, 2, dtype=torch.float64)
    with cache.scope():
        cache.get(x, packed_outer)
        with cache.scope():
            pass
        assert len(cache) == 1
    assert len(cache) == 0


def test_in_memory_batches_are_the_same_views_at_every_read():
    data = torch.randn(100, 3, dtype=torch.float64)
    source = make_batches(data, 4)
    assert all(source.batch(b) is source.batch(b) for b in range(4))
    assert make_batches(data, 1).batch(0) is data
    assert torch.equal(torch.cat([source.batch(b) for b in range(4)]), data)


@pytest.mark.parametrize("seed", range(3))
def test_a_fit_with_moves_is_the_same_with_and_without_kept_products(seed, monkeypatch):
    """Keeping the products changes the fit's time only: the same ELBO trace and components."""
    from pyro_memo.data import toy_patches

    x = torch.as_tensor(toy_patches(3000, seed=seed)[0])

    def fit():
        return pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), 1, laps=6, moves="birth,merge,delete",
                             seed=seed).fit(x, num_batches=6)

    kept = fit()
    monkeypatch.setattr(PRODUCT_CACHE, "max_bytes", 0)
    formed = fit()
    assert kept.elbo_trace == formed.elbo_trace
    assert torch.equal(kept.posterior.component["B"], formed.posterior.component["B"])
    assert len(PRODUCT_CACHE) == 0 and PRODUCT_CACHE.nbytes == 0


def test_a_fit_reads_its_batches_products_back(monkeypatch):
    import pyro_memo.families.zero_mean_gaussian as zero_mean

    made = Counting()
    monkeypatch.setattr(zero_mean, "packed_outer", made)
    x = torch.randn(2000, 4, dtype=torch.float64)
    pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), 3, laps=5, tol=0.0, seed=0).fit(x, num_batches=4)
    assert made.calls == 4  # each batch's products once, for five laps


def test_a_local_step_keeps_a_batch_of_one_chunk_only(monkeypatch):
    """The chunks of a larger batch are views that live as long as its local step: keeping them would
    hold the whole batch's products during the step for nothing."""
    x = torch.randn(1000, 4, dtype=torch.float64)
    post = pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), 3, laps=1, seed=0).fit(x, num_batches=1).posterior
    monkeypatch.setattr(type(post), "chunk_rows", lambda self, items: 256)
    with PRODUCT_CACHE.scope():
        big = post.local_step(x)[1]
        assert len(PRODUCT_CACHE) == 0
        small = x[:200]
        post.local_step(small)
        assert len(PRODUCT_CACHE) == 1
        stats = post.family.stats(small, torch.ones(200, 1, dtype=torch.float64).expand(200, 2).contiguous())
        assert len(PRODUCT_CACHE) == 1
    assert torch.allclose(stats["xx"][0], small.T @ small)
    assert torch.allclose(big.stats["xx"].sum(0), x.T @ x)
