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
    if write == 1:  # died in the first write: no checkpoint, and no half file under its name
        assert not (save / "state.pt").exists()
    else:
        from pyro_memo.memo import load_state

        assert load_state(save / "state.pt").laps_done == write - 1
    end = finish(tmp_path, args)
    assert end["elbo"] == reference[model]["elbo"]


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
