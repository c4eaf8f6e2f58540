"""A hand-written Pyro HDP relational model is recognised like the DP and HDP models, and
``SVI(model, RelationalGuide(model), ClosedFormOptimizer(), MemoizedELBO())`` runs it over batches of
nodes: the engine's memoized fit, step for step, with the guide's Trace_ELBO equal to its bound plus
the closed-form normaliser gap."""

import math

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI, Predictive, Trace_ELBO
from pyro.ops.indexing import Vindex

from pyro_memo import (
    ClosedFormOptimizer,
    MemoizedELBO,
    ModelStructureError,
    RelationalGuide,
    batch_pairs,
    recognize_model,
    stick_breaking_weights,
)
from pyro_memo.models import HDPRelationalModel
from pyro_memo.relational import MemoizedRelational, NodeBatches
from tests.relational.test_pyro_model import assert_enumerated_elbo_is


def random_pairs(seed, N=24, K=3, drop=0.0):
    """Every unordered pair of an assortative graph (``drop``: the share left unlisted, unobserved)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, N)
    src, dst = torch.triu_indices(N, N, 1)
    p = np.where(labels[src] == labels[dst], 0.5, 0.03)
    y = torch.tensor(rng.random(len(src)) < p, dtype=torch.float64)
    keep = torch.tensor(rng.random(len(src)) >= drop)
    return src[keep], dst[keep], y[keep]


def users_model(num_nodes, K, alpha=0.5, gamma=2.0, tau_a=1.0, tau_b=3.0, eps=1e-3):
    """The relational model as a user might write it: other names, keyword arguments, Beta(1, .) links."""

    def graph_model(i, j, links=None, pair_batch=None):
        with pyro.plate("topics", K):
            sticks = pyro.sample("v", dist.Beta(torch.tensor(1.0, dtype=torch.float64), gamma))
            strength = pyro.sample("strength", dist.Beta(torch.tensor(tau_a, dtype=torch.float64), tau_b))
        beta = stick_breaking_weights(sticks)
        with pyro.plate("people", num_nodes):
            member = pyro.sample("member", dist.Dirichlet(alpha * beta.unsqueeze(-2)))
        tail = torch.cat([strength, torch.full_like(strength[..., :1], eps)], -1).unsqueeze(-2)
        with pyro.plate("dyads", len(i), subsample=pair_batch) as d:
            a = pyro.sample("a", dist.Categorical(member[..., i[d], :]))
            b = pyro.sample("b", dist.Categorical(member[..., j[d], :]))
            prob = torch.where(a == b, Vindex(tail)[..., a], torch.tensor(eps, dtype=torch.float64))
            pyro.sample("link", dist.Bernoulli(prob), obs=None if links is None else links[d])

    return graph_model


def test_recognition_reads_the_models_hyperparameters_and_names():
    src, dst, y = random_pairs(0)
    spec = recognize_model(HDPRelationalModel(24, 3, alpha=0.7, gamma=3.0, tau=(2.0, 5.0), eps=1e-3), src, dst, y)
    assert spec.kind == "relational" and (spec.N, spec.K) == (24, 3)
    assert spec.alpha == pytest.approx(0.7) and spec.gamma == pytest.approx(3.0)
    assert spec.tau == pytest.approx((2.0, 5.0)) and spec.eps == pytest.approx(1e-3, rel=1e-9)
    batch = batch_pairs(src, dst, torch.tensor([0, 5, 7]))
    model = users_model(24, 3)
    spec = recognize_model(model, src, dst, links=y, pair_batch=batch)
    assert (spec.stick_site, spec.link_site, spec.membership_site) == ("v", "strength", "member")
    assert (spec.source_site, spec.receiver_site, spec.obs_site, spec.pair_plate) == ("a", "b", "link", "dyads")
    assert spec.tau == pytest.approx((1.0, 3.0)) and spec.alpha == pytest.approx(0.5)
    assert spec.subsample_arg == ("kwarg", "pair_batch") and spec.y_arg == ("kwarg", "links")


def test_batch_pairs_partition_the_pairs_by_their_smaller_node():
    src, dst, _ = random_pairs(1)
    parts = torch.randperm(24, generator=torch.Generator().manual_seed(0)).chunk(4)
    batches = [batch_pairs(src, dst, nodes) for nodes in parts]
    assert sorted(torch.cat(batches).tolist()) == list(range(len(src)))
    for nodes, batch in zip(parts, batches, strict=True):
        assert bool(torch.isin(torch.minimum(src[batch], dst[batch]), nodes).all())


def _model_variant(kind):
    N, K, eps = 10, 2, 1e-3

    def model(src, dst, y=None, batch=None):
        with pyro.plate("sticks", K):
            u = pyro.sample("u", dist.Beta(torch.tensor(1.0, dtype=torch.float64), 2.0))
            w = pyro.sample("w", dist.Beta(torch.tensor(2.0, dtype=torch.float64), 2.0))
        beta = stick_breaking_weights(u)
        conc = 0.5 * (beta if kind != "not alpha beta" else torch.ones_like(beta))
        node_batch = torch.arange(5) if kind == "subsampled nodes" else None
        with pyro.plate("nodes", N, subsample=node_batch):
            pi = pyro.sample("pi", dist.Dirichlet(conc))
        if kind == "extra site":
            pyro.sample("noise", dist.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0))
        pi = pi if kind != "subsampled nodes" else pi.repeat(2, 1)
        tail = torch.cat([w, w.new_full((1,), eps)])
        size = 4 if kind == "random subsample" else None
        with pyro.plate("pairs", len(src), subsample=batch, subsample_size=size) as d:
            s = pyro.sample("s", dist.Categorical(pi[src[d]]))
            r = pyro.sample("r", dist.Categorical(pi[dst[d]]))
            other = eps * (1 + s) if kind == "eps varies" else torch.full_like(tail[s], eps)
            prob = torch.where(s == r, tail[s], other)
            pyro.sample("y", dist.Bernoulli(prob), obs=None if y is None else y[d])

    return model


@pytest.mark.parametrize("kind,match", [
    ("subsampled nodes", "subsample the pair plate"),
    ("eps varies", "observed site .y.: its link probability"),
    ("not alpha beta", "alpha \\* beta"),
    ("extra site", "noise"),
    ("random subsample", "subsampled at random"),
])
def test_unsupported_relational_structure_is_refused_with_the_site_and_the_form(kind, match):
    src, dst = torch.triu_indices(10, 10, 1)
    y = (torch.arange(len(src)) % 7 == 0).double()
    with pytest.raises(ModelStructureError, match=match):
        recognize_model(_model_variant(kind), src, dst, y)


def test_bad_pairs_get_one_clear_error():
    src, dst, y = random_pairs(2, N=10)
    model = HDPRelationalModel(10, 2)
    guide = RelationalGuide(model, prefix="bad")
    svi = SVI(model, guide, ClosedFormOptimizer(), MemoizedELBO())
    pyro.clear_param_store()
    with pytest.raises(ValueError, match="listed 2 times"):
        svi.step(torch.cat([src, src[:1]]), torch.cat([dst, dst[:1]]), torch.cat([y, y[:1]]))
    bad = y.clone()
    bad[0] = 2.0
    with pytest.raises(ValueError, match="0 or 1"):
        svi.step(src, dst, bad)


def test_a_pair_batch_with_repeats_and_pair_lists_of_two_lengths_are_refused():
    """A repeated pair id used to be counted twice in the memo silently; batch_pairs on src and dst of two
    lengths raised torch's raw "The size of tensor a (45) must match the size of tensor b (44)"."""
    src, dst, y = random_pairs(2, N=10)
    model = HDPRelationalModel(10, 2)
    pyro.clear_param_store()
    svi = SVI(model, RelationalGuide(model, prefix="repeat"), ClosedFormOptimizer(), MemoizedELBO())
    with pytest.raises(ValueError, match="the subsample of plate 'pairs' lists an id more than once"):
        svi.step(src, dst, y, torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match=r"src and dst must list one node per pair each; got shapes \(45,\) and "
                                         r"\(44,\)"):
        batch_pairs(src, dst[:-1], torch.tensor([0, 1]))


