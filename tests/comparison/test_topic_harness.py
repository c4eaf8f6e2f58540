"""The topic-model comparison: every method scored by the same document completion, tables
after every run, budgets, optional libraries' errors, external topics as posteriors."""

import csv
import sys

import numpy as np
import pytest
import torch

from pyro_memo.comparison import TOPIC_COLUMNS, Budget, TopicSettings, compare_topics
from pyro_memo.comparison.topic_methods import TOPIC_METHODS, point_estimate, posterior_from_topics
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


def test_posterior_from_topics_defaults_match_a_hand_computed_case():
    phi = np.array([[2.0, 1.0, 1.0], [1.0, 1.0, 2.0]])  # rows normalised inside
    settings = TopicSettings(alpha=0.5, gamma=10.0, lam0=0.1)
    post = posterior_from_topics(phi, [1.0, 3.0], settings, tokens=100)
    # the heavier topic (weight 0.75) first; lam = lam0 + phi_k / sum(phi_k) * w_k * tokens
    lam = np.array([[0.1 + 18.75, 0.1 + 18.75, 0.1 + 37.5], [0.1 + 12.5, 0.1 + 6.25, 0.1 + 6.25]])
    np.testing.assert_allclose(post.lam.numpy(), lam, rtol=1e-14)
    # E[beta] = (0.99 * 0.75, 0.99 * 0.25, 0.01): rho_1 = 0.7425, rho_2 = 0.2475 / (1 - 0.7425)
    np.testing.assert_allclose(post.rho.numpy(), [0.7425, 0.2475 / 0.2575], rtol=1e-14)
    np.testing.assert_allclose(post.omega.numpy(), [1e4, 1e4])
    assert (post.alpha, post.gamma, post.lam0) == (0.5, 10.0, 0.1)


def test_posterior_from_topics_point_topics_and_alpha_vector():
    rng = np.random.default_rng(1)
    phi = rng.dirichlet(np.full(200, 0.3), size=6)
    alpha = rng.gamma(1.0, 0.1, size=6)
    post = posterior_from_topics(phi, alpha, TopicSettings(), tokens=1e6, alpha=alpha.sum(), tail=1e-9, point=True)
    order = np.argsort(-alpha, kind="stable")
    means = phi[order]
    # point topics: E[log phi] is log phi wherever phi >= 1e-6
    big = means >= 1e-6
    assert big.mean() > 0.5 and (~big).any()
    np.testing.assert_allclose(post.e_log_phi.numpy()[big], np.log(means[big]), rtol=0, atol=1e-6)
    np.testing.assert_allclose(post.topic_means().numpy(), means, rtol=1e-12)
    # the documents' prior is Dir(alpha_1..alpha_K), with (almost) nothing in the tail
    prior = (post.alpha * post.expected_beta()).numpy()
    np.testing.assert_allclose(prior[:-1], alpha[order], rtol=1e-6)
    assert prior[-1] <= 1e-6 * alpha.sum()
    # point_estimate turns a posterior into the same form: same sticks and alpha, E[log phi] = log E[phi]
    soft = posterior_from_topics(phi, alpha, TopicSettings(), tokens=1e3)
    hard = point_estimate(soft)
    assert torch.equal(hard.rho, soft.rho) and torch.equal(hard.omega, soft.omega) and hard.alpha == soft.alpha
    np.testing.assert_allclose(hard.topic_means().numpy(), soft.topic_means().numpy(), rtol=1e-12)
    means = soft.topic_means().numpy()
    np.testing.assert_allclose(hard.e_log_phi.numpy(), np.log(means), rtol=0, atol=1e-6)
    assert (soft.e_log_phi.numpy() < np.log(means) - 1e-3).any()  # what the point form removes
    with pytest.raises(ValueError, match="tail"):
        posterior_from_topics(phi, alpha, TopicSettings(), tokens=1e3, tail=0)


def test_tomotopy_lda_runs_on_bars_and_scores(bars):
    pytest.importorskip("tomotopy")
    train, test, _ = bars
    settings = TopicSettings(K=10)
    run = TOPIC_METHODS["tomotopy-lda"](train, Budget(passes=30), settings, 0)
    assert run.laps == [10, 20, 30] and len(run.seconds) == 3
    post = run.posterior
    assert post.K == 10 and post.lam.shape == (10, train.vocab_size)
    # LDA's prior: total concentration tomotopy's sum(alpha), nothing in the tail
    assert post.alpha * post.expected_beta()[-1] <= 1e-6 * post.alpha
    heldout = document_completion(post, test)
    assert np.isfinite(heldout)
    assert heldout > document_completion(posterior_from_topics(np.ones((1, train.vocab_size)), [1.0], settings,
                                                               train.num_tokens), test)


