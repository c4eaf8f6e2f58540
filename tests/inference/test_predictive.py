"""Posterior predictive densities: Monte Carlo references, normalisation, errors."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.inference.predictive import log_predictive, log_predictive_components, vb_log_predictive
from pyro_memo.summaries import Summary
from tests.families.test_reference import N_MC, NAMES, SPECS, K, _assert_within_mc, _np, _post_k, _setup


@pytest.mark.parametrize("name", NAMES)
def test_component_predictive_is_the_posterior_expected_likelihood(name):
    """exp(log p(x | S_k)) = E_{q(phi_k)}[p(x | phi_k)], by Monte Carlo over q(phi_k)."""
    spec, rng, _, fam, x_np, x, resp, counts, st, post = _setup(name)
    summary = Summary(counts, st, torch.zeros_like(counts), x.shape[0])
    closed = np.exp(_np(log_predictive_components(fam, summary, x[:4])))
    assert closed.shape == (4, K)
    for k in range(K):
        smp = spec.sample(_post_k(post, k), rng, N_MC)
        _assert_within_mc(closed[:, k], np.exp(spec.loglik(x_np[:4], smp)), f"{name} p(x | S_{k})")


@pytest.mark.parametrize("name", ["gauss", "zm-gauss", "diag-gauss"])
def test_vb_predictive_integrates_to_one_in_1d(name):
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(100, 1, generator=g, dtype=torch.float64) - 4,
                   0.5 * torch.randn(100, 1, generator=g, dtype=torch.float64) + 3])
    family = pm.get_family(name).from_data(x)
    result = pm.FullBatchVB(family, 5).fit(x)
    grid = torch.linspace(-60, 60, 12001, dtype=torch.float64)[:, None]
    density = vb_log_predictive(result.posterior, result.summary, grid).exp()
    assert float(torch.trapezoid(density, grid[:, 0])) == pytest.approx(1.0, abs=1e-4)


def test_counts_predictive_sums_to_one():
    """Poisson: the predictive pmf over 0..200 sums to 1."""
    x = torch.poisson(torch.full((50, 1), 4.0, dtype=torch.float64))
    family = pm.Poisson.from_data(x)
    result = pm.FullBatchVB(family, 3).fit(x)
    support = torch.arange(201, dtype=torch.float64)[:, None]
    total = vb_log_predictive(result.posterior, result.summary, support).exp().sum()
    assert float(total) == pytest.approx(1.0, abs=1e-8)


def test_bad_weights_are_rejected():
    x = torch.randn(20, 2, dtype=torch.float64)
    family = pm.Gaussian.from_data(x)
    summary = Summary.from_responsibilities(family, x, torch.full((20, 2), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        log_predictive(family, summary, torch.ones(3) / 3, x)
    with pytest.raises(ValueError, match="non-negative"):
        log_predictive(family, summary, torch.tensor([0.8, 0.7]), x)
    assert SPECS  # the reference specs cover every family


def test_float32_weights_rounded_past_one_are_accepted():
    """A float32 fit's expected weights may sum to 1 plus a few float32 roundings (50 components of
    the estimator with dtype="float32" summed to 1 + 1.2e-7); that is rounding, not bad weights, so
    ``score_samples`` must not refuse them. Weights past one by more than rounding are still refused."""
    x = torch.randn(20, 2, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    family = pm.Gaussian.from_data(x, dtype=torch.float32)
    resp = torch.full((20, 50), 1 / 50, dtype=torch.float32)
    summary = Summary.from_responsibilities(family, x, resp)
    weights = torch.full((50,), 1 / 50, dtype=torch.float32)
    weights[0] += 1 - float(weights.sum(dtype=torch.float32)) + 1.2e-7  # one ulp of 1 past it
    assert float(weights.sum()) > 1
    assert torch.isfinite(log_predictive(family, summary, weights, x)).all()
    with pytest.raises(ValueError, match="non-negative"):
        log_predictive(family, summary, weights * 1.001, x)
