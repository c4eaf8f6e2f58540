"""The HDP topic guide behaves like a Pyro guide (#14 item 4): it runs on any batch of documents
(uneven last batches included), the whole corpus and new documents; Predictive and Trace_ELBO work
after batch training; continuing from globals fitted to other documents warns; and the global sites
are read out as Pyro's AutoGuide does."""

import math
import warnings

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro import poutine
from pyro.infer import SVI, Predictive, Trace_ELBO, TraceEnum_ELBO, config_enumerate, infer_discrete
from pyro.ops.indexing import Vindex
from scipy import stats

import pyro_memo as pm
from pyro_memo.bridge.param_store import WarmStartWarning

K, ALPHA, GAMMA, LAM0 = 4, 0.6, 3.0, 0.2
F64 = torch.float64


def weights(u):
    return F.pad(u, (0, 1), value=1) * F.pad((1 - u).cumprod(-1), (1, 0), value=1)


def model(doc_of, words, D, V, docs=None):
    """A float64 HDP topic model whose document plate may be subsampled; it runs under Pyro's
    vectorised particles."""
    one = torch.ones((), dtype=F64)
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(one, GAMMA * one))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0, dtype=F64)))
    with pyro.plate("doc_plate", D, subsample=docs) as d:
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b).unsqueeze(-2)))
    tok, local = pm.batch_tokens(doc_of, d, D)
    with pyro.plate("word_plate", len(doc_of), subsample=tok):
        c = pyro.sample("c", dist.Categorical(theta[..., local, :]))
        pyro.sample("w", dist.Categorical(Vindex(topic.unsqueeze(-3))[..., c, :]), obs=words[tok])


