"""Gibbs samplers: exact stationary distributions on tiny problems, normalised predictive
densities, and recovery of well-separated clusters."""

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import normalized_mutual_info_score

import pyro_memo as pm
from pyro_memo.inference.blocked_gibbs import BlockedGibbs
from pyro_memo.inference.collapsed_gibbs import CollapsedGibbs
from pyro_memo.inference.gibbs import hard_summary, log_crp

#: tolerance in batch-means standard errors (which account for the chain's autocorrelation)
Z = 4.0
X3 = torch.tensor([[-1.0], [0.3], [2.5]], dtype=torch.float64)


def canonical(labels):
    """Relabel by order of first appearance, so equal partitions get equal keys."""
    seen = {}
    return tuple(seen.setdefault(int(z), len(seen)) for z in labels)


def assert_frequencies(keys, exact):
    """Empirical frequencies of ``keys`` (one per sweep) against ``exact`` {key: prob},
    within Z batch-means standard errors (25 batches)."""
    batches = np.array_split(np.arange(len(keys)), 25)
    for key, prob in exact.items():
        hits = np.array([k == key for k in keys], dtype=float)
        means = np.array([hits[b].mean() for b in batches])
        se = means.std(ddof=1) / math.sqrt(len(batches))
        assert abs(hits.mean() - prob) <= Z * max(se, 1e-3), (key, hits.mean(), prob, se)


@pytest.mark.slow
def test_collapsed_gibbs_samples_the_exact_partition_posterior():
    family = pm.Gaussian.from_data(X3)
    alpha = 0.7
    exact = {}
    for labels in itertools.product(range(3), repeat=3):
        key = canonical(labels)
        if key in exact:
            continue
        s = hard_summary(family, X3, torch.tensor(key), max(key) + 1)
        exact[key] = float(family.log_marginal(s.counts, s.stats).sum()) + log_crp(s.counts, alpha)
    norm = np.logaddexp.reduce(list(exact.values()))
    exact = {k: math.exp(v - norm) for k, v in exact.items()}
    assert len(exact) == 5  # Bell(3)
    keys = []
    CollapsedGibbs(family, alpha=alpha, sweeps=2500, burn_in=10, seed=1).fit(
        X3, callback=lambda sweep, labels: keys.append(canonical(labels)))
    assert_frequencies(keys[10:], exact)


def test_blocked_gibbs_samples_the_exact_truncated_posterior():
    """Labels under the truncated prior: p(z) = prod_{k<T} B(1+N_k, a+N_>k) / B(1, a)."""
    family = pm.Gaussian.from_data(X3)
    alpha, T = 0.7, 3
    exact = {}
    for labels in itertools.product(range(T), repeat=3):
        s = hard_summary(family, X3, torch.tensor(labels), T)
        n = s.counts
        after = torch.flip(torch.cumsum(torch.flip(n, [0]), 0), [0]) - n
        log_prior = sum(math.lgamma(1 + n[k]) + math.lgamma(alpha + after[k]) - math.lgamma(1 + alpha + n[k] + after[k])
                        - (math.lgamma(1) + math.lgamma(alpha) - math.lgamma(1 + alpha)) for k in range(T - 1))
        exact[labels] = float(family.log_marginal(s.counts, s.stats).sum()) + float(log_prior)
    norm = np.logaddexp.reduce(list(exact.values()))
    exact = {k: math.exp(v - norm) for k, v in exact.items()}
    keys = []
    BlockedGibbs(family, T=T, alpha=alpha, sweeps=2500, burn_in=10, seed=2).fit(
        X3, callback=lambda sweep, labels: keys.append(tuple(int(z) for z in labels)))
    assert_frequencies(keys[10:], exact)


def two_blobs_1d(n=120):
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(2, (n,), generator=g)
    x = torch.where(labels[:, None] == 0, -4.0, 3.0) + torch.randn(n, 1, generator=g, dtype=torch.float64)
    return x.to(torch.float64), labels


@pytest.mark.parametrize("sampler", ["collapsed", "blocked"])
def test_predictive_density_integrates_to_one_and_clusters_are_found(sampler):
    x, labels = two_blobs_1d()
    family = pm.Gaussian.from_data(x)
    if sampler == "collapsed":
        result = CollapsedGibbs(family, sweeps=30, thin=3, seed=0).fit(x)
    else:
        result = BlockedGibbs(family, T=10, sweeps=60, thin=3, seed=0).fit(x)
    grid = torch.linspace(-40, 40, 8001, dtype=torch.float64)[:, None]
    density = result.log_predictive(grid).exp()
    assert float(torch.trapezoid(density, grid[:, 0])) == pytest.approx(1.0, abs=1e-3)
    assert normalized_mutual_info_score(labels.numpy(), result.labels.numpy()) > 0.9
    assert len(result.log_joint_trace) == len(result.sweep_seconds) == len(result.num_clusters)
    assert np.isfinite(result.log_joint_trace).all()


def test_bad_options():
    family = pm.Gaussian.from_data(X3)
    with pytest.raises(ValueError, match="alpha"):
        CollapsedGibbs(family, alpha=0)
    with pytest.raises(ValueError, match="burn_in"):
        BlockedGibbs(family, sweeps=10, burn_in=10)
    # a fraction was truncated (T = 2.5 sampled with 2 components, burn_in = 2.5 kept sweeps from 2) and a bad
    # seed accepted by the blocked sampler (seed = -1 or 1.5 drew from torch's seeds -1 and 1) or refused by
    # numpy's "expected non-negative integer" in the collapsed one's first sweep
    with pytest.raises(ValueError, match="T must be a positive integer"):
        BlockedGibbs(family, T=2.5)
    for sampler in (CollapsedGibbs, BlockedGibbs):
        with pytest.raises(ValueError, match="burn_in must be a non-negative integer"):
            sampler(family, sweeps=10, burn_in=2.5)
        for seed in (-1, 1.5, "0"):
            with pytest.raises(ValueError, match="seed must be a whole number"):
                sampler(family, seed=seed)
    with pytest.raises(ValueError, match="init_K must be at most T"):
        BlockedGibbs(family, T=2, init_K=3)
    with pytest.raises(ValueError, match="no samples"):
        from pyro_memo.inference.gibbs import GibbsResult
        GibbsResult(torch.zeros(3)).log_predictive(X3)


@pytest.mark.parametrize("sampler", ["collapsed", "blocked"])
def test_samplers_run_in_float32(sampler):
    """A float32 family samples in float32 as in float64 (the collapsed sampler failed with torch's "can't assign
    a numpy.float32 to a torch.FloatTensor" the first time an item opened a new cluster)."""
    x, labels = two_blobs_1d(60)
    family = pm.Gaussian.from_data(x, dtype=torch.float32)
    if sampler == "collapsed":
        result = CollapsedGibbs(family, sweeps=6, seed=0).fit(x)
        assert max(result.num_clusters) > 1  # items opened new clusters, from one
    else:
        result = BlockedGibbs(family, T=10, sweeps=6, seed=0).fit(x)
    assert np.isfinite(result.log_joint_trace).all()
    density = result.log_predictive(x[:5])
    assert density.dtype == torch.float32 and bool(torch.isfinite(density).all())
