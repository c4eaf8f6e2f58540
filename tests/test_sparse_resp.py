"""Sparse top-L responsibilities (Hughes & Sudderth 2016): exact summaries, the restricted optimum,
monotone memoized objective, moves, the estimator and the CLI."""

import itertools
import json

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.families import SparseResponsibilities, check_sparse_L
from pyro_memo.inference.moves import DeleteMove, make_moves
from pyro_memo.summaries import Summary
from tests.conftest import FAMILY_NAMES, make_data


def assert_same_summary(a, b, rtol=1e-12):
    """Counts, entropies and every statistic agree to ``rtol`` of each tensor's largest entry."""
    pairs = [(a.counts, b.counts), (a.entropy, b.entropy)] + [(a.stats[k], b.stats[k]) for k in b.stats]
    assert a.stats.keys() == b.stats.keys()
    for got, want in pairs:
        scale = float(want.abs().max()) or 1.0
        torch.testing.assert_close(got, want, rtol=rtol, atol=rtol * scale)


def random_sparse(N, K, L, seed):
    """Top-``L`` responsibilities of random log-weights (spread enough that some rows underflow)."""
    g = torch.Generator().manual_seed(seed)
    log_weights = 30.0 * torch.randn(N, K, generator=g, dtype=torch.float64) ** 3
    return SparseResponsibilities.top(log_weights, L), log_weights


# ------------------------------------------------------------------ summaries
@pytest.mark.parametrize("name,seed", [(name, seed) for name in FAMILY_NAMES for seed in range(3)])
def test_sparse_stats_equal_dense_stats_of_the_densified_responsibilities(name, seed):
    x = make_data(name, 40 + 17 * seed, D=3, seed=seed)
    family = pm.get_family(name).from_data(x)
    x = family.check_data(x)
    K, L = (9, 1 + seed) if seed < 2 else (60, 2)  # seed 2: more components than kept entries, so some stay empty
    resp, _ = random_sparse(x.shape[0], K, L, seed)
    sparse = Summary.from_sparse_responsibilities(family, x, resp)
    assert_same_summary(sparse, Summary.from_responsibilities(family, x, resp.dense()))
    if seed == 2:
        assert bool((sparse.counts == 0).any())


def test_sparse_responsibilities_are_a_distribution_on_their_support():
    resp, log_weights = random_sparse(200, 12, 3, seed=4)
    dense = resp.dense()
    assert torch.allclose(dense.sum(1), torch.ones(200, dtype=torch.float64), rtol=0, atol=1e-12)
    assert int((dense > 0).sum(1).max()) <= 3
    top = torch.topk(log_weights, 3).indices
    assert torch.equal(resp.indices, top)


def test_top_L_is_the_best_q_on_L_components():
    """The per-item objective :math:`\\sum_k q_k \\log\\tilde r_k - q_k \\log q_k` of the top-L softmax
    beats the softmax on every other support of L components."""
    g = torch.Generator().manual_seed(0)
    log_weights = 3.0 * torch.randn(6, 7, generator=g, dtype=torch.float64)

    def objective(q):
        return (q * log_weights).sum(1) - torch.special.xlogy(q, q).sum(1)

    best = objective(SparseResponsibilities.top(log_weights, 3).dense())
    for support in itertools.combinations(range(7), 3):
        q = torch.zeros_like(log_weights)
        q[:, support] = torch.softmax(log_weights[:, support], dim=-1)
        assert bool((best >= objective(q) - 1e-12).all())


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_sparse_L_of_K_or_more_is_the_dense_fit_exactly(name):
    x = make_data(name, 300, D=3, seed=1)
    family = pm.get_family(name).from_data(x)
    runs = [pm.MemoizedVB(family, 5, laps=4, tol=0, seed=1, sparse_L=L).fit(x, num_batches=3).elbo_trace
            for L in (None, 5, 9)]
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12)
    np.testing.assert_allclose(runs[2], runs[0], rtol=1e-12)
    # the sparse code path itself, keeping all K, summarises as the dense one
    post = pm.MemoizedVB(family, 5, seed=1).initial_posterior(family.check_data(x))
    x = family.check_data(x)
    dense_resp, dense = post.local_step(x)
    full = post.sparse_responsibilities(x, 5)
    torch.testing.assert_close(full.dense(), dense_resp, rtol=1e-12, atol=1e-14)
    assert_same_summary(Summary.from_sparse_responsibilities(family, x, full), dense)


