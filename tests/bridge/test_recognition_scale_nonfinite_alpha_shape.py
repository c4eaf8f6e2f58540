"""Three things recognition must not get wrong silently: a ``poutine.scale`` on a site it reads, or a
mask on a latent site (refused: the closed-form fit would ignore either), NaN / inf in the observed data (one clear
:class:`~pyro_memo.families.NonFiniteDataError`), and a latent alpha of shape ``(1,)`` (the guide
samples it with the model site's shape and event dims, and Pyro's Trace_ELBO still scores it)."""

import contextlib
import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro import poutine
from pyro.infer import Predictive, Trace_ELBO

import pyro_memo as pm
from pyro_memo.families import NonFiniteDataError
from pyro_memo.models.component_sites import index_components
from tests.bridge.test_trace_elbo import pyro_elbo

T = 6


def mix_weights(v):
    return F.pad(v, (0, 1), value=1) * F.pad((1 - v).cumprod(-1), (1, 0), value=1)


def model(data, batch=None, scaled=None, scale=2.0, mask=True, latent_alpha=False):
    """The reviewer's repro model; ``scaled`` names the block wrapped in ``poutine.scale(scale=scale)``."""

    def block(name):
        return poutine.scale(scale=scale) if scaled == name else contextlib.nullcontext()

    alpha = 1.0
    if latent_alpha:
        with block("alpha"):
            alpha = pyro.sample("alpha", dist.Gamma(1.0, 1.0))
    with pyro.plate("sticks", T - 1), block("sticks"):
        v = pyro.sample("v", dist.Beta(1.0, alpha))
    with pyro.plate("components", T), block("components"):
        mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), 4 * torch.eye(2)))
    with pyro.plate("data", data.shape[0], subsample=batch) as i, block("data"):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        with block("obs"), poutine.mask(mask=mask):
            pyro.sample("x", dist.MultivariateNormal(mu[z], torch.eye(2)), obs=data[i])


def two_clusters():
    torch.manual_seed(0)
    return torch.cat([torch.randn(100, 2) - 3, torch.randn(100, 2) + 3])


def fit_elbo(*args, **kwargs):
    pyro.clear_param_store()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ConvergenceWarning)
        return pm.fit_vb(model, *args, **kwargs).elbo


# ------------------------------------------------------------------------------- poutine.scale
@pytest.mark.parametrize("scaled, site", [("data", "z"), ("obs", "x"), ("components", "mu"), ("sticks", "v"),
                                          ("alpha", "alpha")])
def test_a_scaled_site_is_refused_naming_it(scaled, site):
    data = two_clusters()
    with pytest.raises(pm.ModelStructureError, match=rf"site '{site}' has its log-density scaled by 2 "
                                                      r"\(poutine.scale.*remove the scale.*scales batches itself"):
        pm.fit_vb(model, data, scaled=scaled, latent_alpha=True)


def test_pyro_scores_the_scale_that_would_have_been_ignored():
    """Why it is refused: Pyro's log-density of the scaled model is not the unscaled one."""
    data = two_clusters()
    plain = poutine.trace(model).get_trace(data)
    scaled = poutine.trace(poutine.condition(model, data={k: plain.nodes[k]["value"] for k in ("v", "mu", "z")}))
    scaled = scaled.get_trace(data, scaled="data")
    assert float(scaled.log_prob_sum()) != pytest.approx(float(plain.log_prob_sum()))


def test_a_scale_inside_a_subsampled_plate_is_refused_but_the_plates_own_scale_is_not():
    data = two_clusters()
    batch = torch.arange(50, 100)
    spec = pm.recognize_model(model, data, batch)  # the plate scales the batch by 200 / 50 itself
    assert spec.subsample_size == 50 and spec.num_data == 200
    with pytest.raises(pm.ModelStructureError, match=r"site 'x' has its log-density scaled by 3"):
        pm.recognize_model(model, data, batch, scaled="obs", scale=3.0)


