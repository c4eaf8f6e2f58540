"""A latent DP concentration written the way Pyro users write it, ``alpha = pyro.sample("alpha",
dist.Gamma(s1, s2))`` then ``Beta(1, alpha)`` sticks: recognised, its q(alpha) learnt by the fits and
sampled by the guide, and the exact ELBO equal to Pyro's TraceEnum_ELBO estimate."""

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro.infer import TraceEnum_ELBO, config_enumerate

import pyro_memo as pm
from pyro_memo.models.component_sites import index_components
from tests.bridge.test_trace_elbo import pyro_elbo


def mix_weights(beta):
    beta1m_cumprod = (1 - beta).cumprod(-1)
    return F.pad(beta, (0, 1), value=1) * F.pad(beta1m_cumprod, (1, 0), value=1)


def gauss_1d(data, T=6, s1=1.0, s2=1.0, form="scalar"):
    alpha = pyro.sample("alpha", dist.Gamma(s1, s2) if form != "vector" else dist.Gamma(torch.tensor([s1]), s2))
    with pyro.plate("beta_plate", T - 1):
        if form == "ones":
            beta = pyro.sample("beta", dist.Beta(torch.ones(T - 1), alpha))
        elif form == "expand":
            beta = pyro.sample("beta", dist.Beta(1.0, alpha.expand(T - 1)))
        else:
            beta = pyro.sample("beta", dist.Beta(1.0, alpha))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(2.0, 2.0))
        mu = pyro.sample("mu", dist.Normal(0.0, (0.01 * lam).rsqrt()))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
        pyro.sample("obs", dist.Normal(mu[z], lam[z].rsqrt()), obs=data)


def gauss_1d_vectorised(data, T=5):
    """The same model written so that Pyro can vectorise particles and enumerate ``z`` (weights
    unsqueezed into the data plate, parameters gathered with ``index_components``)."""
    one = torch.ones((), dtype=torch.float64)
    alpha = pyro.sample("alpha", dist.Gamma(one, one))
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(one, alpha))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(2.0 * one, 2.0 * one))
        mu = pyro.sample("mu", dist.Normal(0.0 * one, (0.01 * lam).rsqrt()))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta).unsqueeze(-2)))
        pyro.sample("obs", dist.Normal(index_components(mu, z, 0), index_components(lam, z, 0).rsqrt()), obs=data)


def clusters(n_clusters, per=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = torch.arange(n_clusters, dtype=torch.float64) * 12.0
    return (means.repeat_interleave(per) + 0.5 * torch.randn(n_clusters * per, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("form", ["scalar", "ones", "expand", "vector"])
def test_latent_alpha_is_recognised_with_its_gamma_prior(form):
    spec = pm.recognize_model(gauss_1d, clusters(2), form=form, s1=3.0, s2=1.5)
    assert spec.alpha_site == "alpha" and spec.alpha_prior == (3.0, 1.5)
    assert spec.alpha == pytest.approx(2.0) and spec.stick_site == "beta"


def alpha_elsewhere(data, T=6, where="prior"):
    """A latent alpha that also enters a component prior's rate (``where="prior"``) or the observation's scale
    (``"obs"``)."""
    alpha = pyro.sample("alpha", dist.Gamma(2.0, 1.0))
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(1.0, alpha))
    with pyro.plate("components", T):
        if where == "prior":
            lam = pyro.sample("lam", dist.Gamma(2.0, alpha))
            mu = pyro.sample("mu", dist.Normal(0.0, (0.01 * lam).rsqrt()))
        else:
            mu = pyro.sample("mu", dist.Normal(0.0, 5.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
        scale = lam[z].rsqrt() if where == "prior" else alpha
        pyro.sample("obs", dist.Normal(mu[z], scale), obs=data)


@pytest.mark.parametrize("where,site", [("prior", "lam"), ("obs", "obs")])
def test_a_latent_alpha_entering_another_site_is_refused_naming_it(where, site):
    """The prior's rate (or the known noise) was read at the one draw of alpha the trace took, a different
    constant under every seed, and q(alpha) learnt from the sticks alone: now one error naming both sites."""
    for seed in range(3):
        pyro.set_rng_seed(seed)
        with pytest.raises(pm.ModelStructureError, match=rf"site 'alpha' .* also enters site\(s\) \['{site}'\]"):
            pm.recognize_model(alpha_elsewhere, clusters(2), where=where)


@pytest.mark.parametrize("fit", ["vb", "memo"])
def test_fits_learn_q_alpha_toward_the_data(fit):
    """Prior mean 1: eight well-separated clusters pull E_q[alpha] up, one cluster pulls it down."""
    learnt = {}
    for n in (1, 8):
        pyro.clear_param_store()
        x = clusters(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pm.ConvergenceWarning)
            if fit == "vb":
                result = pm.fit_vb(gauss_1d, x, T=12, max_iter=300)
            else:
                result = pm.fit_memoized(gauss_1d, x, T=12, num_batches=4, laps=100)
        learnt[n] = result.posterior.expected_alpha()
        w1, w2 = pyro.param(f"{result.guide.prefix}.q_alpha").tolist()
        assert w1 / w2 == pytest.approx(learnt[n], rel=1e-10)  # the guide's q(alpha) is in the param store
    assert learnt[1] < 1.0 < learnt[8], learnt


@pytest.mark.parametrize("K", [None, 3])
def test_exact_elbo_matches_pyro_trace_enum_elbo(K):
    """The guide samples alpha from q(alpha) (and sticks beyond K from Beta(1, alpha)): Pyro's
    TraceEnum_ELBO of the fitted guide equals the closed-form ELBO, within 3 standard errors."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x = clusters(3, per=10, seed=1)
    result = pm.fit_vb(gauss_1d_vectorised, x, K=K, max_iter=300)
    assert result.guide.spec.alpha_site == "alpha" and result.guide.K == (4 if K is None else K)
    guide = config_enumerate(result.guide, "parallel", expand=True)
    mean, se = pyro_elbo(gauss_1d_vectorised, guide, x, particles=1000, loss=TraceEnum_ELBO)
    assert se < 0.05
    assert abs(result.elbo - mean) < 3 * se, (result.elbo, mean, se)


def test_guide_samples_alpha_and_runs_under_the_memoized_elbo():
    pyro.clear_param_store()
    x = clusters(3, per=10, seed=2)
    guide = pm.DPMixtureGuide(gauss_1d)
    svi = pyro.infer.SVI(gauss_1d, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for _ in range(60):
        loss = svi.step(x)
    draws = guide.sample_posterior(200)
    assert draws["alpha"].shape == (200,) and bool((draws["alpha"] > 0).all())
    assert float(draws["alpha"].mean()) == pytest.approx(guide.posterior.expected_alpha(), rel=0.25)
    pyro.clear_param_store()
    assert -loss == pytest.approx(pm.fit_vb(gauss_1d, x, max_iter=300).elbo, rel=1e-6)
