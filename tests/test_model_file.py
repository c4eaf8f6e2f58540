"""save_model / load_model: exact round trips for every kind of fit, atomic writes, and the
files load_model refuses (each with one ValueError naming the file)."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo import model_file
from pyro_memo.data import bars_corpus
from pyro_memo.inference.predictive import vb_log_predictive
from pyro_memo.topics import MemoizedHDP, doc_topic_weights
from tests.conftest import make_data


def _dp_fit(algo, family_name):
    x = make_data(family_name, 300, D=3, seed=1, clusters=3).to(torch.float64)
    family = pm.get_family(family_name).from_data(x)
    if algo == "vb":
        fit = pm.FullBatchVB(family, 6, 1.0, max_iter=15, seed=0).fit(x)
    else:
        fit = pm.MemoizedVB(family, 6, 1.0, laps=4, seed=0).fit(x, num_batches=3)
    new = make_data(family_name, 50, D=3, seed=7, clusters=3).to(torch.float64)
    return fit, x, new


@pytest.mark.parametrize("algo", ["vb", "memo"])
@pytest.mark.parametrize("family_name", ["gauss", "diag-gauss", "zm-gauss"])
def test_dp_mixture_round_trip_is_exact(tmp_path, algo, family_name):
    fit, x, new = _dp_fit(algo, family_name)
    path = tmp_path / "model.pt"
    pm.save_model(path, fit)
    loaded = pm.load_model(path)
    assert loaded.kind == "dp-mixture" and loaded.family.name == family_name and loaded.K == fit.posterior.K
    assert loaded.posterior.sticks.alpha == fit.posterior.sticks.alpha
    assert loaded.posterior.dtype == torch.float64
    for data in (x, new):
        resp = fit.posterior.responsibilities(data)
        assert torch.equal(loaded.predict_proba(data), resp)
        assert torch.equal(loaded.predict(data), resp.argmax(-1))
        assert torch.equal(loaded.score_samples(data), vb_log_predictive(fit.posterior, fit.summary, data))
    # a numpy array is accepted and gives the same labels
    assert torch.equal(loaded.predict(new.numpy()), loaded.predict(new))
    # the labels are not all one component: the test could fail
    assert len(torch.unique(loaded.predict(x))) > 1


def test_a_posterior_and_summary_pair_and_a_loaded_model_save_alike(tmp_path):
    fit, x, _ = _dp_fit("vb", "gauss")
    pm.save_model(tmp_path / "a.pt", (fit.posterior, fit.summary))
    pm.save_model(tmp_path / "b.pt", fit.posterior, summary=fit.summary)
    pm.save_model(tmp_path / "c.pt", pm.load_model(tmp_path / "a.pt"))
    scores = [pm.load_model(tmp_path / f"{n}.pt").score_samples(x) for n in "abc"]
    assert torch.equal(scores[0], scores[1]) and torch.equal(scores[0], scores[2])


def test_save_model_refuses_what_it_cannot_save(tmp_path):
    fit, _, _ = _dp_fit("vb", "gauss")
    with pytest.raises(ValueError, match="summary"):
        pm.save_model(tmp_path / "m.pt", fit.posterior)
    with pytest.raises(TypeError, match="cannot save"):
        pm.save_model(tmp_path / "m.pt", torch.ones(3))
    assert not (tmp_path / "m.pt").exists()


def test_a_fitted_estimator_saves_as_its_posterior_and_an_unfitted_one_is_refused(tmp_path):
    """save_model(path, est) for a fitted DPMixture / HDPTopics (a TypeError "cannot save a DPMixture" before):
    the file is the one (est.posterior_, est.summary_) gives, and predicts as the estimator does."""
    from pyro_memo.topic_estimator import TRANSFORM_ITERS, TRANSFORM_TOL

    x = make_data("gauss", 200, D=2, seed=1, clusters=3).numpy()
    est = pm.DPMixture(n_components=4, max_iter=50, tol=1e-4, random_state=0).fit(x)
    pm.save_model(tmp_path / "dp.pt", est)
    loaded = pm.load_model(tmp_path / "dp.pt")
    assert np.array_equal(loaded.score_samples(x).numpy(), est.score_samples(x))
    assert np.array_equal(est.component_of_label_[est.predict(x)], loaded.predict(x).numpy())
    counts = np.random.default_rng(0).poisson(1.0, (30, 12))
    topics = pm.HDPTopics(n_components=3, max_iter=50, tol=1e-4, random_state=0).fit(counts)
    pm.save_model(tmp_path / "hdp.pt", topics)
    pi = pm.load_model(tmp_path / "hdp.pt").predict_proba(pm.topics.from_counts(counts), TRANSFORM_ITERS,
                                                         TRANSFORM_TOL)[:, :-1]
    assert np.array_equal((pi / pi.sum(1, keepdim=True)).numpy(), topics.transform(counts))
    for unfitted in (pm.DPMixture(), pm.HDPTopics()):
        with pytest.raises(ValueError, match=f"this {type(unfitted).__name__} is not fitted; call its fit"):
            pm.save_model(tmp_path / "none.pt", unfitted)
    assert not (tmp_path / "none.pt").exists()


def test_a_saved_topic_model_and_its_estimator_give_the_same_proportions_by_default(tmp_path):
    """SavedTopics.predict_proba ran 200 document iterations to tol 1e-4 by default, HDPTopics.transform 1000 to
    1e-10: the same model gave proportions 2.8e-4 apart (and other scores) by the path taken. Both paths now
    share doc_topic_weights's defaults (pyro_memo.topics.heldout.PREDICT_ITERS, PREDICT_TOL)."""
    from pyro_memo import topic_estimator
    from pyro_memo.topics import heldout

    assert (topic_estimator.TRANSFORM_ITERS, topic_estimator.TRANSFORM_TOL) == (heldout.PREDICT_ITERS,
                                                                                heldout.PREDICT_TOL)
    counts = np.random.default_rng(0).poisson(1.0, (40, 15))
    topics = pm.HDPTopics(n_components=4, max_iter=50, tol=1e-4, random_state=0).fit(counts)
    pm.save_model(tmp_path / "hdp.pt", topics)
    loaded, corpus = pm.load_model(tmp_path / "hdp.pt"), pm.topics.from_counts(counts)
    pi = loaded.predict_proba(corpus)[:, :-1]
    assert np.array_equal((pi / pi.sum(1, keepdim=True)).numpy(), topics.transform(counts))
    assert np.array_equal(loaded.score_samples(corpus).numpy(), topics.score_samples(counts))
    assert torch.equal(loaded.predict_proba(corpus), doc_topic_weights(loaded.posterior, corpus,
                                                                       np.arange(corpus.num_docs)))


