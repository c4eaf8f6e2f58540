"""The stochastic HDP relational algorithm (Kim et al. 2013) and stochastic a-MMSB (Gopalan et al. 2012)."""

import numpy as np
import pytest
import torch

from pyro_memo.data.graphs import assortative_graph
from pyro_memo.metrics import nmi
from pyro_memo.posterior.relational import RelationalPosterior
from pyro_memo.relational.stochastic import (
    AMMSBPosterior,
    StochasticAMMSB,
    StochasticRelational,
    prune,
    touch_probability,
)


@pytest.fixture(scope="module")
def easy():
    return assortative_graph(300, 3, alpha=0.01, seed=1)


@pytest.mark.parametrize("cls", [StochasticRelational, StochasticAMMSB])
def test_recovers_the_communities_of_an_easy_graph_and_raises_the_bound(easy, cls):
    graph, _, labels = easy
    fit = cls(K=3, laps=4, kappa=0.6, seed=1).fit(graph, 5)
    assert nmi(labels, fit.posterior.memberships().argmax(1).numpy()) > 0.8
    assert fit.elbo_trace[-1] > fit.elbo_trace[0]


def test_step_sizes_follow_t_plus_delay_to_minus_kappa(easy):
    model = StochasticRelational(K=3, kappa=0.7, delay=4.0, laps=1)
    rates = []
    model.step = lambda state, summary, scale, rate: rates.append(rate)
    model.fit(easy[0], 3)
    assert rates == pytest.approx([(t + 4.0) ** -0.7 for t in (1, 2, 3)])


def test_rho_one_on_the_full_graph_is_the_closed_form_coordinate_update(easy):
    graph = easy[0]
    for cls in (StochasticRelational, StochasticAMMSB):
        model = cls(K=3, laps=1, seed=0)
        source = model.make_source(graph, 1)
        post = model.initial_posterior(source)
        state = model.new_state()
        state.posterior = post
        _, summary = model.fresh_local_step(post, model.read_batch(source, 0))
        model.step(state, summary, 1.0, 1.0)
        _, full = post.local_step(source.edges, torch.ones(graph.num_nodes, dtype=torch.bool), None,
                                  model.nonlink_iters, source.missing)
        exact = post.updated(full, rounds=1) if cls is StochasticRelational else post.updated(full)
        for name in ("theta", "w_a", "w_b") + (("rho", "omega") if cls is StochasticRelational else ()):
            assert torch.allclose(getattr(state.posterior, name), getattr(exact, name), rtol=1e-9, atol=1e-9), name


def test_touch_probability_is_the_fraction_of_pairs_a_random_node_set_touches():
    rng = np.random.default_rng(0)
    N, n = 12, 3
    hits = [len({(i, j) for i in range(N) for j in range(i + 1, N) if i in s or j in s})
            for s in (set(rng.choice(N, n, replace=False)) for _ in range(2000))]
    assert np.mean(hits) / (N * (N - 1) / 2) == pytest.approx(touch_probability(N, n), rel=1e-12)
    assert touch_probability(N, N) == 1.0


def test_pruning_removes_a_community_that_holds_no_nodes(easy):
    graph, _, labels = easy
    m = torch.nn.functional.one_hot(torch.as_tensor(labels), 4).double()  # community 3 holds no node
    # measured: after the first pass the empty community's E[beta] is about 0.08, the occupied ones' >= 0.15
    model = StochasticRelational(K=4, laps=3, seed=0, prune_threshold=0.1)
    state = model.new_state()
    state.posterior = RelationalPosterior.from_memberships(m, scale=1.0)
    post = model.fit(graph, 5, state=state).posterior
    assert post.K == 3
    assert nmi(labels, post.memberships().argmax(1).numpy()) > 0.9
    unpruned = StochasticRelational(K=4, laps=3, seed=0, prune_threshold=0.0)
    state = unpruned.new_state()
    state.posterior = RelationalPosterior.from_memberships(m, scale=1.0)
    assert unpruned.fit(graph, 5, state=state).posterior.K == 4


