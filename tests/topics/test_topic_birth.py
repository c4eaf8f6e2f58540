"""Topic births: accepted only with an exact bound increase (randomised), the candidate keeps
every other topic's weight, and births from two topics find the bars."""

import numpy as np
import pytest
import torch

from pyro_memo.data import lda_corpus
from pyro_memo.engine.candidate_memo import candidate_total
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP, TopicBirthMove, document_completion, split_documents
from pyro_memo.topics.hdp_sticks import expected_beta
from pyro_memo.topics.memoized_hdp import DocumentLocal
from tests.topics.test_memoized_hdp import random_corpus
from tests.topics.test_topic_merge import assert_moves_kept_the_memo_exact


@pytest.mark.parametrize("seed", range(6))
def test_accepted_births_raise_the_exact_bound_and_keep_the_memo_exact(seed):
    corpus = random_corpus(seed)
    B = 1 + seed % 3
    birth = TopicBirthMove(num_new=2 + seed % 2, min_tokens=5, num_targets=1 + seed % 3 // 2 * 2)  # 1, 1, 3
    fit = MemoizedHDP(K=2, laps=8, tol=0, seed=seed, moves=[birth, "merge"]).fit(corpus, B)
    assert [m.name for m in MemoizedHDP(moves="merge,birth").moves] == ["birth", "merge"]
    assert all(set(lap) == {"birth", "merge"} for lap in fit.state.move_log)
    assert_moves_kept_the_memo_exact(fit, corpus)


class RecordedBirth(TopicBirthMove):
    """A birth move that records, for each lap, its targets, the laps its candidate ran before, whether the
    candidate was kept or runs on, and checks that one that runs on steps under the optimum it was handed."""

    def __init__(self, **settings):
        super().__init__(**settings)
        self.events = []

    def start_lap(self, state, driver):
        handed = None if self.continued is None else self.continued["posterior"]
        super().start_lap(state, driver)
        self.events.append({"lap": state.laps_done, "targets": list(self.targets), "ran": self.laps_run,
                            "handed": handed, "continuing": self.continuing})

    def visit_batch(self, state, key, batch, local, summary):
        running = self.continuing
        summary = super().visit_batch(state, key, batch, local, summary)
        if running is not None:  # the batch stepped under the candidate's globals, then refit them
            assert self.candidate is running and self.continuing is not running
        return summary

    def end_lap(self, state, driver):
        if self.continuing is not None:  # every batch's summary replaced the last lap's in the candidate's memo
            assert set(self.running.batches) == set(self.batches)
            assert all(self.running.batches[k] is s for k, (_, s) in self.batches.items())
            torch.testing.assert_close(self.running.total.word_counts, candidate_total(self.batches).word_counts)
        gains = len(state.move_gains)
        super().end_lap(state, driver)
        self.events[-1].update(kept=len(state.move_gains) > gains, runs_on=self.continued is not None,
                               tried=list(state.tried_components(self.name, state.posterior.K)))


def assert_candidates_ran_on_as_promised(events, patience):
    """A candidate that fell short ran on, from the optimum of its last memo, for at most ``patience`` laps
    more with the same targets; after its last lap its targets counted as tried."""
    for event, after in zip(events, events[1:] + [None], strict=True):
        if not event["targets"] or "kept" not in event:
            continue
        assert event["ran"] <= patience
        if event["kept"]:
            assert not event["runs_on"]
        elif event["ran"] < patience:
            assert event["runs_on"]
            if after is not None:
                assert after["targets"] == event["targets"] and after["ran"] == event["ran"] + 1
                assert torch.equal(after["continuing"].lam, after["handed"].lam)
                assert torch.equal(after["continuing"].rho, after["handed"].rho)
        else:
            assert not event["runs_on"] and set(event["targets"]) <= set(event["tried"])
            if after is not None:
                assert after["ran"] == 0 and after["continuing"] is None


@pytest.mark.parametrize("seed", range(8))
def test_a_candidate_that_fell_short_runs_on_and_is_kept_only_on_an_exact_increase(seed):
    """``patience=2`` on random corpora and bars: every kept birth raised the exact bound (those that ran on
    too) and the memo stayed exact, and each candidate ran on as promised."""
    corpus = random_corpus(seed) if seed % 2 else bars_corpus(80, 30, alpha=0.2, seed=seed)[0]
    birth = RecordedBirth(num_new=2 + seed % 2, min_tokens=5, patience=2, num_targets=1 + seed % 3 // 2)
    fit = MemoizedHDP(K=2, laps=10, tol=0, seed=seed, moves=[birth]).fit(corpus, 1 + seed % 3)
    assert_moves_kept_the_memo_exact(fit, corpus)
    assert_candidates_ran_on_as_promised(birth.events, 2)
    assert sum(e.get("runs_on", False) for e in birth.events) >= 2


def test_a_candidate_kept_after_running_on_raised_the_bound():
    """On bars (seed 7) births that lost after their first lap were kept after running on, each raising the
    exact bound, with the memo exact."""
    corpus = bars_corpus(80, 30, alpha=0.2, seed=7)[0]
    birth = RecordedBirth(num_new=3, min_tokens=5, patience=2)
    fit = MemoizedHDP(K=2, laps=10, tol=0, seed=7, moves=[birth]).fit(corpus, 2)
    late = [e for e in birth.events if e.get("kept") and e["ran"] > 0]
    assert len(late) >= 2
    assert len(fit.state.move_gains) == sum(e.get("kept", False) for e in birth.events)
    assert_moves_kept_the_memo_exact(fit, corpus)


def test_a_fit_does_not_stop_while_a_candidate_runs_on():
    """With a tolerance every lap meets, the fit stops at the first lap where no birth was kept and none
    runs on (a candidate that runs on is not converged)."""
    corpus = random_corpus(1)
    birth = RecordedBirth(num_new=3, min_tokens=5, patience=2)
    fit = MemoizedHDP(K=2, laps=30, tol=1.0, seed=1, moves=[birth]).fit(corpus, 2)
    done = [e for e in birth.events if "kept" in e]
    assert any(e["runs_on"] and not e["kept"] for e in done)
    assert all(e["kept"] or e["runs_on"] for e in done[1:-1])
    assert not (done[-1]["kept"] or done[-1]["runs_on"])
    assert fit.converged and len(fit.elbo_trace) < 30


def test_a_converged_fit_resumed_with_births_judges_them():
    """A converged fit resumed with births stopped after one lap: that lap only collected the first target's tokens
    (no candidate judged), so the births were never tried and the fit stayed at its topics."""
    corpus = bars_corpus(seed=0)[0]
    done = MemoizedHDP(K=3, laps=200, seed=0).fit(corpus, 2)
    assert done.converged
    laps = len(done.elbo_trace)
    grown = MemoizedHDP(K=3, laps=200, seed=0, moves="birth,merge,delete").fit(corpus, 2, state=done.state)
    assert grown.converged and grown.posterior.K > 3
    assert sum(lap["birth"]["accepted"] for lap in grown.state.move_log[laps:]) >= 1


@pytest.mark.parametrize("num_targets", [1, 2])
def test_candidate_replaces_the_targets_and_keeps_the_other_weights(num_targets):
    corpus = random_corpus(1, num_docs=80)
    model = MemoizedHDP(K=4, laps=2, seed=0)
    fit = model.fit(corpus, 2)
    move = TopicBirthMove(num_new=3, min_tokens=1, collect="batch", num_targets=num_targets)
    move.start_lap(fit.state, model)  # the targets chosen at the lap's start, largest first
    sizes = fit.state.cache.total.topic_counts
    assert move.targets == torch.argsort(sizes, descending=True)[:num_targets].tolist()
    doc, word, count = corpus.tokens()
    resp, _, _, _ = fit.posterior.local_step(doc, word, count, corpus.num_docs)
    post = fit.posterior
    move.new_lams = [move._new_topics((doc, word, count, corpus.num_docs), resp, post, t, seed=0) for t in move.targets]
    cand = move._candidate(post)
    keep = [k for k in range(post.K) if k not in move.targets]
    torch.testing.assert_close(cand.lam[:len(keep)], post.lam[keep])
    old, new = expected_beta(post.rho), expected_beta(cand.rho)
    torch.testing.assert_close(new[:len(keep)], old[keep], rtol=1e-6, atol=1e-9)
    for i, (target, lam) in enumerate(zip(move.targets, move.new_lams, strict=True)):
        assert lam.shape == (3, corpus.vocab_size)
        # each target's new topics carry its expected tokens in all, and its weight, in its order
        torch.testing.assert_close((lam - post.lam0).sum(), sizes[target])
        fresh = slice(len(keep) + 3 * i, len(keep) + 3 * (i + 1))
        torch.testing.assert_close(cand.lam[fresh], lam)
        torch.testing.assert_close(new[fresh].sum(), old[target], rtol=1e-6, atol=1e-9)
    assert cand.K == post.K + 2 * num_targets


def _candidate_move(fit, model, batch, resp, **settings):
    """A birth move of the largest topic of ``fit`` with its fresh topics and candidate made from ``batch``."""
    move = TopicBirthMove(collect="batch", **settings)
    move.start_lap(fit.state, model)
    move.new_lams = [move._new_topics(batch, resp, fit.posterior, t, seed=0) for t in move.targets]
    move.candidate = move._candidate(fit.posterior)
    return move


@pytest.mark.parametrize("seed", range(4))
def test_the_candidate_step_of_a_batch_is_the_sum_of_its_documents_steps(seed):
    """Documents holding the target run the candidate's local step and the others keep theirs without it,
    each document on its own: the batch's candidate counts and summary are those of its documents taken
    one at a time (a fixed number of sweeps, ``local_tol=0``, so no document stops with another)."""
    corpus = random_corpus(seed, num_docs=30)
    model = MemoizedHDP(K=4, laps=3, seed=seed, local_tol=0, local_iters=15)
    fit = model.fit(corpus, 1)
    doc, word, count = corpus.tokens()
    batch = (doc, word, count, corpus.num_docs)
    resp, counts, _, _ = fit.posterior.local_step(*batch, max_iter=15, tol=0)
    move = _candidate_move(fit, model, batch, resp, min_tokens=1, num_targets=1 + seed % 2)
    holding = (counts[:, move.targets] >= move.hold_tokens).any(1)
    assert 0 < int(holding.sum()) < corpus.num_docs  # both kinds of document
    both, summary = move._candidate_step(batch, DocumentLocal(resp, counts))
    parts, total = [], None
    for d in range(corpus.num_docs):
        mine = doc == d
        one = (doc[mine] * 0, word[mine], count[mine], 1)
        part, s = move._candidate_step(one, DocumentLocal(resp[mine], counts[d:d + 1]))
        parts.append(part)
        total = s if total is None else total + s
    torch.testing.assert_close(both, torch.cat(parts))
    for name in ("word_counts", "sum_log_pi", "doc_term", "entropy"):
        torch.testing.assert_close(getattr(summary, name), getattr(total, name))
    assert summary.num_docs == corpus.num_docs
    fresh = both[:, fit.posterior.K - len(move.targets):]
    assert float(fresh[~holding].abs().max()) == 0.0  # the fresh topics only in documents holding the target
    torch.testing.assert_close(both.sum(1), counts.sum(1))  # every token assigned


@pytest.mark.parametrize("seed", range(3))
def test_the_targeted_candidate_step_is_as_good_as_every_documents(seed):
    """On 20-token LDA documents (10 topics, a fit of K = 6), the candidate memo of the documents holding
    the target (38-51% of them) has an exact bound, under the candidate's optimal globals, no more than
    1e-4 nats per token below the one where every document runs the candidate's local step (measured
    2e-4 to 7e-4 above it: the other documents keep their converged responsibilities)."""
    corpus = lda_corpus(1000, 20, vocab_size=300, num_topics=10, seed=seed)[0]
    model = MemoizedHDP(K=6, laps=5, seed=0)
    fit = model.fit(corpus, 1)
    batch = (*corpus.tokens(), corpus.num_docs)
    resp, counts, _, _ = fit.posterior.local_step(*batch)
    bounds = []
    for hold in (0.0, 0.01):
        move = _candidate_move(fit, model, batch, resp, hold_tokens=hold)
        summary = move._candidate_step(batch, DocumentLocal(resp, counts))[1]
        bounds.append(float(move.candidate.optimal_for(summary).elbo(summary)) / corpus.num_tokens)
    assert float((counts[:, move.targets[0]] >= 0.01).float().mean()) < 0.6
    assert bounds[1] > bounds[0] - 1e-4


def test_births_from_two_topics_find_the_bars():
    corpus, topics, _ = bars_corpus(200, 80, alpha=0.2, seed=4)
    train, test = split_documents(corpus, 0.2, seed=0)
    fit = MemoizedHDP(K=2, laps=10, seed=0, moves="birth,merge").fit(train, 2)
    without = MemoizedHDP(K=2, laps=10, seed=0).fit(train, 2)
    assert fit.elbo > without.elbo
    assert document_completion(fit.posterior, test) > document_completion(without.posterior, test) + 0.2
    phi = fit.posterior.topic_means().numpy()
    dist = np.abs(topics[:, None, :] - phi[None]).sum(-1)
    assert np.sum(dist.min(1) < 0.3) >= 9  # at least 9 of the 10 bars have a close learned topic


@pytest.mark.parametrize("seed", range(2))
def test_births_from_one_topic_grow_on_short_documents(seed):
    """20 bars, 10-token documents: the fresh topics are refined on the target's tokens before the
    candidate lap, so the first birth from K = 1 raises the exact bound (k-means topics of one
    batch of short documents alone lost to the one topic, and the fit stayed at K = 1)."""
    corpus, _, _ = bars_corpus(400, 10, side=10, alpha=0.05, seed=seed)
    one = MemoizedHDP(K=1, laps=3, tol=0, seed=0).fit(corpus, 2)
    fit = MemoizedHDP(K=1, laps=3, tol=0, seed=0, moves="birth").fit(corpus, 2)
    assert fit.state.move_log[1]["birth"] == {"proposed": 1, "accepted": 1}  # lap 1: the first birth
    assert fit.posterior.K > 1
    assert fit.elbo > one.elbo
    assert_moves_kept_the_memo_exact(fit, corpus)


@pytest.mark.parametrize("seed", range(2))
def test_births_from_one_topic_pass_a_fixed_K_fit_on_short_lda_documents(seed):
    """10 LDA topics, 1,000 documents of 20 tokens in 4 batches: births from K = 1, their fresh topics
    made from the target's tokens of a whole lap, find every true topic and end at least 0.05 nats per
    token above a fixed K = 10 fit (measured 0.068-0.093 over seeds 0-3; with the fresh topics of one
    batch, ``collect="batch"``, 0.017-0.028, the fixed fit keeping two blends of two topics)."""
    corpus, topics, _ = lda_corpus(1000, 20, vocab_size=300, num_topics=10, seed=seed)
    fixed = MemoizedHDP(K=10, laps=20, seed=0).fit(corpus, 4)
    fit = MemoizedHDP(K=1, laps=20, seed=0, moves=[TopicBirthMove(), "delete", "merge"]).fit(corpus, 4)
    assert fit.elbo / corpus.num_tokens > fixed.elbo / corpus.num_tokens + 0.05
    phi = fit.posterior.topic_means().numpy()
    assert np.abs(topics[:, None, :] - phi[None]).sum(-1).min(1).max() < 0.5
    assert_moves_kept_the_memo_exact(fit, corpus)


def short_bars_in_one_batch(K, laps):
    """``(model, fit, batch, resp)``: a fit of 300 ten-token bars documents in one batch, and the whole
    corpus's responsibilities under its globals."""
    corpus, _, _ = bars_corpus(300, 10, side=10, alpha=0.05, seed=0)
    model = MemoizedHDP(K=K, laps=laps, seed=0)
    fit = model.fit(corpus, 1)
    batch = (*corpus.tokens(), corpus.num_docs)
    return model, fit, batch, fit.posterior.local_step(*batch)[0]


def test_refined_fresh_topics_make_a_better_candidate():
    """With the whole corpus in one batch, the candidate whose fresh topics were refined has a higher
    exact bound after its local step than the one with the k-means topics they start from."""
    model, fit, batch, resp = short_bars_in_one_batch(K=1, laps=1)
    post = fit.posterior
    bounds = []
    for steps in (0, 10):
        move = TopicBirthMove(num_new=4, refine_steps=steps, collect="batch")
        move.start_lap(fit.state, model)
        move.new_lams = [move._new_topics(batch, resp, post, move.target, seed=0)]
        candidate = move._candidate(post)
        summary = candidate.local_step(*batch)[2]
        bounds.append(float(candidate.optimal_for(summary).elbo(summary)))
    assert bounds[1] > bounds[0]


def test_every_birth_refined_on_request():
    """From K > 1 the fresh topics are the k-means ones unless ``refine="every"``, which refines them
    (different topics, the same expected tokens)."""
    model, fit, batch, resp = short_bars_in_one_batch(K=4, laps=2)
    post = fit.posterior
    made = []
    for refine in ("first", "every"):
        move = TopicBirthMove(num_new=3, collect="batch", refine=refine)
        move.start_lap(fit.state, model)
        made.append(move._new_topics(batch, resp, post, move.target, seed=0))
    torch.testing.assert_close(made[0].sum(), made[1].sum())
    assert float((made[0] - made[1]).abs().max()) > 1.0


def test_bad_birth_settings_raise():
    with pytest.raises(ValueError, match="num_new must be at least 2"):
        TopicBirthMove(num_new=1)
    with pytest.raises(ValueError, match="refine_steps must be a non-negative integer"):
        TopicBirthMove(refine_steps=-1)
    with pytest.raises(ValueError, match="collect must be one of lap, batch"):
        TopicBirthMove(collect="corpus")
    with pytest.raises(ValueError, match="max_docs must be at least num_new"):
        TopicBirthMove(max_docs=2)
    with pytest.raises(ValueError, match="refine must be one of first, every"):
        TopicBirthMove(refine="all")
    for bad in (-0.5, float("nan")):
        with pytest.raises(ValueError, match="hold_tokens must be a non-negative finite number"):
            TopicBirthMove(hold_tokens=bad)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="num_targets must be a positive integer"):
            TopicBirthMove(num_targets=bad)
    for bad in (-1, 0.5, True):
        with pytest.raises(ValueError, match="patience must be a non-negative integer"):
            TopicBirthMove(patience=bad)


def test_move_options_configure_the_topic_moves_given_by_name():
    birth = MemoizedHDP(K=1, moves="merge,birth", move_options={"birth": {"num_new": 5, "patience": 1}}).moves[0]
    assert (birth.name, birth.num_new, birth.patience) == ("birth", 5, 1)
    with pytest.raises(ValueError, match="num_new must be at least 2"):
        MemoizedHDP(K=1, moves="birth", move_options={"birth": {"num_new": 1}})
    with pytest.raises(ValueError, match="birth move has no option targets"):
        MemoizedHDP(K=1, moves="birth", move_options={"birth": {"targets": 2}})
    with pytest.raises(ValueError, match="options for the birth move, which the moves do not name"):
        MemoizedHDP(K=1, moves=[TopicBirthMove()], move_options={"birth": {"num_new": 5}})


@pytest.mark.parametrize("num_targets,patience", [(1, 0), (2, 0), (1, 2)])
def test_a_resumed_fit_with_moves_goes_on_alike(tmp_path, num_targets, patience):
    from pyro_memo.topics.checkpoint import load_hdp_state, save_hdp_state

    corpus, _, _ = bars_corpus(80, 60, alpha=0.2, seed=6)

    def moves():
        return [TopicBirthMove(num_targets=num_targets, patience=patience), "delete", "merge"]

    # with patience, the checkpoint is written while a rejected birth's candidate runs on (laps 6 and 7)
    saved_at, laps = (3, 6) if patience == 0 else (6, 9)
    direct = MemoizedHDP(K=2, laps=laps, tol=0, seed=0, moves=moves()).fit(corpus, 2)
    first = MemoizedHDP(K=2, laps=saved_at, tol=0, seed=0, moves=moves()).fit(corpus, 2)
    assert (first.state.move_states["birth"]["continued"] is not None) == (patience > 0)
    save_hdp_state(tmp_path / "state.pt", first.state)
    state = load_hdp_state(tmp_path / "state.pt")
    assert state.tried_topics == first.state.tried_topics
    resumed = MemoizedHDP(K=2, laps=laps, tol=0, seed=0, moves=moves()).fit(corpus, 2, state=state)
    assert any(g["move"] == "birth" for g in direct.state.move_gains)
    np.testing.assert_allclose(resumed.elbo_trace, direct.elbo_trace, rtol=1e-10)
    assert resumed.state.move_log == direct.state.move_log


def test_a_checkpoint_of_one_target_births_loads_as_one_target():
    """Checkpoints written before ``num_targets`` hold one pending target and its fresh topics."""
    move, lam = TopicBirthMove(), torch.ones(3, 5)
    move.load_state_dict({"pending": {"target": 2, "K": 4, "gains": 1, "new_lam": lam}})
    assert move.pending == {"targets": [2], "K": 4, "gains": 1, "new_lam": [lam]}
    assert move.state_dict()["pending"]["targets"] == [2]