def test_sparse_local_step_returns_dense_zeros_outside_the_support():
    x = make_data("gauss", 500, D=2, seed=3, clusters=4)
    family = pm.Gaussian.from_data(x)
    post = pm.MemoizedVB(family, 8, seed=0).initial_posterior(family.check_data(x))
    resp, summary = post.local_step(family.check_data(x), sparse_L=2)
    assert resp.shape == (500, 8) and int((resp > 0).sum(1).max()) <= 2
    assert_same_summary(summary, Summary.from_responsibilities(family, family.check_data(x), resp))


# ------------------------------------------------------------- monotonicity
MONOTONE_CASES = [(name, L, seed) for name in FAMILY_NAMES for L in (1, 2, 4) for seed in range(3)]


@pytest.mark.parametrize("name,L,seed", MONOTONE_CASES)
def test_no_batch_step_lowers_the_exact_objective_with_sparse_L(name, L, seed):
    x = make_data(name, 300 + 41 * seed, D=3, seed=seed, clusters=3 + seed)
    family = pm.get_family(name).from_data(x)
    B = (2, 5, 9)[seed]
    exact = seed == 0  # the other seeds: over-relaxed steps (the default), each over one or more batches
    memo = pm.MemoizedVB(family, 8, alpha=0.5 + seed, truncation="direct" if seed == 1 else "nested", laps=5,
                         tol=0, init="random" if seed else "kmeans++", init_items=60, seed=seed,
                         record_batch_elbos=True, sparse_L=L, overrelax=not exact)
    result = memo.fit(x, num_batches=B)
    steps = np.array(result.batch_elbos)
    laps = len(result.elbo_trace) - 1
    assert len(steps) == laps * B + 1 if exact else len(steps) >= laps * min(B, 3) + 1
    assert np.isfinite(steps).all()
    assert np.diff(steps).min() >= -1e-9 * np.abs(steps).max(), np.diff(steps).min()


@pytest.mark.parametrize("seed", range(3))
def test_full_batch_coordinate_steps_never_lower_the_objective_with_sparse_L(seed):
    x = make_data("zm-gauss", 400, D=4, seed=seed, clusters=4)
    family = pm.ZeroMeanGaussian.from_data(x)
    result = pm.FullBatchVB(family, 10, max_iter=8, tol=0, seed=seed, record_steps=True, sparse_L=2).fit(x)
    steps = np.array(result.step_elbos)
    assert np.diff(steps[1:]).min() >= -1e-9 * np.abs(steps).max()


def test_float32_sparse_fit_matches_float64():
    x = make_data("gauss", 800, D=3, seed=2, clusters=4)
    fits = [pm.MemoizedVB(pm.Gaussian.from_data(x, dtype=dtype), 10, laps=6, tol=0, sparse_L=3).fit(x, num_batches=4)
            for dtype in (torch.float64, torch.float32)]
    assert fits[1].posterior.dtype == torch.float32
    assert fits[1].elbo == pytest.approx(fits[0].elbo, rel=1e-4)


# ------------------------------------------------------------------- moves
@pytest.mark.parametrize("name,seed", [(name, seed) for name in FAMILY_NAMES for seed in range(2)])
def test_moves_with_sparse_L_accept_only_exact_gains_and_keep_the_memo_exact(name, seed):
    x = make_data(name, 500, D=3, seed=seed, clusters=2 + seed)
    family = pm.get_family(name).from_data(x)
    moves = make_moves("birth,merge,delete", seed=seed, birth={"fresh_K": 4, "subsample_size": 200})
    result = pm.MemoizedVB(family, 6, laps=6, tol=0, seed=seed, moves=moves, sparse_L=2).fit(x, num_batches=5)
    for gain in result.state.move_gains:
        assert gain["after"] > gain["before"], gain
    cache = result.state.cache
    fresh = cache.recomputed_total()
    torch.testing.assert_close(cache.total.counts, fresh.counts, rtol=1e-9, atol=1e-8)
    assert float(cache.total.counts.sum()) == pytest.approx(len(x), rel=1e-9)
    assert result.elbo == pytest.approx(float(result.posterior.elbo(cache.total)), rel=1e-12)