@pytest.mark.parametrize("how", ["one", "ones", "mask-ones", "dist-mask-ones"])
def test_a_unit_scale_or_an_all_true_mask_fits_as_the_plain_model(how):
    data = two_clusters()
    reference = fit_elbo(data)
    if how == "one":
        assert fit_elbo(data, scaled="data", scale=1.0) == reference
    elif how == "ones":
        assert fit_elbo(data, scaled="obs", scale=torch.ones(200)) == reference
    elif how == "mask-ones":
        assert fit_elbo(data, mask=torch.ones(200, dtype=torch.bool)) == reference
    else:
        def masked(data):
            with pyro.plate("sticks", T - 1):
                v = pyro.sample("v", dist.Beta(1.0, 1.0))
            with pyro.plate("components", T):
                mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), 4 * torch.eye(2)))
            with pyro.plate("data", data.shape[0]):
                z = pyro.sample("z", dist.Categorical(mix_weights(v)))
                fn = dist.MultivariateNormal(mu[z], torch.eye(2)).mask(torch.ones(200, dtype=torch.bool))
                pyro.sample("x", fn, obs=data)

        pyro.clear_param_store()
        assert pm.fit_vb(masked, data).elbo == pytest.approx(reference, rel=1e-12)


def test_a_tensor_of_scales_and_a_partial_mask_are_still_refused():
    data = two_clusters()
    with pytest.raises(pm.ModelStructureError, match=r"site 'x' has its log-density scaled by a tensor of scales "
                                                      r"from 1 to 3"):
        pm.recognize_model(model, data, scaled="obs", scale=torch.ones(200).index_fill(0, torch.tensor([5]), 3.0))
    with pytest.raises(pm.ModelStructureError, match=r"observed site 'x' is masked"):
        pm.recognize_model(model, data, mask=torch.arange(200) > 0)


@pytest.mark.parametrize("how", ["dist", "poutine"])
def test_a_masked_latent_site_is_refused_not_ignored(how):
    keep = torch.arange(T) < 3

    def masked(data):
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, 1.0))
        with pyro.plate("components", T):
            prior = dist.MultivariateNormal(torch.zeros(2), 4 * torch.eye(2))
            with poutine.mask(mask=keep) if how == "poutine" else contextlib.nullcontext():
                mu = pyro.sample("mu", prior.mask(keep) if how == "dist" else prior)
        with pyro.plate("data", data.shape[0]):
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            pyro.sample("x", dist.MultivariateNormal(mu[z], torch.eye(2)), obs=data)

    with pytest.raises(pm.ModelStructureError, match=r"latent site 'mu' is masked .*would ignore the mask"):
        pm.fit_vb(masked, two_clusters())


# ------------------------------------------------------------------------------ NaN / inf data
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("entry", ["fit_vb", "recognize_model", "DPMixtureGuide"])
def test_non_finite_observed_data_name_the_site_and_the_first_row(bad, entry):
    data = two_clusters()
    data[3, 0] = bad
    data[150, 1] = bad
    expected = r"observed site 'x' data has NaN or inf values in 2 of its 200 rows; the first is row 3$"
    with pytest.raises(NonFiniteDataError, match=expected) as err:
        if entry == "fit_vb":
            pm.fit_vb(model, data)
        elif entry == "recognize_model":
            pm.recognize_model(model, data)
        else:
            pyro.clear_param_store()
            pm.DPMixtureGuide(model)(data)
    assert isinstance(err.value, ValueError) and not isinstance(err.value, pm.ModelStructureError)
    assert (err.value.count, err.value.total, err.value.first) == (2, 200, 3)


def test_non_finite_rows_of_a_batch_are_counted_in_the_batch():
    data = two_clusters()
    data[60, 1], data[70, 0] = float("inf"), float("nan")
    with pytest.raises(NonFiniteDataError, match=r"observed site 'x' data has NaN or inf values in 2 of the 50 "
                                                    r"rows of this call's subsample of plate 'data'; the first is "
                                                    r"the batch's row 10"):
        pm.recognize_model(model, data, torch.arange(50, 100))


