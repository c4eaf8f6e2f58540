"""Topic merges: accepted only with an exact bound increase (randomised), candidate summaries
equal those computed directly from merged local parameters."""

import numpy as np
import pytest
import torch

from pyro_memo.topics import HDPPosterior, MemoizedHDP, TopicMergeMove
from pyro_memo.topics.hdp_posterior import expected_log_dirichlet
from pyro_memo.topics.hdp_sticks import expected_beta
from pyro_memo.topics.memoized_hdp import DocumentLocal
from pyro_memo.topics.topic_merge import merged_sticks
from tests.topics.test_memoized_hdp import random_corpus


def assert_moves_kept_the_memo_exact(fit, corpus):
    """Every accepted move raised the bound; the memo equals its batches' sum and covers every
    token; the globals, memo and warm starts agree on K; the bound never fell across laps."""
    for gain in fit.state.move_gains:
        assert gain["after"] > gain["before"]
    cache = fit.state.cache
    fresh = cache.recomputed_total()
    torch.testing.assert_close(cache.total.word_counts, fresh.word_counts)
    torch.testing.assert_close(cache.total.sum_log_pi, fresh.sum_log_pi)
    assert float(cache.total.word_counts.sum()) == pytest.approx(corpus.num_tokens, rel=1e-10)
    assert fit.posterior.K == cache.total.K == fit.state.doc_topic_counts[0].shape[1]
    assert fit.elbo == pytest.approx(float(fit.posterior.elbo(cache.total)), rel=1e-12)
    trace = np.asarray(fit.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))


@pytest.mark.parametrize("seed", range(8))
def test_accepted_merges_raise_the_exact_bound_and_keep_the_memo_exact(seed):
    corpus = random_corpus(seed)
    B = 1 + seed % 4
    fit = MemoizedHDP(K=12, laps=8, tol=0, seed=seed, moves="merge").fit(corpus, B)
    assert all(set(lap) == {"merge"} for lap in fit.state.move_log)
    assert_moves_kept_the_memo_exact(fit, corpus)


