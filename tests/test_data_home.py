"""Downloaded data: one data folder (``PYRO_MEMO_DATA``), ``fetch_*`` downloads once, ``load_*`` never downloads.

No test touches the network: the pip transport is replaced by a fake that fails (offline) or that
writes a tiny sdist with the same layout as bnpy 0.1.7's.
"""

import io
import os
import subprocess
import tarfile

import numpy as np
import pytest

import pyro_memo.topics
from pyro_memo.data import DataUnavailableError, fetch_wikipedia, get_data_home, load_wikipedia, wikipedia
from pyro_memo.data.wikipedia import FETCH_COMMAND, MEMBERS

LDAC = "2 0:3 2:1\n1 1:2\n"
VOCAB = "apple\nbanana\ncherry\n"


def write_cache(home):
    """A tiny two-document corpus where the cache keeps the Wikipedia files."""
    folder = os.path.join(home, "wiki")
    os.makedirs(folder)
    with open(os.path.join(folder, "train.ldac"), "w") as fh:
        fh.write(LDAC)
    with open(os.path.join(folder, "vocab.txt"), "w") as fh:
        fh.write(VOCAB)


def check_tiny(corpus):
    assert corpus.num_docs == 2 and corpus.vocab == ["apple", "banana", "cherry"]
    np.testing.assert_array_equal(corpus.to_dense(), [[3, 0, 1], [0, 2, 0]])


@pytest.fixture
def no_download(monkeypatch):
    """Any download attempt fails the test."""
    def forbidden(folder):
        raise AssertionError("the transport was called although the corpus is cached or downloads are off")

    monkeypatch.setattr(wikipedia, "_download_sdist", forbidden)


@pytest.fixture
def fake_pip(monkeypatch):
    """A transport writing a tiny sdist with bnpy 0.1.7's layout; returns the list of folders it wrote to."""
    calls = []

    def download(folder):
        calls.append(folder)
        path = os.path.join(folder, "bnpy-0.1.7.tar.gz")
        with tarfile.open(path, "w:gz") as tar:
            for name, member in MEMBERS.items():
                data = (LDAC if name == "train.ldac" else VOCAB).encode()
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    monkeypatch.setattr(wikipedia, "_download_sdist", download)
    return calls


def test_data_home_is_the_argument_else_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("PYRO_MEMO_DATA", str(tmp_path / "from-env"))
    assert get_data_home() == str(tmp_path / "from-env") and (tmp_path / "from-env").is_dir()
    assert get_data_home(tmp_path / "explicit") == str(tmp_path / "explicit")
    monkeypatch.delenv("PYRO_MEMO_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == str(tmp_path / "home" / "pyro_memo_data")


def test_load_reads_the_cache_named_by_the_environment_variable(tmp_path, monkeypatch, no_download):
    write_cache(tmp_path)
    monkeypatch.setenv("PYRO_MEMO_DATA", str(tmp_path))
    check_tiny(load_wikipedia())
    check_tiny(fetch_wikipedia())
    check_tiny(pyro_memo.topics.load_wikipedia(tmp_path))


def test_load_never_downloads_and_names_the_folder_and_the_command(tmp_path, no_download):
    with pytest.raises(DataUnavailableError) as err:
        load_wikipedia(tmp_path)
    assert str(tmp_path / "wiki") in str(err.value) and FETCH_COMMAND in str(err.value)
    assert "fetch_wikipedia()" in str(err.value)


def test_fetch_without_download_if_missing_fails_clearly(tmp_path, no_download):
    with pytest.raises(DataUnavailableError, match="download_if_missing=False") as err:
        fetch_wikipedia(tmp_path, download_if_missing=False)
    assert str(tmp_path / "wiki") in str(err.value) and FETCH_COMMAND in str(err.value)


@pytest.mark.parametrize("failure", [subprocess.CalledProcessError(1, ["pip", "download"]),
                                     subprocess.TimeoutExpired(["pip", "download"], 600)], ids=["offline", "hangs"])
def test_fetch_offline_fails_clearly_and_leaves_no_partial_files(tmp_path, monkeypatch, failure):
    def offline(folder):
        raise failure

    monkeypatch.setattr(wikipedia, "_download_sdist", offline)
    with pytest.raises(DataUnavailableError, match="could not download") as err:
        fetch_wikipedia(tmp_path)
    assert str(tmp_path / "wiki") in str(err.value) and FETCH_COMMAND in str(err.value)
    assert not (tmp_path / "wiki").exists() or not os.listdir(tmp_path / "wiki")
    with pytest.raises(DataUnavailableError):
        load_wikipedia(tmp_path)


def test_fetch_downloads_once_into_the_environment_variables_folder(tmp_path, monkeypatch, fake_pip):
    monkeypatch.setenv("PYRO_MEMO_DATA", str(tmp_path))
    check_tiny(fetch_wikipedia())
    assert len(fake_pip) == 1
    assert sorted(os.listdir(tmp_path / "wiki")) == ["train.ldac", "vocab.txt"]
    check_tiny(fetch_wikipedia())
    check_tiny(load_wikipedia())
    assert len(fake_pip) == 1


def test_the_first_fetch_says_it_downloads_before_it_does_and_later_fetches_say_nothing(tmp_path, monkeypatch, capsys,
                                                                                        fake_pip):
    said_before = []
    transport = wikipedia._download_sdist

    def download(folder):
        said_before.append(capsys.readouterr().err)
        return transport(folder)

    monkeypatch.setattr(wikipedia, "_download_sdist", download)
    check_tiny(fetch_wikipedia(tmp_path))
    assert "downloading the Wikipedia corpus" in said_before[0] and str(tmp_path / "wiki") in said_before[0]
    assert "the Wikipedia corpus is in" in capsys.readouterr().err
    check_tiny(fetch_wikipedia(tmp_path))
    assert capsys.readouterr().err == "" and len(said_before) == 1
