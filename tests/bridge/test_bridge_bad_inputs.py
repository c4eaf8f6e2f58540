"""Bad input to the Pyro bridge's guides outside SVI (their read-outs, calls without the data) and to the
models it recognises: one ValueError naming the argument or site, never torch's error or a silent result.
For the DP, HDP and relational guides alike."""

import itertools
import re

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI

import pyro_memo as pm
from tests.bridge.test_memoized_elbo import T, mix_weights
from tests.bridge.test_memoized_elbo_batches import CASES, splits


def fitted(kind):
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for batch in splits(n, 0):
        svi.step(*call(batch))
    return model, guide, call


@pytest.mark.parametrize("kind", CASES)
def test_read_outs_refuse_a_number_of_draws_that_is_not_a_positive_whole_number(kind):
    """``sample_posterior(0)`` (or ``-1``) gave a DP guide's empty dict and an HDP or relational guide's
    "The expanded size of the tensor (-1) isn't allowed"; ``2.5`` was truncated to 2 draws; ``median`` and
    ``quantiles`` with ``num_samples=0`` raised torch's "quantile() input tensor must be non-empty"."""
    _, guide, _ = fitted(kind)
    for bad in (0, -1, 2.5, None, "3", True):
        with pytest.raises(ValueError, match=r"num_samples must be a positive integer; got"):
            guide.sample_posterior(bad)
    for read_out in (lambda: guide.median(num_samples=0), lambda: guide.quantiles([0.5], num_samples=0)):
        with pytest.raises(ValueError, match=r"num_samples must be a positive integer; got 0"):
            read_out()
    assert all(len(v) == 2 for v in guide.sample_posterior(2).values())


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("bad", [[1.5], [-0.1, 0.5], [float("nan")], ["a"], [[0.1], [0.2, 0.3]]])
def test_quantiles_refuse_levels_outside_zero_to_one(kind, bad):
    """A level outside [0, 1] or NaN raised torch's "quantile() q values must be in the range [0, 1]", a
    string "too many dimensions 'str'"."""
    _, guide, _ = fitted(kind)
    with pytest.raises(ValueError, match=r"quantiles must be numbers in \[0, 1\] \(one, or a list\); got"):
        guide.quantiles(bad, num_samples=10)
    assert all(v.shape[0] == 2 for v in guide.quantiles([0.0, 1.0], num_samples=10).values())


