"""``ConjugateFamily.with_prior``: changed hyperparameters, the spread scale, and clear refusals."""

import pytest
import torch

import pyro_memo as pm
from tests.conftest import make_data


def test_a_number_fills_its_key_and_the_rest_of_the_prior_is_kept(family_name):
    family = pm.get_family(family_name).from_data(make_data(family_name, 200, D=3))
    key = next((k for k in family.prior_names if family.prior[k].dim() < 2 and k != "m"), "m")
    value = float(family.prior[key].max()) * 2.5 + 3.0  # inside every domain (nu > D - 1 included)
    changed = family.with_prior(**{key: value})
    assert type(changed) is type(family) and changed is not family
    assert torch.equal(changed.prior[key], torch.full_like(family.prior[key], value))
    for other in family.prior_names:
        if other != key:
            assert torch.equal(changed.prior[other], family.prior[other])
    assert torch.equal(family.prior[key], pm.get_family(family_name).from_data(make_data(family_name, 200, D=3))
                       .prior[key])  # the original is not changed


def test_the_scale_multiplies_the_spread_hyperparameter_and_changes_the_fit(family_name):
    cls = pm.get_family(family_name)
    x = make_data(family_name, 300, D=3)
    family = cls.from_data(x)
    if cls.spread_key is None:
        with pytest.raises(ValueError, match="no spread hyperparameter"):
            family.with_prior(2.0)
        return
    scaled = family.with_prior(4.0)
    assert torch.allclose(scaled.prior[cls.spread_key], 4.0 * family.prior[cls.spread_key], rtol=1e-15, atol=0)
    fits = [pm.FullBatchVB(f, 5, max_iter=5, seed=0).fit(x).elbo for f in (family, scaled)]
    assert fits[0] != pytest.approx(fits[1], rel=1e-6)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), float("nan")])
def test_a_scale_that_is_not_positive_and_finite_is_refused(scale):
    family = pm.Gaussian.from_data(make_data("gauss", 50, D=2))
    with pytest.raises(ValueError, match="positive finite"):
        family.with_prior(scale)


def test_unknown_keys_matrices_given_a_number_wrong_shapes_and_bad_values_are_refused():
    family = pm.Gaussian.from_data(make_data("gauss", 50, D=3))
    with pytest.raises(ValueError, match="no prior 'lam'.*m, kappa, nu, B"):
        family.with_prior(lam=1.0)
    with pytest.raises(ValueError, match="'B' is a matrix"):
        family.with_prior(B=2.0)
    with pytest.raises(ValueError, match=r"'m' has shape \(3,\); got \(2,\)"):
        family.with_prior(m=torch.zeros(2))
    with pytest.raises(ValueError, match="nu"):
        family.with_prior(nu=1.0)
    assert torch.equal(family.with_prior(m=torch.ones(3)).prior["m"], torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("value", [None, "ab", True, torch.tensor([True, False]), 1 + 2j, object()])
def test_a_value_that_is_not_real_numbers_is_refused_naming_the_key(value):
    family = pm.Gaussian.from_data(make_data("gauss", 50, D=2))
    with pytest.raises(ValueError, match="gauss prior 'kappa' must be a real number"):
        family.with_prior(kappa=value)
