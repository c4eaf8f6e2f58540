"""Fault injection against ``pyro-memo fit --save``: kill -9 at random moments and inside the
checkpoint write, Ctrl-C and SIGTERM mid-fit, a truncated or corrupted checkpoint. Whatever
happens, ``--resume`` ends at the ELBO of an uninterrupted run, or the user gets one clear line."""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

from pyro_memo.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAPS = 40
FIT = ["fit", "digits", "--algo", "memo", "--K", "12", "--batches", "6", "--laps", str(LAPS), "--tol", "0",
       "--quiet"]
HDP = ["fit", "bars", "--model", "hdp", "--K", "8", "--batches", "3", "--laps", "12", "--tol", "0", "--quiet"]

#: run the CLI after installing a fault: the ``n``-th checkpoint write dies half-way (kill -9 alike)
DIE_IN_WRITE = """
import os, sys, torch
import pyro_memo.memo.checkpoint as checkpoint
calls = {{"n": 0}}
real_save = torch.save
def dying_save(obj, f, *a, **k):
    calls["n"] += 1
    if calls["n"] == {n}:
        real_save(obj, f, *a, **k)
        size = os.path.getsize(f)
        with open(f, "r+b") as fh:
            fh.truncate(size // 2)
        os._exit(137)
    return real_save(obj, f, *a, **k)
torch.save = dying_save
from pyro_memo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def command(args):
    return [sys.executable, "-m", "pyro_memo.cli", *args]


def env():
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def run(args, **kwargs):
    return subprocess.run(command(args), env=env(), capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted runs' JSON output, by model."""
    folder = tmp_path_factory.mktemp("reference")
    out = {}
    for name, args in (("dp", FIT), ("hdp", HDP)):
        done = run([*args, "--json", str(folder / f"{name}.json")])
        assert done.returncode == 0, done.stderr
        out[name] = json.loads((folder / f"{name}.json").read_text())
    return out


def finish(tmp_path, args, tag="end"):
    """Resume from ``tmp_path/save`` (or start afresh when nothing was saved) and return the JSON."""
    save = tmp_path / "save"
    resume = ["--resume", str(save)] if (save / "state.pt").exists() else []
    done = run([*args, "--save", str(save), *resume, "--json", str(tmp_path / f"{tag}.json")])
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / f"{tag}.json").read_text())


