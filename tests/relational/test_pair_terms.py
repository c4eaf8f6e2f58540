"""The assortative pair terms in O((E + N) K) against a brute-force O(N^2 K^2) evaluation
(:mod:`pyro_memo.posterior.relational_pairs`)."""

import itertools
import math

import numpy as np
import pytest
import torch

from pyro_memo.posterior.relational_pairs import link_roles, nonlink_factors, pair_summary, pair_terms


def random_case(seed, N=None, K=None):
    rng = np.random.default_rng(seed)
    N = N or int(rng.integers(2, 11))
    K = K or int(rng.integers(1, 5))
    pairs = [(i, j) for i in range(N) for j in range(i + 1, N)]
    links = [p for p in pairs if rng.random() < rng.uniform(0.1, 0.7)]
    edges = torch.tensor(links, dtype=torch.long).reshape(-1, 2)

    def globals_():
        e_log_pi = torch.as_tensor(np.log(rng.dirichlet(np.full(K + 1, 0.7), size=N)) - rng.uniform(0, 1, (N, 1)))
        a, b = rng.uniform(0.5, 5, K), rng.uniform(0.5, 5, K)
        e_log_w = torch.digamma(torch.as_tensor(a)) - torch.digamma(torch.as_tensor(a + b))
        e_log_1mw = torch.digamma(torch.as_tensor(b)) - torch.digamma(torch.as_tensor(a + b))
        return e_log_pi[:, :K], e_log_w, e_log_1mw

    eps = float(rng.choice([1e-4, 0.01, 0.2]))
    sources = torch.as_tensor(rng.random(N) < 0.6)
    return N, K, edges, sources, globals_(), globals_(), eps


def brute_force(N, K, edges, sources, fitted, scored, eps, factors=None, missing=()):
    """sum over pairs i < j with a source i of E_q[log p(s, r, y | pi, w)] - E_q[log q(s, r)], with q from
    the globals ``fitted`` (structured for links; for non-links the product of the factors, default the
    node weights) and the expectations under ``scored``."""
    pi_q, w_q, _ = fitted
    pi, e_log_w, e_log_1mw = scored
    linked = {tuple(e) for e in edges.tolist()}
    m, m_bar = factors if factors is not None else (torch.softmax(pi_q, -1),) * 2
    total = 0.0
    skip = {tuple(p) for p in np.asarray(missing).tolist()}
    for i, j in itertools.combinations(range(N), 2):
        if not sources[i] or (i, j) in skip:
            continue
        y = (i, j) in linked
        if y:
            g = torch.full((K, K), math.log(eps), dtype=torch.float64)
            g.diagonal().copy_(w_q)
            logits = pi_q[i][:, None] + pi_q[j][None, :] + g
            q = torch.softmax(logits.reshape(-1), 0).reshape(K, K)
            lik = torch.full((K, K), math.log(eps), dtype=torch.float64)
            lik.diagonal().copy_(e_log_w)
        else:
            q = m[i][:, None] * m_bar[j][None, :]
            lik = torch.full((K, K), math.log(1 - eps), dtype=torch.float64)
            lik.diagonal().copy_(e_log_1mw)
        total += float((q * (pi[i][:, None] + pi[j][None, :] + lik)).sum() - torch.special.xlogy(q, q).sum())
    return total


def terms(summary, scored, eps):
    pi, e_log_w, e_log_1mw = scored
    return float(pair_terms(summary, pi, e_log_w, e_log_1mw, math.log(eps), math.log1p(-eps)))


