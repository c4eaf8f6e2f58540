"""The comparison harness: every method runs under one budget and is scored alike."""

import csv
import os

import numpy as np
import pytest
import torch

from pyro_memo.cli import main
from pyro_memo.comparison import (
    METHODS,
    Budget,
    Settings,
    compare,
    load_array_split,
    merge_outputs,
    read_outputs,
    summarize,
)
from pyro_memo.comparison.methods import labels_elbo


def blobs(n=600, seed=5):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(3, (n,), generator=g)
    centers = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]], dtype=torch.float64)
    return centers[labels] + torch.randn(n, 2, generator=g, dtype=torch.float64), labels.numpy()


@pytest.fixture(scope="module")
def small_comparison(tmp_path_factory):
    x, y = blobs()
    out = tmp_path_factory.mktemp("cmp")
    methods = [m for m in METHODS if m not in ("pyro-svi", "pyro-svi-trace", "gibbs-collapsed")]
    rows, runs = compare(x[:500], methods, seeds=(0, 1), labels=y[:500], heldout=x[500:], budget=Budget(passes=3),
                         settings=Settings(K=6, batches=5), out_dir=str(out))
    return x[:500], methods, rows, runs, out


def test_every_method_runs_within_the_pass_budget(small_comparison):
    x, methods, rows, runs, _ = small_comparison
    assert [(r["method"], r["seed"]) for r in rows] == [(m, s) for m in methods for s in (0, 1)]
    for (method, _), run in runs.items():
        assert 2.9 <= run.passes[-1] <= 3.0 + 5 / 500, method
        assert len(run.passes) == len(run.elbo) == len(run.seconds) == len(run.K)
        assert np.all(np.diff(run.passes) > 0) and np.all(np.diff(run.seconds) >= 0)
        assert np.isfinite(run.elbo).all() and run.labels.shape == (500,)


def test_rows_hold_scores_that_could_fail(small_comparison):
    x, _, rows, runs, _ = small_comparison
    for row in rows:
        assert np.isfinite([row["elbo_per_item"], row["heldout_per_item"], row["nmi"], row["accuracy"]]).all()
        assert 0 <= row["nmi"] <= 1 and 0 < row["accuracy"] <= 1
    # a hard-label method's reported ELBO is labels_elbo of its labels
    run = runs[("sga+f", 0)]
    from pyro_memo.families import Gaussian

    assert labels_elbo(Gaussian.from_data(x), x, run.labels) == pytest.approx(run.elbo[-1], rel=1e-9)


def test_converging_methods_cluster_clear_cut_data():
    x, y = blobs()
    rows, _ = compare(x, ["memo", "vb", "sklearn-bgm"], seeds=(0, 1), labels=y, budget=Budget(passes=10),
                      settings=Settings(K=6, batches=5))
    for method, stats in summarize(rows).items():
        assert stats["nmi"][0] > 0.95, method


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_memoized_and_full_batch_vb_start_from_one_place(seed):
    """Issue #13: in a comparison every variational method starts from the seed's start; memoized
    VB's held first lap is then full VB's first iteration, and bnpy's incremental one is not."""
    x, _ = blobs()
    rows, runs = compare(x, ["memo", "vb", "memo-incremental"], seeds=(seed,), budget=Budget(passes=1),
                         settings=Settings(K=6, batches=5))
    first = {method: run.elbo[0] for (method, _), run in runs.items()}
    assert first["memo"] == pytest.approx(first["vb"], rel=1e-10)
    assert first["memo-incremental"] != pytest.approx(first["vb"], rel=1e-6)


