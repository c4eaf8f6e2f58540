"""Each family declares its Pyro form in its own file: a family defined in one place (here, in
this test) is registered, written as Pyro sites, recognised in a hand-written model, guided with
its constraints and fitted, with no change to the bridge or the models."""

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F

import pyro_memo as pm
from pyro_memo.families import FAMILIES, Bernoulli
from pyro_memo.families.base import REGISTRY
from pyro_memo.models.component_sites import SITES, BernoulliSites, GaussianSites, sites_for


@pytest.fixture
def binomial_family():
    """Bernoulli observations written as Binomial(1, p): a new Pyro form, declared in one class."""

    class OneTrialBinomial(Bernoulli):
        name = "test-binomial1"
        pyro_observation = ("Binomial",)

        @staticmethod
        def pyro_likelihood(dist, theta, x=None):
            return dist.Binomial(1, theta["phi"]).to_event(1)

    try:
        yield OneTrialBinomial
    finally:
        REGISTRY.pop(OneTrialBinomial.name, None)
        SITES.pop(OneTrialBinomial, None)


def weights(v):
    return F.pad(v, (0, 1), value=1) * F.pad((1 - v).cumprod(-1), (1, 0), value=1)


def binomial_model(data, T=4):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.5))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(torch.full((data.shape[1],), 2.0), 3.0).to_event(1))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(weights(v)))
        pyro.sample("x", dist.Binomial(1, p[z]).to_event(1), obs=data)


def test_a_family_declared_in_one_class_is_registered_recognised_and_fitted(binomial_family):
    assert FAMILIES["test-binomial1"] is binomial_family and pm.get_family("test-binomial1") is binomial_family
    x = torch.bernoulli(torch.full((60, 3), 0.3), generator=torch.Generator().manual_seed(0))
    spec = pm.recognize_model(binomial_model, x)
    assert type(spec.family) is binomial_family and spec.param_sites == {"phi": "p"}
    torch.testing.assert_close(spec.family.prior["a"], torch.full((3,), 2.0, dtype=torch.float64))
    pyro.clear_param_store()
    result = pm.fit_vb(binomial_model, x, max_iter=20)
    assert result.elbo_trace[-1] >= result.elbo_trace[0]
    # the guide writes the new family's sites; Pyro scores it
    loss = pyro.infer.Trace_ELBO(num_particles=5, max_plate_nesting=1).loss(
        binomial_model, result.guide, x)
    assert torch.isfinite(torch.tensor(loss))


def test_without_the_family_the_likelihood_is_unsupported_and_the_message_lists_the_registry():
    x = torch.bernoulli(torch.full((20, 3), 0.3), generator=torch.Generator().manual_seed(0))
    with pytest.raises(pm.ModelStructureError, match=r"unsupported likelihood Binomial.*Beta components -> bern"):
        pm.recognize_model(binomial_model, x)


def test_every_registered_family_declares_a_complete_pyro_form():
    for name, fam in FAMILIES.items():
        assert fam.name == name and fam.pyro_observation and fam.pyro_components
        prior = fam.from_data(fam.example_data(torch.arange(6) % 2, 2, 3, torch.Generator().manual_seed(1))).prior
        assert set(fam.pyro_constraints) <= set(fam.prior_names)
        sites = sites_for(fam)
        assert set(sites.roles) == set(fam.pyro_components) and sites.names == {r: r for r in fam.pyro_components}
        assert prior  # the declared example data are in the family's support


def test_old_site_writer_names_still_work():
    assert BernoulliSites.family is Bernoulli and SITES[Bernoulli] is BernoulliSites
    assert GaussianSites().roles == {"Lambda": 2, "mu": 1}
