"""Stochastic online natural-gradient VI: the step, the schedule, and that it learns."""

import numpy as np
import pytest
import torch
from sklearn.metrics import normalized_mutual_info_score

import pyro_memo as pm
from pyro_memo.data_sources import make_batches
from pyro_memo.inference.stochastic_vb import PAPER_SCHEDULES, StochasticVB, full_data_elbo
from tests.conftest import four_blobs, make_data


def normal_wishart_natural(post):
    """Natural parameters of a Normal-Wishart posterior: (kappa, kappa m, B + kappa m m^T, nu)."""
    kappa, m = post["kappa"], post["m"]
    return [kappa, kappa[:, None] * m, post["B"] + kappa[:, None, None] * m[:, :, None] * m[:, None, :], post["nu"]]


def test_summary_blend_is_a_natural_parameter_step():
    """The effective-summary blend moves the natural parameters by exactly rho (eq. 7)."""
    x = make_data("gauss", 400, D=3, seed=1)
    family = pm.Gaussian.from_data(x)
    g = torch.Generator().manual_seed(0)
    r1 = torch.softmax(torch.randn(400, 4, generator=g, dtype=torch.float64), -1)
    r2 = torch.softmax(3 * torch.randn(400, 4, generator=g, dtype=torch.float64), -1)
    s1 = pm.Summary.from_responsibilities(family, x, r1)
    s2 = pm.Summary.from_responsibilities(family, x, r2).scaled(7.0)
    rho = 0.3
    blended = family.posterior(*_cs(s1.scaled(1 - rho) + s2.scaled(rho)))
    n1, n2 = (normal_wishart_natural(family.posterior(*_cs(s))) for s in (s1, s2))
    nb = normal_wishart_natural(blended)
    for a, b, c in zip(n1, n2, nb, strict=True):
        torch.testing.assert_close(c, (1 - rho) * a + rho * b, rtol=1e-12, atol=1e-9)
    sticks = pm.DPSticks(1.0)
    e1, e2 = sticks.posterior(s1.counts), sticks.posterior(s2.counts)
    eb = sticks.posterior((s1.scaled(1 - rho) + s2.scaled(rho)).counts)
    for a, b, c in zip(e1, e2, eb, strict=True):
        torch.testing.assert_close(c, (1 - rho) * a + rho * b, rtol=1e-12, atol=1e-12)


def _cs(summary):
    return summary.counts, summary.stats


def test_rate_schedule():
    svi = StochasticVB(pm.Gaussian.from_data(torch.randn(10, 2)), 3, kappa=0.9, delay=10)
    assert svi.rate(1) == pytest.approx(11 ** -0.9)
    assert [svi.rate(t) for t in (1, 2, 3)] == sorted((svi.rate(t) for t in (1, 2, 3)), reverse=True)
    assert PAPER_SCHEDULES == ((0.5, 10.0), (0.5, 100.0), (0.9, 10.0))


@pytest.mark.parametrize("kwargs,match", [({"kappa": 0.3}, "kappa"), ({"delay": -1}, "delay"),
                                          ({"K": 0}, "K"), ({"laps": 0}, "laps")])
def test_bad_options(kwargs, match):
    family = pm.Gaussian.from_data(torch.randn(10, 2))
    args = {"K": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        StochasticVB(family, args.pop("K"), **args)


@pytest.mark.parametrize("kwargs,match", [({"delay": "a"}, "delay must be a non-negative finite number"),
                                          ({"delay": None}, "delay must be"), ({"delay": float("inf")}, "delay"),
                                          ({"kappa": "a"}, "kappa must be a positive finite number"),
                                          ({"kappa": None}, "kappa must be")])
def test_step_size_options_that_are_not_numbers_are_named(kwargs, match):
    from pyro_memo.relational import StochasticRelational
    from pyro_memo.topics import StochasticHDP

    for make in (lambda: StochasticVB(pm.Gaussian.from_data(torch.randn(10, 2)), 3, **kwargs),
                 lambda: StochasticRelational(**kwargs), lambda: StochasticHDP(**kwargs)):
        with pytest.raises(ValueError, match=match):
            make()


def test_first_full_step_equals_a_vb_iteration(family_name):
    """One batch, d = 0: rho_1 = 1, so the first update is one full-batch VB iteration."""
    x = make_data(family_name, 300, D=3, seed=2)
    family = pm.get_family(family_name).from_data(x)
    svi = StochasticVB(family, 6, laps=1, delay=0.0, seed=3).fit(x)
    vb = pm.FullBatchVB(family, 6, max_iter=1, tol=0.0, seed=3).fit(x)
    for key, value in vb.posterior.component.items():
        torch.testing.assert_close(svi.posterior.component[key], value, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(svi.posterior.eta1, vb.posterior.eta1)


def test_elbo_trace_is_exact_and_scored_with_optimal_locals():
    x = make_data("gauss", 2000, D=2, seed=0)
    family = pm.Gaussian.from_data(x)
    result = StochasticVB(family, 10, laps=3, seed=0).fit(x, num_batches=10)
    elbo, summary = full_data_elbo(result.posterior, make_batches(x, 7))
    assert elbo == pytest.approx(result.elbo_trace[-1], rel=1e-10)
    assert summary.num_items == 2000
    assert len(result.lap_seconds) == 3


@pytest.mark.parametrize("kappa,delay", PAPER_SCHEDULES)
def test_every_paper_schedule_improves_the_exact_elbo(kappa, delay):
    x, _ = four_blobs()
    result = StochasticVB(pm.Gaussian.from_data(x), 10, laps=6, kappa=kappa, delay=delay, seed=1,
                          init_items=400).fit(x, num_batches=20)
    trace = np.array(result.elbo_trace)
    assert np.isfinite(trace).all() and trace[-1] > trace[0]


def test_recovers_well_separated_clusters():
    x, labels = four_blobs()
    result = StochasticVB(pm.Gaussian.from_data(x), 10, laps=30, kappa=0.5, delay=10, seed=1,
                          init_items=400).fit(x, num_batches=20)
    pred = result.posterior.responsibilities(x).argmax(-1)
    assert normalized_mutual_info_score(labels.numpy(), pred.numpy()) > 0.95
