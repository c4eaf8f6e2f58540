"""The guides behave like Pyro guides (#14 item 4): they run on any subsample, the full data and
new data; Predictive, Trace_ELBO and infer_discrete work after batch training; every model keeps
its own param-store prefix; stored parameters are shape-checked and fingerprinted; and the
DP-mixture guide reads out its global sites as Pyro's AutoGuide does."""

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro import poutine
from pyro.infer import SVI, Predictive, Trace_ELBO, TraceEnum_ELBO, config_enumerate, infer_discrete

import pyro_memo as pm
from pyro_memo.bridge.param_store import WarmStartWarning
from tests.conftest import make_data

T = 5
F64 = torch.float64


def mix_weights(beta):
    return F.pad(beta, (0, 1), value=1) * F.pad((1 - beta).cumprod(-1), (1, 0), value=1)


def model(data, batch=None):
    """README example 2, in float64."""
    D = data.shape[1]
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(torch.tensor(1.0, dtype=F64), torch.tensor(1.0, dtype=F64)))
    with pyro.plate("components", T):
        prec = pyro.sample("prec", dist.Wishart(torch.tensor(D + 2.0, dtype=F64),
                                                covariance_matrix=torch.eye(D, dtype=F64)))
        loc = pyro.sample("loc", dist.MultivariateNormal(torch.zeros(D, dtype=F64), precision_matrix=0.1 * prec))
    with pyro.plate("data", data.shape[0], subsample=batch) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.MultivariateNormal(loc[z], precision_matrix=prec[z]), obs=data[idx])


def other_model(data, batch=None):
    """A second model with the same structure (another prior scale)."""
    D = data.shape[1]
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(torch.tensor(1.0, dtype=F64), torch.tensor(2.0, dtype=F64)))
    with pyro.plate("components", T):
        prec = pyro.sample("prec", dist.Wishart(torch.tensor(D + 2.0, dtype=F64),
                                                covariance_matrix=torch.eye(D, dtype=F64)))
        loc = pyro.sample("loc", dist.MultivariateNormal(torch.zeros(D, dtype=F64), precision_matrix=0.01 * prec))
    with pyro.plate("data", data.shape[0], subsample=batch) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.MultivariateNormal(loc[z], precision_matrix=prec[z]), obs=data[idx])


def blobs(n1, n2, seed=0, shift=3.0, D=2):
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randn(n1, D, generator=g, dtype=F64) - shift,
                      torch.randn(n2, D, generator=g, dtype=F64) + shift])


def train(model_fn=model, data=None, laps=4, batch=100):
    """README-style memoized training over fixed batches; the last batch is smaller."""
    data = blobs(130, 120) if data is None else data
    guide = pm.DPMixtureGuide(model_fn, K=T - 1)
    batches = torch.randperm(len(data), generator=torch.Generator().manual_seed(0)).split(batch)
    svi = SVI(model_fn, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for _ in range(laps):
        for b in batches:
            loss = svi.step(data, b)
    return guide, data, loss, batches


def exact_elbo(guide, data):
    post = guide.posterior
    _, summary = post.local_step(data)
    return float(post.elbo(summary))


def z_probs(guide, *args, **kwargs):
    site = poutine.trace(guide).get_trace(*args, **kwargs).nodes["z"]
    return site["fn"].probs


@pytest.fixture(autouse=True)
def fresh_store():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)


def test_uneven_batches_and_the_full_data_three_ways():
    guide, data, loss, batches = train(laps=8)
    assert len(batches[-1]) != len(batches[0])  # uneven last batch
    assert guide.memo.num_items == len(data)
    # converged: the memoized loss is minus the exact full-data ELBO of the guide's posterior
    assert -loss == pytest.approx(exact_elbo(guide, data), rel=1e-3)
    N = len(data)
    expected = guide.posterior.responsibilities(data)
    for args in [(data,), (data, None), (data, torch.arange(N))]:
        probs = z_probs(guide, *args)
        assert probs.shape == (N, T)
        torch.testing.assert_close(probs[:, : T - 1], expected)
        assert float(probs[:, -1].abs().max()) == 0.0
    # any subsample, of any size
    sub = torch.tensor([5, 3, 200])
    torch.testing.assert_close(z_probs(guide, data, sub)[:, : T - 1], expected[sub])


