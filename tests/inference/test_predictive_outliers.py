"""Posterior predictives of far outliers: the full-covariance Gaussians' closed-form Student-t.

The generic predictive (:meth:`ConjugateFamily.log_predictive`) is the ratio of marginal likelihoods
log p(S_k + s(x)) - log p(S_k), whose rank-one-updated scale matrix B + c u u^T fails its Cholesky once
c u^T B^{-1} u passes ~1/eps. The Gaussian and zero-mean Gaussian families override it with the closed
form (matrix determinant lemma), which must equal the ratio where the ratio is computable.
"""

import math

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.families.base import ConjugateFamily, item_summaries
from pyro_memo.inference.predictive import log_predictive, log_predictive_components, vb_log_predictive
from pyro_memo.summaries import Summary
from tests.conftest import make_data

CLOSED_FORM = ("gauss", "zm-gauss")
#: count families whose predictive is a closed form too: the Gamma-Poisson negative binomial, the
#: Dirichlet-multinomial (the ratio cancels the whole summary's lgamma terms at large counts)
COUNT_CLOSED_FORM = ("poisson", "mult")
DISTANCES = [10.0 ** e for e in range(2, 10)]  # 1e2 .. 1e9 standard deviations


def _random_case(name, g):
    """A family with a data-scaled prior, a random soft summary of K components and random items."""
    D = int(torch.randint(1, 6, (), generator=g))
    K = int(torch.randint(1, 8, (), generator=g))
    N = int(torch.randint(1, 150, (), generator=g))
    spread = torch.exp(torch.randn(D, generator=g, dtype=torch.float64))
    x = 3 * torch.randn(D, generator=g, dtype=torch.float64) + spread * torch.randn(N, D, generator=g,
                                                                                     dtype=torch.float64)
    family = pm.get_family(name).from_data(x)
    resp = torch.rand(N, K, generator=g, dtype=torch.float64) ** 3
    resp = resp / resp.sum(1, keepdim=True)
    items = 5 * torch.randn(int(torch.randint(1, 30, (), generator=g)), D, generator=g, dtype=torch.float64)
    return family, resp.sum(0), family.stats(x, resp), items


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_closed_form_equals_the_marginal_likelihood_ratio(name):
    """Over many random (D, K, summaries, items) the Student-t equals the generic ratio to 1e-9 relative."""
    g = torch.Generator().manual_seed(2006)
    for _ in range(150):
        family, counts, stats, items = _random_case(name, g)
        assert type(family).log_predictive is not ConjugateFamily.log_predictive
        closed = family.log_predictive(items, counts, stats)
        ratio = ConjugateFamily.log_predictive(family, items, counts, stats)
        assert closed.shape == ratio.shape == (items.shape[0], counts.shape[0])
        torch.testing.assert_close(closed, ratio, rtol=1e-9, atol=0)


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_closed_form_of_the_empty_component_is_the_prior_predictive(name):
    """No data: the prior's Student-t, equal to the ratio from the zero summary."""
    x = make_data(name, 100, D=3)
    family = pm.get_family(name).from_data(x)
    empty = Summary.zeros(family, 1)
    torch.testing.assert_close(family.log_predictive(x, empty.counts, empty.stats),
                               ConjugateFamily.log_predictive(family, x, empty.counts, empty.stats),
                               rtol=1e-10, atol=0)


def _two_blobs():
    rng = np.random.RandomState(0)
    return np.vstack([rng.randn(100, 2) + 5, rng.randn(100, 2) - 5])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CLOSED_FORM)
