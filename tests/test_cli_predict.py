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


def test_a_second_fit_replaces_the_model_file(data, capsys):
    save = data / "fit"
    assert main(["fit", str(data / "train.npz"), "--K", "4", "--laps", "3", "--save", str(save), "--quiet"]) == 0
    assert main(["fit", str(data / "train.npz"), "--K", "7", "--laps", "3", "--save", str(save), "--quiet",
                 "--family", "diag-gauss"]) == 0
    model = pm.load_model(save / "model.pt")
    assert model.K == 7 and model.family.name == "diag-gauss"
