"""``pyro-memo fit --save DIR`` writes DIR/model.pt; ``pyro-memo predict`` with it reproduces the
fit's labels exactly and scores new data as the library does."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.data import bars_corpus
from tests.conftest import make_data


@pytest.fixture
def data(tmp_path):
    x = make_data("gauss", 240, D=2, seed=0, clusters=3).numpy()
    np.savez(tmp_path / "train.npz", x=x)
    np.savez(tmp_path / "new.npz", x=make_data("gauss", 40, D=2, seed=5, clusters=3).numpy())
    return tmp_path


@pytest.mark.parametrize("options", [["--algo", "vb"], ["--algo", "memo", "--batches", "3"],
                                     ["--family", "diag-gauss"], ["--family", "zm-gauss", "--algo", "memo"]])
def test_predict_reproduces_the_labels_fit_wrote(data, capsys, options):
    save = data / "fit"
    assert main(["fit", str(data / "train.npz"), "--K", "6", "--laps", "10", "--save", str(save), "--quiet",
                 *options]) == 0
    assert (save / "model.pt").is_file()
    capsys.readouterr()
    assert main(["predict", str(save), str(data / "train.npz")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "240 items" in out[0] and "predictions.npz" in out[0]
    fitted = np.load(save / "posterior.npz")["labels"]
    predicted = np.load(save / "predictions.npz")
    assert np.array_equal(predicted["labels"], fitted)
    assert len(np.unique(fitted)) > 1
    # new data: the same numbers as the library's loaded model
    target = data / "new_pred.npz"
    assert main(["predict", str(save / "model.pt"), str(data / "new.npz"), "--out", str(target)]) == 0
    model = pm.load_model(save / "model.pt")
    x_new = np.load(data / "new.npz")["x"]
    new = np.load(target)
    assert np.array_equal(new["labels"], model.predict(x_new).numpy())
    assert np.array_equal(new["log_density"], model.score_samples(x_new).numpy())
    assert new["log_density"].shape == (40,) and np.isfinite(new["log_density"]).all()


def test_hdp_fit_save_then_predict(tmp_path, capsys):
    save = tmp_path / "hdp"
    assert main(["fit", "bars", "--model", "hdp", "--K", "5", "--batches", "2", "--laps", "2", "--save", str(save),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["predict", str(save), "bars", "--out", str(tmp_path / "p.npz")]) == 0
    assert "500 documents" in capsys.readouterr().out
    out = np.load(tmp_path / "p.npz")
    model = pm.load_model(save / "model.pt")
    corpus = bars_corpus()[0]
    assert out["topic_proportions"].shape == (500, model.K + 1)
    assert np.allclose(out["topic_proportions"].sum(1), 1.0)
    assert np.array_equal(out["topic_proportions"], model.predict_proba(corpus).numpy())
    assert np.array_equal(out["log_likelihood"], model.score_samples(corpus).numpy())
    assert np.array_equal(out["labels"], out["topic_proportions"][:, :-1].argmax(1))
    # the saved topics are the ones fit wrote to topics.npz
    topics = np.load(save / "topics.npz")["topic_word"]
    assert torch.equal(torch.as_tensor(topics), model.posterior.topic_means())


@pytest.fixture(scope="module")
def hdp_model(tmp_path_factory):
    """A small HDP model over a 12-word vocabulary, fitted and saved by the command line."""
    import scipy.sparse as sp

    folder = tmp_path_factory.mktemp("hdp12")
    rng = np.random.default_rng(0)
    sp.save_npz(folder / "c.npz", sp.csr_matrix(rng.poisson(2.0, size=(30, 12)).astype(float)))
    assert main(["fit", str(folder / "c.npz"), "--model", "hdp", "--K", "3", "--batches", "1", "--laps", "2",
                 "--save", str(folder / "m"), "--quiet"]) == 0
    return folder


@pytest.mark.parametrize("columns", [5, 20])
def test_hdp_predict_refuses_a_count_matrix_of_another_width(hdp_model, tmp_path, capsys, columns):
    # 5 columns were scored silently (as a corpus over the model's first 5 words)
    import scipy.sparse as sp

    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(np.ones((4, columns))))
    capsys.readouterr()
    assert main(["predict", str(hdp_model / "m"), str(tmp_path / "x.npz"), "--out", str(tmp_path / "p.npz")]) == 2
    err = capsys.readouterr().err
    assert f"X has {columns} features, but the model" in err and "is expecting 12 features as input" in err
    assert err.count("error") == 1 and "Traceback" not in err and not (tmp_path / "p.npz").exists()


def _ldac(folder, words, docs):
    """An LDA-C corpus ``folder/c.ldac`` with ``folder/vocab.txt`` beside it; ``docs`` lists word-id counts."""
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    lines = [f"{len(d)} " + " ".join(f"{v}:{c}" for v, c in d.items()) for d in docs]
    (folder / "c.ldac").write_text("\n".join(lines) + "\n")
    return str(folder / "c.ldac")


def test_hdp_predict_refuses_a_corpus_whose_vocabulary_numbers_words_otherwise(tmp_path, capsys):
    # the model kept no vocabulary, and a renumbered corpus was scored silently against the wrong words
    words = ["apple", "banana", "cherry", "date", "elder", "fig"]
    docs = [{0: 3, 1: 2}, {2: 4, 3: 1}, {4: 2, 5: 3}, {0: 1, 5: 2}] * 3
    train = _ldac(tmp_path / "train", words, docs)
    assert main(["fit", train, "--model", "hdp", "--K", "3", "--batches", "1", "--laps", "2", "--save",
                 str(tmp_path / "m"), "--quiet"]) == 0
    assert pm.load_model(tmp_path / "m" / "model.pt").vocab == words
    same = _ldac(tmp_path / "same", words, docs[:2])
    assert main(["predict", str(tmp_path / "m"), same, "--out", str(tmp_path / "p.npz")]) == 0
    renumbered = _ldac(tmp_path / "renumbered", ["apple", "cherry", "banana", "date", "elder", "fig"], docs[:2])
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "m"), renumbered, "--out", str(tmp_path / "q.npz")]) == 2
    err = capsys.readouterr().err
    assert "numbers its words otherwise than the model: word id 1 is 'cherry' in the corpus's vocabulary and " \
           "'banana' in the model's" in err
    assert err.count("error") == 1 and "Traceback" not in err and not (tmp_path / "q.npz").exists()


def test_hdp_fit_says_which_vocabulary_it_read(tmp_path, capsys):
    # the vocab.txt beside an LDA-C file was picked up without a word
    path = _ldac(tmp_path / "c", ["a", "b", "c"], [{0: 2, 1: 1}, {2: 3}] * 4)
    fit = ["fit", path, "--model", "hdp", "--K", "2", "--batches", "1", "--laps", "1"]
    assert main(fit) == 0
    assert f"words from {tmp_path / 'c' / 'vocab.txt'}" in capsys.readouterr().out
    (tmp_path / "c" / "vocab.txt").unlink()
    assert main(fit) == 0
    assert "words from" not in capsys.readouterr().out


def test_hdp_predict_on_a_corpus_without_tokens_says_so(hdp_model, tmp_path, capsys):
    # it printed "log-likelihood 0.0000 per token"
    import scipy.sparse as sp

    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(np.zeros((5, 12))))
    capsys.readouterr()
    assert main(["predict", str(hdp_model / "m"), str(tmp_path / "x.npz"), "--out", str(tmp_path / "p.npz")]) == 0
    out = capsys.readouterr().out
    assert "no tokens" in out and "per token under" not in out and "0.0000" not in out
    model = pm.load_model(hdp_model / "m" / "model.pt")
    prior = model.posterior.expected_beta().numpy()
    np.testing.assert_allclose(np.load(tmp_path / "p.npz")["topic_proportions"], np.tile(prior, (5, 1)))


def test_hdp_fit_refuses_a_corpus_without_tokens(tmp_path, capsys):
    # ZeroDivisionError in the summary (bound / num_tokens) with --init documents
    import scipy.sparse as sp

    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(np.zeros((5, 12))))
    assert main(["fit", str(tmp_path / "x.npz"), "--model", "hdp", "--K", "3", "--batches", "1", "--init",
                 "documents", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "every document is empty (the corpus has no tokens" in err and err.count("error") == 1


def test_a_second_fit_replaces_the_model_file(data, capsys):
    save = data / "fit"
    assert main(["fit", str(data / "train.npz"), "--K", "4", "--laps", "3", "--save", str(save), "--quiet"]) == 0
    assert main(["fit", str(data / "train.npz"), "--K", "7", "--laps", "3", "--save", str(save), "--quiet",
                 "--family", "diag-gauss"]) == 0
    model = pm.load_model(save / "model.pt")
    assert model.K == 7 and model.family.name == "diag-gauss"


def test_predict_on_a_memory_bounded_hdp_folder_says_it_writes_no_model_file(tmp_path, capsys):
    # was "no model.pt there (write one with pyro-memo fit --save DIR)", the command that had written DIR
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "groups.npz", x=rng.normal(size=(40, 2)), groups=np.repeat(np.arange(4), 10))
    assert main(["fit", str(tmp_path / "groups.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "200",
                 "--epoch", "2", "--K", "2", "--quiet", "--save", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "groups.npz")]) == 2
    err = capsys.readouterr().err
    assert "--algo memory-bounded" in err and "posterior.npz" in err and "write one with" not in err, err


@pytest.mark.parametrize("vocab_words", [30, 5])
def test_hdp_predict_refuses_a_corpus_over_another_vocabulary(hdp_model, tmp_path, capsys, vocab_words):
    """An LDA-C corpus whose vocab.txt lists fewer words than the model's vocabulary was scored by word id as if
    the ids meant the model's words (5 words against 12: no error; a 6,130-word Wikipedia model scored a 50-word
    corpus, and the 25-word bars, likewise), though a count matrix of another width is refused and so was a larger
    vocabulary (30 words)."""
    rng = np.random.default_rng(0)
    folder = tmp_path / f"v{vocab_words}"
    folder.mkdir()
    ids = [rng.choice(5, 3, replace=False) for _ in range(6)]  # ids every vocabulary here holds
    (folder / "c.ldac").write_text("".join(f"3 {' '.join(f'{i}:2' for i in d)}\n" for d in ids))
    (folder / "vocab.txt").write_text("".join(f"w{i}\n" for i in range(vocab_words)))
    capsys.readouterr()
    assert main(["predict", str(hdp_model / "m"), str(folder / "c.ldac"), "--out", str(tmp_path / "p.npz")]) == 2
    err = capsys.readouterr().err
    assert f"{vocab_words} words but the model" in err and "has 12" in err, err
    assert err.count("error") == 1 and not (tmp_path / "p.npz").exists()
    (folder / "vocab.txt").write_text("".join(f"w{i}\n" for i in range(12)))  # the model's size: read as before
    assert main(["predict", str(hdp_model / "m"), str(folder / "c.ldac"), "--out", str(tmp_path / "p.npz")]) == 0
