"""The Wikipedia corpus of bnpy's examples (Hughes & Sudderth 2013 use it for the HDP topic model).

The 7,961 documents (V = 6,130) ship inside the bnpy 0.1.7 source distribution on PyPI.
:func:`fetch_wikipedia` downloads that sdist once with ``pip download`` (bnpy is not installed)
and keeps the two corpus files in ``<data home>/wiki``; :func:`load_wikipedia` only reads them.
"""

import os
import subprocess
import sys
import tarfile
import tempfile

from .corpus import read_ldac
from .files import write_atomically
from .home import DataUnavailableError, get_data_home

#: the PyPI requirement whose sdist holds the corpus, and the corpus files inside it
SDIST = "bnpy==0.1.7"
MEMBERS = {"train.ldac": "bnpy-0.1.7/bnpy/datasets/wiki/train.ldac",
           "vocab.txt": "bnpy-0.1.7/bnpy/datasets/wiki/vocab.txt"}

#: seconds the download may take before it counts as failed (a blocked network can hang pip)
DOWNLOAD_TIMEOUT = 600

#: the shell command that fills the cache
FETCH_COMMAND = 'python -c "from pyro_memo.data import fetch_wikipedia; fetch_wikipedia()"'


def wikipedia_folder(data_home=None):
    """``<data home>/wiki``, where the corpus files are cached."""
    return os.path.join(get_data_home(data_home), "wiki")


def _cached_files(folder):
    """Paths of the corpus files in ``folder``, or ``None`` if any is missing."""
    paths = {name: os.path.join(folder, name) for name in MEMBERS}
    return paths if all(os.path.exists(p) for p in paths.values()) else None


def _download_sdist(folder):
    """Download the bnpy sdist into ``folder`` with pip (the transport); return the archive's path.

    :raises subprocess.SubprocessError: when pip fails (offline, index unreachable) or runs past
        :data:`DOWNLOAD_TIMEOUT`.
    """
    # --no-build-isolation: pip reads the sdist's metadata with the installed setuptools instead of
    # building bnpy's build requirements (Cython) from source first, which takes many minutes
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "--no-binary",
                    "bnpy", SDIST, "-d", folder, "-q"], check=True, timeout=DOWNLOAD_TIMEOUT)
    return os.path.join(folder, "bnpy-0.1.7.tar.gz")


def _extract(sdist, folder):
    """Copy the corpus files out of the ``sdist`` archive into ``folder``, each written atomically."""
    os.makedirs(folder, exist_ok=True)
    with tarfile.open(sdist) as tar:
        for name, member in MEMBERS.items():
            data = tar.extractfile(tar.getmember(member)).read()

            def dump(tmp, data=data):
                with open(tmp, "wb") as fh:
                    fh.write(data)

            write_atomically(os.path.join(folder, name), dump)


def fetch_wikipedia(data_home=None, download_if_missing=True):
    """The Wikipedia corpus, downloaded on the first call (scikit-learn's ``fetch_*`` convention).

    :param data_home: the data folder (see :func:`~pyro_memo.data.get_data_home`).
    :param bool download_if_missing: if false, fail instead of downloading when the files are not cached.
    :returns: the :class:`~pyro_memo.topics.Corpus` (with its vocabulary).
    :raises DataUnavailableError: naming the folder and the command to run, when the files are not cached
        and downloading is not allowed or fails (offline).
    """
    folder = wikipedia_folder(data_home)
    if _cached_files(folder) is None:
        if not download_if_missing:
            raise DataUnavailableError(f"the Wikipedia corpus is not in {folder} and download_if_missing=False; "
                                       f"fetch it with: {FETCH_COMMAND}")
        print(f"pyro-memo: downloading the Wikipedia corpus once into {folder} (the {SDIST} source archive "
              f"from PyPI, about 7 MB; nothing is built or installed) ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                sdist = _download_sdist(tmp)
            except (OSError, subprocess.SubprocessError) as err:
                raise DataUnavailableError(
                    f"could not download the Wikipedia corpus into {folder} ('pip download {SDIST}' failed: {err}); "
                    f"when online, run: {FETCH_COMMAND}") from err
            _extract(sdist, folder)
        print(f"pyro-memo: the Wikipedia corpus is in {folder}", file=sys.stderr, flush=True)
    return load_wikipedia(data_home)


def load_wikipedia(data_home=None):
    """The Wikipedia corpus from the data folder; never downloads.

    :raises DataUnavailableError: naming the folder and the command that fetches the corpus, when it is missing.
    """
    folder = wikipedia_folder(data_home)
    paths = _cached_files(folder)
    if paths is None:
        raise DataUnavailableError(f"the Wikipedia corpus is not in {folder}; download it once with "
                                   f"pyro_memo.data.fetch_wikipedia() or: {FETCH_COMMAND}")
    return read_ldac(paths["train.ldac"], paths["vocab.txt"])
