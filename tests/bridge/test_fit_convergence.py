"""fit_vb / fit_memoized warn when they stop unconverged, and report the exact ELBO of what they return."""

import warnings

import pyro
import pytest
import torch

import pyro_memo as pm
from tests.conftest import make_data


def _model_and_data():
    x = make_data("diag-gauss", 60, D=2, seed=4)
    return pm.DPMixtureModel(pm.DiagGaussian.from_data(x), T=6, alpha=1.0), x


def exact_elbo(result, x):
    """The ELBO of the returned posterior, recomputed: responsibilities at their optimum under it."""
    post = result.guide.posterior
    _, summary = post.local_step(result.guide.spec.data((x,), {}))
    return float(post.elbo(summary))


@pytest.mark.parametrize("fit", ["vb", "memoized"])
def test_stopping_at_the_limit_warns(fit):
    pyro.clear_param_store()
    model, x = _model_and_data()
    with pytest.warns(pm.ConvergenceWarning, match="limit of 2"):
        if fit == "vb":
            result = pm.fit_vb(model, x, max_iter=2)
        else:
            result = pm.fit_memoized(model, x, num_batches=3, laps=2)
    assert not result.converged


def test_a_converged_fit_does_not_warn():
    pyro.clear_param_store()
    model, x = _model_and_data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pm.fit_vb(model, x, max_iter=500, tol=1e-6)
    assert result.converged
    assert not [w for w in caught if issubclass(w.category, pm.ConvergenceWarning)]


def test_convergence_warning_is_a_user_warning():
    assert issubclass(pm.ConvergenceWarning, UserWarning)


@pytest.mark.parametrize("fit", ["vb", "memoized"])
@pytest.mark.parametrize("limit", [1, 3])
def test_elbo_is_that_of_the_returned_posterior(fit, limit):
    """Stopped early, the last lap's bound (old responsibilities, new globals) is lower than the
    returned posterior's own ELBO; ``result.elbo`` is the latter."""
    pyro.clear_param_store()
    model, x = _model_and_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ConvergenceWarning)
        if fit == "vb":
            result = pm.fit_vb(model, x, max_iter=limit)
        else:
            result = pm.fit_memoized(model, x, num_batches=3, laps=limit)
    assert result.elbo == pytest.approx(exact_elbo(result, x), rel=1e-12, abs=1e-9)
    assert result.elbo >= result.elbo_trace[-1] - 1e-9
    assert torch.isfinite(torch.tensor(result.elbo))