@pytest.mark.parametrize("seed", range(40))
def test_pair_terms_equal_the_brute_force_sum(seed):
    N, K, edges, sources, fitted, scored, eps = random_case(seed)
    summary = pair_summary(fitted[0], edges, sources, fitted[1], math.log(eps))
    for at in (fitted, scored):  # at the summary's own globals and at later ones (the memo's case)
        exact = brute_force(N, K, edges, sources, fitted, at, eps)
        assert terms(summary, at, eps) == pytest.approx(exact, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_summaries_add_over_a_partition_of_the_sources(seed):
    N, K, edges, _, fitted, scored, eps = random_case(100 + seed)
    rng = np.random.default_rng(seed)
    part = torch.as_tensor(rng.integers(0, 3, N))
    parts = [pair_summary(fitted[0], edges, part == b, fitted[1], math.log(eps)) for b in range(3)]
    whole = pair_summary(fitted[0], edges, torch.ones(N, dtype=torch.bool), fitted[1], math.log(eps))
    total = parts[0] + parts[1] + parts[2]
    torch.testing.assert_close(total.role_counts, whole.role_counts, rtol=1e-12, atol=1e-12)
    assert float(total.num_links) == len(edges) and float(total.num_nonlinks) == N * (N - 1) / 2 - len(edges)
    assert total.num_sources == N
    # every pair gives each of its two nodes one role
    torch.testing.assert_close(whole.role_counts.sum(0), torch.full((N,), N - 1.0, dtype=torch.float64))
    assert terms(total, scored, eps) == pytest.approx(terms(whole, scored, eps), rel=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_the_structured_link_factor_is_the_pairs_optimum(seed):
    """For one linked pair, any other joint q(s, r) gives a lower pair term than eq. R1's."""
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6))
    pi_i, pi_j = (torch.as_tensor(rng.normal(size=(1, K))) for _ in range(2))
    e_log_w, eps = torch.as_tensor(-rng.uniform(0.1, 3, K)), 1e-3
    q_src, q_dst, diag, entropy = link_roles(pi_i, pi_j, e_log_w, math.log(eps))
    lik = torch.full((K, K), math.log(eps), dtype=torch.float64)
    lik.diagonal().copy_(e_log_w)
    score = pi_i[0][:, None] + pi_j[0][None, :] + lik

    def value(q):
        return float((q * score).sum() - torch.special.xlogy(q, q).sum())

    best = float((q_src[0] * pi_i[0]).sum() + (q_dst[0] * pi_j[0]).sum() + (diag[0] * e_log_w).sum()
                 + (1 - diag[0].sum()) * math.log(eps) + entropy[0])
    assert best == pytest.approx(float(torch.logsumexp(score.reshape(-1), 0)), rel=1e-12)
    for _ in range(20):
        other = torch.as_tensor(rng.dirichlet(np.ones(K * K))).reshape(K, K)
        assert value(other) < best + 1e-12


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("dtype, eps", [(torch.float32, 1e-40), (torch.float32, 1e-30), (torch.float64, 1e-310)])
def test_the_link_factor_of_a_tiny_eps_is_finite_and_exact(seed, dtype, eps):
    """e^{E log w_k} / eps overflows float32 below eps = 1e-38 (float64 below 1e-308): the factor is formed
    over its largest term, so it stays finite, and with the off-diagonal mass negligible its marginals and the
    pair's optimal term (eq. R1) are those of the diagonal alone."""
    rng = np.random.default_rng(seed)
    K, L = int(rng.integers(1, 6)), 7
    pi_i, pi_j = (torch.as_tensor(rng.normal(size=(L, K))) for _ in range(2))
    e_log_w = torch.as_tensor(-rng.uniform(0.1, 3, K))
    small = link_roles(*(t.to(dtype) for t in (pi_i, pi_j, e_log_w)), math.log(eps))
    assert all(bool(torch.isfinite(t).all()) for t in small)
    q_src, q_dst, diag, entropy = (t.double() for t in small)
    torch.testing.assert_close(q_src, diag)  # all the mass on the diagonal: s = r
    torch.testing.assert_close(q_dst, diag)
    score = pi_i + pi_j + e_log_w  # q(s = r = k) ∝ exp(E log pi_ik + E log pi_jk + E log w_k)
    torch.testing.assert_close(diag, torch.softmax(score, -1), rtol=1e-5, atol=1e-6)
    # the pair's optimal term is log Z = logsumexp over the diagonal once the off-diagonal mass vanishes
    best = (q_src * pi_i).sum(-1) + (q_dst * pi_j).sum(-1) + (diag * e_log_w).sum(-1) + entropy
    torch.testing.assert_close(best, torch.logsumexp(score, -1), rtol=1e-5, atol=1e-4)


def random_factors(rng, N, K):
    return tuple(torch.as_tensor(rng.dirichlet(np.full(K, 0.5), size=N)) for _ in range(2))


@pytest.mark.parametrize("seed", range(20))
def test_pair_terms_with_free_nonlink_factors_equal_the_brute_force_sum(seed):
    N, K, edges, sources, fitted, scored, eps = random_case(200 + seed)
    factors = random_factors(np.random.default_rng(seed), N, K)
    summary = pair_summary(fitted[0], edges, sources, fitted[1], math.log(eps), factors)
    exact = brute_force(N, K, edges, sources, fitted, scored, eps, factors)
    assert terms(summary, scored, eps) == pytest.approx(exact, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_nonlink_factor_rounds_never_lower_the_batch_terms_and_end_at_block_optima(seed):
    N, K, edges, sources, _, scored, eps = random_case(300 + seed, N=int(6 + seed % 5), K=int(2 + seed % 3))
    pi, e_log_w, e_log_1mw = scored
    rng = np.random.default_rng(seed)
    factors = random_factors(rng, N, K)

    def value(f):
        return terms(pair_summary(pi, edges, sources, e_log_w, math.log(eps), f), scored, eps)

    values = [value(factors)]
    for _ in range(6):
        factors = nonlink_factors(pi, edges, sources, e_log_w, e_log_1mw, math.log1p(-eps), iters=1, start=factors)
        values.append(value(factors))
    assert all(b >= a - 1e-10 * abs(a) for a, b in zip(values, values[1:], strict=False))
    # the last half-step set m_bar to its exact optimum given m: any other m_bar is worse
    m, m_bar = factors
    for _ in range(10):
        other = torch.as_tensor(rng.dirichlet(np.ones(K), size=N))
        assert value((m, other)) <= values[-1] + 1e-10 * abs(values[-1])


@pytest.mark.parametrize("seed", range(15))
def test_missing_pairs_are_left_out_of_every_term(seed):
    N, K, edges, sources, fitted, scored, eps = random_case(400 + seed)
    rng = np.random.default_rng(seed)
    linked = {tuple(e) for e in edges.tolist()}
    free = [(i, j) for i in range(N) for j in range(i + 1, N) if (i, j) not in linked]
    pick = rng.permutation(len(free))[: max(1, len(free) // 4)] if free else []
    missing = torch.tensor([free[k] for k in pick], dtype=torch.long).reshape(-1, 2)
    pi, e_log_w, e_log_1mw = fitted
    factors = nonlink_factors(pi, edges, sources, e_log_w, e_log_1mw, math.log1p(-eps), iters=3, missing=missing)
    summary = pair_summary(pi, edges, sources, e_log_w, math.log(eps), factors, missing)
    exact = brute_force(N, K, edges, sources, fitted, scored, eps, factors, missing)
    assert terms(summary, scored, eps) == pytest.approx(exact, rel=1e-9, abs=1e-9)
    mine = int(sum(bool(sources[i]) for i, _ in missing.tolist()))
    expected = sum(bool(sources[i]) for i in range(N) for _ in range(i + 1, N)) - int(sources[edges[:, 0]].sum()) - mine
    assert float(summary.num_nonlinks) == expected