def corpus(seed, D=10, V=9, length=12):
    """D documents, document d drawn from word block d % 3 (three disjoint blocks of V // 3 words)."""
    g = torch.Generator().manual_seed(seed)
    doc_of, words = [], []
    for d in range(D):
        n = length + int(torch.randint(4, (1,), generator=g))
        block = d % 3
        doc_of.append(torch.full((n,), d))
        words.append(block * (V // 3) + torch.randint(V // 3, (n,), generator=g))
    return torch.cat(doc_of), torch.cat(words), D, V


def train(doc_of, words, D, V, batch_size=4, laps=6, guide=None, seed=0):
    """SVI + MemoizedELBO over fixed batches of documents (the last one shorter when batch_size does not divide D)."""
    guide = guide or pm.HDPGuide(model, seed=seed)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    batches = list(torch.arange(D).split(batch_size))
    losses = [svi.step(doc_of, words, D, V, b) for _ in range(laps) for b in batches]
    return guide, batches, losses


def full_size(site):
    frame = site["cond_indep_stack"][0]
    return frame.size if frame.full_size is None else frame.full_size


def guide_trace(guide, *args):
    with torch.no_grad():
        return poutine.trace(guide).get_trace(*args)


def test_the_document_plate_is_read_from_each_call():
    doc_of, words, D, V = corpus(0)
    spec = pm.recognize_model(model, doc_of, words, D, V, torch.tensor([1, 3]))
    assert spec.num_docs_arg == ("arg", 2) and not spec.docs_from_tokens
    args = (doc_of[doc_of < 5], words[doc_of < 5], 5, V)
    assert spec.plate_size(args, {}) == 5 and spec.batch(args, {}).size == 5
    # pyro_memo's own model counts its documents from the tokens when num_docs is not given
    own = pm.models.HDPTopicModel(V, K)
    spec = pm.recognize_model(own, doc_of, words)
    assert spec.num_docs_arg is None and spec.docs_from_tokens
    assert spec.plate_size((doc_of[doc_of < 7], words[doc_of < 7]), {}) == 7


def test_uneven_last_batch_trains_and_the_bound_never_falls_after_lap_1():
    doc_of, words, D, V = corpus(1)
    pyro.clear_param_store()
    guide, batches, losses = train(doc_of, words, D, V, batch_size=4)
    assert [len(b) for b in batches] == [4, 4, 2]
    later = losses[len(batches) - 1:]
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(later, later[1:], strict=False))
    assert later[-1] < later[0]
    assert guide.memo.total.num_docs == D
    assert guide.doc_topic_counts.shape == (D, K) and not bool(torch.isnan(guide.doc_topic_counts).any())


def test_guide_runs_on_a_batch_the_whole_corpus_and_new_documents():
    doc_of, words, D, V = corpus(2)
    pyro.clear_param_store()
    guide, batches, _ = train(doc_of, words, D, V)
    counts = guide.doc_topic_counts.clone()
    # a batch: the plate has the corpus' size and the batch as its subsample
    site = guide_trace(guide, doc_of, words, D, V, batches[-1]).nodes["theta"]
    assert site["value"].shape == (2, K + 1) and full_size(site) == D
    assert site["scale"] == pytest.approx(D / 2)
    # the whole corpus, by leaving the batch out
    full = guide_trace(guide, doc_of, words, D, V)
    assert full.nodes["theta"]["value"].shape == (D, K + 1) and full.nodes["c"]["value"].shape == doc_of.shape
    # new documents: another corpus of another size over the same vocabulary
    new_doc, new_words, D2, _ = corpus(3, D=7, V=V)
    trace = guide_trace(guide, new_doc, new_words, D2, V)
    assert trace.nodes["theta"]["value"].shape == (D2, K + 1)
    assert full_size(trace.nodes["theta"]) == D2
    # their parameters come from a full local step of their own, not from the stored counts
    post = guide.posterior
    batch = guide.spec.batch((new_doc, new_words, D2, V), {})
    _, own, _, _ = post.local_step(batch.pair_doc, batch.pair_word, batch.pair_count, D2,
                                   max_iter=guide.local_iters, tol=guide.local_tol)
    prior = post.alpha * pm.allocation.stick_breaking_weights(post.rho)
    expected = torch.cat([own + prior[:-1], prior[-1:].expand(D2, 1)], 1)
    torch.testing.assert_close(trace.nodes["theta"]["fn"].concentration, expected)
    # the same number of documents with other words: still a fresh local step (the corpus is checked)
    other_doc, other_words, _, _ = corpus(4, D=D, V=V)
    batch = guide.spec.batch((other_doc, other_words, D, V), {})
    _, own, _, _ = post.local_step(batch.pair_doc, batch.pair_word, batch.pair_count, D,
                                   max_iter=guide.local_iters, tol=guide.local_tol)
    theta = guide_trace(guide, other_doc, other_words, D, V).nodes["theta"]["fn"].concentration
    torch.testing.assert_close(theta[:, :K], own + prior[:-1])
    # running the guide never changes the training corpus' stored counts
    assert torch.equal(guide.doc_topic_counts, counts)


def test_predictive_on_new_documents():
    doc_of, words, D, V = corpus(5)
    pyro.clear_param_store()
    guide, _, _ = train(doc_of, words, D, V)
    new_doc, new_words, D2, _ = corpus(6, D=5, V=V)
    pyro.set_rng_seed(0)
    samples = Predictive(model, guide=guide, num_samples=40)(new_doc, new_words, D2, V)
    assert samples["theta"].shape == (40, D2, K + 1) and samples["c"].shape == (40, len(new_doc))
    assert samples["topic"].shape == (40, K + 1, V) and samples["b"].shape == (40, K)
    # documents of the same word block share their dominant topic; documents of other blocks do not
    top = samples["theta"].mean(0).argmax(-1)
    assert top[0] == top[3] and top[1] == top[4] and len({int(top[0]), int(top[1]), int(top[2])}) == 3


@pytest.mark.filterwarnings("ignore:TraceEnum_ELBO found no sample sites")
@pytest.mark.parametrize("pyro_elbo", [Trace_ELBO, TraceEnum_ELBO])
def test_trace_elbo_on_the_full_corpus_after_batch_training(pyro_elbo):
    """The guide's exact bound (``guide.elbo``) is the HDP bound, which bounds the Dirichlet
    log-normaliser of each document's prior from below: Pyro's Trace_ELBO (and TraceEnum_ELBO, no
    site enumerated) of the guide (float64) estimates the bound plus that closed-form normaliser
    gap, not the bound itself."""
    doc_of, words, D, V = corpus(7, D=6, V=9, length=8)
    pyro.clear_param_store()
    guide, _, _ = train(doc_of, words, D, V, batch_size=4, laps=5)
    bound, gap = guide.elbo(doc_of, words, D, V), guide.normaliser_gap(doc_of, words, D, V)
    pyro.set_rng_seed(0)
    elbo = pyro_elbo(num_particles=3000, vectorize_particles=True, max_plate_nesting=1)
    estimates = [-elbo.loss(model, guide, doc_of, words, D, V) for _ in range(10)]
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / math.sqrt(len(estimates))
    assert gap > 0
    assert abs(mean - (bound + gap)) < 3 * se
    assert abs(mean - bound) > 3 * se  # the gap is resolved: the check can fail


def test_continuing_from_globals_fitted_to_other_documents_warns():
    doc_of, words, D, V = corpus(8)
    pyro.clear_param_store()
    guide, batches, _ = train(doc_of, words, D, V, laps=2)
    assert pm.HDPGuide(model).prefix == guide.prefix
    with warnings.catch_warnings():
        warnings.simplefilter("error", WarmStartWarning)
        train(doc_of, words, D, V, laps=1, guide=guide)  # the same corpus: no warning
        new_doc, new_words, D2, _ = corpus(9, D=7, V=V)
        guide(new_doc, new_words, D2, V)  # prediction on new documents: no warning
        Predictive(model, guide=guide, num_samples=2)(new_doc, new_words, D2, V)
    with pytest.warns(WarmStartWarning, match=f"'{guide.prefix}'.*other data"):
        train(new_doc, new_words, D2, V, laps=1, guide=guide)
    # the memo and stored counts now describe the new corpus only
    assert guide.memo.total.num_docs == D2 and guide.doc_topic_counts.shape == (D2, K)
    second = pm.HDPGuide(model)
    with pytest.warns(WarmStartWarning):
        train(doc_of, words, D, V, laps=1, guide=second)


def test_median_quantiles_and_sample_posterior_of_the_global_sites():
    doc_of, words, D, V = corpus(10)
    pyro.clear_param_store()
    guide, _, _ = train(doc_of, words, D, V)
    draws = guide.sample_posterior(5)
    assert set(draws) == {"b", "topic"}
    assert draws["b"].shape == (5, K) and draws["topic"].shape == (5, K + 1, V) and draws["b"].dtype == F64
    state = torch.get_rng_state()
    qs = guide.quantiles([0.1, 0.5, 0.9], num_samples=4000)
    assert torch.equal(torch.get_rng_state(), state)
    assert qs["b"].shape == (3, K) and qs["topic"].shape == (3, K + 1, V)
    assert bool((qs["b"][0] < qs["b"][1]).all() and (qs["b"][1] < qs["b"][2]).all())
    median = guide.median(num_samples=4000)
    assert torch.equal(median["b"], guide.median(num_samples=4000)["b"])  # a fixed seed: repeatable
    # against the exact Beta quantiles: sticks, and each topic's word marginals Beta(lam_v, sum - lam_v)
    post = guide.posterior
    a, b = (post.rho * post.omega).numpy(), ((1 - post.rho) * post.omega).numpy()
    for i, q in enumerate([0.1, 0.5, 0.9]):
        np.testing.assert_allclose(qs["b"][i].numpy(), stats.beta.ppf(q, a, b), atol=0.03)
    lam = post.lam.numpy()
    exact = stats.beta.median(lam, lam.sum(1, keepdims=True) - lam)
    np.testing.assert_allclose(median["topic"][:K].numpy(), exact, atol=0.03)
    tail = stats.beta.median(LAM0, LAM0 * (V - 1))
    np.testing.assert_allclose(median["topic"][K].numpy(), np.full(V, tail), atol=0.03)
    with pytest.raises(RuntimeError, match="has not seen the model"):
        pm.HDPGuide(model, prefix="unused").median()
    with pytest.raises(RuntimeError, match="has not seen the model"):  # a KeyError before
        _ = pm.HDPGuide(model, prefix="unused").posterior
    pyro.clear_param_store()
    with pytest.raises(RuntimeError, match="param store holds none of this guide's parameters"):
        guide.median()


def test_pyro_memos_own_model_counts_new_documents_from_their_tokens():
    doc_of, words, D, V = corpus(11)
    pyro.clear_param_store()
    own = pm.models.HDPTopicModel(V, K, alpha=ALPHA, gamma=GAMMA, lam0=LAM0)
    result = pm.fit_memoized(own, doc_of, words, num_batches=2, laps=3, seed=0)
    new_doc, new_words, D2, _ = corpus(12, D=4, V=V)
    with torch.no_grad():
        trace = poutine.trace(result.guide).get_trace(new_doc, new_words)
    assert trace.nodes["pi"]["value"].shape == (D2, K + 1)
    samples = Predictive(own, guide=result.guide, num_samples=3)(new_doc, new_words)
    assert samples["pi"].shape == (3, D2, K + 1) and samples["z"].shape == (3, len(new_doc))


@pytest.mark.parametrize("words", [True, False])
def test_a_model_fitted_with_its_number_of_documents_counts_them_from_the_tokens_without_it(words):
    """``HDPTopicModel`` counts its documents from the tokens when ``num_docs`` is left out: a guide fitted with
    ``num_docs`` given must do the same on a call without it (it drew the training corpus' number of documents,
    and Predictive failed in torch's reshape)."""
    doc_of, words_of, D, V = corpus(16)
    pyro.clear_param_store()
    own = pm.models.HDPTopicModel(V, K, alpha=ALPHA, gamma=GAMMA, lam0=LAM0)
    guide = pm.fit_memoized(own, doc_of, words_of, D, num_batches=2, laps=3, seed=0).guide
    new_doc, new_words, D2, _ = corpus(17, D=4, V=V)
    args = (new_doc, new_words) if words else (new_doc,)
    with torch.no_grad():
        assert poutine.trace(guide).get_trace(*args).nodes["pi"]["value"].shape == (D2, K + 1)
    samples = Predictive(own, guide=guide, num_samples=3)(*args)
    assert samples["pi"].shape == (3, D2, K + 1) and samples["x"].shape == (3, len(new_doc))


def test_a_call_without_the_words_is_read_as_the_fitted_call_whatever_came_before():
    """``Predictive(model, guide)(new_doc, None, D2)`` after ``Predictive(model, guide)(new_doc)``: the second call adds
    no argument to the fitted call and must be read as it is (it was read again, as if it added the batch, and
    refused for observing nothing)."""
    doc_of, words, D, V = corpus(18)
    pyro.clear_param_store()
    own = pm.models.HDPTopicModel(V, K, alpha=ALPHA, gamma=GAMMA, lam0=LAM0)
    guide = pm.fit_memoized(own, doc_of, words, D, num_batches=2, laps=3, seed=0).guide
    new_doc = torch.tensor([0] * 5 + [1] * 7)
    assert Predictive(own, guide=guide, num_samples=2)(new_doc)["pi"].shape == (2, 2, K + 1)
    samples = Predictive(own, guide=guide, num_samples=2)(new_doc, None, 3)
    assert samples["pi"].shape == (2, 3, K + 1) and samples["x"].shape == (2, len(new_doc))


def test_infer_discrete_decodes_assignments_after_batch_training():
    doc_of, words, D, V = corpus(13)
    pyro.clear_param_store()
    guide, _, _ = train(doc_of, words, D, V)
    pyro.set_rng_seed(1)
    globals_trace = poutine.trace(poutine.block(guide, hide=["c"])).get_trace(doc_of, words, D, V)
    decode = infer_discrete(config_enumerate(poutine.replay(model, trace=globals_trace)), first_available_dim=-2,
                            temperature=0)
    c = poutine.trace(decode).get_trace(doc_of, words, D, V).nodes["c"]["value"]
    theta, topic = globals_trace.nodes["theta"]["value"], globals_trace.nodes["topic"]["value"]
    expected = (theta[doc_of].log() + topic[:, words].T.log()).argmax(-1)
    assert torch.equal(c, expected)


@pytest.mark.parametrize("trained_by", ["fit_memoized", "guide_call"])
def test_predictive_generates_the_words_of_new_documents(trained_by):
    """``Predictive`` with the words left out generates them: each document's topics then follow its
    weights alone (the local optimum without word evidence: ``q(z)`` alike for a document's tokens,
    ``q(z_k) ∝ exp(E log pi_k)``, ``theta = alpha E[beta] + N_d q(z)``), never the tail topic."""
    doc_of, words, D, V = corpus(14)
    pyro.clear_param_store()
    own = pm.models.HDPTopicModel(V, K, alpha=ALPHA, gamma=GAMMA, lam0=LAM0)
    if trained_by == "fit_memoized":
        guide = pm.fit_memoized(own, doc_of, words, num_batches=2, laps=3, seed=0).guide
    else:
        guide = pm.HDPGuide(own, seed=0)
        guide(doc_of, words)
    new_doc = torch.tensor([0] * 30 + [1] * 5 + [2] * 12)
    samples = Predictive(own, guide=guide, num_samples=20)(new_doc)
    assert samples["x"].shape == (20, len(new_doc)) and samples["pi"].shape == (20, 3, K + 1)
    assert int(samples["x"].min()) >= 0 and int(samples["x"].max()) < V
    with torch.no_grad():
        trace = poutine.trace(guide).get_trace(new_doc)
    probs = trace.nodes["z"]["fn"].probs.double()
    theta = trace.nodes["pi"]["fn"].concentration.double()
    assert bool((probs[:, K] == 0).all()) and bool(torch.isfinite(theta).all())
    for d in range(3):
        rows = probs[new_doc == d]
        torch.testing.assert_close(rows, rows[:1].expand_as(rows), rtol=0, atol=1e-12)
        own_weights = torch.softmax(torch.digamma(theta[d, :K]), 0)
        torch.testing.assert_close(rows[0, :K], own_weights, rtol=0, atol=1e-3)
    prior = guide.posterior.alpha * pm.stick_breaking_weights(guide.posterior.rho)
    torch.testing.assert_close(theta - prior, torch.tensor([[30.0], [5.0], [12.0]], dtype=F64) * probs[[0, 30, 35]])


def test_a_call_without_the_words_that_needs_them_names_the_argument():
    doc_of, words, D, V = corpus(15)
    pyro.clear_param_store()
    own = pm.models.HDPTopicModel(V, K)
    with pytest.raises(ValueError, match="observes nothing.*call with the data"):
        pm.HDPGuide(own)(doc_of)  # no fitted topics to generate from, and none to start from
    guide = pm.HDPGuide(own)
    guide(doc_of, words)
    with pytest.raises(ValueError, match="passes no word ids.*positional argument 1.*site 'x'"):
        guide.elbo(doc_of)  # the bound scores words


def test_the_initial_topics_count_the_picked_documents_words_alone():
    """``picked_counts`` equals rows ``pick`` of the corpus' (documents, V) count table, which the guide no
    longer forms (repeated and empty documents included), over random corpora."""
    from pyro_memo.bridge.hdp_guide import picked_counts

    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        D, V, N = (int(torch.randint(1, hi, (1,), generator=g)) for hi in (30, 20, 300))
        doc, word = torch.randint(D, (N,), generator=g), torch.randint(V, (N,), generator=g)
        pick = torch.randint(D, (int(torch.randint(1, 8, (1,), generator=g)),), generator=g)
        table = torch.zeros(D, V, dtype=F64).index_put_((doc, word), torch.ones(N, dtype=F64), accumulate=True)
        assert torch.equal(picked_counts(doc, word, pick, V), table[pick])


def test_fit_vb_continues_from_an_hdp_guide_as_fit_memoized_does():
    """``fit_vb(model, ..., guide=hdp_guide)`` raised AttributeError "'HDPSpec' object has no attribute 'data'" (it took
    every guide for a DP mixture's); ``fit_memoized`` continued from it."""
    doc_of, words, D, V = corpus(0)
    pyro.clear_param_store()
    first = pm.fit_vb(model, doc_of, words, D, V, max_iter=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning
        again = pm.fit_vb(model, doc_of, words, D, V, guide=first.guide, max_iter=20)
    assert again.guide is first.guide and again.elbo >= first.elbo - 1e-6
