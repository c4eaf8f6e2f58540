"""Bundled datasets: the digits read without importing scikit-learn are scikit-learn's digits."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits as sklearn_digits

from pyro_memo.data import BUNDLED, load_dataset, load_digits


def test_digits_are_sklearns():
    x, y = load_digits()
    want_x, want_y = sklearn_digits(return_X_y=True)
    assert x.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, want_y)
    data, labels, description = load_dataset("digits")
    np.testing.assert_array_equal(data, want_x)
    np.testing.assert_array_equal(labels, want_y)
    assert description == BUNDLED["digits"]


def test_digits_without_importing_sklearn():
    code = ("import sys; from pyro_memo.data import load_digits; x, y = load_digits(); "
            "print(x.shape, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["(1797,", "64)", "False"]


def test_digits_fall_back_to_sklearns_reader(monkeypatch):
    """Where scikit-learn's data file is not found, its own reader gives the same arrays."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    x, y = load_digits()
    want_x, want_y = sklearn_digits(return_X_y=True)
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, want_y)


def test_unknown_dataset_names_the_bundled_ones():
    with pytest.raises(ValueError, match="neither a bundled dataset .*digits.*nor an existing file"):
        load_dataset("digitz")