@pytest.mark.parametrize("missing", ["src", "dst"])
def test_batch_pairs_refuses_missing_node_ids_naming_the_argument(missing):
    """batch_pairs(None, dst, nodes) raised torch's raw "Could not infer dtype of NoneType"."""
    src, dst, _ = random_pairs(2, N=10)
    given = {"src": src, "dst": dst, missing: None}
    with pytest.raises(ValueError, match=rf"^{missing} must be a 1-D array of node ids, one per pair .*; got None$"):
        batch_pairs(given["src"], given["dst"], torch.tensor([0, 1]))
    given[missing] = object()
    with pytest.raises(ValueError, match=rf"^{missing} must be a 1-D array of node ids.*; got object$"):
        batch_pairs(given["src"], given["dst"], torch.tensor([0, 1]))


def _fit_svi(model, src, dst, y, batches, laps, prefix="svi"):
    pyro.clear_param_store()
    guide = RelationalGuide(model, prefix=prefix, seed=0)
    svi = SVI(model, guide, ClosedFormOptimizer(), MemoizedELBO())
    losses = [[svi.step(src, dst, y, b) for b in batches] for _ in range(laps)]
    return guide, losses


def test_one_batch_svi_is_the_engines_memoized_fit_step_for_step():
    src, dst, y = random_pairs(3, drop=0.1)
    model = HDPRelationalModel(24, 3)
    guide, losses = _fit_svi(model, src, dst, y, [None], 6)
    graph, _ = guide.graph((src, dst, y), {})
    driver = MemoizedRelational(K=3, laps=6, tol=0.0, seed=0)
    fit = driver.fit(NodeBatches(graph, [np.arange(24)]))
    post = guide.posterior_for(src, dst, y)
    for key in ("theta", "rho", "omega", "w_a", "w_b"):  # the same globals after every lap's closed-form step
        torch.testing.assert_close(getattr(post, key), getattr(fit.posterior, key), rtol=1e-7, atol=1e-9)
    # step t + 1's loss is the bound of lap t's globals with the batch's links refreshed under them,
    # never below the driver's bound of those globals with the memo of lap t
    refreshed = [-loss[0] for loss in losses[1:]]
    assert all(a >= b - 1e-9 * abs(b) for a, b in zip(refreshed, fit.elbo_trace, strict=False))
    assert refreshed[-1] == pytest.approx(fit.elbo_trace[-2], rel=1e-3)