def test_outputs_are_written(small_comparison):
    *_, rows, _, out = small_comparison
    for name in ("runs.csv", "runs.md", "summary.md", "traces.csv", "elbo_vs_passes.png", "elbo_vs_seconds.png",
                 "k_vs_passes.png", "final_elbo.png"):
        assert os.path.getsize(out / name) > 0, name
    with open(out / "runs.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)


def test_seconds_budget_stops_runs_early(monkeypatch):
    """A time budget, tested with an injected clock (10 ms per reading), not the machine's."""
    from pyro_memo.comparison import clock

    ticks = iter(range(10**6))
    monkeypatch.setattr(clock, "now", lambda: 0.01 * next(ticks))
    x, _ = blobs(400)
    rows, runs = compare(x, ["memo", "sga+f"], seeds=(0,), budget=Budget(passes=1000, seconds=0.05),
                         settings=Settings(K=5, batches=4))
    for run in runs.values():
        assert run.passes[-1] < 1000 and run.seconds[-1] >= 0.05


def test_errors():
    x, y = blobs(50)
    with pytest.raises(ValueError, match="unknown methods"):
        compare(x, ["memo", "adam"])
    with pytest.raises(ValueError, match="labels"):
        compare(x, ["vb"], labels=y[:10])
    with pytest.raises(ValueError, match="held-out fraction"):
        load_array_split(x, y, 1.0)


def test_cli_compare(tmp_path, capsys):
    x, y = blobs(300)
    np.savez(tmp_path / "data.npz", x=x.numpy(), labels=y)
    code = main(["compare", str(tmp_path / "data.npz"), "--methods", "memo,sga+f", "--seeds", "0,1", "--passes", "2",
                 "--K", "5", "--batches", "3", "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| memo | 2 |" in printed and "| sga+f | 2 |" in printed
    assert (tmp_path / "out" / "summary.md").exists()
    assert main(["compare", str(tmp_path / "data.npz"), "--methods", "memo,nope", "--out", str(tmp_path)]) == 2
    assert "unknown" in capsys.readouterr().err


def test_the_slow_methods_run_in_the_harness():
    x, y = blobs(120)
    methods = ["pyro-svi", "pyro-svi-trace", "gibbs-collapsed"]
    rows, runs = compare(x, methods, seeds=(0,), labels=y, heldout=x[:20], budget=Budget(passes=2),
                         settings=Settings(K=4, batches=2))
    assert [r["method"] for r in rows] == methods
    for run in runs.values():
        assert run.passes[-1] == 2 and np.isfinite(run.elbo).all()
    assert all(np.isfinite(r["heldout_per_item"]) for r in rows)


def test_separate_comparisons_merge_into_one_table(small_comparison, tmp_path):
    x, methods, rows, runs, out = small_comparison
    x2, y2 = blobs()
    extra = tmp_path / "extra"
    more, _ = compare(x2[:500], ["memo"], seeds=(5,), labels=y2[:500], heldout=x2[500:], budget=Budget(passes=2),
                      settings=Settings(K=6, batches=5), out_dir=str(extra))
    merged_rows, merged_runs = merge_outputs(str(tmp_path / "merged"), [str(out), str(extra)])
    assert len(merged_rows) == len(rows) + 1 and len(merged_runs) == len(runs) + 1
    back, back_runs = read_outputs(str(tmp_path / "merged"))
    by_key = {(r["method"], r["seed"]): r for r in back}
    for r in rows + more:
        for column in ("elbo_per_item", "nmi", "passes"):
            assert by_key[(r["method"], r["seed"])][column] == pytest.approx(r[column], rel=1e-12)
    assert back_runs[("memo", 5)].passes == [1.0, 2.0]
    assert os.path.getsize(tmp_path / "merged" / "final_elbo.png") > 0


def test_merge_refuses_one_path_or_no_folder(small_comparison, tmp_path):
    """merge_outputs(out, "runs1") read the folders "r", "u", "n", ... (a string's characters), and
    merge_outputs(out, []) wrote an empty comparison; both are a ValueError now, nothing written."""
    out = str(small_comparison[-1])
    with pytest.raises(ValueError, match="in_dirs must be a list of comparison folders; got the single path"):
        merge_outputs(str(tmp_path / "merged"), out)
    with pytest.raises(ValueError, match="in_dirs is empty"):
        merge_outputs(str(tmp_path / "merged"), [])
    assert not (tmp_path / "merged").exists()


def test_finished_runs_are_written_before_a_later_run_fails(tmp_path, monkeypatch):
    x, y = blobs(300)

    def broken(*args):
        raise MemoryError("simulated")

    monkeypatch.setitem(METHODS, "broken", broken)
    with pytest.raises(MemoryError):
        compare(x, ["vb", "broken"], seeds=(0, 1), labels=y, budget=Budget(passes=2),
                settings=Settings(K=4, batches=3), out_dir=str(tmp_path))
    rows, _ = read_outputs(str(tmp_path))
    assert [(r["method"], r["seed"]) for r in rows] == [("vb", 0), ("vb", 1)]


def test_one_loop_runs_any_task(tmp_path):
    """A task defined only here (data + scorer + columns) runs through the same loop and writers."""
    from dataclasses import dataclass, field

    from pyro_memo.comparison import Table, Task, run_comparison

    @dataclass
    class Guess:
        steps: list = field(default_factory=list)
        seconds: list = field(default_factory=list)
        error: list = field(default_factory=list)
        K: list = field(default_factory=list)

    def halving(data, budget, seed):
        run, guess = Guess(), float(seed)
        for step in range(int(budget.passes)):
            guess = (guess + data.mean()) / 2
            run.steps.append(step + 1)
            run.seconds.append(0.001 * (step + 1))
            run.error.append(abs(guess - data.mean()))
            run.K.append(1)
        return run

    class MeanTask(Task):
        table = Table(columns=("method", "seed", "steps", "seconds", "error", "k"), integers=("seed", "k"),
                      trace=(("steps", "steps"), ("seconds", "seconds"), ("error", "error"), ("K", "K")),
                      run_type=Guess, progress="steps", objective="error", objective_label="error",
                      final="error", final_label="final error", k_label="K")
        methods = {"halving": halving}
        noun = "mean methods"

        def __init__(self, data):
            self.data = data

        def run(self, method, seed):
            return self.methods[method](self.data, Budget(passes=4), seed)

        def score(self, run):
            return {"steps": run.steps[-1], "seconds": run.seconds[-1], "error": run.error[-1], "k": run.K[-1]}

        def describe(self, row):
            return f"error {row['error']:.3g}"

    data = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="unknown mean methods"):
        run_comparison(MeanTask(data), ["bisection"])
    rows, runs = run_comparison(MeanTask(data), ["halving"], seeds=(0, 6), out_dir=str(tmp_path))
    assert [r["error"] for r in rows] == pytest.approx([2 / 16, 4 / 16])
    back, back_runs = read_outputs(str(tmp_path), MeanTask.table)
    assert back == rows and back_runs[("halving", 6)].error == pytest.approx(runs[("halving", 6)].error)
    assert (tmp_path / "error_vs_steps.png").exists() and (tmp_path / "final_error.png").exists()


def _comparison_folder(folder, table):
    """A folder of two runs of ``table``'s task, written as the harness writes it."""
    from pyro_memo.comparison.harness import write_csv

    folder.mkdir()
    row = [("memo" if c == "method" else 0 if c == "seed" else 1 if c in table.integers else 0.5)
           for c in table.columns]
    write_csv(str(folder / "runs.csv"), table.columns, [row, ["vb", 1, *row[2:]]])
    lines = [[m, s, *[k if c == "K" else 0.1 * k for c in table.trace_columns]] for m, s in (("memo", 0), ("vb", 1))
             for k in (1, 2, 3)]
    write_csv(str(folder / "traces.csv"), ("method", "seed", *table.trace_columns), lines)
    return folder


def test_a_damaged_or_foreign_comparison_folder_is_one_error_naming_the_file(tmp_path):
    from pyro_memo.comparison import MIXTURE_TABLE, TOPIC_TABLE

    good = _comparison_folder(tmp_path / "good", MIXTURE_TABLE)
    rows, runs = read_outputs(str(good))
    assert [r["seed"] for r in rows] == [0, 1] and runs[("vb", 1)].K == [1, 2, 3]
    traces = (good / "traces.csv").read_text()
    (good / "traces.csv").write_text(traces[: len(traces) - 9])
    with pytest.raises(ValueError, match="traces.csv, line 7: .*truncated"):
        read_outputs(str(good))
    (good / "traces.csv").write_text(traces.replace("0.2", "x", 1))
    with pytest.raises(ValueError, match="traces.csv, line 3: .* is 'x', not a number"):
        read_outputs(str(good))
    (good / "traces.csv").write_text("")
    with pytest.raises(ValueError, match="traces.csv: expected the columns"):
        read_outputs(str(good))
    topics = _comparison_folder(tmp_path / "topics", TOPIC_TABLE)
    with pytest.raises(ValueError, match="runs.csv: expected the columns method, seed, passes.*another comparison"):
        read_outputs(str(topics))
    assert len(read_outputs(str(topics), TOPIC_TABLE)[0]) == 2
    with pytest.raises(ValueError, match="runs.csv: no such file"):
        merge_outputs(str(tmp_path / "merged"), [str(tmp_path / "nowhere")])
