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