@pytest.mark.parametrize("seed", range(3))
def test_candidate_summary_equals_the_merged_local_parameters_summary(seed):
    corpus = random_corpus(seed, num_docs=40)
    model = MemoizedHDP(K=6, laps=3, tol=0, seed=seed)
    state = model.fit(corpus, 1).state
    move = TopicMergeMove(pairs_per_topic=1)
    doc, word, count = corpus.tokens()
    move.start_lap(state, model)
    resp, counts, summary, _ = state.posterior.local_step(doc, word, count, corpus.num_docs,
                                                          init_counts=state.doc_topic_counts[0])
    state.doc_topic_counts[0] = counts
    # the batch side: the pair entropies travel in the batch's summary
    summary.extras["merge"] = move.batch_terms((doc, word, count, corpus.num_docs), DocumentLocal(resp, counts))
    state.cache.replace(0, summary)
    move.pair_entropy = move.collected_terms(state)
    a, b = move.pairs[0].tolist()
    _, (batches, total, _) = move.evaluate(state, a, b, 0)
    # direct: merge the responsibilities, refit the documents' Dirichlets with the merged sticks
    post = state.posterior
    keep = [k for k in range(post.K) if k != b]
    merged_resp = resp.clone()
    merged_resp[:, a] += merged_resp[:, b]
    merged_resp = merged_resp[:, keep]
    rho, omega = merged_sticks(post.rho, post.omega, a, b)
    small = HDPPosterior(post.lam[keep], rho, omega, post.alpha, post.gamma, post.lam0)
    n = torch.zeros(corpus.num_docs, len(keep), dtype=torch.float64).index_add_(0, doc, merged_resp * count[:, None])
    prior = post.alpha * expected_beta(rho)
    theta = torch.cat([n + prior[:-1], prior[-1:].expand(corpus.num_docs, 1)], 1)
    direct = small.summarize(doc, word, count, merged_resp, theta, expected_log_dirichlet(theta), n)
    got = batches[0][1]
    for field in ("word_counts", "sum_log_pi", "doc_term", "entropy"):
        torch.testing.assert_close(getattr(got, field), getattr(direct, field), rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(batches[0][0], n)


def test_merging_a_duplicated_topic_is_accepted():
    """Two exact copies of one topic share its tokens; merging them must raise the bound."""
    corpus = random_corpus(3, num_docs=80)
    fit = MemoizedHDP(K=4, laps=10, seed=0).fit(corpus, 2)
    state = fit.state
    post = state.posterior
    lam = torch.cat([post.lam, post.lam[:1]])  # topic 4 = a copy of topic 0
    rho = torch.cat([post.rho, post.rho.new_tensor([0.3])])
    omega = torch.cat([post.omega, post.omega[:1]])
    state.posterior = HDPPosterior(lam, rho, omega, post.alpha, post.gamma, post.lam0)
    state.doc_topic_counts = {}
    state.cache.batches, state.cache.total = {}, None
    model = MemoizedHDP(K=5, laps=state.laps_done + 1, tol=0, seed=0, moves=[TopicMergeMove(max_pairs=10)])
    model.fit(corpus, 2, state=state)  # lap to rebuild the memo at K = 5
    model.laps += 1
    result = model.fit(corpus, 2, state=state)
    assert result.state.move_log[-1]["merge"]["accepted"] >= 1
    assert result.posterior.K <= 4


@pytest.mark.parametrize("seed", range(6))
def test_accepted_deletes_raise_the_exact_bound_and_keep_the_memo_exact(seed):
    corpus = random_corpus(seed)
    B = 1 + seed % 3
    fit = MemoizedHDP(K=10, laps=8, tol=0, seed=seed, moves="delete,merge").fit(corpus, B)
    assert [m.name for m in MemoizedHDP(moves="merge,delete").moves] == ["delete", "merge"]
    assert all(set(lap) == {"delete", "merge"} for lap in fit.state.move_log)
    assert_moves_kept_the_memo_exact(fit, corpus)



def test_a_rejected_pair_waits_until_either_topic_changes_size():
    corpus = random_corpus(1, num_docs=60)
    model = MemoizedHDP(K=6, laps=3, tol=0, seed=1)
    state = model.fit(corpus, 1).state
    move = TopicMergeMove(pairs_per_topic=2, retry_change=0.01)
    move.start_lap(state, model)
    pairs = [tuple(p) for p in move.pairs.tolist()]
    assert len(pairs) >= 3
    for a, b in pairs:
        move.remember_rejected(state, a, b)
    move.start_lap(state, model)
    assert len(move.pairs) == 0  # all rejected at these sizes
    grown = pairs[0][0]
    total = state.cache.total
    word_counts = total.word_counts.clone()
    word_counts[grown] *= 1.02  # one topic grows by 2%: its pairs are worth retrying, no other
    state.cache.total = type(total)(word_counts, total.sum_log_pi, total.doc_term, total.entropy, total.num_docs)
    move.start_lap(state, model)
    assert {tuple(p) for p in move.pairs.tolist()} == {p for p in pairs if grown in p}
    always = TopicMergeMove(pairs_per_topic=2, retry_change=None)
    always.start_lap(state, model)
    assert {tuple(p) for p in always.pairs.tolist()} == set(pairs)


@pytest.mark.parametrize("seed", range(3))
def test_rejected_pairs_are_not_paid_for_lap_after_lap(seed):
    # every lap re-evaluated the same rejected pairs (each re-optimising the sticks): 57% of a
    # births-and-merges fit of 20 LDA topics
    corpus = random_corpus(seed)
    counts = {}
    for retry in (0.01, None):
        fit = MemoizedHDP(K=10, laps=8, tol=0, seed=seed, moves=[TopicMergeMove(retry_change=retry)]).fit(corpus, 2)
        counts[retry] = sum(lap["merge"]["proposed"] for lap in fit.state.move_log)
        assert_moves_kept_the_memo_exact(fit, corpus)
    assert counts[0.01] < counts[None]


def test_retry_change_must_be_a_non_negative_number():
    with pytest.raises(ValueError, match="retry_change must be a non-negative number"):
        TopicMergeMove(retry_change=-0.5)