def test_new_data_of_another_size():
    guide, data, _, _ = train()
    new = blobs(20, 17, seed=5)
    probs = z_probs(guide, new)
    assert probs.shape == (37, T)
    torch.testing.assert_close(probs[:, : T - 1], guide.posterior.responsibilities(new))


def test_gradient_svi_with_uneven_batches():
    data = blobs(130, 120)
    guide = pm.DPMixtureGuide(model, K=T - 1)
    guide.setup(data, torch.arange(100))
    before = {k: v.detach().clone() for k, v in guide.posterior.component.items()}
    svi = SVI(model, config_enumerate(guide), pyro.optim.Adam({"lr": 0.01}), TraceEnum_ELBO(max_plate_nesting=1))
    for b in torch.arange(len(data)).split(100):  # 100, 100, 50
        loss = svi.step(data, b)
        assert loss == loss and abs(loss) < float("inf")
    after = guide.posterior.component
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("by_name", [True, False])
def test_a_call_passing_the_data_the_other_way_than_training_did(by_name):
    """Trained with ``svi.step(data=x, batch=b)``, the guide runs on ``guide(x)`` (and trained positionally, on
    ``guide(data=x)``): the data are passed, only the other way (the guide said the call passed no data)."""
    data = blobs(60, 50)
    guide = pm.DPMixtureGuide(model, K=T - 1)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for _ in range(2):
        for b in torch.arange(len(data)).split(40):
            svi.step(data=data, batch=b) if by_name else svi.step(data, b)
    expected = guide.posterior.responsibilities(data)
    probs = z_probs(guide, data) if by_name else z_probs(guide, data=data)
    torch.testing.assert_close(probs[:, : T - 1], expected)
    assert Predictive(model, guide=guide, num_samples=2)(data)["z"].shape == (2, len(data))


def test_random_subsample_size_is_read_from_the_call():
    x = make_data("gauss", 60, D=2, seed=1)
    dp = pm.DPMixtureModel(pm.Gaussian.from_data(x), T=4)
    guide = pm.DPMixtureGuide(dp, K=3)
    assert z_probs(guide, x, subsample_size=20).shape[0] == 20
    assert z_probs(guide, x).shape[0] == 60
    assert z_probs(guide, x[:45]).shape[0] == 45