@pytest.mark.parametrize("seed", range(8))
def test_svi_over_node_batches_holds_lap_one_then_never_lowers_the_bound(seed):
    src, dst, y = random_pairs(seed, N=20, drop=0.05 * (seed % 3))
    rng = torch.Generator().manual_seed(seed)
    batches = [batch_pairs(src, dst, nodes) for nodes in torch.randperm(20, generator=rng).chunk(2 + seed % 3)]
    model = HDPRelationalModel(20, 2 + seed % 3, alpha=0.5)
    pyro.clear_param_store()
    guide = RelationalGuide(model, prefix="svi", seed=seed)
    svi = SVI(model, guide, ClosedFormOptimizer(), MemoizedELBO())
    guide.setup(src, dst, y, batches[0])
    start = pyro.param("svi.theta").detach().clone()
    for b in batches[:-1]:
        svi.step(src, dst, y, b)
        torch.testing.assert_close(pyro.param("svi.theta").detach(), start)  # held until the memo covers every pair
    losses = [svi.step(src, dst, y, batches[-1])]
    for _ in range(5):
        losses += [svi.step(src, dst, y, b) for b in batches]
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(losses, losses[1:], strict=False))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_trace_elbo_of_the_svi_trained_guide_is_its_bound_plus_the_normaliser_gap(seed):
    N, K = 12, 3
    src, dst, y = random_pairs(seed, N=N, K=K, drop=0.1)
    model = users_model(N, K)
    batches = [batch_pairs(src, dst, nodes) for nodes in torch.arange(N).chunk(3)]
    guide, _ = _fit_svi(model, src, dst, y, batches, 10)
    bound, gap = guide.elbo(src, dst, y), guide.normaliser_gap(src, dst, y)
    pyro.set_rng_seed(seed)
    elbo = Trace_ELBO(num_particles=4000, vectorize_particles=True, max_plate_nesting=1)
    estimates = [-elbo.loss(model, guide, src, dst, links=y) for _ in range(20)]
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / math.sqrt(len(estimates))
    assert gap > 0
    assert abs(mean - (bound + gap)) < 3 * se
    assert abs(mean - bound) > 3 * se  # the check can fail


@pytest.mark.parametrize("model_kind", ["shipped", "users"])
def test_trace_enum_elbo_of_the_guide_with_its_roles_enumerated_is_its_bound_plus_the_gap(model_kind):
    # enumerated, s takes the tail role, where q(s) = 0 and q(r | s) was 0 / 0 = NaN: Pyro's validation
    # refused the guide, and without validation the estimate was about half the bound
    N, K = 10, 3
    torch.manual_seed(0)
    src, dst = torch.triu_indices(N, N, 1)
    y = (torch.rand(len(src)) < 0.3).double()
    model = HDPRelationalModel(N, K) if model_kind == "shipped" else users_model(N, K)
    guide, _ = _fit_svi(model, src, dst, y, [None], 5)
    truth = guide.elbo(src, dst, y) + guide.normaliser_gap(src, dst, y)
    assert_enumerated_elbo_is(truth, model, guide, src, dst, y)


