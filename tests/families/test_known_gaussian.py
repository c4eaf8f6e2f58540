"""The known-covariance Gaussian family (Normal-Normal) and Pyro's DP-mixture tutorial model."""

import math

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro.infer import TraceEnum_ELBO, config_enumerate
from pyro.ops.indexing import Vindex

import pyro_memo as pm
from pyro_memo.bridge.recognition import recognize_model
from pyro_memo.families import KnownCovGaussian, KnownDiagGaussian
from tests.bridge.test_trace_elbo import pyro_elbo


def mix_weights(beta):
    beta1m_cumprod = (1 - beta).cumprod(-1)
    return F.pad(beta, (0, 1), value=1) * F.pad(beta1m_cumprod, (1, 0), value=1)


def tutorial_model(data, alpha=0.1, T=6):
    """Pyro's DP-mixture tutorial model, verbatim in shape."""
    N = data.shape[0]
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(1, alpha))
    with pyro.plate("mu_plate", T):
        mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), 5 * torch.eye(2)))
    with pyro.plate("data", N):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
        pyro.sample("obs", dist.MultivariateNormal(mu[z], torch.eye(2)), obs=data)


def diag_model(data, T=6):
    N = data.shape[0]
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(1, 0.5))
    with pyro.plate("mu_plate", T):
        mu = pyro.sample("mu", dist.Normal(torch.zeros(2), torch.tensor([3.0, 2.0])).to_event(1))
    with pyro.plate("data", N):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
        pyro.sample("obs", dist.Normal(mu[z], torch.tensor([0.5, 1.5])).to_event(1), obs=data)


def blobs(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.tensor([[4.0, 4.0], [-4.0, 4.0], [0.0, -4.0]])
    labels = torch.randint(3, (n,), generator=g)
    return (centers[labels] + torch.randn(n, 2, generator=g)).float(), labels


def random_family(seed, cls=KnownCovGaussian, D=3):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(D, D, generator=g, dtype=torch.float64)
    b = torch.randn(D, D, generator=g, dtype=torch.float64)
    S, R = a @ a.T + 0.5 * torch.eye(D), b @ b.T + 0.3 * torch.eye(D)
    if cls is KnownDiagGaussian:
        S, R = torch.diag_embed(torch.diagonal(S)), torch.diag_embed(torch.diagonal(R))
    fam = cls({"m": torch.randn(D, generator=g, dtype=torch.float64), "S": S, "noise": R})
    x = torch.randn(40, D, generator=g, dtype=torch.float64) * 3
    resp = torch.softmax(2 * torch.randn(40, 4, generator=g, dtype=torch.float64), -1)
    return fam, x, resp


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("cls", [KnownCovGaussian, KnownDiagGaussian])
def test_summaries_elbo_terms_and_marginal_agree(seed, cls):
    fam, x, resp = random_family(seed, cls)
    counts, stats = resp.sum(0), fam.stats(x, resp)
    post = fam.posterior(counts, stats)
    direct = (resp * fam.expected_log_lik(x, post)).sum(0)
    assert torch.allclose(direct, fam.expected_log_lik_from_stats(counts, stats, post), rtol=1e-10, atol=1e-8)
    # at the conjugate posterior, expected log-likelihood minus KL is the log marginal (soft counts too)
    bound = fam.expected_log_lik_from_stats(counts, stats, post) - fam.kl_to_prior(post)
    assert torch.allclose(bound, fam.log_marginal(counts, stats), rtol=1e-10, atol=1e-8)
    # hard assignments: the log marginal is scipy's joint Gaussian density of the items
    from scipy.stats import multivariate_normal
    p = {k: v.numpy() for k, v in fam.prior.items()}
    xs = x[:5].numpy()
    cov = np.kron(np.ones((5, 5)), p["S"]) + np.kron(np.eye(5), p["noise"])
    ref = multivariate_normal(np.tile(p["m"], 5), cov).logpdf(xs.reshape(-1))
    hard = torch.zeros(40, 1, dtype=torch.float64)
    hard[:5] = 1
    assert math.isclose(float(fam.log_marginal(hard.sum(0), fam.stats(x, hard))[0]), ref, rel_tol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_expected_log_lik_and_kl_match_monte_carlo(seed):
    fam, x, resp = random_family(seed)
    post = fam.posterior(resp.sum(0), fam.stats(x, resp))
    torch.manual_seed(seed)
    draws = [fam.sample_posterior(post)["mu"] for _ in range(4000)]
    mu = torch.stack(draws)  # (M, K, D)
    ll = torch.stack([fam.log_density(x[:3, None, :], {"mu": m[None]}) for m in mu])  # (M, 3, K)
    q = torch.distributions.MultivariateNormal(post["m"], covariance_matrix=post["S"])
    kl_mc = q.log_prob(mu) - fam.log_prior_density({"mu": mu})
    for mc, exact in ((ll, fam.expected_log_lik(x[:3], post)), (kl_mc, fam.kl_to_prior(post))):
        se = mc.std(0) / math.sqrt(mc.shape[0])
        assert bool(((mc.mean(0) - exact).abs() <= 4 * se + 1e-9).all())


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("name", ["known-gauss", "known-diag-gauss"])
def test_coordinate_steps_never_lower_the_elbo(seed, name):
    g = torch.Generator().manual_seed(seed)
    x = pm.get_family(name).example_data(torch.randint(4, (300,), generator=g), 4, 3, g)
    fam = pm.get_family(name).from_data(x).with_prior(float(torch.rand((), generator=g)) * 3 + 0.2)
    vb = pm.FullBatchVB(fam, 2 + seed, alpha=0.5 + seed / 3, truncation="direct" if seed % 3 == 2 else "nested",
                        max_iter=15, tol=0.0, init="random" if seed % 2 else "kmeans++", seed=seed, record_steps=True)
    steps = np.array(vb.fit(x).step_elbos)
    assert np.isfinite(steps).all()
    assert np.diff(steps).min() >= -1e-9 * np.abs(steps).max()


def test_state_dict_round_trip():
    fam, _, _ = random_family(0)
    back = pm.families.family_from_state(fam.state_dict())
    assert type(back) is KnownCovGaussian and all(torch.equal(back.prior[k], fam.prior[k]) for k in fam.prior)


def test_tutorial_model_is_recognised_as_known_gauss():
    data, _ = blobs(100)
    spec = recognize_model(tutorial_model, data)
    assert spec.family.name == "known-gauss" and spec.T == 6 and spec.alpha == pytest.approx(0.1)
    assert torch.allclose(spec.family.prior["noise"], torch.eye(2, dtype=torch.float64))
    assert torch.allclose(spec.family.prior["S"], 5 * torch.eye(2, dtype=torch.float64))
    assert spec.param_sites == {"mu": "mu"} and spec.obs_site == "obs"
    spec = recognize_model(diag_model, data)
    assert spec.family.name == "known-diag-gauss"
    assert torch.allclose(torch.diagonal(spec.family.prior["noise"]), torch.tensor([0.25, 2.25], dtype=torch.float64))


def test_non_constant_observation_covariance_is_refused():
    def model(data):
        with pyro.plate("beta_plate", 2):
            beta = pyro.sample("beta", dist.Beta(1, 1.0))
        with pyro.plate("mu_plate", 3):
            mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), torch.eye(2)))
        with pyro.plate("data", data.shape[0]):
            z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
            cov = torch.eye(2) * (1 + torch.arange(data.shape[0]))[:, None, None]
            pyro.sample("obs", dist.MultivariateNormal(mu[z], cov), obs=data)

    with pytest.raises(pm.ModelStructureError, match="same for every item"):
        recognize_model(model, blobs(10)[0])