def test_prune_moves_mass_to_the_tail_and_keeps_the_dirichlets_totals(easy):
    post = RelationalPosterior.from_memberships(torch.full((5, 3), 1 / 3, dtype=torch.float64), gamma=50.0)
    pruned = prune(post, float(post.expected_beta()[1]) + 1e-9)  # drops the communities after the first
    assert pruned.K < post.K
    assert torch.allclose(pruned.theta.sum(1), post.theta.sum(1))
    assert float(pruned.expected_beta().sum()) == pytest.approx(1.0)


def test_ammsb_keeps_K_fixed(easy):
    fit = StochasticAMMSB(K=5, laps=3, seed=0).fit(easy[0], 5)
    assert isinstance(fit.posterior, AMMSBPosterior)
    assert fit.posterior.K == 5 and fit.posterior.theta.shape == (300, 5)
    probs = fit.posterior.link_probability(np.array([[0, 1], [2, 3]]))
    assert probs.shape == (2,) and bool(((probs > 0) & (probs < 1)).all())


@pytest.mark.parametrize("kwargs, word", [({"kappa": 0.5}, "kappa"), ({"kappa": 1.1}, "kappa"),
                                          ({"delay": -1.0}, "delay"), ({"K": 0}, "K"), ({"eps": 0.0}, "eps"),
                                          ({"prune_threshold": 1.0}, "prune_threshold"), ({"init": "x"}, "init")])
def test_bad_settings_raise(kwargs, word):
    with pytest.raises(ValueError, match=word):
        StochasticRelational(**kwargs)


@pytest.mark.parametrize("cls", [StochasticRelational, StochasticAMMSB])
def test_zero_batches_are_refused_as_the_memoized_fit_refuses_them(easy, cls):
    """num_batches=0 was read as 1 (``num_batches or 1``) and fitted the whole graph each step, silently; None
    still means one batch."""
    with pytest.raises(ValueError, match=r"num_batches must be a whole number in \[1, 300\].*got 0"):
        cls(K=2, laps=1).fit(easy[0], 0)
    assert np.isfinite(cls(K=2, laps=1).fit(easy[0], None).elbo_trace).all()


def test_a_non_graph_is_refused():
    with pytest.raises(ValueError, match="Graph"):
        StochasticRelational(K=2, laps=1).fit(np.zeros((3, 2)), 1)


def test_an_ammsb_state_is_saved_loaded_and_resumed(tmp_path):
    """save_state takes a StochasticAMMSB fit's state (as every model's), and load_state gives back an
    AMMSBPosterior the fit goes on from. (Before, save_state failed inside the posterior's state_dict on the sticks
    the a-MMSB does not have: AttributeError: 'NoneType' object has no attribute 'cpu'.)"""
    import pyro_memo as pm

    graph = assortative_graph(40, 3, seed=0)[0]
    full = StochasticAMMSB(K=3, laps=4, seed=1).fit(graph, 3)
    part = StochasticAMMSB(K=3, laps=2, seed=1).fit(graph, 3)
    pm.save_state(tmp_path / "state.pt", part.state)
    state = pm.load_state(tmp_path / "state.pt")
    assert isinstance(state.posterior, AMMSBPosterior) and state.posterior.alpha == part.posterior.alpha
    assert state.posterior.to(dtype=torch.float32).theta.dtype == torch.float32
    resumed = StochasticAMMSB(K=3, laps=4, seed=1).fit(graph, 3, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, full.elbo_trace, rtol=1e-10)


@pytest.mark.parametrize("cls", [StochasticRelational, StochasticAMMSB])
def test_a_dtype_given_by_name_is_read_as_the_memoized_fit_reads_it(cls):
    """dtype="float32" failed in the initialisation with torch's "Invalid device string: 'float32'"
    (MemoizedRelational reads the name)."""
    graph = assortative_graph(40, 3, seed=0)[0]
    fit = cls(K=3, laps=2, seed=0, dtype="float32").fit(graph, 2)
    assert fit.posterior.theta.dtype == torch.float32
    resumed = cls(K=3, laps=3, seed=0, dtype="float32").fit(graph, 2, state=fit.state)
    assert len(resumed.elbo_trace) == 3
