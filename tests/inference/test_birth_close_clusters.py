"""Births on clusters close enough that a split pays only on all of a target's items (D = 10, unit
covariances, each mean 3 standard deviations along its own axis)."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.estimator import DPMixture
from pyro_memo.inference.moves import BirthMove
from pyro_memo.summaries import Summary
from tests.inference.test_moves import assert_memo_is_exact


def close_clusters(clusters, n, seed, D=10, shift=3.0):
    """``(x, labels)``: ``n`` items, equally likely from ``clusters`` unit Gaussians with means ``shift * e_k``."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(clusters, size=n)
    means = shift * np.eye(clusters, D)
    return torch.tensor(means[labels] + rng.standard_normal((n, D))), labels


def bound_at_labels(posterior, x, labels):
    """The exact ELBO of the hard assignment to the true clusters (largest first) with its optimal globals."""
    order = np.argsort(-np.bincount(labels), kind="stable")
    resp = torch.nn.functional.one_hot(torch.as_tensor(labels), len(order)).to(x.dtype)[:, order]
    summary = Summary.from_responsibilities(posterior.family, x, resp)
    return float(posterior.optimal_for(summary).elbo(summary))


@pytest.mark.parametrize("seed", range(3))
def test_a_birth_replaces_its_target_when_the_remnant_is_deleted(seed):
    """From K = 1 on two clusters the fresh pair is adopted, but after one lap the target keeps a broad
    remnant of about a third of the items: the expanded model, and the remnant merged into a fresh
    component, both score below K = 1; with the remnant deleted (its items to the fresh components that
    explain them) the split is kept at once, above the bound at the true labels, the memo exact."""
    x, labels = close_clusters(2, 1500, seed)
    family = pm.Gaussian.from_data(x)
    birth = BirthMove(subsample_size=len(x), seed=seed)  # the whole target: this tests the adoption alone
    result = pm.MemoizedVB(family, 1, laps=2, tol=0, seed=seed, moves=[birth]).fit(x, num_batches=5)
    assert result.state.move_log[1]["birth"] == {"proposed": 1, "accepted": 1}
    assert result.posterior.K == 2
    assert result.elbo > bound_at_labels(result.posterior, x, labels)
    gains = result.state.move_gains
    assert gains and all(g["after"] > g["before"] for g in gains)
    assert_memo_is_exact(x, result, 5)
    assert float(result.posterior.elbo(result.state.cache.total)) == pytest.approx(result.elbo, rel=1e-12)


@pytest.mark.parametrize("seed", [2, 3])
def test_births_from_one_component_find_four_close_clusters_with_the_default_options(seed):
    """The estimator's defaults from K = 1: every cluster is found (a default subsample of 1,000 items,
    60% of a pair of clusters, merged the pair's split away on the subsample, and the fit stopped at two
    or three components), with an ELBO above the bound at the true labels."""
    x, labels = close_clusters(4, 3000, seed)
    est = DPMixture(n_components=1, moves="birth,merge,delete", random_state=seed).fit(x.numpy())
    assert est.n_components_ == 4
    assert est.elbo_ > bound_at_labels(est.posterior_, x, labels)
