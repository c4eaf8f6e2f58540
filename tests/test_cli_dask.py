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