def batch_size_model(data, batch_size=10, T=10):
    """A random subsample sized by ``batch_size``, followed by another integer argument of the same value."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        loc = pyro.sample("loc", dist.Normal(torch.zeros(2), 3.0).to_event(1))
    with pyro.plate("data", data.shape[0], subsample_size=batch_size) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Normal(loc[z], 1.0).to_event(1), obs=data[idx])


@pytest.mark.parametrize("call", [((), {"batch_size": 10, "T": 10}), ((10, 10), {}), ((), {})])
def test_random_subsample_size_is_read_from_the_argument_that_sizes_the_plate(call):
    """``model(data, batch_size=10, T=10)``: the subsample's size came from the last integer argument equal to
    it (``T``), so a guide called with ``batch_size=20`` drew 10 assignments and the model refused the 20-item
    subsample; one left at its default was not read at all. The argument that sizes the plate is found by
    re-tracing, passed either way or left out."""
    x = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    args, kwargs = call
    spec = pm.recognize_model(batch_size_model, x, *args, **kwargs)
    assert spec.subsample_size_arg in {("kwarg", "batch_size"), ("arg", 1)}
    assert [spec.plate_args(a, k)[2] for a, k in [((x,), {}), ((x, 20), {}), ((x,), {"batch_size": 30})]] \
        == [10, 20, 30]
    guide = pm.DPMixtureGuide(batch_size_model, K=9)
    guide_trace = poutine.trace(guide).get_trace(x, *args, **kwargs)
    guide_trace = poutine.trace(guide).get_trace(x, batch_size=20, T=10)
    assert guide_trace.nodes["z"]["value"].shape == (20,)
    model_trace = poutine.trace(poutine.replay(batch_size_model, trace=guide_trace)).get_trace(x, batch_size=20, T=10)
    assert model_trace.nodes["z"]["value"].shape == (20,)


def test_predictive_on_full_and_new_data():
    guide, data, _, _ = train()
    S = 4
    full = Predictive(model, guide=guide, num_samples=S)(data)
    assert full["z"].shape == (S, len(data))
    assert full["v"].shape == (S, T - 1)
    assert full["loc"].shape == (S, T, 2)
    new = blobs(11, 9, seed=3)
    out = Predictive(model, guide=guide, num_samples=S)(new)
    assert out["z"].shape == (S, 20)
    # z is drawn from the guide's exact q(z): items of the second blob never take the first blob's cluster
    first = int(guide.posterior.responsibilities(new)[0].argmax())
    assert not bool((out["z"][:, 11:] == first).any())


def pyro_elbo(model_fn, guide, *args, batches=20, particles=100, loss=Trace_ELBO):
    """Mean and standard error of Pyro's estimate over ``batches`` independent estimates (the README
    model indexes ``loc[z]``, so particles are not vectorised). Seeded: the check does not depend on
    the tests that ran before; 20 batches keep the standard error's own estimate steady (with 5, a
    3-standard-error check fails about one time in twenty by chance)."""
    pyro.set_rng_seed(0)
    elbo = loss(num_particles=particles, max_plate_nesting=1)
    values = torch.tensor([-elbo.loss(model_fn, guide, *args) for _ in range(batches)], dtype=F64)
    return float(values.mean()), float(values.std() / batches**0.5)


@pytest.mark.slow
def test_trace_elbo_on_full_data_agrees_with_exact_elbo_after_batch_training():
    guide, data, _, _ = train(data=blobs(40, 35), batch=30)
    exact = exact_elbo(guide, data)
    mean, se = pyro_elbo(model, guide, data)
    assert se < 1.0
    assert abs(exact - mean) < 3 * se, (exact, mean, se)
    mean, se = pyro_elbo(model, config_enumerate(guide, "parallel", expand=True), data, loss=TraceEnum_ELBO)
    assert abs(exact - mean) < 3 * se, (exact, mean, se)


def test_the_guide_draws_wishart_precisions_without_torchs_false_singular_warning():
    # Trace_ELBO on a Gaussian guide printed "Singular sample detected." on every call: torch's check is inverted
    # (it warns on positive-definite draws, pytorch/pytorch#122021). (Predictive still runs the user's own model
    # once unconditioned, to guess its plates: that draw is the model's, not the guide's.)
    guide, data, _, _ = train(laps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Trace_ELBO(num_particles=3).loss(model, guide, data)
        precisions = torch.stack([poutine.trace(guide).get_trace(data).nodes["prec"]["value"] for _ in range(3)])
        bare = dist.Wishart(torch.tensor(4.0, dtype=F64), covariance_matrix=torch.eye(2, dtype=F64))
    assert not [w for w in caught if "Singular sample" in str(w.message)]
    assert bool((torch.linalg.eigvalsh(precisions) > 0).all())  # the draws are positive definite
    with warnings.catch_warnings(record=True) as caught:  # the same sampler outside the guide warns: the test can fail
        warnings.simplefilter("always")
        bare.rsample((3,))
    assert [w for w in caught if "Singular sample" in str(w.message)]


def test_infer_discrete_with_the_guide_conditioned_model():
    guide, data, _, _ = train()
    globals_only = poutine.block(guide, hide=["z"])
    guide_trace = poutine.trace(globals_only).get_trace(data)
    conditioned = poutine.replay(model, trace=guide_trace)
    decoded = infer_discrete(config_enumerate(conditioned), first_available_dim=-2, temperature=0)
    z = poutine.trace(decoded).get_trace(data).nodes["z"]["value"]
    assert z.shape == (len(data),)
    agree = (z == guide.posterior.responsibilities(data).argmax(-1)).double().mean()
    assert float(agree) > 0.95


@pytest.mark.slow
def test_two_models_in_one_process_keep_their_parameters():
    data_a = blobs(60, 60, seed=1)
    result_a = pm.fit_vb(model, data_a, K=T - 1)
    score_a = exact_elbo(result_a.guide, data_a)
    state_a = {k: v.clone() for k, v in result_a.guide.posterior.component.items()}
    data_b = blobs(50, 70, seed=2, shift=5.0)
    result_b = pm.fit_vb(other_model, data_b, K=T - 1)
    assert result_a.guide.prefix != result_b.guide.prefix
    assert result_a.guide.prefix == "memo.model" and result_b.guide.prefix == "memo.other_model"
    assert exact_elbo(result_a.guide, data_a) == score_a
    for k, v in state_a.items():
        assert torch.equal(result_a.guide.posterior.component[k], v)
    mean, se = pyro_elbo(model, result_a.guide, data_a)
    assert abs(score_a - mean) < 3 * se


def test_two_instances_of_one_model_class_get_distinct_prefixes():
    x = make_data("gauss", 30, D=2, seed=1)
    m1 = pm.DPMixtureModel(pm.Gaussian.from_data(x), T=3)
    m2 = pm.DPMixtureModel(pm.Gaussian.from_data(x), T=4)
    g1, g2 = pm.DPMixtureGuide(m1), pm.DPMixtureGuide(m2)
    assert g1.prefix != g2.prefix
    assert pm.DPMixtureGuide(m1).prefix == g1.prefix  # the same model: the same prefix (a warm start)
    g1.setup(x)
    g2.setup(x)  # T = 4 next to T = 3: no shape clash
    assert pm.DPMixtureGuide(m1, prefix="mine").prefix == "mine"


def test_shape_mismatch_raises_a_clear_error():
    pm.fit_vb(model, blobs(30, 30), K=T - 1)
    with pytest.raises(ValueError, match=r"memo\.model.*clear_param_store"):
        pm.fit_vb(model, blobs(30, 30, D=3), K=T - 1)  # another data dimension
    with pytest.raises(ValueError, match=r"memo\.model.*prefix="):
        pm.DPMixtureGuide(model, K=2).setup(blobs(30, 30))  # another truncation
    pyro.clear_param_store()
    pm.fit_vb(model, blobs(30, 30, D=3), K=T - 1)  # fresh: fine
    pm.DPMixtureGuide(model, K=2, prefix="memo.k2").setup(blobs(30, 30))  # another prefix: fine


def test_warm_start_from_other_data_warns_and_same_data_does_not():
    data = blobs(40, 40, seed=1)
    pm.fit_vb(model, data, K=T - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WarmStartWarning)
        pm.fit_vb(model, data, K=T - 1)  # the same data: a silent, documented warm start
    with pytest.warns(WarmStartWarning, match="memo.model"):
        pm.fit_vb(model, blobs(40, 40, seed=2), K=T - 1)  # same shapes, other data
    with pytest.warns(WarmStartWarning):
        guide, _, _, _ = train(data=blobs(40, 40, seed=3), laps=1, batch=40)
    # predicting on new data is not training: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", WarmStartWarning)
        guide(blobs(5, 5, seed=9))


class MixtureOfBlobs:
    """A model written as a method, as Pyro users write models on classes: ``obj.model`` is a new bound method
    object at every access."""

    def model(self, data, batch=None):
        return model(data, batch)


def test_a_model_written_as_a_method_is_one_model():
    """SVI(obj.model, DPMixtureGuide(obj.model), ClosedFormOptimizer(), MemoizedELBO()) refused its first step with
    'the DPMixtureGuide was built for a different model than the one passed to SVI', and a fit of obj.model beside
    a guide of obj.model stored its parameters under another prefix ('memo.MixtureOfBlobs.model.1')."""
    pyro.clear_param_store()
    data, obj = blobs(30, 30, seed=5), MixtureOfBlobs()
    guide = pm.DPMixtureGuide(obj.model)
    svi = SVI(obj.model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for _ in range(3):
        for batch in torch.arange(60).split(30):
            svi.step(data, batch)
    fitted = pm.fit_vb(obj.model, data)
    assert fitted.guide.prefix == guide.prefix == "memo.MixtureOfBlobs.model"
    assert pm.DPMixtureGuide(MixtureOfBlobs().model).prefix == "memo.MixtureOfBlobs.model.1"  # another object


def test_bfloat16_data_are_fingerprinted_and_fitted_as_their_values():
    """numpy has no bfloat16: the data fingerprint failed with torch's raw 'Got unsupported ScalarType BFloat16'
    before the first iteration of fit_vb (and of every guide's setup); the fit is now the fit of the same values
    in float64."""
    data = blobs(30, 30, seed=4).to(torch.bfloat16)
    pyro.clear_param_store()
    fitted = pm.fit_vb(model, data, K=T - 1).elbo
    pyro.clear_param_store()
    assert fitted == pytest.approx(pm.fit_vb(model, data.double(), K=T - 1).elbo, rel=1e-12)


@pytest.mark.slow
def test_median_quantiles_and_sample_posterior():
    guide, data, _, _ = train()
    post = guide.posterior
    draws = guide.sample_posterior(400)
    assert set(draws) == {"v", "prec", "loc"}
    assert draws["v"].shape == (400, T - 1)
    assert draws["loc"].shape == (400, T, 2)
    assert draws["prec"].shape == (400, T, 2, 2)
    mean_v = post.eta1 / (post.eta1 + post.eta0)
    se = draws["v"][:, : T - 1].std(0) / 400**0.5
    assert bool((((draws["v"].mean(0) - mean_v).abs()) < 5 * se + 1e-9).all())
    q = guide.quantiles([0.1, 0.5, 0.9])
    assert q["loc"].shape == (3, T, 2)
    assert bool((q["v"][0] <= q["v"][1]).all()) and bool((q["v"][1] <= q["v"][2]).all())
    med = guide.median()
    torch.testing.assert_close(med["v"], q["v"][1])  # same seed: deterministic
    assert med["prec"].shape == (T, 2, 2)
    # the loc marginal is a symmetric Student t around m: median = posterior mean, within Monte-Carlo error
    m = post.component["m"]
    spread = (q["loc"][2, : T - 1] - q["loc"][0, : T - 1]).abs()
    assert bool(((med["loc"][: T - 1] - m).abs() < 0.2 * spread + 1e-6).all())
    # the Beta median lies between the mode-side quantiles and near the mean
    assert bool(((med["v"] - mean_v).abs() < 0.25).all())


def test_read_outs_before_the_first_call_or_after_the_store_is_cleared_are_one_clear_error():
    """``guide.posterior`` before the guide saw its model was an AttributeError on ``None``, and after
    ``pyro.clear_param_store()`` Pyro's KeyError; both are now a RuntimeError saying what to do."""
    with pytest.raises(RuntimeError, match="has not seen the model"):
        _ = pm.DPMixtureGuide(model, K=T - 1).posterior
    guide, data, _, _ = train(laps=1)
    pyro.clear_param_store()
    for read_out in (lambda: guide.posterior, guide.median, guide.sample_posterior):
        with pytest.raises(RuntimeError, match=r"param store holds none of this guide's parameters.*clear_param_store"):
            read_out()
    guide.setup(data)  # initialises them again
    assert torch.isfinite(guide.posterior.eta1).all()
