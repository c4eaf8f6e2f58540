"""write_atomically: an overwrite keeps the file's permissions and a symbolic link, writers of one
path never share a temporary file, and a directory in the way is refused before anything is written."""

import os
import stat
import threading

import pytest

from pyro_memo.data.files import write_atomically


def _text(value):
    def write(tmp):
        with open(tmp, "w") as fh:
            fh.write(value)
    return write


def test_an_overwrite_keeps_the_permissions_and_a_new_file_gets_the_usual_ones(tmp_path):
    path = tmp_path / "state.pt"
    write_atomically(path, _text("one"))
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask
    os.chmod(path, 0o600)
    write_atomically(path, _text("two"))
    assert path.read_text() == "two" and stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_symbolic_link_stays_and_its_target_is_replaced(tmp_path):
    (tmp_path / "real.pt").write_text("old")
    os.symlink("real.pt", tmp_path / "link.pt")
    write_atomically(tmp_path / "link.pt", _text("new"))
    assert os.path.islink(tmp_path / "link.pt") and (tmp_path / "real.pt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.pt", "real.pt"]


def test_writers_of_one_path_never_share_a_temporary_file(tmp_path):
    path, errors, names = tmp_path / "state.pt", [], set()

    def write(value):
        def inner(tmp):
            names.add(os.path.basename(tmp))
            _text(value * 20000)(tmp)
        return inner

    def saver(value):
        for _ in range(6):
            try:
                write_atomically(path, write(value))
            except Exception as err:  # noqa: BLE001  (any failure fails the test)
                errors.append(err)

    threads = [threading.Thread(target=saver, args=(c,)) for c in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(names) == 18
    assert all(n.startswith(".state.pt.") and n.endswith(".tmp") and str(os.getpid()) not in n for n in names)
    assert path.read_text() in {c * 20000 for c in "abc"}
    assert os.listdir(tmp_path) == ["state.pt"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "state.pt"
    write_atomically(path, _text("good"))

    def broken(tmp):
        _text("half")(tmp)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, broken)
    assert path.read_text() == "good" and os.listdir(tmp_path) == ["state.pt"]


def test_a_directory_in_the_way_is_refused_before_writing(tmp_path):
    called = []
    (tmp_path / "state.pt").mkdir()
    with pytest.raises(IsADirectoryError, match="state.pt: is a directory"):
        write_atomically(tmp_path / "state.pt", called.append)
    (tmp_path / "w").write_text("a file")
    with pytest.raises(NotADirectoryError, match="x.pt: cannot write there, a file stands where a folder"):
        write_atomically(tmp_path / "w" / "x.pt", called.append)
    with pytest.raises(NotADirectoryError, match="x.pt: cannot write there"):
        write_atomically(tmp_path / "w" / "sub" / "x.pt", called.append)
    assert called == [] and sorted(os.listdir(tmp_path)) == ["state.pt", "w"]


def _damaged_npz_files(folder):
    """``.npz`` files damaged where the reviewers found raw tracebacks: an unknown compression method in
    the central directory (NotImplementedError) and a garbled ``.npy`` header (tokenize.TokenError)."""
    import numpy as np
    import scipy.sparse as sp

    np.savez(folder / "dense.npz", x=np.random.default_rng(0).random((100, 2)))
    sp.save_npz(folder / "sparse.npz", sp.random(30, 20, density=0.3, format="csr", random_state=0).ceil())
    out = []
    for name in ("dense.npz", "sparse.npz"):
        data = bytearray((folder / name).read_bytes())
        data[data.find(b"PK\x01\x02") + 10] = 99  # compression method 99
        (folder / f"method_{name}").write_bytes(bytes(data))
        out.append(folder / f"method_{name}")
    np.savez_compressed(folder / "header.npz", x=np.random.default_rng(0).normal(size=(300, 2)))
    data = bytearray((folder / "header.npz").read_bytes())
    data[188] ^= 0x10
    (folder / "header_damaged.npz").write_bytes(bytes(data))
    out.append(folder / "header_damaged.npz")
    return out


def test_damaged_npz_files_are_one_error_naming_the_file(tmp_path):
    from pyro_memo.cli import main
    from pyro_memo.data import load_dataset
    from pyro_memo.data.graphs import read_npz

    method_dense, method_sparse, header = _damaged_npz_files(tmp_path)
    for path in (method_dense, header):
        with pytest.raises(ValueError, match="damaged") as err:
            load_dataset(str(path))
        assert str(path) in str(err.value)
    with pytest.raises(ValueError, match="damaged"):
        read_npz(str(method_sparse))
    for args in (["fit", str(method_dense), "--K", "2", "--laps", "1"], ["fit", str(method_sparse), "--model", "hdp"],
                 ["fit", str(method_sparse), "--model", "relational"]):
        assert main(args) == 2
