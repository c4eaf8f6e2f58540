"""The background link probability learnt by empirical Bayes (eq. E1 of
:mod:`pyro_memo.posterior.relational`): the M-step is the exact maximiser of the bound over eps, no
memoized step lowers the bound with it, and on a synthetic graph it recovers the generating eps."""

import math

import numpy as np
import pytest
import torch

from pyro_memo.data import Graph, assortative_graph
from pyro_memo.posterior.relational import optimal_eps
from pyro_memo.relational import MemoizedRelational, NodeBatches


def random_graph(seed, N=30, K=3, background=0.05):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, N)
    pairs = np.array([(i, j) for i in range(N) for j in range(i + 1, N)])
    p = np.where(labels[pairs[:, 0]] == labels[pairs[:, 1]], 0.5, background)
    kind = rng.random(len(pairs))
    return Graph(pairs[kind < p], N, missing=pairs[(kind >= p) & (kind > 0.95)])


def with_eps(post, eps):
    moved = post.with_globals(post.theta, post.rho, post.omega, post.w_a, post.w_b)
    moved.eps = eps
    return moved


@pytest.mark.parametrize("nonlinks", ["tied", "free"])
@pytest.mark.parametrize("seed", range(6))
def test_the_learnt_eps_maximises_the_bound_given_everything_else(seed, nonlinks):
    graph = random_graph(seed)
    driver = MemoizedRelational(K=3, laps=3, tol=0, seed=seed, nonlinks=nonlinks, learn_eps=True,
                                eps=float(np.random.default_rng(seed).choice([1e-4, 0.3])))
    fit = driver.fit(graph, 3)
    post, total = fit.posterior, fit.state.cache.total
    best = float(post.elbo(total))
    assert 0 < post.eps < 1 and post.learn_eps
    for factor in (0.5, 0.9, 1.1, 2.0):  # any other eps, all else held, gives a lower bound
        assert float(with_eps(post, post.eps * factor).elbo(total)) < best
    # and it is A / (A + B) of the summaries: the step is the closed form, not a search
    if nonlinks == "free":
        a, b = total.num_links - total.link_diag.sum(), total.num_nonlinks - total.nonlink_diag.sum()
        assert post.eps == pytest.approx(optimal_eps(a, b), rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("nonlinks", ["tied", "free"])
@pytest.mark.parametrize("seed", range(6))
def test_no_memoized_step_lowers_the_bound_while_eps_is_learnt(seed, nonlinks):
    graph = random_graph(100 + seed, N=24 + 3 * seed)
    driver = MemoizedRelational(K=2 + seed % 3, laps=12, tol=0, seed=seed, nonlinks=nonlinks, learn_eps=True,
                                record_batch_elbos=True, moves="birth,merge,delete" if seed % 2 else ())
    fit = driver.fit(graph, 2 + seed % 2)
    trace = np.array(fit.elbo_trace)
    assert np.all(np.diff(trace[1:]) >= -1e-9 * np.abs(trace[1:-1]))
    assert fit.posterior.eps != pytest.approx(1e-4)  # it moved from its start


@pytest.mark.slow
def test_the_learnt_eps_recovers_the_generating_background_probability():
    graph, _, _ = assortative_graph(600, 4, alpha=0.02, link_range=(0.2, 0.4), epsilon=0.01, seed=3)
    fit = MemoizedRelational(K=4, laps=40, seed=0, learn_eps=True).fit(graph, 3)
    assert fit.posterior.eps == pytest.approx(0.01, rel=0.15)
    fixed = MemoizedRelational(K=4, laps=40, seed=0).fit(graph, 3)
    assert fit.elbo_trace[-1] > fixed.elbo_trace[-1]  # the bound (a lower bound of the evidence) prefers it


def test_checkpoints_keep_the_learnt_eps():
    post = MemoizedRelational(K=2, laps=3, seed=0, learn_eps=True).fit(random_graph(7), 2).posterior
    again = type(post).from_state_dict(post.state_dict())
    assert again.learn_eps and again.eps == post.eps
    assert math.isfinite(float(again.elbo(MemoizedRelational(K=2, laps=1, seed=0).fit(
        NodeBatches(random_graph(7), [np.arange(30)]), posterior=again).state.cache.total)))
    assert optimal_eps(0.0, 0.0) > 0 and optimal_eps(5.0, 0.0) < 1
    torch.testing.assert_close(torch.tensor(optimal_eps(3.0, 7.0)), torch.tensor(0.3))


@pytest.mark.parametrize("nonlinks", ["tied", "free"])
@pytest.mark.parametrize("seed", range(4))
def test_hyperparameters_learnt_from_a_settled_fit_never_lower_its_bound(seed, nonlinks):
    """``learning()`` keeps the globals and switches on alpha ~ Gamma and eps learning; the fit continued
    from it (the harness's ``memo-eb``) raises its own bound at every lap and ends with both learnt."""
    graph = random_graph(seed)
    fixed = MemoizedRelational(K=3, laps=4, tol=0, seed=seed, nonlinks=nonlinks).fit(graph, 3).posterior
    start = fixed.learning(alpha_prior=(1.0, 1.0), learn_eps=True)
    assert start.learn_eps and not fixed.learn_eps and float(start.alpha) == 1.0 and type(fixed.alpha) is float
    assert torch.equal(start.theta, fixed.theta) and torch.equal(start.w_a, fixed.w_a)
    driver = MemoizedRelational(K=3, laps=6, tol=0, seed=seed, nonlinks=nonlinks, learn_eps=True,
                                alpha_prior=(1.0, 1.0))
    fit = driver.fit(graph, 3, posterior=start)
    trace = np.array(fit.state.elbo_trace)
    assert np.diff(trace).min() >= -1e-9 * np.abs(trace).max(), np.diff(trace)
    assert fit.posterior.alpha.q != start.alpha.q and fit.posterior.eps != fixed.eps


@pytest.mark.parametrize("value", ["False", "no", 0, 1, None])
def test_learn_eps_must_be_a_bool(value):
    """MemoizedRelational(learn_eps="False") learnt eps (bool("False") is True): on random_graph(0) in 5 laps eps
    moved from 1e-4 to 9.16e-5 without a word; RelationalPosterior.learning(learn_eps="no") switched it on
    alike. Both now refuse anything but True or False, naming learn_eps (as HDPCommunities does)."""
    with pytest.raises(ValueError, match="learn_eps must be True or False"):
        MemoizedRelational(K=2, learn_eps=value)
    post = MemoizedRelational(K=2, laps=2, seed=0).fit(random_graph(0), 2).posterior
    with pytest.raises(ValueError, match="learn_eps must be True or False"):
        post.learning(learn_eps=value)
    assert not post.learning().learn_eps and MemoizedRelational(learn_eps=np.bool_(True)).learn_eps