def test_an_hdp_topics_fitted_to_a_dataframe_saves_its_columns_as_the_vocabulary(tmp_path):
    counts = np.random.default_rng(0).poisson(1.0, (30, 6))
    words = ["ant", "bee", "cat", "dog", "eel", "fox"]
    topics = pm.HDPTopics(n_components=3, max_iter=50, tol=1e-4, random_state=0).fit(counts)
    topics.feature_names_in_ = np.asarray(words, dtype=object)  # as fit sets it from a DataFrame's columns
    pm.save_model(tmp_path / "hdp.pt", topics)
    loaded = pm.load_model(tmp_path / "hdp.pt")
    assert loaded.vocab == words and all(type(word) is str for word in loaded.vocab)
    with pytest.raises(ValueError, match="word id 0 is 'bee' in the corpus's vocabulary and 'ant' in the model's"):
        loaded.predict_proba(pm.topics.from_counts(counts, vocab=words[1:] + words[:1]))
    plain = pm.HDPTopics(n_components=3, max_iter=50, tol=1e-4, random_state=0).fit(counts)
    pm.save_model(tmp_path / "plain.pt", plain)
    assert pm.load_model(tmp_path / "plain.pt").vocab is None  # no column names: no words


@pytest.mark.parametrize("path", [None, 3, b"m.pt", "io"])
def test_save_model_refuses_a_path_that_is_no_file_name(tmp_path, monkeypatch, path):
    """save_model(None, fit) wrote a file named "None" in the working directory (3: "3", an open file: its repr)."""
    import io

    monkeypatch.chdir(tmp_path)
    fit, _, _ = _dp_fit("vb", "gauss")
    path = io.BytesIO() if path == "io" else path
    with pytest.raises(TypeError, match=f"model file path must be a file name .*; got a {type(path).__name__}"):
        pm.save_model(path, fit)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def hdp_fit():
    corpus = bars_corpus()[0]
    fit = MemoizedHDP(K=6, laps=3, seed=0).fit(corpus, 2)
    return fit, corpus


