"""``pyro-memo fit`` / ``predict`` on array files of unusual dtypes, shapes and layouts: one error line
naming the problem and status 2, the same with ``--algo vb`` and ``--algo memo``; bool arrays are 0/1
data and Fortran-ordered ones are read as they are."""

import json

import numpy as np
import pytest

from pyro_memo.cli import main


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    import scipy.sparse as sp

    d = tmp_path_factory.mktemp("arrays")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    x[20:] += 6
    np.save(d / "complex.npy", x + 1j * x)
    np.savez(d / "complex.npz", x=x + 1j)
    np.save(d / "strings.npy", np.array([["a", "b"]] * 5))
    np.save(d / "dates.npy", np.array([["2020-01-01", "2020-01-02"]] * 5, dtype="datetime64[D]"))
    np.save(d / "nocols.npy", np.zeros((5, 0)))
    np.save(d / "bool.npy", rng.random((40, 4)) < 0.4)
    np.save(d / "fortran.npy", np.asfortranarray(x))
    np.save(d / "c.npy", x)
    sp.save_npz(d / "sparse.npz", sp.csr_matrix((rng.random((20, 6)) < 0.3).astype(float)))
    return d


def run(argv, capsys):
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err
    return status, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("algo", ["vb", "memo"])
@pytest.mark.parametrize("name, keyword", [("complex.npy", "complex"), ("complex.npz", "complex"),
                                           ("strings.npy", "must be numeric"), ("dates.npy", "must be numeric"),
                                           ("nocols.npy", "no columns"), ("sparse.npz", "sparse matrix")])
def test_bad_arrays_get_one_error_line(arrays, capsys, algo, name, keyword):
    batches = ["--batches", "1"] if algo == "memo" else []
    status, lines = run(["fit", str(arrays / name), "--algo", algo, "--laps", "1", "--quiet", *batches], capsys)
    assert status == 2, lines
    assert len(lines) == 1 and lines[0].startswith("pyro-memo: error:") and keyword in lines[0], lines
    assert name in lines[0]


@pytest.mark.parametrize("algo", ["vb", "memo"])
def test_bool_arrays_fit_and_predict_as_zeros_and_ones(arrays, tmp_path, capsys, algo):
    save = tmp_path / "fit"
    status, lines = run(["fit", str(arrays / "bool.npy"), "--family", "bern", "--algo", algo, "--laps", "2",
                         "--save", str(save), "--quiet"], capsys)
    assert status == 0, lines
    status, lines = run(["predict", str(save), str(arrays / "bool.npy")], capsys)
    assert status == 0, lines


def test_a_fortran_ordered_array_is_read_as_its_c_ordered_copy(arrays):
    from pyro_memo.data.batches import make_batches

    fortran, c = make_batches(str(arrays / "fortran.npy"), 3), make_batches(str(arrays / "c.npy"), 3)
    for b in range(3):
        np.testing.assert_array_equal(fortran.batch(b), c.batch(b))
    np.testing.assert_array_equal(fortran.take([0, 5, 39]), c.take([0, 5, 39]))


def test_memo_fits_a_fortran_ordered_file_as_its_c_ordered_copy(arrays, tmp_path, capsys):
    out = {}
    for name in ("fortran.npy", "c.npy"):
        json_path = tmp_path / f"{name}.json"
        status, lines = run(["fit", str(arrays / name), "--algo", "memo", "--laps", "3", "--batches", "2",
                             "--json", str(json_path), "--quiet"], capsys)
        assert status == 0, lines
        out[name] = json.loads(json_path.read_text())["elbo_trace"]
    assert out["fortran.npy"] == out["c.npy"]