def known_noise(data, scalar=True):
    """Known unit noise, written for ``(N,)`` data (``scalar``) or ``(N, 1)`` data with ``.to_event(1)``."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        mu = pyro.sample("mu", dist.Normal(0.0, 3.0) if scalar else dist.Normal(torch.zeros(1), 3.0).to_event(1))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Normal(mu[z], 1.0) if scalar else dist.Normal(mu[z], 1.0).to_event(1), obs=data)


def test_scalar_data_with_a_known_noise_fit_as_one_column():
    """The known noise of a scalar Normal observation is read as (1, 1), not one entry per item."""
    data = two_clusters()[:, 0]
    spec = pm.recognize_model(known_noise, data)
    assert spec.scalar and spec.family.prior["noise"].shape == (1, 1)
    pyro.clear_param_store()
    scalar = pm.fit_vb(known_noise, data).elbo
    pyro.clear_param_store()
    assert pm.fit_vb(known_noise, data.unsqueeze(-1), scalar=False).elbo == pytest.approx(scalar, rel=1e-10)


def test_non_finite_scalar_data():
    data = two_clusters()[:, 0]
    data[7] = float("nan")
    with pytest.raises(NonFiniteDataError, match=r"observed site 'x' data has NaN or inf values in 1 of its "
                                                    r"200 rows; the first is row 7"):
        pm.fit_vb(known_noise, data)


# ---------------------------------------------------------------------- alpha of shape (1,)
def alpha_model(data, form="batch", T=5):
    """A latent alpha of shape (1,) (``form="event"``: the same prior with ``.to_event(1)``), written so
    that Pyro can vectorise particles (weights unsqueezed into the data plate, alpha broadcast from the
    left)."""
    one = torch.ones(1, dtype=torch.float64)
    prior = dist.Gamma(one, one)
    alpha = pyro.sample("alpha", prior.to_event(1) if form == "event" else prior)
    if form == "event":
        alpha = alpha[..., 0]  # the event dim dropped (vectorised particles add batch dims on its left)
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(torch.ones(T - 1, dtype=one.dtype), alpha.expand(alpha.shape[:-1] + (T - 1,))))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(2.0 * one[0], 2.0 * one[0]))
        mu = pyro.sample("mu", dist.Normal(0.0 * one[0], (0.01 * lam).rsqrt()))
    with pyro.plate("data", data.shape[0]):
        z = pyro.sample("z", dist.Categorical(mix_weights(v).unsqueeze(-2)))
        pyro.sample("x", dist.Normal(index_components(mu, z, 0), index_components(lam, z, 0).rsqrt()), obs=data)


def clusters(n=3, per=10, seed=1):
    g = torch.Generator().manual_seed(seed)
    means = torch.arange(n, dtype=torch.float64) * 12.0
    return means.repeat_interleave(per) + 0.5 * torch.randn(n * per, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("form", ["batch", "event"])
def test_the_guide_samples_alpha_with_the_model_sites_shape(form):
    x = clusters()
    pyro.clear_param_store()
    result = pm.fit_vb(alpha_model, x, form=form, max_iter=300)
    spec = result.guide.spec
    assert spec.alpha_site == "alpha" and spec.alpha_prior == (1.0, 1.0)
    assert (spec.alpha_shape, spec.alpha_event_dim) == ((1,), 1 if form == "event" else 0)
    model_site = poutine.trace(alpha_model).get_trace(x, form=form).nodes["alpha"]
    guide_site = poutine.trace(result.guide).get_trace(x, form=form).nodes["alpha"]
    assert guide_site["value"].shape == model_site["value"].shape == (1,)
    assert guide_site["fn"].batch_shape == model_site["fn"].batch_shape
    assert guide_site["fn"].event_shape == model_site["fn"].event_shape
    # Predictive (the guide's draws, replayed through the model) keeps the model's shape
    draws = Predictive(alpha_model, guide=result.guide, num_samples=4, return_sites=["alpha"])(x, form=form)
    prior = Predictive(alpha_model, num_samples=4, return_sites=["alpha"])(x, form=form)
    assert draws["alpha"].shape == prior["alpha"].shape
    assert result.guide.sample_posterior(3)["alpha"].shape == (3, 1)
    assert poutine.trace(poutine.replay(alpha_model, trace=poutine.trace(result.guide).get_trace(x, form=form))) \
        .get_trace(x, form=form).nodes["alpha"]["value"].shape == (1,)


def test_the_to_event_alpha_fits_as_the_batch_alpha():
    x = clusters()
    pyro.clear_param_store()
    batch = pm.fit_vb(alpha_model, x, form="batch", max_iter=300).elbo
    pyro.clear_param_store()
    assert pm.fit_vb(alpha_model, x, form="event", max_iter=300).elbo == pytest.approx(batch, rel=1e-10)


def test_an_alpha_of_more_than_one_value_names_the_accepted_shapes():
    def two_alphas(data, T=5):
        alpha = pyro.sample("alpha", dist.Gamma(torch.ones(T - 1), 1.0).to_event(1))
        with pyro.plate("sticks", T - 1):
            v = pyro.sample("v", dist.Beta(1.0, alpha))
        with pyro.plate("components", T):
            mu = pyro.sample("mu", dist.Normal(0.0, 3.0))
        with pyro.plate("data", data.shape[0]):
            z = pyro.sample("z", dist.Categorical(mix_weights(v)))
            pyro.sample("x", dist.Normal(mu[z], 1.0), obs=data)

    with pytest.raises(pm.ModelStructureError, match=r"site 'alpha' is a latent DP concentration with a Gamma prior "
                                                      r"of shape \(4,\); .*\(shape \(\) or \(1,\), with or without "
                                                      r"\.to_event\(1\)\)"):
        pm.recognize_model(two_alphas, clusters().float())


@pytest.mark.parametrize("form", ["batch", "event"])
def test_trace_elbo_scores_the_guide_of_a_shape_one_alpha(form):
    """Pyro's Trace_ELBO of the fitted guide (alpha from q(alpha), with sticks beyond K from
    Beta(1, alpha)) equals the closed-form ELBO within 3 standard errors."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x = clusters()
    result = pm.fit_vb(alpha_model, x, form=form, K=3, max_iter=300)
    mean, se = pyro_elbo(alpha_model, result.guide, x, form, particles=2000, loss=Trace_ELBO)
    assert se < 0.1
    assert abs(result.elbo - mean) < 3 * se, (result.elbo, mean, se)