def test_far_outliers_have_finite_decreasing_predictive(name, dtype):
    """Points 1e2 .. 1e9 standard deviations away score finitely, lower the farther (no Cholesky error)."""
    X = _two_blobs()
    std = float(X.std())
    model = pm.DPMixture(n_components=4, max_iter=5, random_state=0, dtype=dtype, family=name).fit(X)
    far = np.array([[s * std, -s * std] for s in DISTANCES])
    scores = np.asarray(model.score_samples(far), dtype=np.float64)
    assert np.isfinite(scores).all(), scores
    assert (np.diff(scores) < 0).all(), scores
    # the same through the VB predictive and per component, the prior component included
    x = torch.as_tensor(far, dtype=getattr(torch, dtype))
    vb = vb_log_predictive(model.posterior_, model.summary_, x)
    assert vb.dtype == getattr(torch, dtype) and bool(torch.isfinite(vb).all())
    np.testing.assert_allclose(vb.numpy(), scores, rtol=1e-6)
    family = model.posterior_.family
    for summary in (model.summary_, Summary.zeros(family, 1)):
        components = log_predictive_components(family, summary, x)
        assert bool(torch.isfinite(components).all())
        assert bool((components.diff(dim=0) < 0).all())


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_float32_outliers_agree_with_float64(name):
    """The float32 closed form keeps its accuracy far out (the ratio lost half a nat at 1e4 sds)."""
    X = _two_blobs()
    far = np.array([[s * X.std(), -s * X.std()] for s in DISTANCES])
    scores = [pm.DPMixture(n_components=4, max_iter=5, random_state=0, dtype=dt, family=name).fit(X)
              .score_samples(far) for dt in ("float32", "float64")]
    np.testing.assert_allclose(np.asarray(scores[0], dtype=np.float64), scores[1], rtol=1e-4)


def test_default_ratio_serves_the_other_families(family_name):
    """Every other family keeps the generic ratio, which the chunked components reproduce (the count families'
    closed forms equal it at these counts)."""
    cls = pm.get_family(family_name)
    if family_name not in CLOSED_FORM + COUNT_CLOSED_FORM:
        assert cls.log_predictive is ConjugateFamily.log_predictive
    x = make_data(family_name, 120, D=3)
    family = cls.from_data(x)
    g = torch.Generator().manual_seed(0)
    resp = torch.rand(x.shape[0], 4, generator=g, dtype=torch.float64)
    summary = Summary.from_responsibilities(family, x, resp / resp.sum(1, keepdim=True))
    items = x[:7]
    ones, item_stats = item_summaries(family, items)
    expected = torch.stack([
        family.log_marginal(summary.counts + ones[n], {k: v + item_stats[k][n] for k, v in summary.stats.items()})
        - family.log_marginal(summary.counts, summary.stats)
        for n in range(items.shape[0])])
    got = log_predictive_components(family, summary, items)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    mixture = log_predictive(family, summary, torch.full((4,), 0.2, dtype=torch.float64), items)
    assert mixture.shape == (7,) and bool(torch.isfinite(mixture).all())
    weighted = torch.cat([got + math.log(0.2), log_predictive_components(family, Summary.zeros(family, 1), items)
                          + math.log(0.2)], 1)
    torch.testing.assert_close(mixture, torch.logsumexp(weighted, 1), rtol=1e-12, atol=1e-12)



def _count_case(name, g, scale=1.0):
    """A count family with default priors, a random soft summary of K components of counts times ``scale``
    and random items of such counts (some zero, some far from every component)."""
    D = int(torch.randint(1, 7, (), generator=g))
    K = int(torch.randint(1, 6, (), generator=g))
    N = int(torch.randint(1, 80, (), generator=g))
    rates = torch.exp(2 * torch.randn(D, generator=g, dtype=torch.float64))
    x = torch.round(scale * torch.poisson(rates.expand(N, D), generator=g))
    family = pm.get_family(name).from_data(x)
    resp = torch.rand(N, K, generator=g, dtype=torch.float64) ** 3
    resp = resp / resp.sum(1, keepdim=True)
    items = torch.round(scale * torch.poisson(rates.expand(12, D) * torch.exp(torch.randn(12, D, generator=g,
                                                                                          dtype=torch.float64)),
                                              generator=g))
    return family, resp.sum(0), family.stats(x, resp), items


