"""Models written the way Pyro's tutorials write them: scalar data, deterministic sites, and the
forms pyro-memo refuses (each with a ModelStructureError naming the site and the nearest supported form)."""

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro.infer import TraceEnum_ELBO, config_enumerate

import pyro_memo as pm


def mix_weights(beta):
    """Pyro tutorial's stick-breaking, written independently of pyro_memo."""
    beta1m_cumprod = (1 - beta).cumprod(-1)
    return F.pad(beta, (0, 1), value=1) * F.pad(beta1m_cumprod, (1, 0), value=1)


def gauss_1d(data, T=5):
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(1.0, 1.5))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(2.0, 2.0))
        mu = pyro.sample("mu", dist.Normal(0.0, (0.1 * lam).rsqrt()))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
        pyro.sample("obs", dist.Normal(mu[z], lam[z].rsqrt()), obs=data)


def poisson_tutorial(data, T=5, alpha=1.5):
    """Pyro's DP-mixture tutorial, Poisson part (``rate ~ Gamma(3, 0.05)``)."""
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(1, alpha))
    with pyro.plate("lambda_plate", T):
        lmbda = pyro.sample("lambda", dist.Gamma(3, 0.05))
    with pyro.plate("data", len(data)):
        z = pyro.sample("z", dist.Categorical(mix_weights(beta)))
        pyro.sample("obs", dist.Poisson(lmbda[z]), obs=data)


def bernoulli_1d(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def with_deterministic(data, T=5):
    with pyro.plate("beta_plate", T - 1):
        beta = pyro.sample("beta", dist.Beta(1.0, 1.5))
    weights = pyro.deterministic("weights", mix_weights(beta))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(2.0, 2.0))
        mu = pyro.sample("mu", dist.Normal(0.0, (0.1 * lam).rsqrt()))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(weights))
        pyro.sample("obs", dist.Normal(mu[z], lam[z].rsqrt()), obs=data)


def counts(n=40, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    rates = torch.cat([torch.full((n // 2,), 3.0), torch.full((n - n // 2,), 40.0)])
    return torch.poisson(rates, generator=g).to(dtype)


def reals(n=40, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64)
    x[: n // 2] -= 4.0
    x[n // 2:] += 4.0
    return x.to(dtype)


def binary(n=40, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    p = torch.cat([torch.full((n // 2,), 0.1), torch.full((n - n // 2,), 0.9)])
    return torch.bernoulli(p, generator=g).to(dtype)


def enum_elbo(model, guide, x, particles=300):
    """Mean and standard error of Pyro's TraceEnum_ELBO (the assignment enumerated in the guide),
    particles one by one (the tutorial's model indexes ``lam[z]`` directly)."""
    elbo = TraceEnum_ELBO(num_particles=1, max_plate_nesting=1)
    guide = config_enumerate(guide, "parallel", expand=True)
    values = torch.tensor([-elbo.loss(model, guide, x) for _ in range(particles)], dtype=torch.float64)
    return float(values.mean()), float(values.std() / len(values) ** 0.5)


@pytest.mark.parametrize("model,data,family", [
    (gauss_1d, reals, pm.DiagGaussian), (poisson_tutorial, counts, pm.Poisson),
    (bernoulli_1d, binary, pm.Bernoulli), (with_deterministic, reals, pm.DiagGaussian),
])
def test_scalar_data_is_d_equals_one_and_matches_trace_enum_elbo(model, data, family):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the model's literals in float64, as the data
    try:
        x = data()
        result = pm.fit_vb(model, x, max_iter=300)
        spec = result.guide.spec
        assert isinstance(spec.family, family) and spec.scalar and spec.family.dim == 1
        assert spec.data((x,), {}).shape == (len(x), 1)
        mean, se = enum_elbo(model, result.guide, x)
    finally:
        torch.set_default_dtype(default)
    assert se < 0.5
    assert abs(result.elbo - mean) < 3 * se + 1e-6, (result.elbo, mean, se)


def test_poisson_tutorial_prior_and_fit_equal_the_vector_form():
    """The tutorial's scalar Poisson model is read as Gamma(3, 0.05) and fitted exactly as the same
    data as one column with pyro-memo's own model."""
    pyro.clear_param_store()
    x = counts(60, seed=1, dtype=torch.float32)
    result = pm.fit_vb(poisson_tutorial, x, max_iter=200)
    fam = result.guide.spec.family
    assert float(fam.prior["a"]) == pytest.approx(3.0) and float(fam.prior["b"]) == pytest.approx(0.05)
    assert result.converged
    pyro.clear_param_store()
    reference = pm.fit_vb(pm.DPMixtureModel(fam, T=5, alpha=1.5), x.double().unsqueeze(-1), max_iter=200)
    assert result.elbo == pytest.approx(reference.elbo, rel=1e-8)


def test_integer_counts_are_accepted():
    pyro.clear_param_store()
    result = pm.fit_vb(poisson_tutorial, counts(30).long(), max_iter=100)
    assert result.guide.spec.scalar and result.elbo == result.elbo


def test_recognition_prints_no_singular_sample_warning():
    def wishart_model(data, T=6):
        D = data.shape[1]
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, 1.0))
        with pyro.plate("clusters", T):
            lam = pyro.sample("lam", dist.Wishart(torch.tensor(D + 0.5), covariance_matrix=torch.eye(D)))
            mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(D), precision_matrix=0.1 * lam))
        with pyro.plate("points", data.shape[0]):
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            pyro.sample("x", dist.MultivariateNormal(mu[z], precision_matrix=lam[z]), obs=data)

    x = torch.randn(20, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(5):
            pyro.set_rng_seed(seed)
            try:
                pm.recognize_model(wishart_model, x)
            except pm.ModelStructureError:
                pass  # a singular draw may fail the wiring check; what matters here is the warning
    assert not [w for w in caught if "Singular sample" in str(w.message)]
    # the same draws outside recognition do warn: the test can fail
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(5):
            pyro.set_rng_seed(seed)
            pyro.poutine.trace(wishart_model).get_trace(x)
    assert [w for w in caught if "Singular sample" in str(w.message)]


# ---------------------------------------------------------------------------- refusals
def param_alpha(data, T=4):
    alpha = pyro.param("alpha", torch.tensor(1.0))
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, alpha))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def param_rate(data, T=4):
    b = pyro.param("rate_b", torch.tensor(0.05), constraint=dist.constraints.positive)
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(3.0, b))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Poisson(lam[z]), obs=data)


def lognormal_alpha(data, T=4):
    alpha = pyro.sample("alpha", dist.LogNormal(0.0, 1.0))
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, alpha))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def plate_alpha(data, T=4):
    with pyro.plate("sticks", T - 1):
        alpha = pyro.sample("alpha", dist.Gamma(1.0, 1.0))
        v = pyro.sample("v", dist.Beta(1.0, alpha))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def marginalised(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        mu = pyro.sample("mu", dist.Normal(0.0, 3.0))
    with pyro.plate("data", data.shape[0]):
        mix = dist.MixtureSameFamily(dist.Categorical(mix_weights(v)), dist.Normal(mu, 1.0))
        pyro.sample("obs", mix, obs=data)


def factor_model(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    pyro.factor("penalty", -v.sum())
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def masked(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        with pyro.poutine.mask(mask=torch.arange(data.shape[0]) % 2 == 0):
            pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def scalar_data_vector_components(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(torch.full((2,), 2.0), 2.0).to_event(1))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z][..., 0]), obs=data)


def subsampled_sticks(data, T=4):
    """Recognition read the sticks' subsample size (2) as T - 1 and blamed the components: "site 'p' must be a
    component parameter in one plate of size T = 3; it is in [('components', 4)]"."""
    with pyro.plate("sticks", T - 1, subsample_size=2):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def subsampled_components(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T, subsample_size=2):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z.clamp(max=1)]), obs=data)


