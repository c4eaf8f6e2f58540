"""Sparse top-L responsibilities in the HDP (Hughes & Sudderth 2016): ``L >= K`` is the dense fit
exactly, sparse summaries equal those of the densified responsibilities, the memoized bound never
falls, the final Dirichlets are the restricted optimum, moves, the estimator and the CLI."""

import json

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.families import SparseResponsibilities
from pyro_memo.posterior.hdp import expected_log_dirichlet
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP, TopicBirthMove
from tests.engine.test_hdp_any_family import gaussian_groups
from tests.topics.test_memoized_hdp import random_corpus
from tests.topics.test_topic_merge import assert_moves_kept_the_memo_exact


def fitted_topics(seed, K=8):
    """A corpus and globals after two dense laps (spread enough that top-L drops real mass)."""
    corpus = random_corpus(seed, num_docs=40)
    return corpus, MemoizedHDP(K=K, laps=2, tol=0, seed=seed).fit(corpus, 2).posterior


def local_bound(post, tokens, num_docs, resp, counts, theta):
    """The bound of the corpus under ``post`` for local parameters ``resp`` (dense) and ``theta``."""
    doc, word, count = tokens
    summary = post.summarize(doc, word, count, resp, theta, expected_log_dirichlet(theta), counts)
    return float(post.elbo(summary))


def optimal_theta(post, counts):
    """:math:`\\theta_d = \\alpha E[\\beta] + N_d` with the tail's share last."""
    prior = post.alpha * post.expected_beta()
    return torch.cat([counts + prior[:-1], prior[-1:].expand(counts.shape[0], 1)], 1)


# ------------------------------------------------------------ L >= K is dense
@pytest.mark.parametrize("seed", range(3))
def test_sparse_L_of_K_or_more_is_the_dense_fit_exactly(seed):
    corpus = random_corpus(seed)
    traces = [MemoizedHDP(K=6, laps=4, tol=0, seed=seed, sparse_L=L).fit(corpus, 3).elbo_trace
              for L in (None, 6, 11)]
    assert traces[1] == traces[0] and traces[2] == traces[0]
    corpus, post = fitted_topics(seed)
    doc, word, count = corpus.tokens()
    dense = post.local_step(doc, word, count, corpus.num_docs)
    full = post.local_step(doc, word, count, corpus.num_docs, sparse_L=post.K)
    assert torch.equal(dense[0], full[0]) and torch.equal(dense[1], full[1]) and dense[3] == full[3]


def test_an_hdp_mixture_with_sparse_L_of_K_is_the_dense_fit_exactly():
    groups, _ = gaussian_groups(1, num_groups=16)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    traces = [MemoizedHDP(K=5, laps=3, tol=0, seed=1, family=family, sparse_L=L).fit(groups, 2).elbo_trace
              for L in (None, 5)]
    assert traces[1] == traces[0]


