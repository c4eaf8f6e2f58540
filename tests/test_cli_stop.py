"""Ctrl-C stops every long-running command at the end of its lap, epoch or run, and the closing line
names the unit and says whether there is a checkpoint to resume from. Each command here runs as if
the signal had come before its first lap ended."""

import json
import re
import signal

import numpy as np
import pytest

from pyro_memo.cli import build_parser, main
from pyro_memo.cli.interrupt import StopOnSignal
from pyro_memo.reporting import _k_hint


@pytest.fixture
def interrupted(monkeypatch):
    """Commands run as if SIGINT came during their first lap (the handlers are still installed)."""
    enter = StopOnSignal.__enter__

    def signalled(self):
        enter(self)
        self.signum = signal.SIGINT
        return self

    monkeypatch.setattr(StopOnSignal, "__enter__", signalled)


def run(argv, capsys):
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err


def test_a_memory_bounded_dp_fit_stops_after_the_epoch_and_has_no_checkpoint(tmp_path, capsys, interrupted):
    status, err = run(["fit", "digits", "--algo", "memory-bounded", "--K", "5", "--memory", "5000", "--epoch", "300",
                       "--save", tmp_path / "mb", "--json", tmp_path / "mb.json", "--quiet"], capsys)
    out = json.loads((tmp_path / "mb.json").read_text())
    assert status == 130 and len(out["epochs"]) == 1 and out["N"] == 1797  # 6 epochs uninterrupted
    assert "stopped by SIGINT after a complete epoch" in err
    assert "--algo memory-bounded writes no checkpoint: nothing to resume from" in err and "state.pt" not in err


def test_a_memory_bounded_hdp_fit_stops_after_the_epoch(tmp_path, capsys, interrupted):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "grouped.npz", x=rng.normal(size=(60, 2)), groups=np.repeat(np.arange(6), 10))
    status, err = run(["fit", tmp_path / "grouped.npz", "--model", "hdp", "--algo", "memory-bounded", "--K", "3",
                       "--memory", "200", "--epoch", "2", "--json", tmp_path / "h.json", "--quiet"], capsys)
    out = json.loads((tmp_path / "h.json").read_text())
    assert status == 130 and len(out["epochs"]) == 1  # of 3
    assert "after a complete epoch" in err
    assert out["groups_seen"] == 2 and out["N"] == 60  # the groups of the epoch done (it said all 6), of 60 items


def test_a_full_batch_fit_stops_after_the_lap_and_does_not_point_to_a_checkpoint(tmp_path, capsys, interrupted):
    status, err = run(["fit", "digits", "--algo", "vb", "--K", "5", "--laps", "50", "--tol", "0",
                       "--save", tmp_path / "vb", "--json", tmp_path / "vb.json", "--quiet"], capsys)
    assert status == 130 and json.loads((tmp_path / "vb.json").read_text())["laps"] == 1
    assert "--algo vb writes no checkpoint" in err and not (tmp_path / "vb" / "state.pt").exists()


def test_a_comparison_stops_after_the_run(tmp_path, capsys, interrupted):
    status, err = run(["compare", "digits", "--methods", "memo,vb", "--seeds", "0,1", "--passes", "2",
                       "--out", tmp_path / "cmp", "--quiet"], capsys)
    runs = (tmp_path / "cmp" / "runs.csv").read_text().strip().splitlines()
    assert status == 130 and len(runs) == 2  # the header and one run of four
    assert "stopped by SIGINT after a complete run; the results above cover the runs done" in err


def test_denoise_stops_training_after_the_lap_then_denoises(tmp_path, capsys, interrupted):
    status, err = run(["denoise", "camera", "--crop", "32", "--n", "2000", "--K", "2", "--laps", "5", "--batches",
                       "2", "--moves", "", "--init-items", "500", "--json", tmp_path / "d.json"], capsys)
    result = json.loads((tmp_path / "d.json").read_text())
    assert status == 130 and result["laps"] == 1 and result["psnr_denoised"] > result["psnr_noisy"]
    assert "after a complete lap" in err


@pytest.mark.parametrize("out,hint", [
    ({"K": 2, "truncation": 1, "moves_on": True}, ""),  # moves grew the truncation: nothing to suggest
    ({"K": 3, "truncation": 5}, ""),
    ({"K": 5, "truncation": 5}, ": all 5 in use"),
])
def test_the_k_hint_counts_the_components_in_use_and_is_silent_when_moves_are_on(out, hint):
    assert _k_hint(out).startswith(hint) and bool(_k_hint(out)) == bool(hint)


def test_help_keeps_an_ellipsis_and_adds_no_stray_period():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for command in ("fit", "compare"):
        text = commands[command].format_help()
        assert "...." not in text and not re.search(r", \.\s+[a-z]+:", text)  # was 'nmi (labelled data), . hdp:'
    assert "tokens, V, ... relational: keys:" in " ".join(commands["fit"].format_help().split())


def test_the_model_choices_keep_their_order_whichever_model_module_was_imported_first():
    # run alone after test_layering (which imports cli.models.relational first), --model read
    # {relational,dp,dp-mixture,hdp} and the help listed relational before hdp
    import subprocess
    import sys

    script = ("import pyro_memo.cli.models.relational, pyro_memo.cli.models.hdp\n"
              "from pyro_memo.cli import build_parser\n"
              "fit = build_parser()._subparsers._group_actions[0].choices['fit']\n"
              "print([a for a in fit._actions if a.dest == 'model'][0].choices)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['dp', 'dp-mixture', 'hdp', 'relational']"


def test_a_resumed_fit_without_save_does_not_claim_its_laps_were_checkpointed(tmp_path, capsys, interrupted):
    """--resume DIR alone writes no checkpoint: the closing line said 'the last complete checkpoint is
    DIR/state.pt: run the same command with --resume DIR to go on', though state.pt still held the fit as
    it was before the run (237 laps of a relational fit lost, and the same command started again from lap 2)."""
    from pyro_memo.memo import load_state

    save = tmp_path / "save"
    small = ["fit", "digits", "--algo", "memo", "--K", "4", "--batches", "3", "--laps", "9", "--tol", "0", "--quiet"]
    assert run([*small, "--save", save], capsys)[0] == 130
    status, err = run([*small, "--resume", save], capsys)
    assert status == 130 and load_state(save / "state.pt").laps_done == 1
    assert "run the same command" not in err and "no --save" in err, err
    assert f"--resume {save} --save {save}" in err, err