def test_hdp_round_trip_is_exact(tmp_path, hdp_fit):
    fit, corpus = hdp_fit
    pm.save_model(tmp_path / "hdp.pt", fit)
    loaded = pm.load_model(tmp_path / "hdp.pt")
    assert loaded.kind == "hdp-topics" and loaded.K == fit.posterior.K and loaded.V == corpus.vocab_size
    for name in ("lam", "rho", "omega"):
        assert torch.equal(getattr(loaded.posterior, name), getattr(fit.posterior, name))
    assert torch.equal(loaded.summary.word_counts, fit.summary.word_counts)
    assert loaded.posterior.elbo(loaded.summary) == fit.posterior.elbo(fit.summary)
    docs = np.arange(corpus.num_docs)
    expected = doc_topic_weights(fit.posterior, corpus, docs)
    assert torch.equal(loaded.predict_proba(corpus), expected)
    assert torch.equal(loaded.predict(corpus), expected[:, :-1].argmax(-1))
    scores = loaded.score_samples(corpus)
    original = model_file.SavedTopics(fit.posterior).score_samples(corpus)
    assert torch.equal(scores, original)
    assert scores.shape == (corpus.num_docs,) and bool((scores < 0).all())
    assert pm.topics.document_completion(loaded.posterior, corpus) == pm.topics.document_completion(fit.posterior,
                                                                                                    corpus)


def test_hdp_refuses_a_corpus_with_more_words(hdp_fit):
    fit, corpus = hdp_fit
    bigger = pm.topics.Corpus(corpus.doc_ptr, corpus.word_ids, corpus.counts, corpus.vocab_size + 5)
    with pytest.raises(ValueError, match="vocabulary"):
        model_file.SavedTopics(fit.posterior).predict_proba(bigger)


def _words(V, swap=None):
    words = [f"w{v}" for v in range(V)]
    if swap is not None:
        i, j = swap
        words[i], words[j] = words[j], words[i]
    return words


def test_hdp_model_keeps_its_vocabulary_and_refuses_a_corpus_numbered_otherwise(tmp_path, hdp_fit):
    fit, corpus = hdp_fit
    V = corpus.vocab_size
    pm.save_model(tmp_path / "hdp.pt", fit, vocab=_words(V))
    loaded = pm.load_model(tmp_path / "hdp.pt")
    assert loaded.vocab == _words(V)

    def with_vocab(words):
        return pm.topics.Corpus(corpus.doc_ptr, corpus.word_ids, corpus.counts, V, words)

    expected = loaded.predict_proba(with_vocab(None))  # a corpus without words is read by id, as before
    assert torch.equal(loaded.predict_proba(with_vocab(_words(V))), expected)
    with pytest.raises(ValueError, match="word id 3 is 'w7' in the corpus's vocabulary and 'w3' in the model's"):
        loaded.predict_proba(with_vocab(_words(V, swap=(3, 7))))
    assert model_file.SavedTopics(fit.posterior).predict_proba(with_vocab(_words(V, swap=(3, 7)))).shape \
        == expected.shape  # a model saved without words cannot tell


