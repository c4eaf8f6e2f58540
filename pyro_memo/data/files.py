"""Writing files safely: a crash while writing never leaves a half-written file under the final name."""

import contextlib
import functools
import os
import re
import signal
import socket
import stat
import tokenize
import zipfile
import zlib

from ..checks import interrupt_behind

#: what reading a damaged ``.npy`` / ``.npz`` / zip file raises besides :class:`OSError` and :class:`ValueError`: a
#: truncated or garbled archive (``BadZipFile``, ``EOFError``, ``zlib.error``, an unknown compression method's
#: ``NotImplementedError``) or a garbled ``.npy`` header, which numpy parses as Python
#: (``tokenize.TokenError``, ``SyntaxError``)
DAMAGED_FILE_ERRORS = (EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, tokenize.TokenError, SyntaxError)


def _umask():
    """The process's umask (read from /proc where it can be, else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: the temporary files being written by this process (their paths): never stale, whatever their pid says
_ACTIVE = set()
#: the tail of a temporary file's name after ``.NAME.``: the writer's pid, its machine (see
#: :func:`_writer_machine`) and a random token
_TEMPORARY_TAIL = re.compile(r"(\d+)-([0-9a-f]{8})\.[0-9a-f]{16}\.tmp")


@functools.lru_cache(maxsize=1)
def _writer_machine():
    """8 hex digits naming this machine and PID namespace (host name, machine id, PID namespace): a pid in a
    temporary file's name tells whether its writer lives only where these match."""
    def machine_id(path):
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()

    parts = [socket.gethostname()]
    for path, read in (("/etc/machine-id", machine_id), ("/proc/self/ns/pid", os.readlink)):
        try:
            parts.append(read(path))
        except (OSError, ValueError):
            parts.append("")
    return f"{zlib.crc32('|'.join(parts).encode()):08x}"


def _temporary_name(folder, base):
    """``.NAME.PID-MACHINE.TOKEN.tmp`` in ``folder``: NAME is ``base`` (its first 200 characters), TOKEN 16
    random hex digits, so that writers of one path (threads of one process included) never share one."""
    return os.path.join(folder, f".{base[:200]}.{os.getpid()}-{_writer_machine()}.{os.urandom(8).hex()}.tmp")