def test_fit_vb_recovers_the_tutorial_blobs():
    pyro.clear_param_store()
    data, labels = blobs(600, seed=1)
    result = pm.fit_vb(tutorial_model, data, max_iter=200)
    resp = result.posterior.responsibilities(data.double())
    big = resp.sum(0) > 10
    means = result.posterior.component["m"][big]
    truth = torch.tensor([[4.0, 4.0], [-4.0, 4.0], [0.0, -4.0]], dtype=torch.float64)
    dist_ = torch.cdist(truth, means)
    # every blob is found, and every used component sits on a blob (plain VB may split one in two)
    assert float(dist_.min(1).values.max()) < 0.3 and float(dist_.min(0).values.max()) < 0.5
    found = resp.argmax(-1)
    for k in found.unique():  # each component holds items of one blob only
        assert len(labels[found == k].unique()) == 1


def test_exact_elbo_matches_trace_enum_elbo_on_the_tutorial_model():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    data, _ = blobs(40, seed=2)
    data = data.double()

    def model(data):
        """The tutorial's model in float64 with a less extreme alpha, written so that Pyro can
        vectorise particles and enumerate z (weights broadcast over the data plate, Vindex)."""
        with pyro.plate("beta_plate", 5):
            beta = pyro.sample("beta", dist.Beta(torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.5).double()))
        with pyro.plate("mu_plate", 6):
            mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2).double(), 5 * torch.eye(2).double()))
        with pyro.plate("data", data.shape[0]):
            z = pyro.sample("z", dist.Categorical(mix_weights(beta).unsqueeze(-2)))
            loc = Vindex(mu.unsqueeze(-3))[..., z, :]
            pyro.sample("obs", dist.MultivariateNormal(loc, torch.eye(2).double()), obs=data)

    result = pm.fit_vb(model, data, K=4, max_iter=50)
    guide = config_enumerate(result.guide, "parallel", expand=True)
    mean, se = pyro_elbo(model, guide, data, particles=1000, loss=TraceEnum_ELBO)
    assert se < 0.05
    assert abs(result.elbo - mean) < 3 * se, (result.elbo, mean, se)
