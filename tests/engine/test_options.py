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


LAP_MAKERS = {
    "MemoizedVB": lambda n: pm.MemoizedVB(pm.Gaussian.from_data(X), 3, laps=n),
    "StochasticVB": lambda n: pm.StochasticVB(pm.Gaussian.from_data(X), 3, laps=n),
    "MemoizedHDP": lambda n: MemoizedHDP(K=3, laps=n),
}


@pytest.mark.parametrize("name", LAP_MAKERS)
@pytest.mark.parametrize("bad", [0, 2.5, True, "3", None])
def test_laps_that_are_not_a_positive_whole_number_are_refused(name, bad):
    """laps=2.5 ran 2 laps, True one, "3" three, and None raised int()'s TypeError."""
    with pytest.raises(ValueError, match=f"laps must be a positive integer; got {bad!r}"):
        LAP_MAKERS[name](bad)


def test_full_batch_max_iter_is_checked_under_its_own_name():
    with pytest.raises(ValueError, match="max_iter must be a positive integer; got 2.5"):
        pm.FullBatchVB(pm.Gaussian.from_data(X), 3, max_iter=2.5)
    assert pm.FullBatchVB(pm.Gaussian.from_data(X), 3, max_iter=np.int64(4)).max_iter == 4


TOL_MAKERS = {
    "MemoizedVB": lambda tol: pm.MemoizedVB(pm.Gaussian.from_data(X), 3, tol=tol),
    "FullBatchVB": lambda tol: pm.FullBatchVB(pm.Gaussian.from_data(X), 3, tol=tol),
    "MemoryBoundedVB": lambda tol: pm.MemoryBoundedVB(pm.Gaussian.from_data(X), 3, 20, 10, tol=tol),
}


@pytest.mark.parametrize("name", TOL_MAKERS)
@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "a", None])
def test_tol_that_is_not_a_non_negative_finite_number_is_refused(name, bad):
    """A negative or NaN tol never converged (every fit ran to its lap limit), and None or "a" raised float()'s
    errors."""
    with pytest.raises(ValueError, match=f"tol must be a non-negative finite number; got {bad!r}"):
        TOL_MAKERS[name](bad)


@pytest.mark.parametrize("name", TOL_MAKERS)
def test_tol_of_zero_and_numpy_numbers_are_taken(name):
    assert TOL_MAKERS[name](0).tol == 0.0 and TOL_MAKERS[name](np.float32(1e-3)).tol == pytest.approx(1e-3)


MOVE_MAKERS = {
    "MemoizedVB": lambda moves: pm.MemoizedVB(pm.Gaussian.from_data(X), 3, moves=moves),
    "MemoryBoundedVB": lambda moves: pm.MemoryBoundedVB(pm.Gaussian.from_data(X), 3, 20, 10, moves=moves),
}


@pytest.mark.parametrize("name", MOVE_MAKERS)
@pytest.mark.parametrize("bad,shown", [(5, "5"), ([1], "1"), ([pm.DeleteMove(), object()], "<object object")])
def test_moves_that_are_neither_names_nor_move_objects_are_refused(name, bad, shown):
    """moves=[1] failed at fit with AttributeError: 'int' object has no attribute 'name', and moves=5 with
    'int' object is not iterable."""
    with pytest.raises(TypeError, match=f"moves must be move names .* or Move objects; got {shown}"):
        MOVE_MAKERS[name](bad)


def _move(path):
    module, name = path.rsplit(".", 1)
    return getattr(__import__(module, fromlist=[name]), name)


@pytest.mark.parametrize("path, option, bad", [
    ("pyro_memo.inference.moves.DeleteMove", "max_fraction", 2.0),
    ("pyro_memo.inference.moves.DeleteMove", "max_fraction", 0.0),
    ("pyro_memo.inference.moves.DeleteMove", "max_single", -1),
    ("pyro_memo.inference.moves.MergeMove", "pairs_per_component", 0),
    ("pyro_memo.inference.moves.BirthMove", "subsample_size", 0),
    ("pyro_memo.inference.moves.BirthMove", "max_K", 0),
    ("pyro_memo.inference.moves.BirthMove", "min_resp", -0.1),
    ("pyro_memo.topics.TopicDeleteMove", "max_share", -1.0),
    ("pyro_memo.topics.TopicMergeMove", "pairs_per_topic", 0),
    ("pyro_memo.topics.TopicMergeMove", "max_pairs", 0),
    ("pyro_memo.relational.moves.CommunityDeleteMove", "max_share", 2.0),
    ("pyro_memo.relational.moves.CommunityMergeMove", "refine", -1),
    ("pyro_memo.inference.moves.tied_hdp.TiedHDPBirthMove", "fresh_K", 1),
    ("pyro_memo.inference.moves.tied_hdp.TiedHDPBirthMove", "fresh_iters", 0),
    ("pyro_memo.inference.moves.tied_hdp.TiedHDPMergeMove", "max_pairs", 0),
])
def test_a_move_option_that_would_make_the_move_do_nothing_or_fail_is_refused_naming_it(path, option, bad):
    """These were read as given: a share of 0 or below never found a target and one above 1 meant no limit, zero
    pairs proposed no merge, subsample_size=0 silently meant the default, a negative refine ran none, fresh_K=1
    never gave a birth, all without a word."""
    cls = _move(path)
    cls()  # the defaults are accepted
    with pytest.raises(ValueError, match=f"{option} must be"):
        cls(**{option: bad})