def _create_empty(path):
    """Create ``path`` as an empty file only its owner may read, failing if it exists (as ``mkstemp`` does),
    without opening it where the system allows: a descriptor held in a Python variable could leak when
    :class:`KeyboardInterrupt` lands between the ``open`` and the ``close``."""
    try:
        os.mknod(path, stat.S_IFREG | 0o600)
        return
    except FileExistsError:
        raise
    except (AttributeError, PermissionError, OSError):  # no mknod, or not for regular files here
        pass
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _writer_alive(pid):
    """Whether process ``pid`` exists (on this machine and PID namespace); a process we may not signal counts."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_stale_temporaries(path):
    """Remove the temporary files :func:`write_atomically` left next to ``path`` when its writer died
    (kill -9, a crash): those named for ``path`` whose writer ran on this machine and PID namespace and
    no longer exists, or is this process but is not writing them. Any other file (another machine's, a
    live process's, a name of another form) stays. Nothing is done outside POSIX systems; errors are
    ignored. :func:`write_atomically` calls it after each successful write."""
    if os.name != "posix":
        return
    target = os.path.realpath(path)
    folder, prefix = os.path.dirname(target), f".{os.path.basename(target)[:200]}."
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    me, machine = os.getpid(), _writer_machine()
    for name in names:
        match = _TEMPORARY_TAIL.fullmatch(name, len(prefix))
        if match is None or match.group(2) != machine:
            continue
        tmp, pid = os.path.join(folder, name), int(match.group(1))
        if tmp in _ACTIVE or (pid != me and _writer_alive(pid)):
            continue
        with contextlib.suppress(OSError):
            os.remove(tmp)


@contextlib.contextmanager
def _signals_deferred():
    """In the main thread (where Python runs signal handlers): hold back SIGINT and SIGTERM (their Python
    handlers) until the block ends, then deliver them, in order, to the handlers that were in place. A Ctrl-C
    that lands while a file is written thus stops the program just after the write (with
    :class:`KeyboardInterrupt` under Python's default handler) rather than inside a library's writer, whose
    clean-up may fail over it (``np.savez``'s zip file: "Can't close the ZIP file while there is an open writing
    handle") or leak the temporary file. Signals whose handler was not set from Python, or is ``SIG_IGN``, are
    left alone. A second signal during the write means the sender insists (a stalled disk, "send it again to
    stop at once"): both are delivered at once."""
    previous, caught = {}, []

    def hold(number, frame):
        caught.append(number)
        if len(caught) > 1:
            held = caught[:]
            caught.clear()
            for signum in held:
                _deliver(signum, previous[signum])

    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)
            if handler is None or handler == signal.SIG_IGN:
                continue
            previous[signum] = handler
            try:
                signal.signal(signum, hold)
            except ValueError:  # not the main thread of the main interpreter: handlers cannot be set here
                del previous[signum]
                break
        yield
    finally:
        _put_back(list(previous.items()))
        for signum in caught:
            _deliver(signum, previous[signum])


def _deliver(signum, handler):
    """Deliver a held-back signal to ``handler``: a Python handler is called (a wake-up file descriptor,
    asyncio's, was written when the signal came and is not written twice), the default one raised again."""
    if callable(handler):
        handler(signum, None)
    else:
        signal.raise_signal(signum)


def _put_back(handlers):
    """Install each ``(signum, handler)``; the rest still are when a handler just put back raises."""
    if handlers:
        try:
            signal.signal(*handlers[0])
        finally:
            _put_back(handlers[1:])


def _naming_target(err, path, tmp):
    """``err`` as an error naming ``path``: an :class:`OSError` of the write (a full disk, a folder
    removed meanwhile) names no file (numpy's, matplotlib's and json's writers) or the temporary file,
    which is gone by the time the message is read. The same class and ``errno``; anything else, or
    an error that names ``path`` already, is ``err`` itself."""
    text = str(err).replace(str(tmp), "") if tmp else str(err)
    if not isinstance(err, OSError) or str(path) in text:
        return err
    cls = type(err) if type(err).__module__ == "builtins" else OSError  # a library's class may take other arguments
    named = cls(f"{path}: cannot write the file ({err.strerror or text})")
    named.errno = err.errno
    return named


def write_atomically(path, write):
    """Call ``write(tmp_path)``, then rename over ``path``: a crash leaves the old file intact.

    ``path`` may be a symbolic link: the file it points to is replaced, the link stays. An existing
    file keeps its permission bits; a new one gets the usual ones (``0o666`` less the umask). The
    temporary file is a fresh name in the same folder (``.NAME.PID-MACHINE.TOKEN.tmp``, created
    readable by its owner only), so that writers of the same path never share one, and it is removed
    if ``write`` fails. SIGINT and SIGTERM that arrive during the write (in the main thread) are
    delivered when it is over (``_signals_deferred()``), and an error that ``write`` raised while
    handling a :class:`KeyboardInterrupt` is reported as that interrupt. After a successful write,
    the temporary files of ``path`` that a dead writer left (kill -9) are removed
    (``remove_stale_temporaries()``).

    :raises OSError: naming ``path`` (not the temporary file) if the write fails (a full disk, ...).
    :raises IsADirectoryError: naming ``path`` if it is a directory (before ``write`` is called).
    :raises NotADirectoryError: naming ``path`` if a folder on its way is a file.
    """
    target = os.path.realpath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(f"{path}: is a directory, cannot write a file there")
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where a folder should be
        raise NotADirectoryError(f"{path}: cannot write there, a file stands where a folder of its path "
                                 "should be") from None
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    with _signals_deferred():
        tmp = None
        try:
            while tmp is None:
                tmp = _temporary_name(folder, os.path.basename(target))
                _ACTIVE.add(tmp)
                try:
                    _create_empty(tmp)
                except FileExistsError:  # a 64-bit token drawn twice: draw another
                    _ACTIVE.discard(tmp)
                    tmp = None
            write(tmp)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException as err:
            interrupt = interrupt_behind(err)
            if interrupt is not None and interrupt is not err:  # an error in the writer's clean-up after Ctrl-C
                raise interrupt from None
            named = _naming_target(err, path, tmp)
            if named is not err:
                raise named from err
            raise
        finally:
            if tmp is not None:
                _ACTIVE.discard(tmp)
                with contextlib.suppress(OSError):
                    os.remove(tmp)
        remove_stale_temporaries(target)


def text_lines(path):
    """``(line number, line)`` of the UTF-8 text file ``path``, from 1; a byte order mark at its start (as Windows
    editors write) is no part of the first line. A file that is not UTF-8 text (a binary or compressed file given
    by mistake) is a :class:`ValueError` naming it, not a ``UnicodeDecodeError`` (the file is decoded by blocks, so
    the error names no line)."""
    with open(path, encoding="utf-8-sig") as fh:
        try:
            yield from enumerate(fh, 1)
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not UTF-8 text (a binary or compressed file?): {err.reason}") from None