# ---------------------------------------------------------------- summaries
def test_sparse_tables_and_weighted_entropy_equal_their_dense_forms():
    g = torch.Generator().manual_seed(0)
    weights = torch.rand(50, 7, generator=g, dtype=torch.float64) ** 4
    resp = SparseResponsibilities.top_weights(weights, 3)
    dense = resp.dense()
    torch.testing.assert_close(dense.sum(1), torch.ones(50, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(resp.indices, torch.topk(weights, 3).indices, rtol=0, atol=0)
    count = torch.rand(50, generator=g, dtype=torch.float64) * 5
    rows = torch.randint(4, (50,), generator=g)
    want = torch.zeros(4, 7, dtype=torch.float64).index_add_(0, rows, dense * count[:, None])
    torch.testing.assert_close(resp.scaled(count).table(rows, 4), want, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(resp.entropy(count), -(count[:, None] * torch.special.xlogy(dense, dense)).sum(0),
                               rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("seed,L", [(seed, L) for seed in range(3) for L in (1, 2, 4)])
def test_topic_summaries_equal_those_of_the_densified_responsibilities(seed, L):
    corpus, post = fitted_topics(seed)
    doc, word, count = corpus.tokens()
    resp, counts, summary, _ = post.local_step(doc, word, count, corpus.num_docs, sparse_L=L)
    assert int((resp > 0).sum(1).max()) <= L
    torch.testing.assert_close(resp.sum(1), torch.ones_like(count), rtol=0, atol=1e-12)
    torch.testing.assert_close(counts, torch.zeros_like(counts).index_add_(0, doc, resp * count[:, None]))
    theta = optimal_theta(post, counts)
    dense = post.summarize(doc, word, count, resp, theta, expected_log_dirichlet(theta), counts)
    for name in ("word_counts", "entropy", "sum_log_pi", "doc_term"):
        torch.testing.assert_close(getattr(summary, name), getattr(dense, name), rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("L", [1, 2])
def test_family_summaries_equal_those_of_the_densified_responsibilities(L):
    groups, _ = gaussian_groups(3, num_groups=12)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    post = MemoizedHDP(K=6, laps=2, tol=0, seed=3, family=family).fit(groups, 2).posterior
    x = family.check_data(torch.as_tensor(np.concatenate(groups)))
    doc = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor([len(g) for g in groups]))
    ones = torch.ones(len(x), dtype=x.dtype)
    resp, counts, summary, _ = post.local_step(doc, x, ones, len(groups), sparse_L=L)
    assert int((resp > 0).sum(1).max()) <= L
    theta = optimal_theta(post, counts)
    dense = post.summarize(doc, x, ones, resp, theta, expected_log_dirichlet(theta), counts)
    torch.testing.assert_close(summary.counts, dense.counts, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(summary.entropy, dense.entropy, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(summary.doc_term, dense.doc_term, rtol=1e-12, atol=1e-10)
    for name in dense.stats:
        scale = float(dense.stats[name].abs().max())
        torch.testing.assert_close(summary.stats[name], dense.stats[name], rtol=1e-12, atol=1e-12 * scale)


# ------------------------------------------------------------- monotonicity
CASES = [(seed, B, K, L) for seed in range(5) for B, K, L in ((1, 4, 1), (3, 8, 2), (6, 12, 3))]


@pytest.mark.parametrize("seed,B,K,L", CASES)
def test_no_memoized_step_lowers_the_bound_with_sparse_L(seed, B, K, L):
    corpus = random_corpus(seed + 10)
    B = min(B, corpus.num_docs)
    fit = MemoizedHDP(K=K, alpha=0.3 + seed * 0.2, gamma=1 + 2 * seed, laps=6, tol=0, seed=seed, local_iters=30,
                      local_restart=bool(seed % 2), record_batch_elbos=True, sparse_L=L).fit(corpus, B)
    steps = np.asarray(fit.batch_elbos)
    assert len(steps) >= 5 * B and np.isfinite(steps).all()
    assert np.all(np.diff(steps) >= -1e-9 * np.abs(steps[1:]))
    cache = fit.state.cache
    assert float(cache.total.word_counts.sum()) == pytest.approx(corpus.num_tokens, rel=1e-10)
    assert fit.elbo == pytest.approx(float(fit.posterior.elbo(cache.total)), rel=1e-12)


@pytest.mark.parametrize("seed", range(2))
def test_an_hdp_mixture_bound_never_falls_with_sparse_L(seed):
    groups, _ = gaussian_groups(seed, num_groups=20)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    fit = MemoizedHDP(K=8, laps=5, tol=0, seed=seed, family=family, record_batch_elbos=True,
                      sparse_L=2).fit(groups, 3)
    steps = np.asarray(fit.batch_elbos)
    assert np.all(np.diff(steps) >= -1e-9 * np.abs(steps[1:]))
    assert float(fit.state.cache.total.counts.sum()) == pytest.approx(sum(len(g) for g in groups), rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_each_sparse_local_iteration_raises_the_bound(seed):
    corpus, post = fitted_topics(seed)
    doc, word, count = corpus.tokens()
    values, counts = [], None
    for _ in range(12):  # one coordinate sweep per call, warm-started from the last
        _, counts, summary, _ = post.local_step(doc, word, count, corpus.num_docs, init_counts=counts, max_iter=1,
                                                sparse_L=2)
        values.append(float(post.elbo(summary)))
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))


# ------------------------------------------------- the restricted optimum
@pytest.mark.parametrize("seed", range(3))
def test_the_final_dirichlets_are_optimal_for_the_sparse_responsibilities(seed):
    corpus, post = fitted_topics(seed)
    tokens = corpus.tokens()
    resp, counts, summary, _ = post.local_step(*tokens, corpus.num_docs, sparse_L=2)
    theta = optimal_theta(post, counts)
    best = local_bound(post, tokens, corpus.num_docs, resp, counts, theta)
    assert best == pytest.approx(float(post.elbo(summary)), rel=1e-12)
    g = torch.Generator().manual_seed(seed)
    for scale in (1e-3, 1e-2, 0.1):
        noise = torch.exp(scale * torch.randn(theta.shape, generator=g, dtype=theta.dtype))
        assert local_bound(post, tokens, corpus.num_docs, resp, counts, theta * noise) < best
    # and the responsibilities are the best on two topics given those Dirichlets: another support is worse
    doc = tokens[0]
    e_log_pi = expected_log_dirichlet(theta)[:, :-1]
    log_w = torch.log(post.item_likelihoods(tokens[1])) + e_log_pi[doc]
    second = torch.topk(log_w, 3).indices[:, 1:]  # the 2nd and 3rd largest instead of the 1st and 2nd
    other = torch.zeros_like(resp).scatter_(1, second, torch.softmax(log_w.gather(1, second), 1))
    other_counts = torch.zeros_like(counts).index_add_(0, doc, other * tokens[2][:, None])
    assert local_bound(post, tokens, corpus.num_docs, other, other_counts, theta) < best


# -------------------------------------------------------------------- moves
@pytest.mark.parametrize("seed", range(4))
def test_moves_with_sparse_L_accept_only_exact_gains_and_keep_the_memo_exact(seed):
    corpus = random_corpus(seed)
    fit = MemoizedHDP(K=3, laps=8, tol=0, seed=seed, sparse_L=2, record_batch_elbos=True,
                      moves=[TopicBirthMove(num_new=2, min_tokens=5), "merge", "delete"]).fit(corpus, 1 + seed % 3)
    assert all(set(lap) == {"birth", "merge", "delete"} for lap in fit.state.move_log)
    assert_moves_kept_the_memo_exact(fit, corpus)


def test_births_with_sparse_L_find_more_topics_on_bars():
    corpus, _, _ = bars_corpus(200, 80, alpha=0.2, seed=4)
    fit = MemoizedHDP(K=2, laps=8, seed=0, moves="birth,merge,delete", sparse_L=2).fit(corpus, 2)
    assert sum(lap["birth"]["accepted"] for lap in fit.state.move_log) >= 2
    assert fit.posterior.K > 4
    assert_moves_kept_the_memo_exact(fit, corpus)


# ---------------------------------------------------- estimator, validation
def test_the_estimator_fits_with_sparse_L():
    X = bars_corpus(60, 30, seed=2)[0].to_dense()
    sparse = pm.HDPTopics(n_components=6, sparse_L=2, n_batches=2, max_iter=5, random_state=0).fit(X)
    dense = pm.HDPTopics(n_components=6, n_batches=2, max_iter=5, random_state=0).fit(X)
    assert sparse.get_params()["sparse_L"] == 2
    assert np.isfinite(sparse.bound_) and sparse.transform(X).shape == (60, sparse.n_components_)
    assert sparse.bound_ == pytest.approx(dense.bound_, rel=1e-2)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_sparse_L_is_refused(bad):
    with pytest.raises(ValueError, match="sparse_L must be a positive integer"):
        MemoizedHDP(K=4, sparse_L=bad)
    with pytest.raises(ValueError, match="sparse_L"):
        pm.HDPTopics(n_components=4, sparse_L=bad).fit(np.ones((5, 3)))


# ---------------------------------------------------------------------- CLI
def test_cli_hdp_sparse_L_fits_and_writes_only_under_tmp_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.json"
    assert main(["fit", "bars", "--model", "hdp", "--K", "8", "--algo", "memo", "--batches", "3", "--laps", "3",
                 "--sparse-L", "3", "--quiet", "--json", str(out), "--save", str(tmp_path / "run")]) == 0
    result = json.loads(out.read_text())
    assert result["sparse_L"] == 3 and result["laps"] == 3 and np.isfinite(result["elbo"])
    assert np.all(np.diff(result["elbo_trace"]) >= -1e-9 * np.abs(result["elbo_trace"][1:]))
    assert "top-3 sparse responsibilities" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "run"]


@pytest.mark.parametrize("value", ["0", "-2"])
def test_cli_bad_sparse_L_is_one_error_line(value, capsys):
    assert main(["fit", "bars", "--model", "hdp", "--sparse-L", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyro-memo: error:")
    assert "--sparse-L must be a positive integer" in err[0]
