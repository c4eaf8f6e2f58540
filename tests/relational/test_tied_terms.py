"""The relational family whose non-linked roles follow the memberships
(:mod:`pyro_memo.posterior.relational_tied`): its O((E + M + N) K) non-linked terms equal a pair-by-pair
sum and a Monte Carlo estimate of their definition, the memberships' ascent direction is the natural
gradient, and no global step lowers the exact bound."""

import itertools
import math

import numpy as np
import pytest
import torch

from pyro_memo.allocation.hdp_sticks import expected_beta, prior_sticks
from pyro_memo.posterior.relational_tied import (
    TiedRelationalPosterior,
    _ascent_direction,
    graph_pairs,
    membership_objective,
    nonlink_diag,
    tied_nonlink_terms,
)


def random_case(seed):
    rng = np.random.default_rng(seed)
    N, K = int(rng.integers(3, 11)), int(rng.integers(1, 5))
    pairs = [(i, j) for i in range(N) for j in range(i + 1, N)]
    kind = rng.choice(3, size=len(pairs), p=[0.5, 0.35, 0.15])  # non-link, link, unobserved
    edges = torch.tensor([p for p, c in zip(pairs, kind, strict=True) if c == 1], dtype=torch.long).reshape(-1, 2)
    missing = torch.tensor([p for p, c in zip(pairs, kind, strict=True) if c == 2], dtype=torch.long).reshape(-1, 2)
    theta = torch.as_tensor(rng.uniform(0.3, 6.0, (N, K + 1)))
    a, b = torch.as_tensor(rng.uniform(0.5, 5, K)), torch.as_tensor(rng.uniform(0.5, 5, K))
    eps = float(rng.choice([1e-4, 0.01, 0.2]))
    return N, K, edges, missing, theta, a, b, eps


def nonlinked(N, edges, missing):
    out = {tuple(p) for p in edges.tolist()} | {tuple(p) for p in missing.tolist()}
    return [(i, j) for i, j in itertools.combinations(range(N), 2) if (i, j) not in out]


@pytest.mark.parametrize("seed", range(30))
def test_nonlinked_terms_equal_the_pair_by_pair_sum(seed):
    N, K, edges, missing, theta, a, b, eps = random_case(seed)
    e_log_1mw = torch.digamma(b) - torch.digamma(a + b)
    pairs = graph_pairs(edges, missing, N)
    e = theta[:, :K] / theta[:, :K].sum(1, keepdim=True)
    lam = torch.digamma(theta[:, :K].sum(1)) - torch.digamma(theta.sum(1))
    total, diag = 0.0, torch.zeros(K, dtype=torch.float64)
    for i, j in nonlinked(N, edges, missing):  # eq. T1, pair by pair
        same = e[i] * e[j]
        total += float((same * e_log_1mw).sum() + (1 - same.sum()) * math.log1p(-eps) + lam[i] + lam[j])
        diag += same
    assert float(tied_nonlink_terms(theta, K, pairs, e_log_1mw, math.log1p(-eps))) == pytest.approx(
        total, rel=1e-9, abs=1e-9)
    torch.testing.assert_close(nonlink_diag(theta, K, pairs), diag, rtol=1e-9, atol=1e-9)
    assert float(pairs.nonlinks.sum()) == 2 * len(nonlinked(N, edges, missing))


@pytest.mark.parametrize("seed", range(4))
def test_nonlinked_terms_agree_with_monte_carlo_of_their_definition(seed):
    """E over q(pi) q(w) of log p(y = 0 | s, r, w) + log p(s, r | pi) - log q(s, r | pi), with roles
    summed exactly under q(s, r | pi) = pi~_i (x) pi~_j: no Dirichlet identity is assumed."""
    N, K, edges, missing, theta, a, b, eps = random_case(200 + seed)
    gen = torch.Generator().manual_seed(seed)
    S = 200_000
    pi = torch._standard_gamma(theta.expand(S, *theta.shape).contiguous(), generator=gen)
    pi = pi / pi.sum(-1, keepdim=True)
    w = torch.distributions.Beta(a, b).sample((S,))
    tilde = pi[..., :K] / pi[..., :K].sum(-1, keepdim=True)
    log_keep = torch.log1p(-pi[..., K])  # log p(s | pi) - log q(s | pi) on explicit roles
    values = torch.zeros(S, dtype=torch.float64)
    for i, j in nonlinked(N, edges, missing):
        same = tilde[:, i] * tilde[:, j]
        values += (same * torch.log1p(-w)).sum(-1) + (1 - same.sum(-1)) * math.log1p(-eps) + log_keep[:, i] \
            + log_keep[:, j]
    e_log_1mw = torch.digamma(b) - torch.digamma(a + b)
    exact = float(tied_nonlink_terms(theta, K, graph_pairs(edges, missing, N), e_log_1mw, math.log1p(-eps)))
    se = float(values.std()) / math.sqrt(S)
    assert abs(float(values.mean()) - exact) < 4 * se + 1e-12


@pytest.mark.parametrize("seed", range(10))
def test_the_ascent_direction_is_the_natural_gradient(seed):
    N, K, edges, missing, theta, a, b, eps = random_case(300 + seed)
    pairs = graph_pairs(edges, missing, N)
    rng = np.random.default_rng(seed)
    roles = torch.as_tensor(rng.uniform(0, 3, (N, K)))
    rho, omega = prior_sticks(K, 2.0)
    alpha, gamma = float(rng.uniform(0.5, 3)), 2.0
    e_log_1mw, log_1meps = torch.digamma(b) - torch.digamma(a + b), math.log1p(-eps)
    x = theta.clone().requires_grad_(True)
    objective = membership_objective(x, roles, pairs, e_log_1mw, log_1meps, rho, omega, alpha, gamma)
    grad, = torch.autograd.grad(objective, x)
    step = _ascent_direction(theta, alpha * expected_beta(rho), roles, pairs, e_log_1mw - log_1meps) - theta
    t0 = theta.sum(1, keepdim=True)
    fisher_step = torch.polygamma(1, theta) * step - torch.polygamma(1, t0) * step.sum(1, keepdim=True)
    torch.testing.assert_close(fisher_step, grad, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_no_global_step_lowers_the_bound(seed):
    N, K, edges, missing, theta, a, b, eps = random_case(400 + seed)
    rho, omega = prior_sticks(K, 3.0)
    post = TiedRelationalPosterior(theta, rho, omega, a, b, 1.5, 3.0, (1.0, 1.0), eps, graph_pairs(edges, missing, N))
    sources = torch.ones(N, dtype=torch.bool)
    for _ in range(3):
        _, summary = post.local_step(edges, sources)
        before = float(post.elbo(summary))
        post = post.updated(summary)
        after = float(post.elbo(summary))
        assert after >= before - 1e-9 * abs(before)
    assert bool((post.theta > 0).all())