@pytest.mark.parametrize("name", COUNT_CLOSED_FORM)
def test_count_closed_forms_equal_the_ratio_at_moderate_counts(name):
    g = torch.Generator().manual_seed(2024)
    for _ in range(100):
        family, counts, stats, items = _count_case(name, g)
        closed = family.log_predictive(items, counts, stats)
        ratio = ConjugateFamily.log_predictive(family, items, counts, stats)
        assert closed.shape == ratio.shape == (items.shape[0], counts.shape[0])
        torch.testing.assert_close(closed, ratio, rtol=1e-10, atol=1e-10)
    empty = Summary.zeros(family, 1)
    torch.testing.assert_close(family.log_predictive(items, empty.counts, empty.stats),
                               ConjugateFamily.log_predictive(family, items, empty.counts, empty.stats),
                               rtol=1e-10, atol=1e-10)


def _reference(name, family, counts, stats, items):
    """The predictive by mpmath at 400 digits from the float64 posterior's parameters."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 400
    post = family.posterior(counts, stats)
    out = np.zeros((items.shape[0], counts.shape[0]))
    for n, row in enumerate(items.tolist()):
        x = [mp.mpf(v) for v in row]
        for k in range(counts.shape[0]):
            if name == "poisson":
                a, b = ([mp.mpf(v) for v in post[key][k].tolist()] for key in ("a", "b"))
                value = sum(mp.loggamma(ad + xd) - mp.loggamma(ad) - mp.loggamma(xd + 1) + ad * mp.log(bd / (bd + 1))
                            - xd * mp.log(bd + 1) for xd, ad, bd in zip(x, a, b, strict=True))
            else:
                lam = [mp.mpf(v) for v in post["lam"][k].tolist()]
                total, size = sum(x), sum(lam)
                value = (mp.loggamma(total + 1) + mp.loggamma(size) - mp.loggamma(size + total)
                         + sum(mp.loggamma(lv + xv) - mp.loggamma(lv) - mp.loggamma(xv + 1)
                               for xv, lv in zip(x, lam, strict=True)))
            out[n, k] = float(value)
    return out


@pytest.mark.parametrize("scale", [1.0, 1e6, 1e12, 1e16, 1e100])
@pytest.mark.parametrize("name", COUNT_CLOSED_FORM)
def test_count_predictives_are_accurate_at_huge_counts(name, scale):
    """Counts up to 1e100 times Poisson draws score as a 400-digit reference does, to 1e-12 relative (the ratio
    of marginal likelihoods scored every item -3.7 at 1e16 where the reference is about -200)."""
    g = torch.Generator().manual_seed(7)
    for _ in range(3):
        family, counts, stats, items = _count_case(name, g, scale)
        got = family.log_predictive(items, counts, stats).numpy()
        expected = _reference(name, family, counts, stats, items)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)


def test_a_poisson_mixture_scores_counts_of_1e16_as_the_reference_does():
    # the reviewer's case: DPMixture.score_samples gave -3.738 for every row
    mp = pytest.importorskip("mpmath")
    base = np.random.default_rng(0).poisson(3, size=(40, 5)).astype(float) + 1
    X = np.round(base * 1e16)
    model = pm.DPMixture(n_components=1, family="poisson", random_state=0, max_iter=5).fit(X)
    family = model.posterior_.family
    weights = model.posterior_.expected_weights().numpy()
    terms = [_reference("poisson", family, model.summary_.counts, model.summary_.stats, torch.as_tensor(X[:3])),
             _reference("poisson", family, torch.zeros(1, dtype=torch.float64),
                        {k: torch.zeros_like(v[:1]) for k, v in model.summary_.stats.items()}, torch.as_tensor(X[:3]))]
    expected = [float(mp.log(sum(mp.exp(mp.mpf(t)) * w for t, w in
                                 zip([terms[0][n, 0], terms[1][n, 0]], [weights[0], 1 - weights.sum()], strict=True))))
                for n in range(3)]
    np.testing.assert_allclose(model.score_samples(X[:3]), expected, rtol=1e-12)
    assert np.all(np.asarray(expected) < -190)
