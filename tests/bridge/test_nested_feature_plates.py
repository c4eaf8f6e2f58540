"""Features written as a nested plate (``pyro.plate("features", D, dim=-1)``) instead of ``.to_event(1)``:
the same model, recognised, fitted exactly as its event form, and a guide that mirrors its plates
(issue #14 item 1)."""

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro.infer import SVI, Predictive, TraceEnum_ELBO, config_enumerate

import pyro_memo as pm
from pyro_memo.families import KnownDiagGaussian

T = 5


def mix_weights(beta):
    """Pyro tutorial's stick-breaking, written independently of pyro_memo."""
    beta1m_cumprod = (1 - beta).cumprod(-1)
    return F.pad(beta, (0, 1), value=1) * F.pad(beta1m_cumprod, (1, 0), value=1)


# ----------------------------------------------------------------------- component priors, two forms
def gauss_prior(D, nested):
    shape = () if nested else (D,)
    lam = pyro.sample("lam", dist.Gamma(torch.full(shape, 2.0), 2.0).to_event(len(shape)))
    mu = pyro.sample("mu", dist.Normal(0.0, (0.1 * lam).rsqrt()).to_event(len(shape)))
    return lambda z: dist.Normal(mu[z], lam[z].rsqrt())


def known_prior(D, nested):
    shape = () if nested else (D,)
    mu = pyro.sample("mu", dist.Normal(torch.zeros(shape), 3.0).to_event(len(shape)))
    return lambda z: dist.Normal(mu[z], 0.8)


def poisson_prior(D, nested):
    shape = () if nested else (D,)
    rate = pyro.sample("rate", dist.Gamma(torch.full(shape, 3.0), 0.5).to_event(len(shape)))
    return lambda z: dist.Poisson(rate[z])


def bernoulli_prior(D, nested):
    shape = () if nested else (D,)
    p = pyro.sample("p", dist.Beta(torch.full(shape, 2.0), 2.0).to_event(len(shape)))
    return lambda z: dist.Bernoulli(p[z])


def model_pair(prior):
    """``(nested, event)``: one DP mixture written with feature plates and with ``.to_event(1)``."""

    def nested(data, idx=None):
        N, D = data.shape
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, 1.5))
        features = pyro.plate("features", D, dim=-1)
        with features, pyro.plate("components", T, dim=-2):
            likelihood = prior(D, nested=True)
        with pyro.plate("data", N, dim=-2, subsample=idx) as i:
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            with features:
                pyro.sample("x", likelihood(z.squeeze(-1)), obs=data[i])

    def event(data, idx=None):
        N, D = data.shape
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, 1.5))
        with pyro.plate("components", T):
            likelihood = prior(D, nested=False)
        with pyro.plate("data", N, subsample=idx) as i:
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            pyro.sample("x", likelihood(z).to_event(1), obs=data[i])

    return nested, event


def two_groups(kind, n=60, D=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    half = torch.arange(n) < n // 2
    if kind == "poisson":
        return torch.poisson(torch.where(half, 2.0, 12.0)[:, None].expand(n, D), generator=g)
    if kind == "bernoulli":
        return torch.bernoulli(torch.where(half, 0.1, 0.9)[:, None].expand(n, D), generator=g)
    return torch.randn(n, D, generator=g, dtype=torch.float64) + torch.where(half, -3.0, 3.0)[:, None]


CASES = {"diag-gauss": (gauss_prior, "gauss", pm.DiagGaussian),
         "known-diag-gauss": (known_prior, "gauss", KnownDiagGaussian),
         "poisson": (poisson_prior, "poisson", pm.Poisson),
         "bern": (bernoulli_prior, "bernoulli", pm.Bernoulli)}


@pytest.fixture(autouse=True)
def float64_literals():
    """The models' literals in float64, as the data."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    pyro.clear_param_store()
    yield
    torch.set_default_dtype(default)


def trace_enum(model, guide, x, particles):
    """Mean and standard error of Pyro's TraceEnum_ELBO (assignment enumerated in the guide, two plate dims)."""
    pyro.set_rng_seed(0)
    elbo = TraceEnum_ELBO(num_particles=1, max_plate_nesting=2)
    guide = config_enumerate(guide, "parallel", expand=True)
    values = torch.tensor([-elbo.loss(model, guide, x) for _ in range(particles)], dtype=torch.float64)
    return float(values.mean()), float(values.std() / particles ** 0.5)


def fit(model, x, **options):
    pyro.clear_param_store()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ConvergenceWarning)
        return pm.fit_vb(model, x, **options)


