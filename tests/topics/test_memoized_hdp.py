"""Memoized HDP inference: monotone bound (randomised), exact memo, local-step convergence,
held-out scores, input checks."""

import numpy as np
import pytest
import torch

from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import (
    HDPPosterior,
    MemoizedHDP,
    doc_topic_weights,
    document_completion,
    from_counts,
    split_documents,
    top_words,
)


def random_corpus(seed, num_docs=None, V=None):
    rng = np.random.default_rng(seed)
    num_docs = num_docs or int(rng.integers(20, 120))
    V = V or int(rng.integers(5, 40))
    topics = rng.dirichlet(np.full(V, 0.3), size=4)
    mix = rng.dirichlet(np.full(4, 0.4), size=num_docs)
    lengths = rng.integers(1, 50, size=num_docs)
    return from_counts(np.stack([rng.multinomial(n, w @ topics) for n, w in zip(lengths, mix, strict=True)]))


CASES = [(seed, B, K) for seed in range(6) for B, K in ((1, 3), (4, 6), (7, 12))]


@pytest.mark.parametrize("seed,B,K", CASES)
def test_no_memoized_step_lowers_the_bound_after_lap_one(seed, B, K):
    corpus = random_corpus(seed)
    B = min(B, corpus.num_docs)
    fit = MemoizedHDP(K=K, alpha=0.3 + seed * 0.2, gamma=1 + 2 * seed, laps=6, tol=0, seed=seed,
                      local_iters=30, record_batch_elbos=True).fit(corpus, B)
    steps = np.asarray(fit.batch_elbos)
    assert len(steps) >= 5 * B
    assert np.all(np.diff(steps) >= -1e-9 * np.abs(steps[1:]))
    laps = np.asarray(fit.elbo_trace)
    assert np.all(np.diff(laps) >= -1e-9 * np.abs(laps[1:]))