def test_a_file_without_a_vocabulary_reads_as_a_model_without_one(tmp_path, hdp_fit):
    pm.save_model(tmp_path / "hdp.pt", hdp_fit[0])
    payload = torch.load(tmp_path / "hdp.pt", weights_only=True)
    assert payload["vocab"] is None
    del payload["vocab"]  # as a file written before the vocabulary was kept
    torch.save(payload, tmp_path / "old.pt")
    assert pm.load_model(tmp_path / "old.pt").vocab is None


@pytest.mark.parametrize("vocab, found", [(["a", "b"], "got 2 items of type str"),
                                          (list(range(25)), "got 25 items of type int")])
def test_save_model_refuses_a_vocabulary_that_is_not_one_word_per_id(tmp_path, hdp_fit, vocab, found):
    expected = f"vocab must be 25 words \\(strings\\), one per word id of the model; {found}"
    with pytest.raises(ValueError, match=expected):
        pm.save_model(tmp_path / "hdp.pt", hdp_fit[0], vocab=vocab)
    assert not (tmp_path / "hdp.pt").exists()


def test_save_model_refuses_a_vocabulary_for_a_dp_mixture(tmp_path):
    fit, _, _ = _dp_fit("vb", "gauss")
    with pytest.raises(ValueError, match="vocab applies to a topic model"):
        pm.save_model(tmp_path / "m.pt", fit, vocab=["a"])


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    fit, x, _ = _dp_fit("vb", "gauss")
    path = tmp_path / "model.pt"
    pm.save_model(path, fit)
    before = path.read_bytes()
    real_save = torch.save

    def broken_save(obj, f, *args, **kwargs):
        with open(f, "wb") as fh:
            fh.write(b"half a file")
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    other, _, _ = _dp_fit("memo", "diag-gauss")
    with pytest.raises(OSError, match="model.pt"):
        pm.save_model(path, other)
    monkeypatch.setattr(torch, "save", real_save)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # no temporary file left
    assert pm.load_model(path).family.name == "gauss"


@pytest.fixture
def good_file(tmp_path):
    fit, _, _ = _dp_fit("vb", "gauss")
    path = tmp_path / "model.pt"
    pm.save_model(path, fit)
    return path


def _refused(path, match):
    with pytest.raises(ValueError, match=match) as err:
        pm.load_model(path)
    assert str(path) in str(err.value)