def test_moves_with_sparse_L_find_separated_clusters_from_one_component():
    x = make_data("gauss", 3000, D=2, seed=11, clusters=4)
    result = pm.MemoizedVB(pm.Gaussian.from_data(x), 1, laps=30, moves="birth,merge,delete", sparse_L=2).fit(
        x, num_batches=6)
    assert sum(log["birth"]["accepted"] for log in result.state.move_log) >= 1
    assert int((result.posterior.expected_weights() > 0.05).sum()) == 4


def test_delete_alternatives_stay_in_the_restricted_family():
    """Items whose surviving mass underflows are reassigned to their top-L survivors, not to all."""
    move = DeleteMove()
    log_joint = torch.randn(50, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    move.sparse_L = 3
    assert int((move.restricted_optimum(log_joint) > 0).sum(1).max()) == 3
    move.sparse_L = None
    torch.testing.assert_close(move.restricted_optimum(log_joint), torch.softmax(log_joint, -1))


# -------------------------------------------------------------- validation
@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "8"])
def test_bad_sparse_L_is_refused(bad):
    with pytest.raises(ValueError, match="sparse_L must be a positive integer"):
        check_sparse_L(bad)
    family = pm.Gaussian.from_data(make_data("gauss", 20, D=2))
    with pytest.raises(ValueError, match="sparse_L must be a positive integer"):
        pm.MemoizedVB(family, 5, sparse_L=bad)
    with pytest.raises(ValueError, match="sparse_L must be a positive integer"):
        pm.DPMixture(n_components=5, sparse_L=bad).fit(make_data("gauss", 20, D=2).numpy())


def test_estimator_fits_with_sparse_L():
    x = make_data("gauss", 600, D=2, seed=4, clusters=3).numpy()
    est = pm.DPMixture(n_components=10, sparse_L=2, random_state=0, max_iter=20).fit(x)
    dense = pm.DPMixture(n_components=10, random_state=0, max_iter=20).fit(x)
    assert np.isfinite(est.elbo_) and est.predict_proba(x).shape == (600, len(est.weights_))
    assert est.elbo_ == pytest.approx(dense.elbo_, rel=1e-2)


# --------------------------------------------------------------------- CLI
@pytest.mark.parametrize("algo", ["memo", "vb"])
def test_cli_sparse_L_fits_and_reports(tmp_path, capsys, algo):
    np.save(tmp_path / "x.npy", make_data("gauss", 400, D=3, seed=0, clusters=3).numpy())
    out = tmp_path / "r.json"
    assert main(["fit", str(tmp_path / "x.npy"), "--algo", algo, "--K", "8", "--laps", "5", "--sparse-L", "2",
                 "--json", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert result["sparse_L"] == 2 and np.isfinite(result["elbo"])
    assert "top-2 sparse responsibilities" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-1"])
def test_cli_bad_sparse_L_is_one_error_line(value, capsys):
    assert main(["fit", "--sparse-L", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyro-memo: error:")
    assert "--sparse-L must be a positive integer" in err[0]


# ------------------------------------------------ the dense log-likelihood
def test_packed_quadratic_forms_equal_the_cholesky_form():
    """The zero-mean Gaussian's float64 expected log-likelihood (one packed matrix product) equals
    the whitened form float32 uses, and the packed products are the upper triangles."""
    from pyro_memo.families.base import packed_outer

    x = make_data("zm-gauss", 300, D=6, seed=2, clusters=4)
    i, j = torch.triu_indices(6, 6)
    assert torch.equal(packed_outer(x), x[:, i] * x[:, j])
    family = pm.ZeroMeanGaussian.from_data(x)
    post = pm.MemoizedVB(family, 5, seed=0).initial_posterior(family.check_data(x)).component
    packed = family.expected_log_lik(x, post)
    whitened = family.to(dtype=torch.float32).expected_log_lik(x.float(), {k: v.float() for k, v in post.items()})
    torch.testing.assert_close(packed.float(), whitened, rtol=1e-5, atol=1e-4)
    chol = torch.linalg.cholesky(post["B"])
    quad = (torch.linalg.solve_triangular(chol, x.T.expand(5, -1, -1), upper=False) ** 2).sum(1).T
    const = packed + 0.5 * post["nu"] * quad  # the per-component constant, the same for every item
    torch.testing.assert_close(const, const[:1].expand_as(const), rtol=1e-10, atol=1e-10 * float(quad.max()))