@pytest.mark.parametrize("seed", range(3))
def test_memo_equals_summaries_recomputed_from_scratch(seed):
    corpus = random_corpus(seed)
    fit = MemoizedHDP(K=5, laps=3, tol=0, seed=seed).fit(corpus, 4)
    cache = fit.state.cache
    fresh = cache.recomputed_total()
    torch.testing.assert_close(cache.total.word_counts, fresh.word_counts)
    torch.testing.assert_close(cache.total.sum_log_pi, fresh.sum_log_pi)
    assert cache.total.num_docs == corpus.num_docs
    assert float(cache.total.word_counts.sum()) == pytest.approx(corpus.num_tokens, rel=1e-10)
    # the bound after the last lap is that of the memo under the current globals
    assert fit.elbo == pytest.approx(float(fit.posterior.elbo(cache.total)), rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_local_step_converges_and_each_iteration_raises_the_bound(seed):
    corpus = random_corpus(seed, num_docs=30)
    post = MemoizedHDP(K=6, laps=2, seed=seed).fit(corpus, 3).posterior
    doc, word, count = corpus.tokens()
    values = []
    counts = None
    for _ in range(15):  # one coordinate sweep per call, warm-started from the last
        _, counts, summary, _ = post.local_step(doc, word, count, corpus.num_docs, init_counts=counts, max_iter=1)
        values.append(float(post.elbo(summary)))
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    _, converged, _, iters = post.local_step(doc, word, count, corpus.num_docs, max_iter=500, tol=1e-8)
    assert iters < 500
    _, again, _, _ = post.local_step(doc, word, count, corpus.num_docs, init_counts=converged, max_iter=1)
    torch.testing.assert_close(again, converged, atol=1e-6, rtol=0)


def test_one_batch_and_many_batches_reach_similar_bounds_on_bars():
    corpus, _, _ = bars_corpus(300, 50, seed=1)
    one = MemoizedHDP(K=15, laps=15, seed=0).fit(corpus, 1)
    many = MemoizedHDP(K=15, laps=15, seed=0).fit(corpus, 6)
    per_token = np.array([one.elbo, many.elbo]) / corpus.num_tokens
    assert abs(per_token[0] - per_token[1]) < 0.05


@pytest.mark.slow
def test_fit_matches_the_true_topics_held_out_score_and_finds_the_bars():
    corpus, topics, _ = bars_corpus(600, 200, alpha=0.2, seed=2)
    train, test = split_documents(corpus, 0.2, seed=0)
    fit = MemoizedHDP(K=20, laps=20, seed=0).fit(train, 5)
    score = document_completion(fit.posterior, test)
    # reference: the true bars as (nearly exact) topics with equal global weights
    K = len(topics)
    rho = torch.tensor([1.0 / (K - k) for k in range(K)], dtype=torch.float64).clamp(max=0.999)
    oracle = HDPPosterior(torch.as_tensor(topics * 1e5 + 1e-3), rho, torch.full((K,), 100.0, dtype=torch.float64),
                          alpha=0.5, gamma=10.0, lam0=0.1)
    reference = document_completion(oracle, test)
    assert reference > -np.log(corpus.vocab_size) + 0.5
    assert score > reference - 0.02
    # every true bar is close (L1) to some learned topic
    phi = fit.posterior.topic_means().numpy()
    dist = np.abs(topics[:, None, :] - phi[None]).sum(-1)
    assert np.all(dist.min(1) < 0.25)
    words = top_words(fit.posterior, train.vocab, 5)
    assert len(words) == 20 and all(len(w) == 5 for _, _, w in words)


def test_bad_settings_and_inputs_raise():
    corpus = random_corpus(0)
    with pytest.raises(ValueError, match="K must be"):
        MemoizedHDP(K=0)
    with pytest.raises(ValueError, match="alpha must be positive"):
        MemoizedHDP(alpha=-1)
    with pytest.raises(ValueError, match="num_batches"):
        MemoizedHDP(K=2).fit(corpus, corpus.num_docs + 1)
    with pytest.raises(TypeError, match="Corpus"):
        MemoizedHDP(K=2).fit(np.zeros((3, 4)))


@pytest.mark.parametrize("init", ["documents", "kmeans"])
def test_a_corpus_without_tokens_is_refused_as_hdptopics_refuses_it(init, tmp_path):
    # init="documents" fitted it without complaint (a bound of 0 nats over 0 tokens; the CLI divided by 0)
    import scipy.sparse as sp

    from pyro_memo import HDPTopics
    from pyro_memo.data import write_corpus_shards
    from pyro_memo.topics import StochasticHDP

    empty = from_counts(sp.csr_matrix(np.zeros((5, 12))))
    message = "every document is empty (the corpus has no tokens"
    with pytest.raises(ValueError, match=r"^MemoizedHDP\.fit: every document is empty") as memo:
        MemoizedHDP(K=3, laps=3, init=init).fit(empty, 1)
    with pytest.raises(ValueError) as sk:
        HDPTopics(n_components=3).fit(np.zeros((5, 12)))
    assert message in str(memo.value) and str(sk.value) == str(memo.value).replace("MemoizedHDP", "HDPTopics")
    with pytest.raises(ValueError, match=r"^StochasticHDP\.fit: every document is empty"):
        StochasticHDP(K=3, laps=1, init=init).fit(empty, 1)
    shards = write_corpus_shards(empty, tmp_path / "s", num_shards=1)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        MemoizedHDP(K=3, laps=3, init=init).fit(shards)


@pytest.mark.parametrize("dtype,scale,fits", [(torch.float32, 1e35, 8e31), (torch.float64, 1e303, 1e301)])
def test_counts_too_large_for_the_bound_are_refused_by_name(dtype, scale, fits, tmp_path):
    """Counts whose sum fits the dtype but whose bound's terms (a count times a log-probability) do not failed in
    the first lap with "the objective became NaN" (float32 from counts of 1e35, float64 from 1e303) or numpy's
    "Probabilities contain NaN"; they are now refused before the fit, by the memoized and the stochastic fit, and a
    corpus just within the bound fits to a finite bound."""
    from pyro_memo.data import write_corpus_shards
    from pyro_memo.topics import StochasticHDP

    counts = np.random.default_rng(0).poisson(3.0, (20, 6)).astype(float)
    for cls in (MemoizedHDP, StochasticHDP):
        with pytest.raises(ValueError, match=rf"^{cls.__name__}\.fit: the corpus's 4.04e\+\d+ tokens .* are too many "
                                             rf"for {str(dtype)[6:]}.*rescale the counts"):
            cls(K=3, laps=2, dtype=dtype).fit(from_counts(counts * scale), 2)
        assert np.isfinite(cls(K=3, laps=2, dtype=dtype).fit(from_counts(counts * fits), 2).elbo_trace).all()
    shards = write_corpus_shards(from_counts(counts * scale), tmp_path / "s", num_shards=2)
    with pytest.raises(ValueError, match="are too many for"):
        MemoizedHDP(K=3, laps=2, dtype=dtype).fit(shards)


def test_type_split_scores_are_lower_than_token_split_scores():
    """Held-out words never seen in the observed part are harder to predict."""
    corpus, _, _ = bars_corpus(300, 200, alpha=0.2, side=8, seed=4)
    train, test = split_documents(corpus, 0.2, seed=0)
    post = MemoizedHDP(K=20, laps=15, seed=0).fit(train, 3).posterior
    tokens = document_completion(post, test, fraction=0.8, split="tokens")
    types = document_completion(post, test, fraction=0.8, split="types")
    assert types < tokens < 0
    with pytest.raises(ValueError, match="split"):
        document_completion(post, test, split="words")


def test_float32_fit_tracks_the_float64_fit():
    corpus, _, _ = bars_corpus(200, 50, seed=3)
    f64 = MemoizedHDP(K=12, laps=8, seed=0).fit(corpus, 4)
    f32 = MemoizedHDP(K=12, laps=8, seed=0, dtype=torch.float32).fit(corpus, 4)
    assert f32.posterior.lam.dtype == f32.posterior.rho.dtype == torch.float32
    np.testing.assert_allclose(f32.elbo_trace, f64.elbo_trace, rtol=1e-4)


def test_a_count_matrix_instead_of_a_corpus_is_pointed_to_from_counts():
    counts = np.ones((4, 6))
    with pytest.raises(TypeError, match=r"got ndarray \(a documents x words count matrix becomes a Corpus by "
                                        r"pyro_memo.topics.from_counts\(matrix\)"):
        MemoizedHDP(K=2, laps=1).fit(counts)
    MemoizedHDP(K=2, laps=1).fit(from_counts(counts))  # the form the error names


@pytest.fixture(scope="module")
def small_fit():
    corpus = random_corpus(3, num_docs=30, V=12)
    return MemoizedHDP(K=3, laps=2, seed=0).fit(corpus, 2), corpus


def test_read_outs_refuse_a_larger_vocabulary_or_a_count_matrix_naming_the_fix(small_fit):
    fit, corpus = small_fit
    wider = from_counts(np.hstack([corpus.to_dense(), corpus.to_dense()]))
    with pytest.raises(ValueError, match="vocabulary of 24 words but the model has 12"):
        document_completion(fit.posterior, wider)
    with pytest.raises(ValueError, match="vocabulary of 24 words"):
        doc_topic_weights(fit.posterior, wider, np.arange(3))
    with pytest.raises(TypeError, match="from_counts"):
        document_completion(fit.posterior, corpus.to_dense())
    with pytest.raises(ValueError, match="vocab has 2 words but the model has 12"):
        top_words(fit.posterior, ["a", "b"])


def test_document_completion_refuses_fractional_counts_instead_of_dropping_them(small_fit):
    fit, corpus = small_fit
    scaled = from_counts(corpus.to_dense() * 0.4)
    with pytest.raises(ValueError, match="not whole numbers .*split_types"):
        document_completion(fit.posterior, scaled)
    assert np.isfinite(document_completion(fit.posterior, from_counts(corpus.to_dense() * 2.0)))


@pytest.mark.parametrize("name", ["alpha", "gamma", "lam0"])
@pytest.mark.parametrize("value", [float("inf"), "x", None, True])
def test_a_concentration_that_is_infinite_or_not_a_number_is_named(name, value):
    # inf passed 'float(value) > 0' and the fit's bound became NaN in lap 1; "x" and None failed inside float()
    from pyro_memo.topics import StochasticHDP

    for cls in (MemoizedHDP, StochasticHDP):
        with pytest.raises(ValueError, match=f"{name} must be positive and finite; got {value!r}"):
            cls(K=2, **{name: value})


@pytest.mark.parametrize("value", [float("nan"), -1, "a", None])
def test_a_local_tolerance_that_is_negative_or_not_a_number_is_named(value):
    # NaN and -1 were kept silently (a local step that never stops early), "a" failed inside float()
    import pyro_memo as pm
    from pyro_memo.inference.memory_bounded import MemoryBoundedHDP
    from pyro_memo.topics import StochasticHDP

    family = pm.Gaussian.from_data(np.random.default_rng(0).normal(size=(10, 2)))
    for make in (lambda: MemoizedHDP(K=2, local_tol=value), lambda: StochasticHDP(K=2, local_tol=value),
                 lambda: MemoryBoundedHDP(family, 2, 100, 3, local_tol=value),
                 lambda: pm.HDPGuide(pm.models.HDPTopicModel(5, 2), local_tol=value)):
        with pytest.raises(ValueError, match=f"local_tol must be a non-negative finite number; got {value!r}"):
            make()
    with pytest.raises(ValueError, match="tol must be a non-negative finite number; got nan"):
        MemoizedHDP(K=2, tol=float("nan"))


@pytest.mark.parametrize("num_words", [-1, 0, 2.5, True])
def test_top_words_refuses_a_number_of_words_that_is_not_a_positive_integer(small_fit, num_words):
    # -1 listed every word but the least probable, 0 empty lists, 2.5 raised a slicing TypeError
    with pytest.raises(ValueError, match=f"num_words must be a positive integer; got {num_words!r}"):
        top_words(small_fit[0].posterior, num_words=num_words)


@pytest.mark.parametrize("kwargs,message", [({"fraction": float("nan")}, r"fraction must be a number in \[0, 1\]"),
                                            ({"fraction": -1, "split": "types"}, r"fraction must be a number in"),
                                            ({"docs_per_chunk": 0}, "docs_per_chunk must be a positive integer")])
def test_document_completion_names_a_bad_fraction_or_chunk(small_fit, kwargs, message):
    # NaN raised 'cannot convert float NaN to integer', -1 scored as 0, docs_per_chunk=0 'range() arg 3 must not
    # be zero'
    fit, corpus = small_fit
    with pytest.raises(ValueError, match=message):
        document_completion(fit.posterior, corpus, **kwargs)