def sequential_sticks(data, T=4):
    """Sticks drawn one by one in a sequential plate: recognition said "expected one Beta(1, alpha) stick site ...;
    found ['v_0', 'v_1', 'v_2']", naming no plate and no form."""
    v = torch.stack([pyro.sample(f"v_{k}", dist.Beta(1.0, 1.0)) for k in pyro.plate("sticks", T - 1)])
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def sequential_components(data, T=4):
    """Components drawn one by one: "component site 'p_0' must be a univariate Normal / Gamma / Beta of shape (T,)
    = (4,); it is Beta of shape ()" (with (N, D) data: "the known-diag-gauss family needs component sites of types
    ['Normal']; found {'mu_0': 'Normal', ...}", sites of just that type)."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    p = torch.stack([pyro.sample(f"p_{k}", dist.Beta(2.0, 2.0)) for k in pyro.plate("components", T)])
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


def components_as_one_event(data, T=4):
    """The T components written as one event outside any plate: "site 'p' must be a component parameter in one
    plate of size T = 4; it is in []", without the form."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    p = pyro.sample("p", dist.Beta(torch.full((T,), 2.0), 2.0).to_event(1))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]), obs=data)


@pytest.mark.parametrize("model,data,message", [
    (components_as_one_event, binary, r"site 'p' .* it is in no plate \(its 4 components written as one event of "
                                      r"shape \(4,\), .to_event\). Supported: with pyro.plate\('components', 4\)"),
    (sequential_sticks, binary, r"site 'v_0' sits in the sequential plate 'sticks' .*`with pyro.plate\('sticks', "
                                r"3\): v = pyro.sample\('v', ...\)`"),
    (sequential_components, binary, r"site 'p_0' sits in the sequential plate 'components' .*`with "
                                    r"pyro.plate\('components', 4\): p = pyro.sample\('p', ...\)`"),
    (subsampled_sticks, binary, r"global site 'v' sits in plate 'sticks' subsampled to 2 of its 3 .*keep plate "
                                r"'sticks' whole"),
    (subsampled_components, binary, r"global site 'p' sits in plate 'components' subsampled to 2 of its 4 "
                                    r".*batches only the items \(plate 'data'\)"),
    (param_alpha, binary, r"site 'alpha' is a pyro.param.*pass a constant.*Gamma prior.*dist.Gamma\(s1, s2\)"),
    (param_rate, counts, r"site 'rate_b' is a pyro.param.*pass a constant tensor"),
    (lognormal_alpha, binary, r"'alpha' is a latent DP concentration with a LogNormal prior.*Gamma\(s1, s2\)"),
    (plate_alpha, binary, r"'alpha' is a latent DP concentration inside plate\(s\) \['sticks'\].*outside any plate"),
    (marginalised, reals, r"(?s)'obs' is a MixtureSameFamily.*Categorical\(weights\).*loc\[z\]"),
    (factor_model, binary, r"site 'penalty' is a pyro.factor"),
    (masked, binary, r"observed site 'x' is masked"),
    (scalar_data_vector_components, binary, r"component site 'p' must be a univariate .* of shape \(T,\)"),
])
def test_refusals_name_the_site_and_the_supported_form(model, data, message):
    with pytest.raises(pm.ModelStructureError, match=message):
        pm.recognize_model(model, data())
    with pytest.raises(pm.ModelStructureError, match=message):
        pm.fit_vb(model, data(), max_iter=5)


