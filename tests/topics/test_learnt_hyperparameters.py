"""The HDP's hyperparameters learnt: concentrations with Gamma priors (``alpha_prior`` /
``gamma_prior``) and the topics' Dirichlet prior by type-II maximum likelihood (``learn_lam0``). The
bound never falls, each is its exact optimum, a sharp prior reproduces the fixed value, and they
survive checkpoints and model files."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.allocation.concentration import GammaConcentration
from pyro_memo.allocation.hdp_sticks import concentration_terms
from pyro_memo.families.type2 import Learnt, symmetric_dirichlet_ml
from pyro_memo.posterior.hdp import HDPMixturePosterior
from pyro_memo.topics import HDPPosterior, MemoizedHDP
from tests.engine.test_hdp_any_family import gaussian_groups
from tests.topics.test_memoized_hdp import random_corpus

PRIORS = [((1.0, 1.0), None), (None, (1.0, 0.1)), ((2.0, 4.0), (3.0, 0.5))]


def _monotone(values):
    values = np.asarray(values)
    return bool(np.all(np.diff(values) >= -1e-9 * np.abs(values[1:])))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha_prior,gamma_prior", PRIORS)
def test_no_memoized_step_lowers_the_bound(seed, alpha_prior, gamma_prior):
    corpus = random_corpus(seed)
    B = min(3 + seed, corpus.num_docs)
    fit = MemoizedHDP(K=4 + 2 * seed, laps=6, tol=0, seed=seed, local_iters=30, record_batch_elbos=True,
                      alpha_prior=alpha_prior, gamma_prior=gamma_prior).fit(corpus, B)
    assert len(fit.batch_elbos) >= 5 * B and _monotone(fit.batch_elbos) and _monotone(fit.elbo_trace)
    post = fit.posterior
    assert post.learnt_concentrations == [n for n, p in (("alpha", alpha_prior), ("gamma", gamma_prior)) if p]
    # the bound's last global step ends on each factor's closed-form optimum given the sticks
    total = fit.state.cache.total
    terms = concentration_terms(post.rho, post.omega, total.num_docs, total.sum_log_pi)
    for name in post.learnt_concentrations:
        c = getattr(post, name)
        assert c.q == pytest.approx(c.updated(*terms[name]).q, rel=1e-12)
    # and the bound is the exact bound of the fitted factors
    assert float(post.elbo(fit.state.cache.recomputed_total())) == pytest.approx(fit.elbo_trace[-1], rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_each_learnt_factor_is_a_maximum_of_the_bound(seed):
    corpus = random_corpus(10 + seed)
    fit = MemoizedHDP(K=6, laps=4, tol=0, seed=seed, alpha_prior=(1.0, 1.0), gamma_prior=(1.0, 0.2)).fit(corpus, 2)
    post, total = fit.posterior, fit.state.cache.total
    best = float(post.elbo(total))
    for name in ("alpha", "gamma"):
        c = getattr(post, name)
        for f1, f2 in ((1.02, 1.0), (1.0, 1.02), (0.98, 1.0), (1.0, 0.98), (1.05, 1.05), (0.95, 0.95)):
            setattr(post, name, GammaConcentration(c.prior, (c.q[0] * f1, c.q[1] * f2)))
            assert float(post.elbo(total)) < best
        setattr(post, name, c)


def test_a_sharp_prior_reproduces_the_fixed_concentrations():
    corpus = random_corpus(3)
    fixed = MemoizedHDP(K=6, alpha=0.7, gamma=3.0, laps=4, tol=0, seed=1).fit(corpus, 3)
    sharp = MemoizedHDP(K=6, laps=4, tol=0, seed=1, alpha_prior=(0.7e9, 1e9), gamma_prior=(3e9, 1e9)).fit(corpus, 3)
    assert float(sharp.posterior.alpha) == pytest.approx(0.7, rel=1e-5)
    assert float(sharp.posterior.gamma) == pytest.approx(3.0, rel=1e-5)
    torch.testing.assert_close(sharp.posterior.lam, fixed.posterior.lam, rtol=1e-4, atol=1e-6)
    # the bounds differ by the factors' KL terms only, which vanish for a sharp prior up to O(log)
    terms = sharp.posterior.elbo_terms(sharp.state.cache.total)
    assert set(terms) - set(fixed.posterior.elbo_terms(fixed.state.cache.total)) == {"concentrations"}


def test_moves_with_learnt_concentrations_never_lower_the_bound():
    corpus = pm.synthetic.bars_corpus(200, 60, alpha=0.2, seed=0)[0]
    fit = MemoizedHDP(K=2, laps=6, tol=0, seed=0, moves="birth,merge,delete", alpha_prior=(1.0, 1.0),
                      gamma_prior=(1.0, 0.1)).fit(corpus, 3)
    assert _monotone(fit.elbo_trace[1:])
    assert fit.posterior.K > 2


def test_an_hdp_mixture_learns_them_too():
    groups, _ = gaussian_groups(0, num_groups=20)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    fit = MemoizedHDP(K=6, laps=4, tol=0, seed=0, family=family, record_batch_elbos=True, alpha_prior=(1.0, 1.0),
                      gamma_prior=(1.0, 1.0)).fit(groups, 3)
    assert _monotone(fit.batch_elbos)
    assert isinstance(fit.posterior, HDPMixturePosterior) and fit.posterior.learnt_concentrations == ["alpha", "gamma"]


def test_checkpoints_and_model_files_keep_the_factors(tmp_path):
    corpus = random_corpus(5)
    model = dict(K=5, tol=0, seed=2, alpha_prior=(1.0, 1.0), gamma_prior=(2.0, 0.5))
    direct = MemoizedHDP(laps=4, **model).fit(corpus, 3)
    part = MemoizedHDP(laps=2, **model).fit(corpus, 3)
    pm.save_state(tmp_path / "state.pt", part.state)
    state = pm.load_state(tmp_path / "state.pt")
    assert state.posterior.alpha.q == part.posterior.alpha.q and state.posterior.gamma.q == part.posterior.gamma.q
    resumed = MemoizedHDP(laps=4, **model).fit(corpus, 3, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, direct.elbo_trace, rtol=1e-12)
    pm.save_model(tmp_path / "hdp.pt", direct)
    loaded = pm.load_model(tmp_path / "hdp.pt").posterior
    assert loaded.alpha.q == direct.posterior.alpha.q and loaded.gamma.prior == (2.0, 0.5)
    assert float(loaded.elbo(direct.summary)) == float(direct.posterior.elbo(direct.summary))


def test_bad_priors_are_refused():
    with pytest.raises(ValueError, match="positive finite"):
        MemoizedHDP(alpha_prior=(1.0, 0.0))


@pytest.mark.parametrize("seed", range(8))
def test_symmetric_dirichlet_ml_maximises_its_terms(seed):
    from scipy import optimize, special

    rng = np.random.default_rng(seed)
    K, V = int(rng.integers(1, 30)), int(rng.integers(2, 500))
    lam0 = rng.uniform(0.01, 2.0)
    T = K * V * (special.digamma(lam0) - special.digamma(V * lam0)) * rng.uniform(0.8, 1.2)

    def f(x):
        return K * (special.gammaln(V * x) - V * special.gammaln(x)) + x * T

    best = optimize.minimize_scalar(lambda u: -f(np.exp(u)), bounds=(np.log(1e-6), np.log(1e3)), method="bounded",
                                    options={"xatol": 1e-12})
    found = symmetric_dirichlet_ml(K, V, T)
    assert f(found) >= -best.fun - 1e-9 * abs(best.fun)
    assert found == pytest.approx(np.exp(best.x), rel=1e-4)


def test_symmetric_dirichlet_ml_at_its_bounds():
    assert symmetric_dirichlet_ml(3, 10, 0.0) == 1e3  # uniform topics: unbounded, clipped
    assert symmetric_dirichlet_ml(3, 10, -1e12) == 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_a_learnt_lam0_never_lowers_the_bound_and_is_its_optimum(seed):
    corpus = random_corpus(20 + seed)
    fit = MemoizedHDP(K=5 + seed, laps=6, tol=0, seed=seed, local_iters=30, record_batch_elbos=True, learn_lam0=True,
                      lam0=[0.05, 0.1, 1.0, 3.0][seed], alpha_prior=(1.0, 1.0) if seed % 2 else None).fit(corpus, 3)
    assert _monotone(fit.batch_elbos) and _monotone(fit.elbo_trace)
    post, total = fit.posterior, fit.state.cache.total
    assert isinstance(post.lam0, Learnt)
    torch.testing.assert_close(post.lam, post.lam0 + total.word_counts)  # topics optimal for it
    best = float(post.elbo(total))
    for factor in (0.98, 1.02):
        other = HDPPosterior(post.lam, post.rho, post.omega, post.alpha, post.gamma, float(post.lam0) * factor)
        assert float(other.elbo(total)) < best


def test_a_learnt_lam0_survives_checkpoints_and_model_files(tmp_path):
    corpus = random_corpus(7)
    model = dict(K=5, tol=0, seed=2, learn_lam0=True)
    direct = MemoizedHDP(laps=4, **model).fit(corpus, 3)
    part = MemoizedHDP(laps=2, **model).fit(corpus, 3)
    pm.save_state(tmp_path / "state.pt", part.state)
    state = pm.load_state(tmp_path / "state.pt")
    assert isinstance(state.posterior.lam0, Learnt) and state.posterior.lam0 == part.posterior.lam0
    resumed = MemoizedHDP(laps=4, **model).fit(corpus, 3, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, direct.elbo_trace, rtol=1e-12)
    pm.save_model(tmp_path / "hdp.pt", direct)
    assert isinstance(pm.load_model(tmp_path / "hdp.pt").posterior.lam0, Learnt)


def test_learn_lam0_is_for_the_topic_model_only():
    family = pm.Gaussian.from_data(np.arange(10.0).reshape(5, 2))
    with pytest.raises(ValueError, match="learn_lam0"):
        MemoizedHDP(family=family, learn_lam0=True)
