"""``pyro-memo fit --workers N`` / ``--scheduler ADDRESS`` (issue #17): one and two workers of a local Dask
cluster give the same fit for each model, and bad settings get one clear error."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from pyro_memo.cli import main
from pyro_memo.data import toy_patches
from pyro_memo.synthetic import bars_corpus

pytest.importorskip("distributed")


def traces(tmp_path, argv):
    out = []
    for workers in ("1", "2"):
        path = tmp_path / f"w{workers}.json"
        assert main(argv + ["--workers", workers, "--quiet", "--json", str(path)]) == 0
        out.append(json.loads(path.read_text())["elbo_trace"])
    return out


@pytest.mark.slow
def test_dp_mixture_with_one_and_two_workers(tmp_path):
    np.save(tmp_path / "x.npy", toy_patches(2000, seed=1, patch=3, num_components=5)[0])
    one, two = traces(tmp_path, ["fit", str(tmp_path / "x.npy"), "--algo", "memo", "--K", "6", "--batches", "4",
                                 "--laps", "4", "--tol", "0", "--round-size", "2"])
    np.testing.assert_allclose(one, two, rtol=1e-10)


@pytest.mark.slow
def test_hdp_with_one_and_two_workers(tmp_path):
    corpus, _, _ = bars_corpus(80, 30, seed=2)
    sp.save_npz(tmp_path / "c.npz", sp.csr_matrix(corpus.to_dense()))
    one, two = traces(tmp_path, ["fit", str(tmp_path / "c.npz"), "--model", "hdp", "--K", "5", "--batches", "4",
                                 "--laps", "3", "--tol", "0"])
    np.testing.assert_allclose(one, two, rtol=1e-10)


@pytest.mark.slow
def test_relational_model_with_one_and_two_workers(tmp_path):
    one, two = traces(tmp_path, ["fit", "karate", "--model", "relational", "--K", "3", "--batches", "4",
                                 "--laps", "3", "--tol", "0"])
    np.testing.assert_allclose(one, two, rtol=1e-10)


@pytest.mark.parametrize("extra,message", [
    (["--workers", "0"], "--workers must be a positive integer"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:9"], "not both"),
    (["--round-size", "0"], "--round-size must be a positive integer"),
    (["--algo", "vb", "--workers", "2"], "--workers needs --algo memo"),
    (["--scheduler", "127.0.0.1"], "--scheduler 127.0.0.1: not an address Dask can connect to"),
    (["--scheduler", "inproc://x"], "--scheduler inproc://x: not an address Dask can connect to"),
    (["--scheduler", "tls://127.0.0.1:9"], "give the running scheduler's address as tcp://HOST:PORT"),
])
def test_bad_cluster_settings_get_one_clear_error(tmp_path, capsys, extra, message):
    np.save(tmp_path / "x.npy", toy_patches(200, seed=1, patch=2, num_components=2)[0])
    argv = ["fit", str(tmp_path / "x.npy"), "--K", "2", "--laps", "1", "--quiet"]
    argv += [] if "--algo" in extra else ["--algo", "memo"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_stops_a_fit_on_local_workers_after_the_lap(tmp_path):
    """A terminal's Ctrl-C reaches the whole foreground process group, the worker processes of
    ``--workers N`` included: they must leave it to the command, which stops after the lap with its
    checkpoint and JSON (the workers took it as their own KeyboardInterrupt and died, and the fit
    ended in a lost-worker RuntimeError's traceback, without the JSON)."""
    import os
    import pathlib
    import signal
    import subprocess
    import sys
    import time

    root = pathlib.Path(__file__).resolve().parents[1]
    save, out = tmp_path / "save", tmp_path / "part.json"
    argv = ["fit", "digits", "--algo", "memo", "--K", "12", "--batches", "6", "--laps", "500", "--tol", "0",
            "--quiet", "--workers", "2", "--save", str(save), "--json", str(out)]
    process = subprocess.Popen([sys.executable, "-m", "pyro_memo.cli", *argv], start_new_session=True,
                               env=dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (save / "state.pt").exists():
        assert time.time() < deadline and process.poll() is None, "no checkpoint appeared"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "lost with a Dask worker" not in err, err
    from pyro_memo.memo import load_state

    laps = load_state(save / "state.pt").laps_done
    assert 1 <= laps < 500 and len(json.loads(out.read_text())["elbo_trace"]) == laps
