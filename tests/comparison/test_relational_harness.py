"""The relational comparison task and its CLI command."""

import csv
import math

import numpy as np
import pytest

from pyro_memo.cli import main
from pyro_memo.comparison import Budget, RelationalSettings, compare_relational
from pyro_memo.comparison.relational_methods import BlockDensity
from pyro_memo.data.graphs import Graph, assortative_graph


def test_the_relational_task_runs_every_method_end_to_end_and_writes_its_files(tmp_path):
    graph = assortative_graph(60, 2, alpha=0.05, seed=0)[0]
    methods = ["memo", "svi-hdp", "svi-ammsb"] + (["louvain"] if _has_networkx() else [])
    rows, runs = compare_relational(graph, methods, seeds=(0,), budget=Budget(passes=2),
                                    settings=RelationalSettings(K=2), out_dir=str(tmp_path))
    assert [r["method"] for r in rows] == methods
    for row in rows:
        assert 0 <= row["heldout_auc"] <= 1 and row["heldout_log_lik"] < 0 and 0 <= row["nmi"] <= 1
        assert row["effective_communities"] >= 1 and row["seconds"] >= 0
    assert all(math.isfinite(r["bound"]) for r in rows if r["method"] != "louvain")
    for name in ("runs.csv", "runs.md", "summary.md", "traces.csv"):
        assert (tmp_path / name).stat().st_size > 0
    with open(tmp_path / "runs.csv") as f:
        assert [r["method"] for r in csv.DictReader(f)] == methods


def test_block_density_scores_pairs_by_their_blocks_observed_link_fraction():
    # blocks {0, 1, 2} and {3, 4}: links 0-1, 1-2 (of 3 pairs within block 0), 2-3 (of 6 between)
    graph = Graph([[0, 1], [1, 2], [2, 3]], 5, missing=[[0, 2]])
    scores = BlockDensity(graph, np.array([0, 0, 0, 1, 1])).link_probability(np.array([[0, 2], [0, 3], [3, 4]]))
    assert scores.tolist() == pytest.approx([(2 + 1) / (2 + 2), (1 + 1) / (6 + 2), (0 + 1) / (1 + 2)])


def test_cli_compare_runs_on_the_karate_club(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "karate", "--model", "relational", "--K", "2", "--passes", "1", "--methods",
                 "memo,svi-ammsb", "--out", str(out), "--quiet"]) == 0
    assert "svi-ammsb" in capsys.readouterr().out
    assert (out / "runs.csv").exists() and (out / "summary.md").exists() and (out / "traces.csv").exists()


def _has_networkx():
    try:
        import networkx  # noqa: F401
    except ImportError:
        return False
    return True


def _system_graph_tool():
    from pyro_memo.comparison.relational_methods import _graph_tool_python

    try:
        return _graph_tool_python()
    except ImportError:
        return None


def test_sbm_without_graph_tool_says_how_to_get_it(monkeypatch):
    monkeypatch.setenv("PYRO_MEMO_GRAPH_TOOL_PYTHON", "/bin/false")  # an interpreter that imports nothing
    graph = assortative_graph(30, 2, seed=0)[0]
    with pytest.raises(ImportError, match="python3-graph-tool"):
        compare_relational(graph, ["sbm"], seeds=(0,), budget=Budget(passes=1), settings=RelationalSettings(K=2))


@pytest.mark.skipif(_system_graph_tool() is None, reason="graph-tool is optional and not installed here")
def test_sbm_runs_through_the_harness_once_per_seed_and_repeats_itself():
    graph = assortative_graph(200, 3, alpha=0.01, link_probs=np.full(3, 0.3), epsilon=1e-3, seed=2)[0]
    from pyro_memo.comparison.relational_methods import run_sbm

    first, second = (run_sbm(graph, Budget(passes=1), RelationalSettings(K=3), 1).posterior.labels for _ in range(2))
    np.testing.assert_array_equal(first, second)
    rows, _ = compare_relational(graph, ["sbm"], seeds=(1,), budget=Budget(passes=1), settings=RelationalSettings(K=3))
    assert rows[0]["nmi"] > 0.8 and rows[0]["heldout_auc"] > 0.75 and rows[0]["effective_communities"] >= 3


def test_compare_relational_without_graph_tool_raises_before_any_method_runs(monkeypatch):
    """compare_relational(["memo", "sbm"]) without graph-tool ran memo's whole budget, then raised (only the
    command line checked first)."""
    from pyro_memo.comparison import RELATIONAL_METHODS

    monkeypatch.setenv("PYRO_MEMO_GRAPH_TOOL_PYTHON", "/bin/false")
    monkeypatch.setitem(RELATIONAL_METHODS, "memo", lambda *args: pytest.fail("a run started"))
    graph = assortative_graph(30, 2, seed=0)[0]
    with pytest.raises(ImportError, match="sbm needs graph-tool"):
        compare_relational(graph, ["memo", "sbm"], seeds=(0,), budget=Budget(passes=1),
                           settings=RelationalSettings(K=2))


def test_cli_compare_without_graph_tool_is_one_error_before_any_method_runs(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PYRO_MEMO_GRAPH_TOOL_PYTHON", "/bin/false")
    argv = ["compare", "karate", "--model", "relational", "--methods", "memo,sbm", "--passes", "1", "--quiet",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sbm needs graph-tool" in err[0] and not (tmp_path / "out").exists()


def test_memo_eb_learns_its_hyperparameters_in_the_second_half_of_its_budget():
    graph = assortative_graph(60, 2, alpha=0.05, seed=0)[0]
    rows, runs = compare_relational(graph, ["memo-eb"], seeds=(0,), budget=Budget(passes=6),
                                    settings=RelationalSettings(K=2))
    run = runs["memo-eb", 0]
    assert run.laps == [1, 2, 3, 4, 5, 6] and run.seconds == sorted(run.seconds)
    assert hasattr(run.posterior.alpha, "q") and run.posterior.learn_eps
    assert np.diff(run.bound[3:]).min() >= -1e-9 * abs(run.bound[-1])  # monotone within the learning half
    assert 0 <= rows[0]["heldout_auc"] <= 1


@pytest.mark.parametrize("passes, laps", [(1, [1]), (2.5, [1, 2, 3]), (3, [1, 2, 3])])
def test_memo_eb_runs_the_passes_its_budget_gives(passes, laps):
    """memo-eb halved the budget and each half rounded its passes up: Budget(passes=1) ran 2 laps and passes=3
    ran 4. It runs ceil(passes) laps now, as every other method, the learning half given the odd lap (so a
    one-pass budget still learns alpha and eps)."""
    from pyro_memo.comparison.relational_methods import run_memo_eb

    graph = assortative_graph(60, 2, alpha=0.05, seed=0)[0]
    run = run_memo_eb(graph, Budget(passes=passes), RelationalSettings(K=2), 0)
    assert run.laps == laps and len(run.bound) == len(laps) and len(run.seconds) == len(laps)
    assert hasattr(run.posterior.alpha, "q") and run.posterior.learn_eps
