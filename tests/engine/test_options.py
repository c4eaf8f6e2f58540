"""The drivers' shared option checks: K (and the HDP's local_iters) must be whole numbers of at least 1,
never truncated (2.5 was 2) or read from a boolean."""

import numpy as np
import pytest

import pyro_memo as pm
from pyro_memo.checks import as_positive_int
from pyro_memo.relational import MemoizedRelational, StochasticRelational
from pyro_memo.topics import MemoizedHDP

X = np.random.default_rng(0).normal(size=(30, 2))
MAKERS = {
    "MemoizedVB": lambda K: pm.MemoizedVB(pm.Gaussian.from_data(X), K),
    "FullBatchVB": lambda K: pm.FullBatchVB(pm.Gaussian.from_data(X), K),
    "MemoizedHDP": lambda K: MemoizedHDP(K=K),
    "MemoizedRelational": lambda K: MemoizedRelational(K=K),
    "StochasticRelational": lambda K: StochasticRelational(K=K),
}


@pytest.mark.parametrize("name", MAKERS)
@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "3", None])
def test_k_that_is_not_a_positive_whole_number_is_refused(name, bad):
    with pytest.raises(ValueError, match=f"K must be a positive integer; got {bad!r}"):
        MAKERS[name](bad)


@pytest.mark.parametrize("name", MAKERS)
@pytest.mark.parametrize("good", [3, np.int64(3), 3.0])
def test_whole_numbers_of_any_type_are_taken_as_ints(name, good):
    assert MAKERS[name](good).K == 3 and type(MAKERS[name](good).K) is int


def test_local_iters_is_checked_too():
    with pytest.raises(ValueError, match="local_iters must be a positive integer; got 0.5"):
        MemoizedHDP(K=3, local_iters=0.5)
    assert as_positive_int(np.float64(4.0), "x") == 4