def wait_for(path, seconds=120):
    deadline = time.time() + seconds
    while not path.exists():
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(4))
def test_kill_9_at_a_random_moment_then_resume_ends_where_an_uninterrupted_run_ends(tmp_path, reference, trial):
    save = tmp_path / "save"
    process = subprocess.Popen(command([*FIT, "--save", str(save)]), env=env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    wait_for(save / "state.pt")
    time.sleep(random.Random(trial).uniform(0.0, 1.5))
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    end = finish(tmp_path, FIT)
    assert end["elbo"] == reference["dp"]["elbo"]
    assert len(end["elbo_trace"]) == len(reference["dp"]["elbo_trace"])


@pytest.mark.slow
@pytest.mark.parametrize("model,args,write", [("dp", FIT, 3), ("dp", FIT, 1), ("hdp", HDP, 2)])
def test_a_death_inside_the_checkpoint_write_keeps_the_last_good_checkpoint(tmp_path, reference, model, args,
                                                                           write):
    save = tmp_path / "save"
    died = subprocess.run([sys.executable, "-c", DIE_IN_WRITE.format(n=write), *args, "--save", str(save)],
                          env=env(), capture_output=True, text=True, timeout=300)
    assert died.returncode == 137
    assert [p.name for p in save.glob(".state.pt.*.tmp")], "the dead writer's temporary file"
    if write == 1:  # died in the first write: no checkpoint, and no half file under its name
        assert not (save / "state.pt").exists()
    else:
        from pyro_memo.memo import load_state

        assert load_state(save / "state.pt").laps_done == write - 1
    end = finish(tmp_path, args)
    assert end["elbo"] == reference[model]["elbo"]
    assert not list(save.glob(".*.tmp"))  # the resumed run's first checkpoint removed it


@pytest.mark.slow
@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_at_the_end_of_the_lap_with_a_checkpoint_and_a_resume_line(tmp_path, reference, signum,
                                                                                  status):
    save = tmp_path / "save"
    process = subprocess.Popen(command([*FIT, "--save", str(save), "--json", str(tmp_path / "part.json")]),
                               env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(save / "state.pt")
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == status, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert any("--resume" in line and str(save) in line for line in lines), err
    assert "Traceback" not in err
    part = json.loads((tmp_path / "part.json").read_text())
    from pyro_memo.memo import load_state

    laps = load_state(save / "state.pt").laps_done
    assert 1 <= laps < LAPS and len(part["elbo_trace"]) == laps  # stopped early, JSON of the laps done
    end = finish(tmp_path, FIT)
    assert end["elbo"] == reference["dp"]["elbo"]


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_checkpoint_is_refused_with_one_clear_line(tmp_path, damage):
    save = tmp_path / "save"
    done = run([*FIT[:-5], "--laps", "2", "--save", str(save), "--quiet"])
    assert done.returncode == 0, done.stderr
    state = save / "state.pt"
    data = state.read_bytes()
    state.write_bytes({"truncate": data[: len(data) // 2], "garbage": os.urandom(len(data)), "empty": b""}[damage])
    resumed = run([*FIT, "--resume", str(save), "--json", str(tmp_path / "out.json")])
    assert resumed.returncode == 2
    lines = [line for line in resumed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pyro-memo: error:") and "state.pt" in lines[0], resumed.stderr
    assert not (tmp_path / "out.json").exists()


# ----------------------------------------------------------------- signals, driven deterministically
# The signals below are raised in the main thread with signal.raise_signal, which runs the Python handler
# before it returns: each lands exactly where the test sends it.

SMALL = ["fit", "digits", "--algo", "memo", "--K", "4", "--batches", "2", "--laps", "3", "--quiet"]


def run_main(argv):
    """``main(argv)``; a KeyboardInterrupt out of it fails the test (rather than stopping pytest)."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped pyro_memo.cli.main")


def signalled_fit(monkeypatch, *signums, then=None):
    """MemoizedVB.fit receives ``signums`` before its first lap (so before any checkpoint), then runs ``then``."""
    from pyro_memo.inference import MemoizedVB

    def fit(self, *args, **kwargs):
        for signum in signums:
            signal.raise_signal(signum)
        if then is not None:
            then()
        raise AssertionError("a second signal stops at once")

    monkeypatch.setattr(MemoizedVB, "fit", fit)


@pytest.mark.parametrize("signums,status", [((signal.SIGINT, signal.SIGINT), 130),
                                            ((signal.SIGTERM, signal.SIGTERM), 143),
                                            ((signal.SIGINT, signal.SIGTERM), 143)])
def test_a_second_signal_stops_at_once_with_the_exit_status_of_that_signal(tmp_path, monkeypatch, capsys, signums,
                                                                          status):
    """Two SIGTERMs: 143 as the docs say (it was 130 whatever the signal)."""
    signalled_fit(monkeypatch, *signums)
    assert run_main([*SMALL, "--save", str(tmp_path / "save")]) == status
    assert "interrupted" in capsys.readouterr().err


def test_signals_after_the_stop_are_ignored_down_to_one_message(tmp_path, monkeypatch, capsys):
    """Signals keep coming (a held Ctrl-C, kill in a loop): the ones after the one that stops the command,
    while it unwinds and while it reports, change nothing (each raised KeyboardInterrupt through the
    report and out of main)."""
    import pyro_memo.cli as cli

    hint = cli._resume_hint

    def hint_under_fire(args):
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
        return hint(args)

    monkeypatch.setattr(cli, "_resume_hint", hint_under_fire)
    signalled_fit(monkeypatch, signal.SIGTERM, signal.SIGTERM, signal.SIGINT)
    assert run_main([*SMALL, "--save", str(tmp_path / "save")]) == 143
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith("pyro-memo: SIGTERM received") and "interrupted" in lines[1]


def test_an_interrupt_before_the_first_checkpoint_says_so_and_removes_the_empty_save_folder(tmp_path, monkeypatch,
                                                                                          capsys):
    """It pointed to DIR/state.pt, which did not exist (the suggested --resume failed), and left DIR behind."""
    signalled_fit(monkeypatch, signal.SIGINT, signal.SIGINT)
    save = tmp_path / "new" / "save"
    assert run_main([*SMALL, "--save", str(save)]) == 130
    err = capsys.readouterr().err
    assert "state.pt" not in err and "--resume" not in err and "nothing to resume from" in err, err
    assert not (tmp_path / "new").exists()


def test_a_ctrl_c_while_the_parser_is_built_is_one_line_and_130(monkeypatch, capsys):
    import pyro_memo.cli as cli

    def slow_start():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", slow_start)
    assert run_main(["fit", "digits"]) == 130
    assert capsys.readouterr().err.strip() == "pyro-memo: interrupted"


def test_an_interrupt_inside_the_posterior_write_is_an_interrupt_not_a_data_error(tmp_path, monkeypatch, capsys):
    """np.savez's zip file, closed over a KeyboardInterrupt, raised "Can't close the ZIP file while there is
    an open writing handle": the command printed it as an error and exited 2."""
    import zipfile

    real_close, calls = zipfile._ZipWriteFile.close, []

    def close(self):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # as the handler of a second Ctrl-C would, inside the member's close
        return real_close(self)

    monkeypatch.setattr(zipfile._ZipWriteFile, "close", close)
    save = tmp_path / "save"
    assert run_main([*SMALL, "--save", str(save)]) == 130
    err = capsys.readouterr().err
    assert "error" not in err and "interrupted" in err and str(save / "state.pt") in err
    assert sorted(p.name for p in save.iterdir()) == ["model.pt", "state.pt"]  # posterior.npz not written


#: pyro-memo itself (main() reading sys.argv) stopped by two SIGTERMs, then more signals while it exits
SIGNALS_AT_EXIT = """
import atexit, signal, sys
from pyro_memo.inference import MemoizedVB
from pyro_memo.cli import main

def fit(self, *args, **kwargs):
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGTERM)

def at_exit():
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        signal.raise_signal(signum)
    print("atexit done", file=sys.stderr)

MemoizedVB.fit = fit
atexit.register(at_exit)
sys.argv = ["pyro-memo", *sys.argv[1:]]
sys.exit(main())
"""


def test_signals_while_the_stopped_program_exits_change_nothing(tmp_path):
    """After main returned, Python's handlers were back: a signal during shutdown raised KeyboardInterrupt in
    an atexit hook (a traceback) or killed the program (status -15 instead of 143)."""
    done = subprocess.run([sys.executable, "-c", SIGNALS_AT_EXIT, *SMALL, "--save", str(tmp_path / "save")],
                          env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr and "atexit done" in done.stderr
