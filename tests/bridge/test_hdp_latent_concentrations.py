"""Latent HDP concentrations on the Pyro side: ``alpha ~ Gamma(s1, s2)`` (the documents' Dirichlet
scale) and ``gamma ~ Gamma(s1, s2)`` (the sticks' Beta parameter), scalars outside every plate, are
recognised by their wiring, learnt by the memoized fit as ``q = Gamma(w1, w2)`` in the param store,
sampled by the guide, and Pyro's Trace_ELBO of the fitted guide is the bound plus E_q(alpha)[gap]."""

import math

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import scipy.stats
import torch
from pyro.ops.indexing import Vindex

import pyro_memo as pm
from pyro_memo.allocation.concentration import GammaConcentration
from pyro_memo.bridge.hdp_gap import expected_normaliser_gap, gamma_quadrature, normaliser_gap
from pyro_memo.models import HDPTopicModel

from .test_hdp_bridge import LAM0, corpus, weights

K = 4
A_PRIOR, G_PRIOR = (2.0, 2.0), (2.0, 1.0)


def latent_model(doc_of, words, D, V, docs=None):
    """Hand-written HDP with latent concentrations under other names; ``docs`` subsamples documents."""
    g0 = pyro.sample("g0", dist.Gamma(torch.tensor(G_PRIOR[0]), torch.tensor(G_PRIOR[1])))
    a0 = pyro.sample("a0", dist.Gamma(torch.tensor(A_PRIOR[0]), torch.tensor(A_PRIOR[1])))
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(torch.tensor(1.0), g0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D, subsample=docs) as d:
        theta = pyro.sample("theta", dist.Dirichlet(a0 * weights(b)))
    tok, local = pm.batch_tokens(doc_of, d, D)
    with pyro.plate("word_plate", len(doc_of), subsample=tok):
        c = pyro.sample("c", dist.Categorical(theta[local]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words[tok])


def plain_latent_model(doc_of, words, D, V):
    """As :func:`latent_model` without subsampling, runnable under vectorised particles (float64)."""
    one = torch.ones((), dtype=torch.float64)
    a0 = pyro.sample("a0", dist.Gamma(A_PRIOR[0] * one, A_PRIOR[1] * one))
    g0 = pyro.sample("g0", dist.Gamma(G_PRIOR[0] * one, G_PRIOR[1] * one))
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(one, g0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0, dtype=torch.float64)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(a0.unsqueeze(-1) * weights(b).unsqueeze(-2)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[..., doc_of, :]))
        pyro.sample("w", dist.Categorical(Vindex(topic.unsqueeze(-3))[..., c, :]), obs=words)


def test_hdp_topic_model_with_priors_is_recognised():
    doc_of, words, D, V = corpus(0)
    model = HDPTopicModel(V, K, alpha_prior=(3.0, 2.0), gamma_prior=(1.0, 0.25))
    spec = pm.recognize_model(model, doc_of, words, D)
    assert (spec.alpha_site, spec.alpha_prior, spec.gamma_site, spec.gamma_prior) == \
        ("alpha", (3.0, 2.0), "gamma", (1.0, 0.25))
    assert spec.alpha == pytest.approx(1.5) and spec.gamma == pytest.approx(4.0)
    only_alpha = pm.recognize_model(HDPTopicModel(V, K, gamma=5.0, alpha_prior=(1.0, 1.0)), doc_of, words, D)
    assert (only_alpha.alpha_site, only_alpha.gamma_site, only_alpha.gamma) == ("alpha", None, 5.0)
    plain = pm.recognize_model(HDPTopicModel(V, K), doc_of, words, D)
    assert (plain.alpha_site, plain.alpha_prior, plain.gamma_site, plain.gamma_prior) == (None, None, None, None)


@pytest.mark.parametrize("bad", [(0.0, 1.0), (1.0, -2.0), (1.0,), "a", (1.0, math.inf)])
def test_hdp_topic_model_refuses_bad_priors(bad):
    with pytest.raises(ValueError, match="alpha_prior"):
        HDPTopicModel(5, 3, alpha_prior=bad)
    with pytest.raises(ValueError, match="gamma_prior"):
        HDPTopicModel(5, 3, gamma_prior=bad)