def plate_of_size(data, batch=None, N=None):
    """The DP mixture of ``test_memoized_elbo`` with the data plate's size an argument."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 0.8))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Wishart(torch.tensor(4.0), covariance_matrix=torch.eye(2)))
        mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), precision_matrix=0.1 * lam))
    with pyro.plate("data", N, subsample=batch) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.MultivariateNormal(mu[z], precision_matrix=lam[z]), obs=data[idx])


def test_a_subsampled_data_plate_larger_than_the_data_is_refused():
    """``pyro.plate("data", 100, subsample=batch)`` over 60 rows: batches of the rows never cover the plate, so
    MemoizedELBO held the globals (zero updates) forever and every step returned the same loss, silently."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(plate_of_size, K=3)
    svi = SVI(plate_of_size, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    with pytest.raises(pm.ModelStructureError, match=r"plate 'data' has size 100, but the data it subsamples, the "
                                                     r"model's argument 'data', holds 60 items"):
        svi.step(data, torch.arange(10), 100)
    # the plate of the data's length fits, in batches
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(plate_of_size, K=3)
    svi = SVI(plate_of_size, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    losses = [svi.step(data, batch, 60) for _ in range(3) for batch in torch.arange(60).split(20)]
    assert losses[-1] < losses[2]


@pytest.mark.parametrize("kind, message", [
    ("dp", r"this call passes no data \(the model's positional argument 0"),
    ("hdp", r"this call passes no document ids \(the model's argument 'doc_of'"),  # IndexError: tuple index ...
    ("relational", r"this call does not pass the model's argument 'src'"),  # a KeyError
])
def test_a_fitted_guide_called_without_the_data_says_which_argument_is_missing(kind, message):
    model, guide, _ = fitted(kind)
    for call in (guide, pyro.infer.Predictive(model, guide=guide, num_samples=2)):
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("shape", [(60, 3), (60,), (60, 1)])
def test_data_of_another_dimension_than_the_model_name_the_observed_site_and_both_shapes(shape):
    """The 2-D model of ``test_memoized_elbo`` on 3 columns (or on 1-D data) read "pyro-memo could not read this
    model (RuntimeError: The size of tensor a (3) must match the size of tensor b (2) ...)"."""
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(plate_of_size, K=3)
    data = torch.randn(shape)
    message = re.escape(f"observed site 'x' observes a value of shape {shape}, but its distribution's event "
                        "shape is (2,)")
    for call in (lambda: guide(data, None, 60), lambda: pm.fit_vb(plate_of_size, data, None, 60, K=3)):
        with pytest.raises(pm.ModelStructureError, match=message):
            call()


@pytest.mark.parametrize("batched", [True, False])
def test_a_data_plate_smaller_than_the_data_is_refused(batched):
    """``pyro.plate("data", 30, subsample=batch)`` over 60 rows: with batches, SVI with MemoizedELBO silently fitted
    the first 30 rows only; without, recognition said "no argument matches the value of observed site 'x'"."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    verb = "subsamples" if batched else "observes"
    message = (rf"plate 'data' has size 30, but the data it {verb}, the model's argument 'data', holds 60 items: "
               r"the plate's indices reach only its first 30 rows.*pyro.plate\('data', len\(data\), subsample=batch\)")
    pyro.clear_param_store()
    guide = pm.DPMixtureGuide(plate_of_size, K=3)
    svi = SVI(plate_of_size, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    with pytest.raises(pm.ModelStructureError, match=message):
        svi.step(data, torch.arange(10) if batched else None, 30)
    pyro.clear_param_store()
    for fit in (pm.fit_vb, pm.fit_memoized):
        with pytest.raises(pm.ModelStructureError, match=message):
            fit(plate_of_size, data, torch.arange(10) if batched else None, 30, K=3)


def plate_over_the_data(data, N):
    """``plate_of_size`` observing the whole data in a plate of size ``N``, without batches."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 0.8))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Wishart(torch.tensor(4.0), covariance_matrix=torch.eye(2)))
        mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), precision_matrix=0.1 * lam))
    with pyro.plate("data", N):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.MultivariateNormal(mu[z], precision_matrix=lam[z]), obs=data)


@pytest.mark.parametrize("N", [21, 19])
def test_a_plate_of_another_size_than_the_observed_items_names_the_plate_and_both_sizes(N):
    """``pyro.plate("data", 21)`` with ``obs=data`` of 20 rows read "the observed data must be passed to the model
    as an argument (positional or keyword); no argument matches the value of observed site 'x'"."""
    data = torch.randn(20, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    with pytest.raises(pm.ModelStructureError, match=rf"observed site 'x' observes 20 items, but its plate 'data' "
                                                     rf"\(size {N}\) holds {N}.*pyro.plate\('data', len\(data\)"):
        pm.fit_vb(plate_over_the_data, data, N, K=3)
    assert pm.fit_vb(plate_over_the_data, data, 20, K=3).guide is not None


def failing_model(data, how):
    """``plate_over_the_data`` failing in its observation: a negative scale (torch's constraint error, with the
    values), or its own check of the data (a ModelStructureError)."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 0.8))
    with pyro.plate("components", T):
        mu = pyro.sample("mu", dist.Normal(torch.zeros(2), 1.0).to_event(1))
    with pyro.plate("data", len(data)):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        if how == "own check":
            raise pm.ModelStructureError("the model's own check: data must be standardised")
        pyro.sample("x", dist.Normal(mu[z], -torch.ones(2)).to_event(1), obs=data)


def test_a_model_that_fails_when_traced_reports_the_cause_without_pyros_table_of_shapes():
    """Pyro's trace appends "Trace Shapes:" and a table of every site's shapes to an error raised in the model: the
    error pyro-memo raised ended in that table (and, for a constraint, all 200 rows of the offending values)."""
    data = torch.randn(200, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    with pytest.raises(pm.ModelStructureError, match=r"tracing the model with the given arguments raised ValueError: "
                                                     r"Expected parameter scale") as caught:
        pm.fit_vb(failing_model, data, "negative scale", K=3)
    message = str(caught.value)
    assert "Trace Shapes" not in message and "Sample Sites" not in message
    assert len(message.splitlines()) <= 7 and "more lines)" in message
    assert isinstance(caught.value.__cause__, ValueError)  # chained: the traceback still shows Pyro's error
    with pytest.raises(pm.ModelStructureError) as caught:
        pm.fit_vb(failing_model, data, "own check", K=3)
    assert str(caught.value) == "the model's own check: data must be standardised"


def sharp_plate_of_size(data, batch=None, N=None):
    """``plate_of_size`` with another prior: a model of its own (the same data, another ELBO)."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 0.8))
    with pyro.plate("components", T):
        lam = pyro.sample("lam", dist.Wishart(torch.tensor(9.0), covariance_matrix=torch.eye(2)))
        mu = pyro.sample("mu", dist.MultivariateNormal(torch.zeros(2), precision_matrix=2.0 * lam))
    with pyro.plate("data", N, subsample=batch) as idx:
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.MultivariateNormal(mu[z], precision_matrix=lam[z]), obs=data[idx])