# ------------------------------------------------------------------------------------- obs_mask
def obs_mask_model(data, mask=None):
    """Scalar Normal-Gamma mixture; ``mask``: Pyro's ``obs_mask=`` (split into 'x_observed' / 'x_unobserved')."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Gamma(2.0, 2.0))
        mu = pyro.sample("mu", dist.Normal(0.0, (0.1 * lam).rsqrt()))
    with pyro.plate("data", len(data)):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Normal(mu[z], lam[z].rsqrt()), obs=data, **({} if mask is None else {"obs_mask": mask}))


def obs_mask_topic_model(doc_of, words, D, V, mask=None):
    K = 3
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, 5.0))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), 0.1)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(0.5 * pm.stick_breaking_weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words, **({} if mask is None else {"obs_mask": mask}))


def test_an_all_true_obs_mask_fits_as_the_plain_model():
    torch.manual_seed(0)
    x = torch.cat([torch.randn(15) - 3, torch.randn(15) + 3])
    spec = pm.recognize_model(obs_mask_model, x, torch.ones(30, dtype=torch.bool))
    assert spec.kind == "dp" and spec.num_data == 30
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    reference = pm.fit_vb(obs_mask_model, x).elbo
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    assert pm.fit_vb(obs_mask_model, x, torch.ones(30, dtype=torch.bool)).elbo == pytest.approx(reference, rel=1e-12)
    doc_of, words = torch.arange(8).repeat_interleave(5), torch.randint(0, 6, (40,))
    spec = pm.recognize_model(obs_mask_topic_model, doc_of, words, 8, 6, torch.ones(40, dtype=torch.bool))
    assert spec.kind == "hdp" and spec.assignment_site == "c"


def test_a_partial_obs_mask_is_refused_naming_the_users_site():
    torch.manual_seed(0)
    x = torch.cat([torch.randn(15) - 3, torch.randn(15) + 3])
    with pytest.raises(pm.ModelStructureError, match=r"^observed site 'x' is masked \(obs_mask=.*pass only the "
                                                      r"observed rows as the data"):
        pm.fit_vb(obs_mask_model, x, torch.arange(30) > 2)
    doc_of, words = torch.arange(8).repeat_interleave(5), torch.randint(0, 6, (40,))
    with pytest.raises(pm.ModelStructureError, match=r"^observed site 'w' is masked \(obs_mask="):
        pm.recognize_model(obs_mask_topic_model, doc_of, words, 8, 6, torch.arange(40) % 2 == 0)
