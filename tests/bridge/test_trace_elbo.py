"""The closed-form exact ELBO equals Pyro's own Trace_ELBO estimate on the same model and guide."""

import pyro
import pytest
import torch
from pyro.infer import Trace_ELBO, TraceEnum_ELBO, config_enumerate

import pyro_memo as pm
from tests.conftest import FAMILY_NAMES, make_data


def pyro_elbo(model, guide, *args, batches=20, particles=2000, loss=Trace_ELBO):
    """Mean and standard error of Pyro's ELBO estimate over independent particle batches."""
    elbo = loss(num_particles=particles, vectorize_particles=True, max_plate_nesting=1)
    values = torch.tensor([-elbo.loss(model, guide, *args) for _ in range(batches)], dtype=torch.float64)
    return float(values.mean()), float(values.std() / batches**0.5)


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("truncation", ["nested", "direct"])
def test_exact_elbo_matches_pyro_trace_elbo(name, truncation):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x = make_data(name, 40, D=2, seed=1)
    T = 4
    model = pm.DPMixtureModel(pm.get_family(name).from_data(x), T=T, alpha=1.5)
    K = T if truncation == "direct" else 3
    result = pm.fit_vb(model, x, K=K, max_iter=50)
    assert result.guide.sticks.truncation == truncation
    # the estimate's own draws, whatever the fit drew (its tracing no longer draws from the caller's stream), and
    # 60 batches of 2000 particles: Bernoulli's estimates are heavy-tailed (with 20 batches seed 0 put the direct
    # truncation's at z = -3.4, seeds 1-7 within |z| <= 1.3)
    pyro.set_rng_seed(0)
    mean, se = pyro_elbo(model, result.guide, x, batches=60)
    assert se < 0.05
    assert abs(result.elbo - mean) < 3 * se, (result.elbo, mean, se)


def test_exact_elbo_matches_pyro_before_fitting():
    """Not only at the optimum: at the k-means++ initialisation too."""
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    x = make_data("gauss", 40, D=2, seed=2)
    model = pm.DPMixtureModel(pm.Gaussian.from_data(x), T=5)
    guide = pm.DPMixtureGuide(model, K=4)
    guide.setup(x)
    post = guide.posterior
    _, summary = post.local_step(guide.spec.data((x,), {}))
    mean, se = pyro_elbo(model, guide, x)
    assert abs(float(post.elbo(summary)) - mean) < 3 * se


def test_enumerated_pyro_elbo_matches_too():
    """TraceEnum_ELBO with the assignment enumerated in the guide: lower variance, same value."""
    pyro.clear_param_store()
    pyro.set_rng_seed(2)
    x = make_data("diag-gauss", 40, D=2, seed=3)
    model = pm.DPMixtureModel(pm.DiagGaussian.from_data(x), T=4)
    result = pm.fit_vb(model, x, K=3)
    guide = config_enumerate(result.guide, "parallel", expand=True)
    mean, se = pyro_elbo(model, guide, x, particles=1000, loss=TraceEnum_ELBO)
    assert abs(result.elbo - mean) < 3 * se


def test_model_runs_under_svi_and_predictive():
    pyro.clear_param_store()
    x = make_data("gauss", 30, D=2, seed=4)
    model = pm.DPMixtureModel(pm.Gaussian.from_data(x), T=3)
    guide = pm.DPMixtureGuide(model)
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    losses = [svi.step(x) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses)))
    samples = pyro.infer.Predictive(model, guide=guide, num_samples=5)(x)
    assert samples["x"].shape == (5, 30, 2)
    prior = pyro.infer.Predictive(model, num_samples=4)(None, num_data=7)
    assert prior["x"].shape == (4, 7, 2) and prior["z"].shape == (4, 7)


def test_predictive_without_the_data_points_to_posterior_samples():
    """A fitted guide's assignments are those of observed items: a call without the data is refused by
    name, and the route it names (the model drawing the assignments) generates new data."""
    pyro.clear_param_store()
    x = make_data("gauss", 30, D=2, seed=5)
    model = pm.DPMixtureModel(pm.Gaussian.from_data(x), T=3)
    result = pm.fit_vb(model, x)
    with pytest.raises(ValueError, match="passes no data.*argument 0.*site 'x'.*posterior_samples="):
        pyro.infer.Predictive(model, guide=result.guide, num_samples=2)(None, num_data=7)
    draws = pyro.infer.Predictive(model, posterior_samples=result.guide.sample_posterior(4))(None, num_data=7)
    assert draws["x"].shape == (4, 7, 2) and bool(torch.isfinite(draws["x"]).all())