@pytest.mark.parametrize("fit", [pm.fit_vb, pm.fit_memoized])
def test_a_fit_given_a_guide_of_another_model_is_refused(fit):
    """``fit_vb(model_b, data, guide=guide_of_model_a)`` fitted model A (the guide's) and returned its ELBO, silently
    ignoring model B."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    guide = fit(plate_of_size, data, None, 60, K=3).guide
    with pytest.raises(ValueError, match=rf"{fit.__name__}: the guide was built for another model \('plate_of_size'.*"
                                         r"than the one passed \('sharp_plate_of_size'.*Pass the guide's own model"):
        fit(sharp_plate_of_size, data, None, 60, guide=guide)
    assert fit(plate_of_size, data, None, 60, guide=guide).guide is guide  # its own model continues


@pytest.mark.parametrize("fit", [pm.fit_vb, pm.fit_memoized])
def test_a_fit_given_a_guide_and_another_K_is_refused(fit):
    """``fit_vb(model, data, K=2, guide=guide)`` with a guide of K = 4 fitted K = 4 components, silently ignoring
    K; a new ``DPMixtureGuide(model)`` (no K) takes the fit's K."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    guide = fit(plate_of_size, data, None, 60, K=4).guide
    with pytest.raises(ValueError, match=rf"{fit.__name__}: K = 2, but the guide was built with K = 4.*"
                                         r"pyro_memo.DPMixtureGuide\(model, K=2\)"):
        fit(plate_of_size, data, None, 60, K=2, guide=guide)
    assert fit(plate_of_size, data, None, 60, K=4, guide=guide).guide.K == 4
    pyro.clear_param_store()  # a guide built without K that has not read its model takes the fit's K
    fresh = fit(plate_of_size, data, None, 60, K=2, guide=pm.DPMixtureGuide(plate_of_size))
    assert fresh.guide.K == 2 and fresh.posterior.K == 2


