"""Writing files safely: a crash while writing never leaves a half-written file under the final name."""

import os
import stat
import tempfile
import tokenize
import zipfile
import zlib

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


def write_atomically(path, write):
    """Call ``write(tmp_path)``, then rename over ``path``: a crash leaves the old file intact.

    ``path`` may be a symbolic link: the file it points to is replaced, the link stays. An existing
    file keeps its permission bits; a new one gets the usual ones (``0o666`` less the umask). The
    temporary file is a fresh name in the same folder (``.NAME.XXXXXXXX.tmp``), so that writers
    of the same path never share one, and it is removed if ``write`` fails.

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
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)[:200]}.", suffix=".tmp")
    try:
        os.close(fd)
        write(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
