"""The topic-model comparison: every method scored by the same document completion, tables
after every run, budgets, optional libraries' errors, external topics as posteriors."""

import csv
import sys

import numpy as np
import pytest
import torch

from pyro_memo.comparison import TOPIC_COLUMNS, Budget, TopicSettings, compare_topics
from pyro_memo.comparison.topic_methods import TOPIC_METHODS, posterior_from_topics
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import document_completion, split_documents


@pytest.fixture(scope="module")
def bars():
    corpus, topics, _ = bars_corpus(150, 60, alpha=0.2, seed=5)
    train, test = split_documents(corpus, 0.2, seed=0)
    return train, test, topics


def test_compare_topics_scores_every_run_alike_and_writes_tables(bars, tmp_path):
    train, test, topics = bars
    settings = TopicSettings(K=12, batches=3)
    messages = []
    rows, runs = compare_topics(train, test, ["memo", "memo-moves", "svi-k0.5-d10"], seeds=(0,),
                                budget=Budget(passes=4), settings=settings, out_dir=str(tmp_path),
                                progress=messages.append)
    assert [r["method"] for r in rows] == ["memo", "memo-moves", "svi-k0.5-d10"]
    assert len(messages) == 3
    for row in rows:
        run = runs[(row["method"], row["seed"])]
        assert row["laps"] == 4 and len(run.bound) == 4
        # the table's held-out score is the document completion of the run's own globals
        assert row["heldout_per_token"] == pytest.approx(document_completion(run.posterior, test), rel=1e-12)
        assert np.isfinite(row["bound_per_token"])
    for method in ("memo", "memo-moves"):  # memoized bounds never fall
        assert np.all(np.diff(runs[(method, 0)].bound) >= -1e-9)
    # the true bars as topics score near the memoized fit with births and merges
    oracle = posterior_from_topics(topics, np.ones(len(topics)), settings, train.num_tokens)
    assert rows[1]["heldout_per_token"] > document_completion(oracle, test) - 0.05
    with open(tmp_path / "runs.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 3 and tuple(table[0]) == TOPIC_COLUMNS
    assert (tmp_path / "summary.md").read_text().count("\n") == 2 + 3
    with open(tmp_path / "traces.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 3 * 4


def test_seconds_budget_stops_a_run(bars, monkeypatch):
    """A time budget, tested with an injected clock (one second per reading), not the machine's."""
    from pyro_memo.comparison import clock

    ticks = iter(range(10**6))
    monkeypatch.setattr(clock, "now", lambda: float(next(ticks)))
    train, test, _ = bars
    rows, runs = compare_topics(train, test, ["memo"], seeds=(0, 1), budget=Budget(passes=1000, seconds=0.5),
                                settings=TopicSettings(K=8, batches=2))
    assert [r["seed"] for r in rows] == [0, 1]
    # the set-up alone reads one second off the clock: the budget is spent after the first lap
    assert all(r["laps"] == 1 and r["seconds"] >= 1.0 for r in rows)


def test_posterior_from_topics_keeps_the_topics_and_weights():
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.ones(30), size=5)
    weights = np.array([5.0, 1.0, 3.0, 0.5, 0.5])
    post = posterior_from_topics(phi, weights, TopicSettings(lam0=0.01), tokens=1e6)
    order = np.argsort(-weights, kind="stable")
    np.testing.assert_allclose(post.topic_means().numpy(), phi[order], atol=1e-6)
    beta = post.expected_beta().numpy()
    np.testing.assert_allclose(beta[:-1], 0.99 * weights[order] / weights.sum(), rtol=1e-6)
    assert beta[-1] == pytest.approx(0.01, rel=1e-6)


@pytest.mark.parametrize("method,module", [("gensim-hdp", "gensim"), ("tomotopy-hdp", "tomotopy")])
def test_optional_libraries_missing_give_one_clear_error(bars, method, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    if module == "gensim":
        monkeypatch.setitem(sys.modules, "gensim.models", None)
    with pytest.raises(ImportError, match=f"{method} needs {module}"):
        TOPIC_METHODS[method](bars[0], Budget(passes=1), TopicSettings(K=5), 0)


def test_bad_arguments_raise(bars):
    train, test, _ = bars
    with pytest.raises(ValueError, match="unknown topic methods"):
        compare_topics(train, test, ["memo", "lda"])
    with pytest.raises(TypeError, match="test must be a pyro_memo.topics.Corpus"):
        compare_topics(train, torch.zeros(3, 3), ["memo"])
    other, _, _ = bars_corpus(20, 10, side=4, seed=0)
    with pytest.raises(ValueError, match="vocabularies differ"):
        compare_topics(train, other, ["memo"])



def test_topic_outputs_have_the_mixture_tables_plots_and_read_back(bars, tmp_path):
    from pyro_memo.comparison import TOPIC_TABLE, merge_outputs, read_outputs

    train, test, _ = bars
    rows, runs = compare_topics(train, test, ["memo"], seeds=(0, 1), budget=Budget(passes=2),
                                settings=TopicSettings(K=6, batches=2), out_dir=str(tmp_path / "a"))
    for name in ("bound_vs_laps.png", "bound_vs_seconds.png", "k_vs_laps.png", "final_heldout.png"):
        assert (tmp_path / "a" / name).read_bytes()[:4] == b"\x89PNG", name
    back, back_runs = read_outputs(str(tmp_path / "a"), TOPIC_TABLE)
    assert [(r["method"], r["seed"], r["effective_topics"]) for r in back] == \
        [(r["method"], r["seed"], r["effective_topics"]) for r in rows]
    assert back[1]["heldout_per_token"] == pytest.approx(rows[1]["heldout_per_token"], rel=1e-12)
    assert back_runs[("memo", 1)].bound == pytest.approx(runs[("memo", 1)].bound, rel=1e-12)
    merged, _ = merge_outputs(str(tmp_path / "m"), [str(tmp_path / "a")], TOPIC_TABLE)
    assert len(merged) == 2 and (tmp_path / "m" / "final_heldout.png").exists()


def test_cli_compare_runs_the_hdp_task(tmp_path, capsys):
    from pyro_memo.cli import main

    out = tmp_path / "out"
    assert main(["compare", "bars", "--model", "hdp", "--methods", "memo,svi-k0.5-d10", "--seeds", "0", "--passes",
                 "2", "--K", "6", "--batches", "2", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "| memo | 1 |" in printed and "| svi-k0.5-d10 | 1 |" in printed and "heldout_per_token" in printed
    with open(out / "runs.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == TOPIC_COLUMNS and [r["laps"] for r in table] == ["2", "2"]
    assert all(np.isfinite(float(r["heldout_per_token"])) for r in table)