@pytest.mark.parametrize("option, match", [
    (dict(shuffle="no"), r"shuffle must be True or False; got 'no'"),
    (dict(shuffle=None), r"shuffle must be True or False; got None"),
    (dict(callback=5), r"callback must be a function callback\(lap, elbo, posterior\) or None; got int 5"),
])
def test_fit_memoized_refuses_a_shuffle_that_is_no_bool_and_a_callback_that_is_no_function(option, match):
    """``shuffle="no"`` (truthy) shuffled the batches, silently; ``callback=5`` ran the first lap, then raised Python's
    "'int' object is not callable"."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    with pytest.raises(ValueError, match=match):
        pm.fit_memoized(plate_of_size, data, None, 60, K=3, **option)


def scale_per_component(data):
    """A Normal observation whose per-component scale is a Gamma site of shape (T,): the diag-gauss family's site
    types (Gamma, Normal), not its form (a Gamma precision of shape (T, D), .to_event(1))."""
    with pyro.plate("sticks", T - 1):
        v = pyro.sample("v", dist.Beta(1.0, 0.8))
    with pyro.plate("components", T):
        mu = pyro.sample("mu", dist.Normal(torch.zeros(2), 3.0).to_event(1))
        sigma = pyro.sample("sigma", dist.Gamma(2.0, 2.0))
    with pyro.plate("data", len(data)):
        z = pyro.sample("z", dist.Categorical(mix_weights(v)))
        pyro.sample("x", dist.Normal(mu[z], sigma[z][:, None]).to_event(1), obs=data)


def test_component_sites_of_a_familys_types_but_other_shapes_name_the_sites_and_the_form():
    """The model read "pyro-memo could not read this model (RuntimeError: expand(torch.FloatTensor{[6, 2]},
    size=[6]): the number of sizes provided (1) must be greater or equal ...)"."""
    data = torch.randn(20, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    with pytest.raises(pm.ModelStructureError, match=re.escape(
            f"have the types of the diag-gauss family, but not its shapes: 'sigma' Gamma of shape ({T},) (event shape "
            f"()); 'mu' Normal of shape ({T}, 2) (event shape (2,)). The diag-gauss family reads lambda ~ Gamma with 1 "
            "event dim (.to_event(1))")):
        pm.fit_vb(scale_per_component, data, K=3)


@pytest.mark.parametrize("fit, option, other", [
    (pm.fit_vb, dict(laps=3), "fit_memoized"), (pm.fit_vb, dict(num_batches=3), "fit_memoized"),
    (pm.fit_memoized, dict(max_iter=5), "fit_vb"), (pm.fit_memoized, dict(init="random"), "fit_vb"),
])
def test_the_other_fits_option_is_named_as_such_not_blamed_on_the_model(fit, option, other):
    """``fit_vb(model, data, laps=3)`` passed ``laps`` to the model and read "tracing the model with the given arguments
    raised TypeError: plate_of_size() got an unexpected keyword argument 'laps'"."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    pyro.clear_param_store()
    (key,) = option
    with pytest.raises(ValueError, match=rf"{fit.__name__} has no option '{key}' \(it is {other}'s\), and the model "
                                         rf"takes no argument '{key}'; {fit.__name__}'s options are"):
        fit(plate_of_size, data, None, 60, K=3, **option)


def test_fit_memoized_refuses_batches_and_num_batches_together():
    """``fit_memoized(model, data, batches=four_batches, num_batches=2)`` fitted the four batches, silently ignoring
    num_batches."""
    data = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    batches = list(torch.arange(60).split(15))
    pyro.clear_param_store()
    with pytest.raises(ValueError, match=r"fit_memoized: give batches or num_batches, not both \(the batches given fix "
                                         r"their number; num_batches = 2 would be ignored\)"):
        pm.fit_memoized(plate_of_size, data, None, 60, K=3, batches=batches, num_batches=2)
    assert len(pm.fit_memoized(plate_of_size, data, None, 60, K=3, batches=batches).guide.memo.batches) == 4


GUIDES = {"dp": pm.DPMixtureGuide, "hdp": pm.HDPGuide, "relational": pm.RelationalGuide}
KIND_NAMES = {"dp": "a DP mixture", "hdp": "an HDP topic model", "relational": "an HDP relational model"}


@pytest.mark.parametrize(("guide_kind", "model_kind"), list(itertools.permutations(GUIDES, 2)))
def test_a_guide_given_another_kind_of_model_names_the_kind_and_the_guide_that_takes_it(guide_kind, model_kind):
    """An ``HDPGuide`` of a relational model said "this model is a DP mixture: use pyro_memo.DPMixtureGuide"."""
    pyro.clear_param_store()
    model, _, call, n = CASES[model_kind](0)
    guide = GUIDES[guide_kind](model)
    message = (f"{GUIDES[guide_kind].__name__} needs {KIND_NAMES[guide_kind]}; this model is "
               f"{KIND_NAMES[model_kind]}: use pyro_memo.{GUIDES[model_kind].__name__}")
    with pytest.raises(pm.ModelStructureError, match=re.escape(message)):
        guide(*call(splits(n, 0)[0]))


def _failing_after(model, n):
    """``model``, raising a RuntimeError on each call after its first ``n`` (recognition's probe traces)."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        out = model(*args, **kwargs)
        if len(calls) > n:
            raise RuntimeError("the model fails on this call")
        return out

    return wrapped


@pytest.mark.parametrize("kind, n, probe", [
    ("dp", 1, r"stick site 'beta' at random values \(checking its wiring\)"),
    ("hdp", 1, r"stick site 'b' at 1/2 \(reading alpha\)"),
    ("hdp", 2, r"sites \['b', 'c', 'topic'\] at random values \(checking its wiring\)"),
    ("relational", 1, r"sites \[[^]]*\] set \(reading the relational form\)"),
])
def test_a_model_failing_in_a_probe_trace_reads_its_cause_without_pyros_table_of_shapes(kind, n, probe):
    """The probe traces of the DP wiring check and of HDP and relational recognition re-raised Pyro's error with
    its long "Trace Shapes:" table (in "pyro-memo could not read this model (RuntimeError: ...)")."""
    from tests.bridge.test_hdp_bridge import corpus, plain_topic_model
    from tests.bridge.test_recognition import diag_model, two_blobs

    model, args = {"dp": lambda: (diag_model, (two_blobs(),)), "hdp": lambda: (plain_topic_model, corpus(0)),
                   "relational": lambda: CASES["relational"](0)[::2]}[kind]()
    if kind == "relational":
        args = args(None)
    with pytest.raises(pm.ModelStructureError) as info:
        pm.recognize_model(_failing_after(model, n), *args)
    assert re.fullmatch(rf"tracing the model with {probe} raised RuntimeError: the model fails on this call",
                        str(info.value))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_model_taking_star_args_that_fails_is_not_told_its_args_are_a_tuple():
    """A model written ``def wrapped(*args, **kwargs)`` whose trace failed was told "the model's argument 'args' is a
    tuple: give the model torch tensors", though every argument was one; a numpy argument is named ``args[0]``."""
    from tests.bridge.test_recognition import diag_model, two_blobs

    data = two_blobs()
    with pytest.raises(pm.ModelStructureError) as info:
        pm.recognize_model(_failing_after(diag_model, 0), data)
    assert str(info.value) == ("tracing the model with the given arguments raised RuntimeError: the model fails on "
                               "this call")
    with pytest.raises(pm.ModelStructureError, match=r"the model's argument 'args\[0\]' is a numpy array"):
        pm.recognize_model(_failing_after(diag_model, 0), data.numpy())


def test_a_keyword_the_model_does_not_take_is_named_as_such_not_as_a_tuple_to_convert():
    """``fit_memoized(model, data, alpha_prior=(1, 1))`` (docs/guide/choosing.md: the bridge takes no ``alpha_prior=``;
    unknown keywords go to the model) failed with "the model's argument 'alpha_prior' is a tuple: give the model
    torch tensors (torch.as_tensor(alpha_prior))", advice that fails again: the model takes no such argument."""
    from tests.bridge.test_recognition import diag_model, two_blobs

    for call in (lambda: pm.fit_memoized(diag_model, two_blobs(), num_batches=2, alpha_prior=(1, 1)),
                 lambda: pm.recognize_model(diag_model, two_blobs(), 6, 0.7, 1)):
        with pytest.raises(pm.ModelStructureError) as info:
            call()
        message = str(info.value)
        assert "the arguments do not fit the model's signature diag_model(data, T=6, alpha=0.7)" in message, message
        assert "torch.as_tensor" not in message
