"""pyro.infer.SVI with MemoizedELBO + ClosedFormOptimizer runs memoized inference on a user's model."""

import math

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F

import pyro_memo as pm

T = 6


def mix_weights(beta):
    return F.pad(beta, (0, 1), value=1) * F.pad((1 - beta).cumprod(-1), (1, 0), value=1)


def model(data, batch=None):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 0.8))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Wishart(torch.tensor(4.0), covariance_matrix=torch.eye(2)))
        mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), precision_matrix=0.1 * lam))
    with pyro.plate("data", data.shape[0], subsample=batch) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.MultivariateNormal(mu[z], precision_matrix=lam[z]), obs=data[idx])


def random_batch_model(data):
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 1.0))
    with pyro.plate("components", T):
        p = pyro.sample("p", dist.Beta(torch.ones(2), 1.0).to_event(1))
    with pyro.plate("data", data.shape[0], subsample_size=10) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Bernoulli(p[z]).to_event(1), obs=data[idx])


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    centers = torch.tensor([[4.0, 0.0], [-4.0, 0.0], [0.0, 5.0]])
    return torch.cat([c + torch.randn(200, 2, generator=g) for c in centers])


@pytest.mark.parametrize("laps", [1, 6])
def test_svi_with_memoized_elbo_reaches_the_drivers_elbo(data, laps):
    batches = list(torch.randperm(len(data), generator=torch.Generator().manual_seed(1)).split(60))
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(model, K=5)
    svi = pyro.infer.SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    losses = []
    for _ in range(laps):
        for batch in batches:
            losses.append(svi.step(data, batch))
    svi_elbo = float(guide.posterior.elbo(guide.memo.total))

    pyro.clear_param_store()
    # MemoizedELBO takes the exact closed-form steps: the driver's schedule without over-relaxation
    result = pm.fit_memoized(model, data, batches[0], batches=batches, K=5, laps=laps, tol=0, shuffle=False,
                             overrelax=False)
    # the memo's bound after the last lap (result.elbo is the returned posterior's exact ELBO)
    assert svi_elbo == pytest.approx(result.elbo_trace[-1], rel=1e-9, abs=1e-7)
    # after lap 1 the loss SVI reports is the exact memoized objective, and it never rises
    later = losses[len(batches):]
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(later, later[1:], strict=False))


@pytest.mark.parametrize("incremental", [False, True])
def test_svi_holds_the_globals_through_the_first_lap_as_the_driver_does(data, incremental):
    batches = list(torch.randperm(len(data), generator=torch.Generator().manual_seed(2)).split(150))
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(model, K=5)
    svi = pyro.infer.SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO(incremental_first_lap=incremental))
    initial = guide.setup(data, batches[0]).posterior
    svi.step(data, batches[0])
    start = {name: value.detach().clone() for name, value in pyro.get_param_store().items()}
    for batch in batches[1:-1]:
        svi.step(data, batch)
    unchanged = all(torch.equal(pyro.param(name).detach(), value) for name, value in start.items())
    assert unchanged != incremental  # held: not one parameter moved before the memo covered the data
    svi.step(data, batches[-1])
    assert not all(torch.equal(pyro.param(name).detach(), value) for name, value in start.items())
    # the posterior read before the steps is a copy: the steps did not move it
    assert all(not torch.equal(initial.component[k], guide.posterior.component[k]) for k in initial.component)
    held = pm.MemoizedVB(guide.spec.family, 5, guide.spec.alpha, laps=1, tol=0, shuffle=False,
                         incremental_first_lap=incremental).fit(pm.make_batches([data[b] for b in batches]),
                                                                posterior=initial)
    assert float(guide.posterior.elbo(guide.memo.total)) == pytest.approx(held.elbo, rel=1e-9)


def test_memoized_elbo_loss_does_not_change_the_memo(data):
    pyro.clear_param_store()
    batches = list(torch.arange(len(data)).split(100))
    guide = pm.DPMixtureGuide(model, K=4)
    svi = pyro.infer.SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for batch in batches:
        svi.step(data, batch)
    total = guide.memo.total.counts.clone()
    loss = pm.MemoizedELBO().loss(model, guide, data, batches[0])
    assert torch.equal(guide.memo.total.counts, total)
    # refreshing one batch's assignments is an exact coordinate step: the loss can only drop
    assert loss <= -float(guide.posterior.elbo(guide.memo.total)) + 1e-9


def test_unbatched_model_is_full_batch_vb(data):
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(model, K=5)
    svi = pyro.infer.SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for _ in range(5):
        svi.step(data)
    pyro.clear_param_store()
    result = pm.fit_vb(model, data, K=5, max_iter=5, tol=0)
    assert float(guide.posterior.elbo(guide.memo.total)) == pytest.approx(result.elbo_trace[-1], rel=1e-10)