def test_missing_empty_truncated_and_garbage_files_are_refused(tmp_path, good_file):
    _refused(tmp_path / "none.pt", "no such model file")
    (tmp_path / "empty.pt").write_bytes(b"")
    _refused(tmp_path / "empty.pt", "damaged")
    data = good_file.read_bytes()
    (tmp_path / "half.pt").write_bytes(data[: len(data) // 2])
    _refused(tmp_path / "half.pt", "damaged")
    (tmp_path / "junk.pt").write_bytes(b"\x80\x02 not a torch file")
    _refused(tmp_path / "junk.pt", "damaged")


def test_foreign_newer_and_inconsistent_files_are_refused(tmp_path, good_file):
    torch.save({"weights": torch.ones(3)}, tmp_path / "foreign.pt")
    _refused(tmp_path / "foreign.pt", "not a pyro-memo model file")
    torch.save({"format_version": 2, "laps_done": 3}, tmp_path / "state.pt")
    _refused(tmp_path / "state.pt", "checkpoint")
    d = torch.load(good_file, weights_only=True)
    torch.save({**d, "format_version": model_file.MODEL_FORMAT_VERSION + 1}, tmp_path / "newer.pt")
    _refused(tmp_path / "newer.pt", "newer")
    torch.save({**d, "kind": "lda"}, tmp_path / "kind.pt")
    _refused(tmp_path / "kind.pt", "lda")
    torch.save({k: v for k, v in d.items() if k != "summary"}, tmp_path / "nosummary.pt")
    _refused(tmp_path / "nosummary.pt", "damaged")
    summary = dict(d["summary"], counts=d["summary"]["counts"][:2])
    torch.save({**d, "summary": summary}, tmp_path / "short.pt")
    _refused(tmp_path / "short.pt", "components")


def test_a_checkpoint_is_still_written_and_read(tmp_path):
    """The helpers save_state now shares with save_model keep the checkpoint's behaviour."""
    fit, _, _ = _dp_fit("memo", "gauss")
    pm.save_state(tmp_path / "state.pt", fit.state)
    state = pm.load_state(tmp_path / "state.pt")
    assert torch.equal(state.posterior.eta1, fit.posterior.eta1)
    torch.save([1, 2], tmp_path / "foreign_state.pt")
    with pytest.raises(ValueError, match="not a pyro-memo checkpoint"):
        pm.load_state(tmp_path / "foreign_state.pt")
    with pytest.raises(ValueError, match="a pyro-memo model file .*not a checkpoint.*load_model"):
        pm.load_state(good_model_path(tmp_path, fit))


def good_model_path(folder, fit):
    path = folder / "model.pt"
    pm.save_model(path, fit)
    return path


def _edited(good_file, folder, name, edit):
    """A copy of ``good_file`` at ``folder/name`` with ``edit(d)`` applied to its payload (checksums valid)."""
    d = torch.load(good_file, weights_only=True)
    edit(d)
    torch.save(d, folder / name)
    return folder / name


@pytest.mark.parametrize("edit, fields", [
    (lambda d: d["posterior"]["component"].update(m=d["posterior"]["component"]["m"][:-1]), ["component 'm'"]),
    (lambda d: d["posterior"]["component"].update(B=d["posterior"]["component"]["B"][:, :2, :2]), ["component 'B'"]),
    (lambda d: d["posterior"].update(eta0=d["posterior"]["eta0"][:-1]), ["eta0"]),
    (lambda d: d["summary"]["stats"].update(x=d["summary"]["stats"]["x"][:, :2]), ["summary stats 'x'"]),
    (lambda d: (d["posterior"]["component"].update(kappa=d["posterior"]["component"]["kappa"][:-1]),
                d["summary"].update(entropy=d["summary"]["entropy"][:-1])), ["component 'kappa'", "summary entropy"]),
])
def test_a_dp_model_file_with_inconsistent_shapes_is_refused_at_load(tmp_path, good_file, edit, fields):
    """A hand-edited file (valid checksums) whose tensors disagree on K or D loaded, then failed at predict
    with torch's "The size of tensor a (6) must match the size of tensor b (5)"; now load_model refuses it
    with one ValueError naming the file and every inconsistent field."""
    path = _edited(good_file, tmp_path, "edited.pt", edit)
    with pytest.raises(ValueError, match="inconsistent shapes") as err:
        pm.load_model(path)
    assert str(path) in str(err.value)
    for field in fields:
        assert field in str(err.value)


def test_an_hdp_model_file_with_inconsistent_shapes_is_refused_at_load(tmp_path, hdp_fit):
    pm.save_model(tmp_path / "hdp.pt", hdp_fit[0])

    def edit(d):
        d["posterior"]["rho"] = d["posterior"]["rho"][:-1]
        d["summary"]["word_counts"] = d["summary"]["word_counts"][:, :-1]

    path = _edited(tmp_path / "hdp.pt", tmp_path, "edited.pt", edit)
    with pytest.raises(ValueError, match="inconsistent shapes") as err:
        pm.load_model(path)
    assert str(path) in str(err.value) and "rho" in str(err.value) and "summary word_counts" in str(err.value)
