"""A concentration with a Gamma prior and a closed-form Gamma factor
(:mod:`pyro_memo.allocation.concentration`)."""

import math
import pickle

import numpy as np
import pytest
import torch
from scipy import optimize, special, stats

from pyro_memo.allocation.concentration import (
    GammaConcentration,
    concentration_from_state,
    concentration_state,
    expected_log,
    learnable,
)


def test_a_learnt_concentration_is_its_mean_as_a_number():
    c = GammaConcentration((2.0, 0.5), (7.0, 2.0))
    assert float(c) == 3.5 and c * 2 == 7.0
    assert c.e_log == pytest.approx(special.digamma(7.0) - math.log(2.0), abs=1e-12)
    assert expected_log(c) == c.e_log and expected_log(3.0) == math.log(3.0)
    assert GammaConcentration((2.0, 0.5)).q == (2.0, 0.5)  # starts at its prior


def test_kl_matches_torch():
    for q, p in [((7.0, 2.0), (2.0, 0.5)), ((0.3, 5.0), (1.0, 1.0)), ((100.0, 3.0), (1.0, 0.01))]:
        c = GammaConcentration(p, q)
        ref = torch.distributions.kl_divergence(torch.distributions.Gamma(*torch.tensor(q, dtype=torch.float64)),
                                                torch.distributions.Gamma(*torch.tensor(p, dtype=torch.float64)))
        assert c.kl() == pytest.approx(float(ref), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_update_is_the_optimum_of_its_terms(seed):
    """n E[log c] - t E[c] - KL(q || p) is maximised over (w1, w2) by Gamma(s1 + n, s2 + t)."""
    rng = np.random.default_rng(seed)
    prior = tuple(rng.uniform(0.2, 3.0, 2))
    n, t = rng.uniform(0, 500), rng.uniform(0.01, 80)

    def value(c):
        return n * c.e_log - t * float(c) - c.kl()

    closed = GammaConcentration(prior).updated(n, t)
    best = optimize.minimize(lambda w: -value(GammaConcentration(prior, np.exp(w))), np.log(closed.q) + 0.3,
                             method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    assert value(closed) >= -best.fun - 1e-8
    assert closed.q == pytest.approx((prior[0] + n, prior[1] + t))


def test_terms_match_monte_carlo():
    """The bound's terms E_q[n log c - t c + log p(c) - log q(c)] by sampling c ~ q."""
    c = GammaConcentration((1.5, 0.4), (12.0, 3.0))
    n, t = 9.0, 2.5
    rng = np.random.default_rng(0)
    draws = rng.gamma(12.0, 1 / 3.0, 400_000)
    mc = n * np.log(draws) - t * draws + stats.gamma(1.5, scale=1 / 0.4).logpdf(draws) \
        - stats.gamma(12.0, scale=1 / 3.0).logpdf(draws)
    exact = n * c.e_log - t * float(c) - c.kl()
    assert abs(mc.mean() - exact) < 4 * mc.std() / math.sqrt(len(draws))


def test_state_round_trip_and_pickle():
    c = GammaConcentration((2.0, 0.5), (7.0, 2.0))
    for back in (concentration_from_state(concentration_state(c)),
                 concentration_from_state(torch.tensor(concentration_state(c))), pickle.loads(pickle.dumps(c))):
        assert isinstance(back, GammaConcentration) and back.prior == c.prior and back.q == c.q
    assert concentration_from_state(concentration_state(0.5)) == 0.5
    assert learnable(0.5, None) == 0.5 and isinstance(learnable(0.5, (1.0, 2.0)), GammaConcentration)


@pytest.mark.parametrize("prior", [(0.0, 1.0), (1.0, -2.0), (float("inf"), 1.0), (float("nan"), 1.0)])
def test_bad_priors_are_refused(prior):
    with pytest.raises(ValueError, match="positive finite"):
        GammaConcentration(prior)


@pytest.mark.parametrize("prior", [(1, 1, 1), (1,), 5, "12", (1, "a")])
def test_a_prior_that_is_not_a_pair_of_numbers_is_named(prior):
    # (1, 1, 1) was "too many values to unpack", 5 "'int' object is not iterable", "12" read as (1, 2)
    import pyro_memo as pm
    from pyro_memo.relational import MemoizedRelational
    from pyro_memo.topics import MemoizedHDP

    family = pm.Gaussian.from_data(np.random.default_rng(0).normal(size=(10, 2)))
    for name, make in [("alpha_prior", lambda: MemoizedHDP(alpha_prior=prior)),
                       ("gamma_prior", lambda: MemoizedHDP(gamma_prior=prior)),
                       ("alpha_prior", lambda: pm.MemoizedVB(family, 2, alpha_prior=prior)),
                       ("alpha_prior", lambda: pm.DPSticks(alpha_prior=prior)),
                       ("alpha_prior", lambda: MemoizedRelational(alpha_prior=prior)),
                       ("gamma_prior", lambda: MemoizedRelational(gamma_prior=prior))]:
        with pytest.raises(ValueError, match=rf"{name} \(shape, rate\) must be two positive finite numbers; got"):
            make()