def test_random_subsampling_is_rejected():
    pyro.clear_param_store()
    x = torch.bernoulli(torch.full((50, 2), 0.4))
    guide = pm.DPMixtureGuide(random_batch_model)
    svi = pyro.infer.SVI(random_batch_model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    with pytest.raises(ValueError, match="fixed batches"):
        svi.step(x)


def test_memoized_elbo_with_a_gradient_optimizer_is_refused(data):
    """``SVI(model, guide, pyro.optim.Adam(...), MemoizedELBO())`` stepped the closed-form update by Adam's
    learning rate, silently (a wrong fit); its next step is now a ValueError naming ClosedFormOptimizer,
    and an SVI with ClosedFormOptimizer continues from there."""
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(model, K=5)
    adam = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), pm.MemoizedELBO())
    adam.step(data)
    with pytest.raises(ValueError, match=r"not applied by pyro_memo.ClosedFormOptimizer.*SVI\(model, guide, "
                                         r"pyro_memo.ClosedFormOptimizer\(\), pyro_memo.MemoizedELBO\(\)\)"):
        adam.step(data)
    svi = pyro.infer.SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    losses = [svi.step(data) for _ in range(3)]
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] <= losses[0]


@pytest.mark.parametrize("batch,message", [
    ([0, 1, 1], "the subsample of plate 'data' lists an id more than once"),  # counted item 1 twice, silently
    # item -1 is item 599, under another batch key
    ([0, -1], r"the model's argument 'batch' \(the subsample of plate 'data'\) must lie in \[0, 600\); "
              r"found \[-1, 0\]"),
])
def test_a_batch_with_repeated_or_negative_indices_is_refused(data, batch, message):
    pyro.clear_param_store()
    svi = pyro.infer.SVI(model, pm.DPMixtureGuide(model, K=5), pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    with pytest.raises(ValueError, match=message):
        svi.step(data, torch.tensor(batch))


@pytest.mark.parametrize("K", [2.5, "3", True, 0, -1])
def test_a_truncation_that_is_not_a_positive_whole_number_is_refused(data, K):
    """``DPMixtureGuide(model, K=2.5)`` (or ``"3"``, ``True``) used to fit silently with ``int(K)``."""
    with pytest.raises(ValueError, match=r"K must be a positive integer; got"):
        pm.DPMixtureGuide(model, K=K)
    with pytest.raises(ValueError, match=r"K must be a positive integer; got"):
        pm.fit_vb(model, data, K=K)


def test_other_guides_are_rejected(data):
    guide = pyro.infer.autoguide.AutoDelta(pyro.poutine.block(model, hide=["z"]))
    with pytest.raises(TypeError, match="DPMixtureGuide"):
        pm.MemoizedELBO().loss_and_grads(model, guide, data)


def test_differentiable_loss_and_the_elbo_module_are_refused_with_the_svi_form(data):
    """Pyro's ELBO has no differentiable_loss of its own: both used to raise a bare AttributeError."""
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(model)
    message = r"no differentiable loss.*SVI\(model, guide, pyro_memo.ClosedFormOptimizer\(\), " \
              r"pyro_memo.MemoizedELBO\(\)\)"
    with pytest.raises(NotImplementedError, match=message):
        pm.MemoizedELBO().differentiable_loss(model, guide, data)
    module = pm.MemoizedELBO()(model, guide)
    with pytest.raises(NotImplementedError, match=message):
        module(data)


def test_the_same_guide_trains_with_pyro_trace_enum_svi(data):
    """The README's swap: the stochastic-gradient line works on the same model and guide."""
    pyro.clear_param_store()
    pyro.set_rng_seed(3)
    batches = list(torch.randperm(len(data), generator=torch.Generator().manual_seed(2)).split(100))
    guide = pm.DPMixtureGuide(model, K=5)
    guide.setup(data, batches[0])
    before = guide.posterior
    _, summary = before.local_step(data.double())
    start = float(before.elbo(summary))
    svi = pyro.infer.SVI(model, pyro.infer.config_enumerate(guide), pyro.optim.Adam({"lr": 0.01}),
                         pyro.infer.TraceEnum_ELBO(max_plate_nesting=1))
    for _ in range(5):
        for batch in batches:
            assert torch.isfinite(torch.tensor(svi.step(data, batch)))
    after = guide.posterior
    _, summary = after.local_step(data.double())
    assert not torch.equal(after.eta1, before.eta1)  # gradients reached the param store
    assert float(after.elbo(summary)) > start