@pytest.mark.parametrize("case", sorted(CASES))
def test_nested_plates_are_the_event_form(case):
    prior, kind, family = CASES[case]
    nested, event = model_pair(prior)
    x = two_groups(kind)
    a = fit(nested, x, max_iter=60)
    theirs = a.guide.posterior.component
    b = fit(event, x, max_iter=60)
    spec = a.guide.spec
    assert isinstance(spec.family, family) and spec.family.dim == x.shape[1]
    assert spec.obs_features == "features" and set(spec.component_features.values()) == {"features"}
    assert spec.dim("data") == spec.dim("components") == -2 and spec.dim("sticks") == -1
    assert b.guide.spec.obs_features is None and b.guide.spec.dim("data") == -1
    assert a.elbo_trace == pytest.approx(b.elbo_trace, rel=1e-10)
    for name, value in b.guide.posterior.component.items():
        assert torch.allclose(theirs[name], value, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_nested_elbo_matches_trace_enum_elbo(case):
    prior, kind, _ = CASES[case]
    nested, _ = model_pair(prior)
    x = two_groups(kind, n=40, D=2, seed=1)
    result = fit(nested, x, max_iter=300)
    mean, se = trace_enum(nested, result.guide, x, 200)
    assert se < 0.5
    assert abs(result.elbo - mean) < 3 * se + 1e-6, (result.elbo, mean, se)


def test_guide_mirrors_the_plates_on_batches_the_full_data_and_new_data():
    nested, _ = model_pair(gauss_prior)
    x = two_groups("gauss", n=90, D=2)
    guide = pm.DPMixtureGuide(nested)
    svi = SVI(nested, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    batches = [torch.arange(i, 90, 3) for i in range(3)]
    for _ in range(4):
        for idx in batches:
            svi.step(x, idx)
    trace = pyro.poutine.trace(guide).get_trace(x, batches[0])
    assert trace.nodes["z"]["value"].shape == (30, 1)
    assert trace.nodes["mu"]["value"].shape == (T, 2)
    assert [f.dim for f in trace.nodes["mu"]["cond_indep_stack"]] in ([-1, -2], [-2, -1])
    for data in (x, two_groups("gauss", n=25, D=2, seed=3)):
        draws = Predictive(nested, guide=guide, num_samples=3)(data)
        assert draws["z"].shape == (3, len(data), 1) and draws["x"].shape == (3, len(data), 2)
    assert set(guide.median()) == {"v", "lam", "mu"}


def test_svi_with_the_memoized_elbo_equals_fit_memoized_of_the_event_form():
    nested, event = model_pair(gauss_prior)
    x = two_groups("gauss", n=90, D=2)
    batches = [torch.arange(i, 90, 3) for i in range(3)]
    guide = pm.DPMixtureGuide(nested)
    svi = SVI(nested, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    losses = [svi.step(x, idx) for _ in range(5) for idx in batches]
    assert all(loss == loss for loss in losses)
    pyro.clear_param_store()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ConvergenceWarning)
        a = pm.fit_memoized(nested, x, num_batches=3, laps=6, overrelax=False)
        pyro.clear_param_store()
        b = pm.fit_memoized(event, x, num_batches=3, laps=6, overrelax=False)
    assert a.elbo_trace == pytest.approx(b.elbo_trace, rel=1e-10)


def test_event_components_with_a_nested_observation():
    """Component sites written with ``.to_event(1)`` (one plate) and the observation's features as a
    nested plate: the plates of each part are mirrored as written."""

    def model(data):
        N, D = data.shape
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, 1.5))
        with pyro.plate("components", T):
            p = pyro.sample("p", dist.Beta(torch.full((D,), 2.0), 2.0).to_event(1))
        with pyro.plate("data", N, dim=-2):
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            with pyro.plate("features", D, dim=-1):
                pyro.sample("x", dist.Bernoulli(p[z.squeeze(-1)]), obs=data)

    _, event = model_pair(bernoulli_prior)
    x = two_groups("bernoulli", n=40, D=3)
    b = fit(event, x, max_iter=60)
    a = fit(model, x, max_iter=60)
    spec = a.guide.spec
    assert spec.obs_features == "features" and spec.component_features == {}
    assert spec.dim("components") == -1 and spec.dim("data") == -2
    assert a.elbo_trace == pytest.approx(b.elbo_trace, rel=1e-10)
    mean, se = trace_enum(model, a.guide, x, 100)
    assert abs(a.elbo - mean) < 3 * se + 1e-6, (a.elbo, mean, se)


def transposed(data):
    """Features at dim=-2 and items at dim=-1 (the data as (D, N)): not the nested form pyro-memo reads."""
    D, N = data.shape
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(torch.full((D,), 2.0), 2.0).to_event(1))
    with pyro.plate("data", N, dim=-1):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        with pyro.plate("features", D, dim=-2):
            pyro.sample("x", dist.Bernoulli(p[z].T), obs=data)


def component_features_at_dim_minus_two(data):
    """Component sites with the features at dim=-2, the components at dim=-1 (a (D, T) value)."""
    N, D = data.shape
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("features_c", D, dim=-2), pyro.plate("components", T, dim=-1):
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
    with pyro.plate("data", N, dim=-2):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        with pyro.plate("features", D, dim=-1):
            pyro.sample("x", dist.Bernoulli(p.T[z.squeeze(-1)]), obs=data)


@pytest.mark.parametrize("model,data,message", [
    (transposed, lambda: two_groups("bernoulli", n=20, D=3).T.contiguous(),
     r"(?s)observed site 'x' sits in plates \[\('features', 3, -2\), \('data', 20, -1\)\].*dim=-2.*to_event\(1\)"),
    (component_features_at_dim_minus_two, lambda: two_groups("bernoulli", n=20, D=3),
     r"(?s)component site 'p' sits in plates .*\('components', 5, -1\).*Supported:.*pyro.plate\('components', T"),
])
def test_other_nestings_are_refused_naming_the_site_and_the_supported_form(model, data, message):
    with pytest.raises(pm.ModelStructureError, match=message):
        pm.recognize_model(model, data())
    with pytest.raises(pm.ModelStructureError, match=message):
        pm.fit_vb(model, data(), max_iter=5)