@pytest.mark.parametrize("method,module", [("gensim-hdp", "gensim"), ("tomotopy-hdp", "tomotopy"),
                                           ("tomotopy-lda", "tomotopy")])
def test_optional_libraries_missing_give_one_clear_error(bars, method, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    if module == "gensim":
        monkeypatch.setitem(sys.modules, "gensim.models", None)
    with pytest.raises(ImportError, match=f"{method} needs {module}"):
        TOPIC_METHODS[method](bars[0], Budget(passes=1), TopicSettings(K=5), 0)


@pytest.mark.parametrize("method,module", [("gensim-hdp", "gensim"), ("tomotopy-lda", "tomotopy")])
def test_a_missing_optional_library_stops_a_comparison_before_any_run(bars, method, module, monkeypatch, tmp_path,
                                                                     capsys):
    """compare_topics(["memo", "gensim-hdp"]) without gensim ran memo's whole budget, then raised; the command
    line printed the ImportError's traceback after it. Both now stop before any method runs."""
    from pyro_memo.cli import main

    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, "gensim.models", None)
    monkeypatch.setitem(TOPIC_METHODS, "memo", lambda *args: pytest.fail("a run started"))
    train, test, _ = bars
    with pytest.raises(ImportError, match=f"method {method} needs {module}"):
        compare_topics(train, test, ["memo", method], settings=TopicSettings(K=5, batches=2))
    try:
        status = main(["compare", "bars", "--model", "hdp", "--methods", f"memo,{method}", "--K", "5", "--batches",
                       "2", "--out", str(tmp_path / "out"), "--quiet"])
    except SystemExit as exit_:
        status = exit_.code
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and f"method {method} needs {module}" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_gensim_hdp_runs_the_budgets_passes_or_seconds_whichever_first(bars, monkeypatch):
    """gensim's HdpModel was given max_time alone (ran as many passes as the seconds allowed: 309 passes of
    Budget(passes=5, seconds=100)) or no limit at all (one pass whatever the passes); it is now given the
    passes as max_chunks, and the seconds as max_time when the budget has them."""
    import math
    import types

    train, test, _ = bars
    calls = []

    class FakeHdp:
        def __init__(self, corpus, id2word, T, **kwargs):
            calls.append(kwargs)
            self.T, self.V = T, len(id2word)

        def hdp_to_lda(self):
            return np.full(self.T, 1.0 / self.T), np.full((self.T, self.V), 1.0 / self.V)

    monkeypatch.setitem(sys.modules, "gensim", types.ModuleType("gensim"))
    monkeypatch.setitem(sys.modules, "gensim.models", types.SimpleNamespace(HdpModel=FakeHdp))
    per_pass = math.ceil(train.num_docs / 256)
    for budget, chunks, seconds in ((Budget(passes=5), 5 * per_pass, None),
                                    (Budget(passes=5, seconds=100), 5 * per_pass, 100),
                                    (Budget(passes=0.5), math.ceil(0.5 * per_pass), None)):
        calls.clear()
        TOPIC_METHODS["gensim-hdp"](train, budget, TopicSettings(K=5), 0)
        assert calls[0]["max_chunks"] == chunks and calls[0]["chunksize"] == 256
        assert calls[0].get("max_time") == seconds


def test_bad_arguments_raise(bars):
    train, test, _ = bars
    with pytest.raises(ValueError, match="unknown topic methods"):
        compare_topics(train, test, ["memo", "lda"])
    with pytest.raises(TypeError, match="test must be a pyro_memo.topics.Corpus"):
        compare_topics(train, torch.zeros(3, 3), ["memo"])
    other, _, _ = bars_corpus(20, 10, side=4, seed=0)
    with pytest.raises(ValueError, match="vocabularies differ"):
        compare_topics(train, other, ["memo"])


def test_bad_heldout_split_raises_before_any_run(bars, monkeypatch):
    """A misspelt ``heldout_split`` failed only at the scoring of the first run, its fit lost, with
    document_completion's message naming ``split``."""
    train, test, _ = bars
    monkeypatch.setitem(TOPIC_METHODS, "memo", lambda *args: pytest.fail("a run started"))
    with pytest.raises(ValueError, match="heldout_split must be 'tokens' or 'types'; got 'word'"):
        compare_topics(train, test, ["memo"], heldout_split="word")



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