@pytest.mark.parametrize("dtype", [torch.long, torch.bool])
def test_data_the_observation_cannot_score_are_refused_naming_the_site_and_the_dtype(dtype):
    """Pyro's Bernoulli cannot score integer or bool data: the error names the observed site, the dtype and the
    fix (it was torch's "result type Float can't be cast to the desired output type Long")."""
    data = binary().to(dtype)
    with pytest.raises(pm.ModelStructureError, match=rf"observed site 'x': its Bernoulli.log_prob fails on the "
                                                     rf"observed value of dtype {dtype}.*data.to\(torch.float32\)"):
        pm.recognize_model(bernoulli_1d, data)


@pytest.mark.parametrize("model,data,says", [
    (bernoulli_1d, lambda: 2 * binary(), r"Bernoulli \(bern data must be binary \(0/1\); found other values\)"),
    (poisson_tutorial, lambda: counts() - 100, r"Poisson \(poisson data must be non-negative counts; found \d+ "),
    (bernoulli_1d, lambda: (2 * binary()).long(), r"Bernoulli \(bern data must be binary"),
])
def test_data_outside_the_observation_support_are_refused_naming_the_values(model, data, says):
    """Float data outside the support (a 2 for a Bernoulli, negative counts) were refused with the advice to
    'pass the data as floats, e.g. data.to(torch.float64)', which they were, and a dump of the values."""
    with pytest.raises(pm.ModelStructureError, match=r"observed site '(x|obs)': its observed value lies outside the "
                                                     rf"support of its {says}") as err:
        pm.recognize_model(model, data())
    assert "data.to(" not in str(err.value) and "tensor(" not in str(err.value)


def test_scalar_model_fits_memoized_as_its_column_form():
    pyro.clear_param_store()
    x = counts(60, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ConvergenceWarning)
        result = pm.fit_memoized(poisson_tutorial, x, num_batches=3, laps=10)
        fam = result.guide.spec.family
        pyro.clear_param_store()
        reference = pm.fit_memoized(pm.DPMixtureModel(fam, T=5, alpha=1.5), x.unsqueeze(-1), num_batches=3, laps=10)
    assert result.elbo_trace == pytest.approx(reference.elbo_trace, rel=1e-10)
    assert result.elbo == pytest.approx(reference.elbo, rel=1e-10)


def test_scalar_model_runs_under_svi_with_the_memoized_elbo():
    pyro.clear_param_store()
    x = reals(40).float()
    guide = pm.DPMixtureGuide(gauss_1d)
    svi = pyro.infer.SVI(gauss_1d, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for _ in range(30):
        loss = svi.step(x)
    assert guide.spec.scalar
    pyro.clear_param_store()
    assert -loss == pytest.approx(pm.fit_vb(gauss_1d, x, max_iter=300).elbo, rel=1e-6)


def test_a_hyperparameter_tensor_requiring_grad_is_read_as_a_constant():
    """Not a pyro.param, so nothing would learn it: read as the constant it is, no TypeError."""
    b = torch.tensor(0.05, requires_grad=True)

    def model(data, T=4):
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, 1.0))
        with pyro.plate("components", T):
            rate = pyro.sample("rate", dist.Gamma(3.0, b))
        with pyro.plate("data", len(data)):
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            pyro.sample("obs", dist.Poisson(rate[z]), obs=data)

    prior = pm.recognize_model(model, counts(20)).family.prior
    assert float(prior["b"]) == pytest.approx(0.05) and not prior["b"].requires_grad