def test_hand_written_latent_concentrations_are_recognised_by_their_wiring():
    doc_of, words, D, V = corpus(1)
    spec = pm.recognize_model(latent_model, doc_of, words, D, V, torch.tensor([3, 1, 8]))
    assert (spec.alpha_site, spec.alpha_prior, spec.gamma_site, spec.gamma_prior) == ("a0", A_PRIOR, "g0", G_PRIOR)
    assert (spec.stick_site, spec.doc_site, spec.subsample_arg) == ("b", "theta", ("arg", 4))
    assert spec.alpha == pytest.approx(1.0) and spec.gamma == pytest.approx(2.0)


def normal_alpha(doc_of, words, D, V):
    a0 = pyro.sample("a0", dist.Normal(1.0, 0.1))
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, 2.0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(a0.abs() * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def plated_alpha(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, 2.0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        a0 = pyro.sample("a_doc", dist.Gamma(2.0, 2.0))
        theta = pyro.sample("theta", dist.Dirichlet(a0.unsqueeze(-1) * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def stray_scalar(doc_of, words, D, V):
    pyro.sample("stray", dist.Gamma(2.0, 2.0))
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, 2.0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(0.7 * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def shared_concentration(doc_of, words, D, V):
    a0 = pyro.sample("both", dist.Gamma(2.0, 2.0))
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, a0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(a0 * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def gamma_in_the_topics(doc_of, words, D, V):
    """A latent gamma that also scales the topics' prior: recognition read lam0 at the one draw of gamma the
    trace took (0.455, 0.267, 0.223 under three seeds), and the fit took that as a constant."""
    g0 = pyro.sample("g0", dist.Gamma(2.0, 1.0))
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, g0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(0.1 * g0 * torch.ones(V)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(0.7 * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


@pytest.mark.parametrize("model,site,says", [
    (normal_alpha, "a0", "Normal prior"),
    (plated_alpha, "a_doc", "inside plate"),
    (stray_scalar, "stray", "wired as neither"),
    (shared_concentration, "both", "wired as both"),
    (gamma_in_the_topics, "g0", r"also enters site\(s\) \['topic'\]"),
])
def test_unsupported_latent_concentrations_are_refused_naming_the_site(model, site, says):
    doc_of, words, D, V = corpus(2)
    with pytest.raises(pm.ModelStructureError, match=says) as err:
        pm.recognize_model(model, doc_of, words, D, V)
    assert f"'{site}'" in str(err.value) and "Gamma(s1, s2)" in str(err.value)


@pytest.mark.parametrize("model", ["own", "hand"])
def test_fit_learns_the_concentrations_and_its_bound_never_decreases(model):
    doc_of, words, D, V = corpus(3, D=15)
    pyro.clear_param_store()
    if model == "own":
        m, args = HDPTopicModel(V, K, lam0=LAM0, alpha_prior=A_PRIOR, gamma_prior=G_PRIOR), (doc_of, words, D)
        names = ("alpha", "gamma")
    else:
        m, args = latent_model, (doc_of, words, D, V)
        names = ("a0", "g0")
    result = pm.fit_memoized(m, *args, num_batches=3, laps=12, tol=0, seed=0)
    post = result.posterior
    assert isinstance(post.alpha, GammaConcentration) and isinstance(post.gamma, GammaConcentration)
    assert abs(float(post.alpha) - A_PRIOR[0] / A_PRIOR[1]) > 0.2  # moved off the prior mean
    trace = result.elbo_trace
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(trace, trace[1:], strict=False))
    store = pyro.get_param_store()
    q_alpha = store[f"{result.guide.prefix}.q_alpha"].detach().double()
    assert torch.allclose(q_alpha, torch.tensor(post.alpha.q, dtype=torch.float64))
    assert torch.allclose(store[f"{result.guide.prefix}.q_gamma"].detach().double(),
                          torch.tensor(post.gamma.q, dtype=torch.float64))
    # the guide samples both at the model's sites; read-outs include them
    tr = pyro.poutine.trace(result.guide).get_trace(*args)
    assert all(tr.nodes[n]["type"] == "sample" and tr.nodes[n]["value"].shape == () for n in names)
    draws = result.guide.sample_posterior(4000)
    assert float(draws[names[0]].mean()) == pytest.approx(float(post.alpha), rel=0.05)
    med = result.guide.median()
    w1, w2 = post.gamma.q
    assert float(med[names[1]]) == pytest.approx(scipy.stats.gamma.ppf(0.5, w1, scale=1 / w2), rel=0.03)
    sites = {"own": {"u", "phi"}, "hand": {"b", "topic"}}[model]
    assert set(result.guide.quantiles([0.1, 0.9])) == sites | set(names)


def test_svi_with_memoized_elbo_learns_the_concentrations_and_never_rises_after_lap_1():
    doc_of, words, D, V = corpus(4, D=12)
    pyro.clear_param_store()
    guide = pm.HDPGuide(latent_model, seed=0)
    svi = pyro.infer.SVI(latent_model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    batches = list(torch.randperm(D, generator=torch.Generator().manual_seed(0)).split(4))
    losses = []
    for _ in range(5):
        for batch in batches:
            losses.append(svi.step(doc_of, words, D, V, batch))
    later = losses[len(batches) - 1:]
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(later, later[1:], strict=False))
    post = guide.posterior
    assert post.alpha.q != post.alpha.prior and post.gamma.q != post.gamma.prior


def test_gamma_quadrature_integrates_polynomials_and_the_gap_matches_monte_carlo():
    for w1, w2 in ((0.7, 2.0), (3.0, 0.5), (400.0, 300.0)):
        x, p = gamma_quadrature(w1, w2, 20)
        for n in range(1, 6):  # E[a^n] = w1 (w1 + 1) ... (w1 + n - 1) / w2^n
            exact = math.exp(math.lgamma(w1 + n) - math.lgamma(w1) - n * math.log(w2))
            assert float((p * x ** n).sum()) == pytest.approx(exact, rel=1e-10)
    rho = torch.tensor([0.3, 0.5, 0.2, 0.6], dtype=torch.float64)
    omega = torch.tensor([5.0, 12.0, 3.0, 30.0], dtype=torch.float64)
    # alpha around 10 needs the scaled Hurwitz zeta (q^m zeta(m, q) overflows unscaled)
    assert math.isfinite(normaliser_gap(rho, omega, 12.0, 1)) and normaliser_gap(rho, omega, 12.0, 1) > 0
    torch.manual_seed(0)
    for q in ((3.0, 2.0), (60.0, 40.0)):
        conc = GammaConcentration((1.0, 1.0), q)
        gap = expected_normaliser_gap(rho, omega, conc, 3)
        assert gap == pytest.approx(expected_normaliser_gap(rho, omega, conc, 3, nodes=80), rel=1e-9)
        n = 400_000
        a = dist.Gamma(torch.tensor(q[0], dtype=torch.float64), q[1]).sample((n, 1))
        beta = weights(dist.Beta(rho * omega, (1 - rho) * omega).sample((n,)))
        draws = 3 * (torch.lgamma(a[:, 0]) - torch.lgamma(a * beta).sum(1) - len(rho) * torch.log(a[:, 0])
                     - torch.log(beta).sum(1))
        se = float(draws.std()) / math.sqrt(n)
        assert abs(gap - float(draws.mean())) < 3 * se
    assert expected_normaliser_gap(rho, omega, 0.8, 3) == normaliser_gap(rho, omega, 0.8, 3)


def test_trace_elbo_with_latent_concentrations_is_the_bound_plus_the_expected_gap():
    doc_of, words, D, V = corpus(2, D=6, V=8, length=8)
    pyro.clear_param_store()
    result = pm.fit_memoized(plain_latent_model, doc_of, words, D, V, num_batches=2, laps=6, seed=1)
    assert isinstance(result.posterior.alpha, GammaConcentration)
    pyro.set_rng_seed(0)
    elbo = pyro.infer.Trace_ELBO(num_particles=3000, vectorize_particles=True, max_plate_nesting=1)
    estimates = [-elbo.loss(plain_latent_model, result.guide, doc_of, words, D, V) for _ in range(10)]
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / math.sqrt(len(estimates))
    gap = result.normaliser_gap
    assert gap > 0 and gap == pytest.approx(result.guide.normaliser_gap(doc_of, words, D, V))
    assert abs(mean - (result.elbo + gap)) < 3 * se
    # without the gap the two disagree: the check can fail
    assert abs(mean - result.elbo) > 3 * se
