"""write_atomically: an overwrite keeps the file's permissions and a symbolic link, writers of one
path never share a temporary file, and a directory in the way is refused before anything is written."""

import os
import re
import signal
import stat
import subprocess
import sys
import threading

import pytest

from pyro_memo.data import files
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
    # distinct names: the writer's pid and machine, then a random token (a pid alone is shared by threads)
    assert all(re.fullmatch(rf"\.state\.pt\.{os.getpid()}-[0-9a-f]{{8}}\.[0-9a-f]{{16}}\.tmp", n) for n in names)
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


@pytest.mark.parametrize("named", [False, True])
def test_a_full_disk_names_the_file_being_written_not_its_temporary_file(tmp_path, named):
    """A real ENOSPC from numpy, matplotlib or json named no file ('[Errno 28] No space left on device'
    for posterior.npz, trace.png and --json), or the temporary file, which is gone by then."""
    import errno

    path = tmp_path / "posterior.npz"
    write_atomically(path, _text("good"))

    def full(tmp):
        _text("half")(tmp)
        raise OSError(errno.ENOSPC, "No space left on device", *([tmp] if named else []))

    with pytest.raises(OSError) as caught:
        write_atomically(path, full)
    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value) == f"{path}: cannot write the file (No space left on device)"
    assert path.read_text() == "good" and os.listdir(tmp_path) == ["posterior.npz"]


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


def _open_descriptors():
    return len(os.listdir("/proc/self/fd"))


def _interrupted_at(k, call):
    """Run ``call()`` with SIGINT sent to this process at its ``k``-th line (under Python's default handler,
    as a Ctrl-C lands wherever the program is); whether it raised KeyboardInterrupt."""
    count = [0]

    def tracer(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] == k:
                signal.raise_signal(signal.SIGINT)
        return tracer

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.settrace(tracer)
    try:
        call()
        return False
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_a_ctrl_c_at_any_line_of_a_write_leaves_no_temporary_file_and_no_descriptor(tmp_path):
    """SIGINT at each line of the write in turn (mkstemp's open included): the path holds the old or the new
    bytes, nothing else is left in the folder and no descriptor stays open. SIGINT during the write itself
    is held back until the new file is in place."""
    path = tmp_path / "state.pt"
    write_atomically(path, _text("old"))
    fds, k, after_the_write = _open_descriptors(), 0, 0
    while True:
        k += 1
        (tmp_path / "state.pt").write_text("old")
        interrupted = _interrupted_at(k, lambda: write_atomically(path, _text("new")))
        assert os.listdir(tmp_path) == ["state.pt"], (k, os.listdir(tmp_path))
        assert path.read_text() in ("old", "new") and _open_descriptors() == fds, k
        after_the_write += interrupted and path.read_text() == "new"
        if not interrupted:
            break
    # most lines are inside the write: their SIGINT waits for it
    assert k > 50 and after_the_write > k // 2, (k, after_the_write, signal.getsignal(signal.SIGINT),
                                                 signal.getsignal(signal.SIGTERM), threading.current_thread().name)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_a_ctrl_c_while_posterior_npz_is_written_is_an_interrupt_not_a_zip_error(tmp_path, monkeypatch):
    """np.savez cleaning up after a KeyboardInterrupt inside its zip member raised "Can't close the ZIP file
    while there is an open writing handle" over it, which the command line took for bad data."""
    import numpy as np
    import torch

    from pyro_memo.reporting import write_posterior_npz

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    path = tmp_path / "posterior.npz"

    def write(value):
        write_posterior_npz(path, np.full(3, value), np.zeros(4), {"means": torch.full((3, 2), value)})

    write(0.0)
    fds, k = _open_descriptors(), 0
    while True:
        k += 3
        interrupted = _interrupted_at(k, lambda: write(1.0))
        assert os.listdir(tmp_path) == ["posterior.npz"] and _open_descriptors() == fds, k
        with np.load(path) as saved:
            assert saved["weights"][0] in (0.0, 1.0) and (saved["means"] == saved["weights"][0]).all()
        if not interrupted:
            break
    assert k > 100 and unraisable == []


def _stale_name(target, pid, machine=None, token="0123456789abcdef"):
    return f".{target}.{pid}-{machine or files._writer_machine()}.{token}.tmp"


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_next_write_removes_the_temporary_files_a_killed_writer_left(tmp_path):
    """kill -9 during a save leaves ``.NAME.PID-MACHINE.TOKEN.tmp``: the next successful write of NAME
    removes those whose writer no longer exists (or is this process, not writing them), and only those."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = _dead_pid()
        stale = [_stale_name("state.pt", dead), _stale_name("state.pt", os.getpid(), token="fedcba9876543210")]
        kept = [_stale_name("state.pt", sleeper.pid),  # a live writer
                _stale_name("state.pt", dead, machine="00000000" if files._writer_machine() != "00000000"
                            else "11111111"),  # another machine's or PID namespace's: its pid means nothing here
                ".state.pt.a1b2c3d4.tmp",  # an older release's name: its writer cannot be told
                _stale_name("state.pt.bak", dead),  # another file's
                _stale_name("other.pt", dead)]
        for name in stale + kept:
            (tmp_path / name).write_bytes(b"half a checkpoint")
        write_atomically(tmp_path / "state.pt", _text("new"))
        assert sorted(os.listdir(tmp_path)) == sorted(["state.pt", *kept])
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_temporary_file_this_process_is_writing_is_not_stale(tmp_path):
    """Two threads saving one path: one's successful write leaves the other's temporary file alone."""
    seen = []

    def slow(tmp):
        _text("first")(tmp)
        write_atomically(tmp_path / "state.pt", _text("second"))  # another writer finishes meanwhile
        seen.append(os.path.exists(tmp))

    write_atomically(tmp_path / "state.pt", slow)
    assert seen == [True] and (tmp_path / "state.pt").read_text() == "first"
    assert os.listdir(tmp_path) == ["state.pt"]


def test_a_signal_held_back_during_a_write_reaches_an_asyncio_handler_once(tmp_path):
    """asyncio learns of a signal through its wake-up file descriptor, written when the signal comes: the
    held-back signal goes to the Python handler afterwards, not raised a second time."""
    import asyncio

    calls = []

    def write(tmp):
        with open(tmp, "w") as fh:
            fh.write("x")
        os.kill(os.getpid(), signal.SIGTERM)

    async def main():
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: calls.append("SIGTERM"))
        try:
            write_atomically(tmp_path / "f.bin", write)
            await asyncio.sleep(0.2)
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    asyncio.run(main())
    assert calls == ["SIGTERM"] and (tmp_path / "f.bin").read_text() == "x"


def test_a_second_ctrl_c_during_a_slow_write_stops_it_at_once(tmp_path):
    """One Ctrl-C waits for the write to end; a second one during the write stops it there, and the
    old file and no temporary file are left."""
    (tmp_path / "f.bin").write_text("old")
    reached = []

    def write(tmp):
        with open(tmp, "w") as fh:
            fh.write("new")
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after one")
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after two")

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "f.bin", write)
    assert reached == ["after one"]
    assert (tmp_path / "f.bin").read_text() == "old" and os.listdir(tmp_path) == ["f.bin"]