def test_predictive_draws_links_of_any_pairs_from_the_trained_guide():
    src, dst, y = random_pairs(4)
    model = HDPRelationalModel(24, 3)
    guide, _ = _fit_svi(model, src, dst, y, [None], 5)
    draws = Predictive(model, guide=guide, num_samples=200, return_sites=["y", "pi"])(src, dst)
    assert draws["y"].shape == (200, len(src)) and draws["pi"].shape == (200, 24, 4)
    assert bool(((draws["y"] == 0) | (draws["y"] == 1)).all())
    # linked pairs are likelier under the posterior than non-linked ones
    rate = draws["y"].mean(0)
    assert float(rate[y == 1].mean()) > 2 * float(rate[y == 0].mean())


def test_read_outs_before_the_first_call_or_after_the_store_is_cleared_are_one_clear_error():
    """``posterior_for`` before the guide saw its model was an AttributeError on ``None``, and read-outs after
    ``pyro.clear_param_store()`` Pyro's KeyError; both are now a RuntimeError saying what to do."""
    src, dst, y = random_pairs(4)
    model = HDPRelationalModel(24, 3)
    with pytest.raises(RuntimeError, match="has not seen the model"):
        RelationalGuide(model, prefix="unseen").posterior_for(src, dst, y)
    guide, _ = _fit_svi(model, src, dst, y, [None], 1)
    pyro.clear_param_store()
    for read_out in (lambda: guide.posterior_for(src, dst, y), guide.median):
        with pytest.raises(RuntimeError, match="param store holds none of this guide's parameters"):
            read_out()


def test_integer_or_bool_links_are_read_as_floats_and_bad_pair_lists_get_one_clear_error():
    # long links raised "result type Double can't be cast to ... Long", bool ones "Subtraction ... with two bool
    # tensors"; a short y an IndexError, no pairs a ZeroDivisionError, all inside the model; N=2.5 became 2
    src, dst, y = random_pairs(3, N=10)
    model = HDPRelationalModel(10, 2)
    fits = []
    for links in (y, y.long(), y.bool()):
        pyro.clear_param_store()
        guide = RelationalGuide(model, prefix="links", seed=0)
        svi = SVI(model, guide, ClosedFormOptimizer(), MemoizedELBO())
        fits.append([svi.step(src, dst, links) for _ in range(2)])
    assert fits[0] == pytest.approx(fits[1]) and fits[0] == pytest.approx(fits[2])
    with pytest.raises(ModelStructureError, match=r"y must hold one link per pair, shape \(45,\); got \(44,\)"):
        recognize_model(model, src, dst, y[:-1])
    with pytest.raises(ModelStructureError, match="src and dst list no pairs"):
        recognize_model(model, src[:0], dst[:0], y[:0])
    for kwargs, message in (({"N": 2.5}, "N must be a positive integer"), ({"K": True}, "K must be a positive"),
                            ({"alpha": float("inf")}, "alpha must be positive and finite")):
        with pytest.raises(ValueError, match=message):
            HDPRelationalModel(**{"N": 10, "K": 2, **kwargs})


def test_fit_vb_and_fit_memoized_point_a_relational_model_to_svi_with_its_guide():
    # the error named DPMixtureGuide, a guide the caller never chose
    import pyro_memo as pm

    src, dst, y = random_pairs(4, N=10)
    for fit in (pm.fit_vb, pm.fit_memoized):
        with pytest.raises(ModelStructureError, match=rf"{fit.__name__} fits DP mixtures and HDP topic models; this "
                                                      r"model is an HDP relational model: fit it with SVI\(model, "
                                                      r"pyro_memo.RelationalGuide\(model\)"):
            fit(HDPRelationalModel(10, 2), src, dst, y)


