"""The pyro-memo console script: main job, outputs, options and errors."""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import pyro_memo as pm
from pyro_memo.cli import build_parser, main
from tests.conftest import make_data

OPTIONS = ["--family", "--algo", "--K", "--batches", "--laps", "--seed", "--device", "--json", "--save",
           "--resume", "--tol", "--alpha", "--init", "--dtype", "--quiet", "--moves", "--alpha-prior"]


def test_help_documents_every_option():
    out = subprocess.run([sys.executable, "-m", "pyro_memo.cli", "fit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    fit_parser = build_parser()._subparsers._group_actions[0].choices["fit"]
    documented = {opt for action in fit_parser._actions for opt in action.option_strings}
    assert set(OPTIONS) <= documented
    for action in fit_parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, action.dest
            assert action.option_strings[0] in out.stdout
    for family in ("gauss", "zm-gauss", "diag-gauss", "mult", "bern", "poisson"):
        assert family in out.stdout


@pytest.fixture
def blobs(tmp_path):
    x = make_data("gauss", 600, D=3, seed=0, clusters=3).numpy()
    labels = np.zeros(600, dtype=int)
    path = tmp_path / "blobs.npz"
    np.savez(path, x=x, labels=labels)
    np.save(tmp_path / "blobs.npy", x)
    return tmp_path


def test_memo_fit_writes_json_and_save_dir(blobs, capsys):
    out_dir = blobs / "fit"
    code = main(["fit", str(blobs / "blobs.npy"), "--algo", "memo", "--K", "6", "--batches", "4", "--laps", "5",
                 "--json", str(blobs / "r.json"), "--save", str(out_dir), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "ELBO" in printed and "memoized VB, 4 batches" in printed
    result = json.loads((blobs / "r.json").read_text())
    for key in ("elbo", "elbo_trace", "K", "weights", "lap_seconds", "seconds"):
        assert key in result
    assert len(result["elbo_trace"]) == len(result["lap_seconds"]) == result["laps"]
    assert result["elbo"] == result["elbo_trace"][-1]
    assert len(result["weights"]) == 6 and 1 <= result["K"] <= 6
    post = np.load(out_dir / "posterior.npz")
    assert post["weights"].shape == (6,)
    assert post["labels"].shape == (600,)
    assert post["means"].shape == (6, 3) and post["covariances"].shape == (6, 3, 3)
    assert (out_dir / "trace.png").read_bytes()[:4] == b"\x89PNG"
    assert (out_dir / "state.pt").exists()

    code = main(["fit", str(blobs / "blobs.npy"), "--algo", "memo", "--K", "6", "--batches", "4", "--laps", "8",
                 "--tol", "0", "--resume", str(out_dir), "--json", str(blobs / "r2.json"), "--quiet"])
    assert code == 0
    resumed = json.loads((blobs / "r2.json").read_text())
    assert resumed["elbo_trace"][:5] == result["elbo_trace"]
    assert resumed["laps"] == 8


def test_vb_fit_on_npz_with_labels(blobs, capsys):
    assert main(["fit", str(blobs / "blobs.npz"), "--family", "diag-gauss", "--K", "5", "--quiet"]) == 0
    assert "NMI" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["fit", "--K", "0"], "--K must be a positive integer"),
        (["fit", "--init-items", "0"], "--init-items must be a positive integer"),
        (["fit", "--init-items", "-3"], "--init-items must be a positive integer"),
        (["fit", "missing.npy"], "neither a bundled dataset"),
        (["fit", "--device", "cuda:7"], "CUDA"),
        (["fit", "--resume", "somewhere"], "--resume needs --algo memo"),
        (["fit", "--moves", "birth"], "--moves needs --algo memo"),
        (["fit", "--algo", "memo", "--moves", "birth,split"], "--moves split is not available"),
    ],
)
def test_bad_options_give_one_error_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyro-memo: error:") and message in err[0]


def test_bad_data_gives_one_error_line(tmp_path, capsys):
    x = np.ones((20, 2))
    x[3, 1] = np.nan
    np.save(tmp_path / "bad.npy", x)
    assert main(["fit", str(tmp_path / "bad.npy")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NaN" in err[0]
    assert f"{tmp_path / 'bad.npy'}:" in err[0] and "1 of its 20 rows; the first is row 3" in err[0]
    for command in (["fit", "--algo", "memo", "--batches", "4"], ["fit", "--algo", "vb"], ["compare"]):
        assert main([command[0], str(tmp_path / "bad.npy"), *command[1:]]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{tmp_path / 'bad.npy'}:" in err[0] and "the first is row 3" in err[0], command
    np.save(tmp_path / "neg.npy", -np.ones((20, 2)))
    assert main(["fit", str(tmp_path / "neg.npy"), "--family", "poisson"]) == 2
    assert "negative" in capsys.readouterr().err


def test_unknown_family_is_an_argparse_error():
    proc = subprocess.run([sys.executable, "-m", "pyro_memo.cli", "fit", "--family", "cauchy"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


@pytest.mark.parametrize("algo", ["vb", "memo"])
def test_init_items_chooses_the_items_the_start_is_drawn_from(blobs, algo):
    """``--init-items`` reaches the initialisation: fewer items than the data give another start (so another
    fit), and any number at least the data's size is all of them, the same fit as the default (10,000 > 600)."""
    memo = ["--batches", "3"] if algo == "memo" else []

    def elbo(*extra):
        path = blobs / f"{algo}{''.join(extra)}.json"
        assert main(["fit", str(blobs / "blobs.npy"), "--algo", algo, *memo, "--K", "8", "--laps", "3", "--tol", "0",
                     "--json", str(path), "--quiet", *extra]) == 0
        out = json.loads(path.read_text())
        assert out["init_items"] == (int(extra[1]) if extra else 10_000)
        return out["elbo"]

    default = elbo()
    assert elbo("--init-items", "600") == default and elbo("--init-items", "100000") == default
    assert elbo("--init-items", "20") != default


def test_moves_are_reported_in_json(blobs, capsys):
    code = main(["fit", str(blobs / "blobs.npy"), "--algo", "memo", "--K", "1", "--batches", "3", "--laps", "6",
                 "--moves", "birth,merge,delete", "--json", str(blobs / "m.json"), "--quiet"])
    assert code == 0
    result = json.loads((blobs / "m.json").read_text())
    assert len(result["moves"]) == result["laps"]
    assert set(result["moves"][0]) == {"birth", "merge", "delete"}
    assert sum(lap["birth"]["accepted"] for lap in result["moves"]) >= 1
    assert "moves" in capsys.readouterr().out


def test_birth_targets_reach_the_birth_move(blobs):
    """--birth-targets is the birth move's targets: reported in the JSON, and the same fit as the
    library's MemoizedVB with move_options."""
    argv = ["fit", str(blobs / "blobs.npy"), "--algo", "memo", "--K", "2", "--batches", "3", "--laps", "3",
            "--moves", "birth", "--birth-targets", "2", "--json", str(blobs / "t.json"), "--quiet"]
    assert main(argv) == 0
    result = json.loads((blobs / "t.json").read_text())
    assert result["birth_targets"] == 2
    family = pm.Gaussian.from_data(np.load(blobs / "blobs.npy"))
    memo = pm.MemoizedVB(family, 2, laps=3, tol=1e-7, seed=0, moves="birth", move_options={"birth": {"targets": 2}})
    assert memo.moves[0].num_targets == 2
    np.testing.assert_allclose(result["elbo_trace"], memo.fit(str(blobs / "blobs.npy"), 3).elbo_trace, rtol=1e-9)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["fit", "bars", "--model", "hdp", "--family", "gauss"], "--family needs --algo memory-bounded (--model hdp)"),
        (["fit", "--gamma", "3"], "--gamma does not apply to --model dp"),
        (["fit", "--lam0", "0.5"], "--lam0 does not apply to --model dp"),
        (["fit", "--vocab", "vocab.txt"], "--vocab does not apply to --model dp"),
        (["fit", "bars", "--model", "hdp", "--init", "kmeans++"],
         "--init kmeans++ is not available for --model hdp; choose from kmeans, documents"),
        (["fit", "--init", "documents"], "--init documents is not available for --model dp"),
        (["fit", "bars", "--model", "hdp", "--algo", "vb"], "--algo vb is not available for --model hdp"),
        (["fit", "--batches", "4"], "--batches needs --algo memo (--model dp)"),
        (["fit", "bars", "--model", "hdp", "--init-items", "50"], "--init-items does not apply to --model hdp"),
        (["fit", "--algo", "memory-bounded", "--init-items", "50"], "--init-items needs --algo vb or memo"),
        (["fit", "bars", "--model", "hdp", "--moves", "greedy-merge"], "greedy-merge is not available for --model hdp"),
        (["compare", "bars", "--model", "hdp", "--family", "mult"], "--family does not apply to --model hdp"),
        (["compare", "--gamma", "2"], "--gamma does not apply to --model dp"),
        (["compare", "bars", "--model", "hdp", "--methods", "memo,sga"], "unknown ['sga'] for --model hdp"),
        (["compare", "bars", "--model", "hdp", "--heldout", "0"], "--heldout must lie in (0, 1)"),
        (["compare", "--methods", "memo", "--seeds", "0,x"], "--seeds must be comma-separated int"),
        (["compare", "--methods", "memo", "--seeds", "1,0,1"], "--seeds: 1 is given twice"),
        (["compare", "bars", "--model", "hdp", "--methods", "memo,memo"], "--methods: memo is given twice"),
    ],
)
def test_an_option_the_model_does_not_take_is_one_error_naming_both(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyro-memo: error:") and message in err[0], err


def test_help_names_the_models_of_every_option():
    for command in ("fit", "compare"):
        parser = build_parser()._subparsers._group_actions[0].choices[command]
        for action in parser._actions:
            if action.dest in ("help", "model"):
                continue
            takers = action.help.split("]")[0]
            names = takers.lstrip("[").split(", ")
            assert takers.startswith("[") and names and set(names) <= {"dp", "hdp", "relational"}, \
                (command, action.dest, action.help)
    fit = build_parser()._subparsers._group_actions[0].choices["fit"]
    helps = {action.dest: action.help for action in fit._actions}
    assert helps["family"].startswith("[dp, hdp]") and helps["gamma"].startswith("[hdp]")
    assert helps["eps"].startswith("[relational]") and helps["heldout"].startswith("[relational]")
    assert "default kmeans++" in helps["init"] and ("default kmeans." in helps["init"]
                                                    or "default kmeans; needs --algo memo" in helps["init"])
    assert "dp: " in helps["batches"] and "needs --algo memo" in helps["batches"]


def test_the_old_model_name_still_fits_a_dp_mixture(blobs):
    assert main(["fit", str(blobs / "blobs.npz"), "--model", "dp-mixture", "--K", "4", "--laps", "3", "--quiet",
                 "--json", str(blobs / "a.json")]) == 0
    out = json.loads((blobs / "a.json").read_text())
    assert out["model"] == "dp" and out["algo"] == "vb" and out["batches"] == 1 and len(out["weights"]) == 4


@pytest.fixture
def third_model():
    """Register a model with its own option, as a new model's module would; removed afterwards."""
    from pyro_memo.cli import registry

    registry.load_models()

    class Constant(registry.CliModel):
        name = "constant"
        summary = "one component: the data's mean"
        why_not = {"family": "it has no observation family"}
        uses = {"fit": {"data": registry.Use("an .npy file"), "shift": registry.Use("added to the mean", default=0.0),
                        "json": registry.Use(), "seed": registry.Use(default=0)}}

        def fit(self, args):
            if args.data is None:
                raise ValueError("--model constant needs DATA")
            mean = np.load(args.data).mean(0) + args.shift
            print(f"mean {mean}")
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump({"mean": mean.tolist()}, fh)
            return 0

    registry.register_option("fit", registry.Option("--shift", "a shift.", {"type": float}))
    registry.register_model(Constant())
    yield Constant
    del registry.MODELS["constant"]
    del registry.OPTIONS["fit"]["shift"]


def test_a_third_model_registers_itself_without_editing_the_cli(third_model, blobs, capsys):
    assert main(["fit", str(blobs / "blobs.npy"), "--model", "constant", "--shift", "1",
                 "--json", str(blobs / "c.json")]) == 0
    expected = np.load(blobs / "blobs.npy").mean(0) + 1
    np.testing.assert_allclose(json.loads((blobs / "c.json").read_text())["mean"], expected)
    assert main(["fit", str(blobs / "blobs.npy"), "--model", "constant", "--family", "gauss"]) == 2
    assert ("--family does not apply to --model constant: it has no observation family (it applies to --model dp, hdp)"
            in capsys.readouterr().err)
    assert main(["fit", "--shift", "1"]) == 2
    assert "--shift does not apply to --model dp (it applies to --model constant)" in capsys.readouterr().err
    fit = build_parser()._subparsers._group_actions[0].choices["fit"]
    assert {a.dest: a.help for a in fit._actions}["shift"].startswith("[constant] a shift.")
    with pytest.raises(SystemExit):  # the model registered no compare options: not a compare choice
        main(["compare", "--model", "constant"])
    with pytest.raises(ValueError, match="already registered"):
        from pyro_memo.cli import registry

        registry.register_model(third_model())


@pytest.mark.parametrize("base", [["fit", "digits", "--algo", "memo", "--K", "8", "--batches", "4"],
                                  ["fit", "digits", "--algo", "memo", "--K", "2", "--batches", "4",
                                   "--moves", "birth,merge,delete"],
                                  ["fit", "bars", "--model", "hdp", "--K", "6", "--batches", "3"]],
                         ids=["dp-memo", "dp-memo-moves", "hdp"])
@pytest.mark.slow
def test_a_fit_resumed_to_completion_reports_the_whole_run(base, tmp_path, capsys):
    """Issue #19: traces, plot and JSON of a resumed fit cover the laps before and after the resume. One
    thread: the thread policy may pick another count in each run, which changes the last bits."""
    common = [*base, "--tol", "0", "--quiet", "--threads", "1"]
    assert main([*common, "--laps", "6", "--json", str(tmp_path / "straight.json")]) == 0
    assert main([*common, "--laps", "3", "--save", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main([*common, "--laps", "6", "--save", str(tmp_path / "run"), "--resume", str(tmp_path / "run"),
                 "--json", str(tmp_path / "resumed.json")]) == 0
    printed = capsys.readouterr().out
    assert "6 laps (3 before --resume, 3 in" in printed
    straight = json.loads((tmp_path / "straight.json").read_text())
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    for key in ("elbo_trace", "k_trace", "lap_seconds", "emptied"):
        assert len(resumed[key]) == 6, key
    assert resumed["elbo_trace"] == straight["elbo_trace"] and resumed["k_trace"] == straight["k_trace"]
    assert resumed["elbo"] == straight["elbo"] and resumed["resumed_laps"] == 3
    assert (tmp_path / "run" / "trace.png").stat().st_size > 0


@pytest.mark.parametrize("base", [["fit", "digits", "--algo", "memo", "--K", "8", "--batches", "4"],
                                  ["fit", "bars", "--model", "hdp", "--K", "6", "--batches", "3"]],
                         ids=["dp-memo", "hdp"])
def test_a_checkpoint_without_a_k_trace_resumes_with_the_unknown_laps_null(base, tmp_path, capsys):
    """A checkpoint written before K per lap was kept (no ``traces``): JSON k_trace has null for its laps."""
    import torch

    common = [*base, "--tol", "0", "--quiet"]
    assert main([*common, "--laps", "2", "--save", str(tmp_path / "run")]) == 0
    path = tmp_path / "run" / "state.pt"
    old = torch.load(path, weights_only=True)
    del old["traces"]
    torch.save(old, path)
    assert main([*common, "--laps", "4", "--save", str(tmp_path / "run"), "--resume", str(tmp_path / "run"),
                 "--json", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    out = json.loads((tmp_path / "r.json").read_text())
    assert len(out["elbo_trace"]) == len(out["k_trace"]) == 4
    assert out["k_trace"][:2] == [None, None] and all(isinstance(k, int) for k in out["k_trace"][2:])
    assert (tmp_path / "run" / "trace.png").stat().st_size > 0


def test_prior_options_reach_the_fit(blobs, capsys):
    import torch

    import pyro_memo as pm

    def cli_elbo(*extra):
        path = blobs / "prior.json"
        assert main(["fit", str(blobs / "blobs.npz"), "--K", "4", "--laps", "3", "--json", str(path), "--quiet",
                     *extra]) == 0
        return json.loads(path.read_text())

    x = torch.as_tensor(np.load(blobs / "blobs.npz")["x"], dtype=torch.float64)
    family = pm.get_family("gauss").from_data(x).with_prior(3.0, kappa=0.5, nu=9.0)
    expected = pm.FullBatchVB(family, 4, max_iter=3, tol=1e-7, seed=0).fit(x).elbo
    given = cli_elbo("--prior", "kappa=0.5,nu=9", "--prior-scale", "3")
    assert given["elbo"] == pytest.approx(expected, rel=1e-12)
    assert given["prior"] == {"kappa": 0.5, "nu": 9.0} and given["prior_scale"] == 3.0
    assert cli_elbo()["elbo"] != pytest.approx(expected, rel=1e-6)


def test_the_summary_suggests_moves_only_when_every_component_is_in_use(blobs, capsys):
    assert main(["fit", str(blobs / "blobs.npz"), "--K", "2", "--laps", "5", "--quiet"]) == 0
    assert "all 2 in use" in capsys.readouterr().out
    assert main(["fit", str(blobs / "blobs.npz"), "--K", "12", "--laps", "30", "--quiet"]) == 0
    assert "in use" not in capsys.readouterr().out
    assert main(["fit", str(blobs / "blobs.npz"), "--K", "1", "--laps", "3", "--quiet", "--algo", "memo",
                 "--batches", "2", "--moves", "birth,merge,delete"]) == 0
    assert "in use" not in capsys.readouterr().out


@pytest.mark.parametrize("algo", ["vb", "memo"])
def test_alpha_prior_learns_alpha_and_reports_it(blobs, tmp_path, capsys, algo):
    """--alpha-prior 1,1 learns q(alpha): E[alpha] in the summary and --json, away from the prior mean 1;
    a memoized fit resumes with the same prior."""
    out_json, save = tmp_path / "fit.json", tmp_path / "save"
    argv = ["fit", str(blobs / "blobs.npz"), "--algo", algo, "--K", "6", "--laps", "30", "--alpha-prior", "1,1",
            "--quiet", "--json", str(out_json)]
    if algo == "memo":
        argv += ["--batches", "3", "--save", str(save)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    out = json.loads(out_json.read_text())
    assert out["alpha_prior"] == [1.0, 1.0] and out["alpha"] == pytest.approx(out["q_alpha"][0] / out["q_alpha"][1])
    assert out["q_alpha"][0] == pytest.approx(1.0 + 6) and abs(out["alpha"] - 1.0) > 0.05
    assert f"E[alpha] = {out['alpha']:.4g} learnt" in text
    if algo == "memo":
        assert main(argv[:-2] + ["--laps", "31", "--resume", str(save), "--json", str(out_json)]) == 0
        assert json.loads(out_json.read_text())["resumed_laps"] >= 1


def test_overrelax_off_runs_the_exact_steps_of_memoized_vb(blobs, capsys):
    """``--overrelax off`` runs the exact steps; the default over-relaxes, from the same held first lap, and its
    objective never falls."""
    traces = {}
    for setting in ("on", "off"):
        path = blobs / f"{setting}.json"
        assert main(["fit", str(blobs / "blobs.npy"), "--algo", "memo", "--K", "8", "--batches", "4", "--laps", "8",
                     "--tol", "0", "--overrelax", setting, "--json", str(path), "--quiet", "--threads", "1"]) == 0
        traces[setting] = json.loads(path.read_text())["elbo_trace"]
    assert traces["on"][0] == traces["off"][0]  # the same held first lap
    assert traces["on"] != traces["off"]
    assert np.all(np.diff(traces["on"]) >= -1e-9 * abs(traces["on"][-1]))


def test_json_files_are_standard_json_with_null_for_nan_and_infinity(tmp_path):
    # json.dump wrote bare Infinity and NaN (its default= hook never sees floats); `pyro-memo denoise --sigma 1e-300
    # --json` wrote "psnr_noisy": Infinity
    from pyro_memo.reporting import write_json

    payload = {"a": float("inf"), "b": [1.5, float("nan"), -float("inf")], "c": (np.float64(np.inf), np.float32(2.0)),
               "d": np.array([np.nan, 3.0]), "e": {"f": np.int64(4), "g": "x", "h": None, "i": True}}
    write_json(tmp_path / "r.json", payload)

    def refuse(word):
        raise AssertionError(f"non-standard JSON constant {word}")

    back = json.loads((tmp_path / "r.json").read_text(), parse_constant=refuse)
    assert back == {"a": None, "b": [1.5, None, None], "c": [None, 2.0], "d": [None, 3.0],
                    "e": {"f": 4, "g": "x", "h": None, "i": True}}


def test_the_json_is_written_when_stdout_is_gone(tmp_path):
    """The summary was printed before --json was written: with stdout a pipe its reader had closed
    (``| grep -q``, a closed terminal), the print raised BrokenPipeError and the results of the whole
    fit were lost, only 'pyro-memo: error: [Errno 32] Broken pipe' said."""
    root = pathlib.Path(__file__).resolve().parents[1]
    out = tmp_path / "r.json"
    process = subprocess.Popen([sys.executable, "-m", "pyro_memo.cli", "fit", "digits", "--algo", "memo", "--K", "3",
                                "--batches", "2", "--laps", "2", "--quiet", "--json", str(out)],
                               env={**os.environ, "PYTHONPATH": str(root)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # nobody reads the summary
    process.wait(timeout=300)
    assert json.loads(out.read_text())["laps"] == 2, process.stderr.read()


HOST_BACKEND = """
import os, sys
import matplotlib
matplotlib.use("svg")
import numpy as np
from pyro_memo.cli import main
folder = sys.argv[1]
np.save(os.path.join(folder, "x.npy"), np.random.default_rng(0).normal(size=(120, 2)))
data = os.path.join(folder, "x.npy")
assert main(["fit", data, "--laps", "2", "--quiet", "--save", os.path.join(folder, "fit")]) == 0
assert main(["compare", data, "--methods", "memo", "--seeds", "0", "--passes", "2", "--K", "3",
             "--batches", "2", "--out", os.path.join(folder, "cmp"), "--quiet"]) == 0
print("HOST", matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
"""


def test_plots_leave_the_host_processs_matplotlib_backend_alone(tmp_path):
    """``main`` called from a program that chose its matplotlib backend draws its PNGs on an Agg canvas of
    its own: the program's backend stays (it was switched to Agg), and pyplot is not even imported."""
    import os
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", HOST_BACKEND, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == ["HOST", "svg", "False"]
    assert (tmp_path / "fit" / "trace.png").read_bytes()[:4] == b"\x89PNG"
    pngs = sorted(p.name for p in (tmp_path / "cmp").glob("*.png"))
    assert len(pngs) == 4 and all((tmp_path / "cmp" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)


@pytest.mark.parametrize("argv, expected", [
    (["patches", "out.npy", "--n", "10", "camera"], {"out": "out.npy", "images": ["camera"], "n": 10}),
    (["patches", "out.npy", "brick", "--seed", "3", "moon", "--n", "7"],
     {"out": "out.npy", "images": ["brick", "moon"], "n": 7, "seed": 3}),
    (["patches", "out.npy", "--exclude", "camera", "astronaut"], {"images": ["astronaut"], "exclude": "camera"}),
    (["fit", "--K", "3", "data.npy", "--laps", "2"], {"data": "data.npy", "K": 3, "laps": 2}),
    (["compare", "--K", "3", "digits"], {"data": "digits", "K": 3}),
    (["predict", "model", "--out", "o.npy", "data.npy"], {"model": "model", "data": "data.npy", "out": "o.npy"}),
    (["denoise", "--sigma", "10", "camera", "--crop", "32"], {"image": "camera", "sigma": 10.0, "crop": 32}),
    (["fit", "--", "-data.npy"], {"data": "-data.npy"}),  # after --, a name that starts with - is a positional
])
def test_options_may_come_between_a_commands_positionals(argv, expected):
    """``pyro-memo patches out.npy --n 10 camera`` failed with "unrecognized arguments: camera": argparse closed
    the IMAGE list at --n. Every command reads its options and positionals in any order."""
    from pyro_memo.cli import parse_command_line

    args = parse_command_line(build_parser(), argv)
    assert args.command == argv[0]
    assert {key: getattr(args, key) for key in expected} == expected


def test_patches_with_an_option_between_its_positionals_writes_the_images_patches(tmp_path):
    out = tmp_path / "p.npy"
    assert main(["patches", str(out), "--n", "50", "brick", "--seed", "1"]) == 0
    assert np.load(out).shape == (50, 64)


@pytest.mark.parametrize("argv, message", [
    (["patches"], "the following arguments are required: OUT.npy"),
    (["fit", "a.npy", "--K", "3", "b.npy"], r"unrecognized arguments: b.npy \(see pyro-memo fit --help\)"),
    (["predict", "model"], "the following arguments are required: DATA"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_a_command_line_that_does_not_parse_is_one_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pyro-memo: error:") and len(err.splitlines()) == 1 and re.search(message, err), err


#: defaults docs/cli.md states: (its words, the command line whose parsed and resolved value is meant, option, value)
CLI_MD_DEFAULTS = [
    ("`--eps` is the fixed background link probability (default 1e-4)",
     ["fit", "karate", "--model", "relational"], "eps", 1e-4),
    ("`--birth-new N` (default 3)", ["fit", "bars", "--model", "hdp"], "birth_new", 3),
    ("`--birth-targets T` (default 1) the topics one birth splits", ["fit", "bars", "--model", "hdp"],
     "birth_targets", 1),
    ("`patches` writes `--n` (default 2,000,000)", ["patches", "out.npy"], "n", 2_000_000),
    ("S = `--size`, default 8", ["patches", "out.npy"], "size", 8),
    ("standard deviation `--sigma` (default 25,", ["denoise", "camera"], "sigma", 25),
    ("from `--K` (default 1)", ["denoise", "camera"], "K", 1),
    ("with `--moves` (default `birth,merge,delete`;", ["denoise", "camera"], "moves", "birth,merge,delete"),
    ("births target `--birth-targets` components a lap, default 4", ["denoise", "camera"], "birth_targets", 4),
    ("on `--n` (default 100,000)", ["denoise", "camera"], "n", 100_000),
    ("at most `--init-items` (default 10,000)", ["denoise", "camera"], "init_items", 10_000),
]


@pytest.mark.parametrize("words, argv, dest, value", CLI_MD_DEFAULTS)
def test_the_defaults_the_cli_page_states_are_the_parsers(words, argv, dest, value):
    """Each default docs/cli.md names is the one the command line uses (resolved for the model, as a fit runs;
    ``denoise``'s training options from the defaults it fills in when it trains the prior)."""
    from pyro_memo.cli import build_parser, parse_command_line, resolve
    from pyro_memo.cli.denoise import TRAIN_DEFAULTS

    page = " ".join((pathlib.Path(__file__).parent.parent / "docs" / "cli.md").read_text().split())
    assert words in page
    args = parse_command_line(build_parser(), argv)
    if argv[0] == "fit":
        resolve("fit", args)
    used = getattr(args, dest)
    assert (TRAIN_DEFAULTS[dest] if argv[0] == "denoise" and used is None else used) == value


def test_no_model_says_memory_bounded_fixes_K_where_its_moves_grow_it():
    """``fit --help`` said the HDP's ``--algo memory-bounded`` keeps "K fixed" while its ``--moves`` help (and
    docs/guide/memory_bounded.md) grow it with ``--K 1 --moves birth,merge``; the DP's said "unless --moves".
    ``--laps`` said only "maximum passes through the data", which a memory-bounded fit sees once: its laps are
    each epoch's model building."""
    from pyro_memo.cli.registry import MODELS, load_models

    load_models()
    checked = 0
    for model in MODELS.values():
        uses = model.uses.get("fit", {})
        if "memory-bounded" in (uses.get("algo") and uses["algo"].help or "") and "moves" in uses:
            assert "K fixed)" not in uses["algo"].help, model.name
            assert "K fixed unless --moves birth,merge" in uses["algo"].help, model.name
            assert "each epoch's model building" in uses["laps"].help, model.name  # not passes through the data
            checked += 1
    assert checked == 2  # dp and hdp


def test_every_option_the_cli_page_and_readme_name_is_an_option_of_a_command():
    """A ``--flag`` written in docs/cli.md or README.md is an option of some ``pyro-memo`` command (a renamed
    option would leave the page naming one that fails to parse)."""
    root = pathlib.Path(__file__).parent.parent
    parser = build_parser()
    flags = {flag for sub in parser.command_parsers.values() for action in sub._actions
             for flag in action.option_strings}
    for page in ("docs/cli.md", "README.md"):
        written = set(re.findall(r"(?<![\w-])--[a-z][a-zA-Z0-9-]*", (root / page).read_text()))
        assert written <= flags, (page, written - flags)


def test_the_summary_and_json_give_the_truncation_the_moves_reached(tmp_path, capsys):
    """A fit from --K 1 that births grew said 'truncation K = 1' in its summary and its JSON. Both now give the
    fit's final truncation, and the --K it started from (``initial_truncation``)."""
    rng = np.random.default_rng(0)
    path, out = tmp_path / "x.npy", tmp_path / "r.json"
    np.save(path, rng.normal(size=(1500, 2)) + 8 * np.eye(3)[rng.integers(0, 3, 1500)][:, :2])
    assert main(["fit", str(path), "--algo", "memo", "--K", "1", "--moves", "birth,merge", "--batches", "2",
                 "--laps", "8", "--quiet", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["initial_truncation"] == 1 and result["truncation"] == len(result["weights"]) > 1
    assert f"truncation K = {result['truncation']} (--K 1 at the start)" in capsys.readouterr().out