@pytest.mark.parametrize("nodes, match", [
    (torch.tensor([0.5, 2.0]), r"nodes must be whole-number ids; found fractions"),
    ([0.5], r"nodes must be whole-number ids; found fractions"),
    (torch.tensor([[0, 1]]), r"nodes must be a 1-D array of node ids \(e.g. torch.tensor\(\[0, 4, 7\]\)\); got shape "
                             r"\(1, 2\), dtype torch.int64"),
    (torch.tensor([True, False]), r"nodes must be whole-number ids; got dtype torch.bool"),
])
def test_batch_pairs_refuses_node_ids_that_are_not_whole_numbers_in_one_dimension(nodes, match):
    """``batch_pairs(src, dst, torch.tensor([0.5]))`` truncated 0.5 to node 0 and returned node 0's pairs, silently;
    a 2-D ``nodes`` was flattened and a bool mask read as the ids 1 and 0."""
    src, dst = torch.triu_indices(6, 6, 1)
    with pytest.raises(ValueError, match=match):
        batch_pairs(src, dst, nodes)
    with pytest.raises(ValueError, match=r"src must be whole-number ids; found fractions"):
        batch_pairs(src + 0.5, dst, [0])
    expected = batch_pairs(src, dst, torch.tensor([0, 2]))
    for same in ([0, 2], torch.tensor([0.0, 2.0]), torch.tensor([0, 2]).numpy()):
        assert torch.equal(batch_pairs(src, dst, same), expected)


def pairs_in_a_plate_of(P):
    """The relational model of ``_model_variant`` with its pair plate of size ``P`` (not ``len(src)``)."""
    N, K, eps = 10, 2, 1e-3

    def model(src, dst, y=None, batch=None):
        with pyro.plate("sticks", K):
            u = pyro.sample("u", dist.Beta(torch.tensor(1.0, dtype=torch.float64), 2.0))
            w = pyro.sample("w", dist.Beta(torch.tensor(2.0, dtype=torch.float64), 2.0))
        beta = stick_breaking_weights(u)
        with pyro.plate("nodes", N):
            pi = pyro.sample("pi", dist.Dirichlet(0.5 * beta))
        tail = torch.cat([w, w.new_full((1,), eps)])
        with pyro.plate("pairs", P, subsample=batch) as d:
            s = pyro.sample("s", dist.Categorical(pi[src[d]]))
            r = pyro.sample("r", dist.Categorical(pi[dst[d]]))
            prob = torch.where(s == r, tail[s], torch.full_like(tail[s], eps))
            pyro.sample("y", dist.Bernoulli(prob), obs=None if y is None else y[d])

    return model


@pytest.mark.parametrize("P, batch", [(30, None), (30, torch.arange(10)), (60, torch.arange(10))])
def test_a_pair_plate_of_another_size_than_the_pairs_names_the_plate_and_the_node_ids(P, batch):
    """``pyro.plate("pairs", 30, subsample=batch)`` over 45 pairs read "role site 's': its probabilities must be the
    memberships pi[src] of site 'pi' with src the pairs' node ids, an integer argument ..." (src is one)."""
    src, dst = torch.triu_indices(10, 10, 1)
    y = (torch.arange(len(src)) % 7 == 0).double()
    with pytest.raises(ModelStructureError, match=rf"pair plate 'pairs' has size {P}, but the node ids its role site "
                                                  r"'s' reads, the model's argument 'src', list 45 pairs.*"
                                                  r"pyro.plate\('pairs', len\(src\), subsample=batch\)"):
        recognize_model(pairs_in_a_plate_of(P), src, dst, y, batch)
    assert recognize_model(pairs_in_a_plate_of(45), src, dst, y, batch).pair_plate == "pairs"


@pytest.mark.parametrize("batch", [None, torch.tensor([0, 50])])
def test_a_pair_plate_larger_than_the_pairs_names_the_plate_its_size_and_the_pairs(batch):
    """``pyro.plate("pairs", 60)`` over 45 pairs, without a batch (or a batch past the pairs), read torch's bare
    "tracing the model ... raised IndexError: index 45 is out of bounds for dimension 0 with size 45"."""
    src, dst = torch.triu_indices(10, 10, 1)
    y = (torch.arange(len(src)) % 7 == 0).double()
    expected = (r"^plate 'pairs' has size 60, but the model's argument 'src', which the model indexes in that plate, "
                r"lists 45 entries: .*pyro.plate\('pairs', len\(src\), subsample=batch\)$")
    with pytest.raises(ModelStructureError, match=expected):
        recognize_model(pairs_in_a_plate_of(60), src, dst, y, batch)
    model = pairs_in_a_plate_of(60)
    pyro.clear_param_store()
    svi = SVI(model, RelationalGuide(model, prefix="large"), ClosedFormOptimizer(), MemoizedELBO())
    with pytest.raises(ModelStructureError, match=expected):
        svi.step(src, dst, y, batch)
