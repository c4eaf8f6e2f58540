"""fit(..., state=) goes on only from a state that belongs to the model and the data: another model's
posterior, other dimensions, vocabulary or graph size, another number of batches or other items get one
ValueError naming the mismatch, and a state of the same fit still resumes to the same trace."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.data.graphs import Graph, assortative_graph
from pyro_memo.relational import MemoizedRelational
from pyro_memo.topics import MemoizedHDP, StochasticHDP, from_counts

X = np.random.default_rng(0).normal(size=(120, 3))
COUNTS = np.random.default_rng(1).poisson(1.0, size=(40, 15))
GRAPH = assortative_graph(30, 3, expected_edges=60, seed=0)[0]


def dp(x=X, family=pm.Gaussian, laps=2):
    return pm.MemoizedVB(family.from_data(x), 3, laps=laps, seed=0)


@pytest.fixture(scope="module")
def states():
    return {"dp": dp().fit(X, 3).state, "hdp": MemoizedHDP(K=3, laps=2, seed=0).fit(from_counts(COUNTS), 2).state,
            "relational": MemoizedRelational(K=3, laps=2, seed=0).fit(GRAPH, 2).state}


@pytest.mark.parametrize("kind,resume,match", [
    ("dp", lambda s: dp(X[:, :2]).fit(X[:, :2], 3, state=s), "gauss of dimension 3, this fit's gauss of 2"),
    ("dp", lambda s: dp(family=pm.DiagGaussian).fit(X, 3, state=s), "this fit's diag-gauss of 3"),
    ("dp", lambda s: dp().fit(X[:60], 3, state=s), "it summarises 120 items, these data hold 60"),
    ("dp", lambda s: dp().fit(X, 4, state=s), "its memo holds 3 batches, these data come in 4"),
    ("hdp", lambda s: MemoizedHDP(K=3).fit(from_counts(np.hstack([COUNTS, COUNTS])), 2, state=s),
     "its topics span 15 words, this corpus's vocabulary 30"),
    ("hdp", lambda s: MemoizedHDP(K=3).fit(from_counts(COUNTS), 3, state=s), "memo holds 2 batches"),
    ("dp", lambda s: MemoizedHDP(K=3).fit(from_counts(COUNTS), 2, state=s), "DPMixturePosterior, not an HDPPosterior"),
    ("hdp", lambda s: MemoizedRelational(K=3).fit(GRAPH, 2, state=s), "HDPPosterior, not a TiedRelationalPosterior"),
    ("relational", lambda s: MemoizedRelational(K=3).fit(Graph([[0, 1], [1, 2]], 5), 2, state=s),
     "a graph of 30 nodes, this one has 5"),
    ("relational", lambda s: MemoizedRelational(K=3, nonlinks="free").fit(GRAPH, 2, state=s),
     "not a RelationalPosterior \\(nonlinks='free'\\)"),
    ("relational", lambda s: dp().fit(X, 3, state=s), "not a DP mixture's posterior"),
])
def test_a_state_of_another_model_or_other_data_is_refused_naming_why(states, kind, resume, match):
    with pytest.raises(ValueError, match="cannot resume this state on these data: .*" + match):
        resume(states[kind])


def test_a_state_of_the_same_fit_resumes_to_the_uninterrupted_trace():
    whole = dp(laps=5).fit(X, 3)
    part = dp(laps=2).fit(X, 3)
    resumed = dp(laps=5).fit(X, 3, state=part.state)
    assert resumed.elbo_trace == whole.elbo_trace


def rewired(graph, seed=1):
    """A graph of as many nodes and links as ``graph``, with other links."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < graph.num_edges:
        i, j = sorted(rng.choice(graph.num_nodes, 2, replace=False).tolist())
        pairs.add((i, j))
    return Graph(sorted(pairs), graph.num_nodes)


@pytest.mark.parametrize("kind,resume", [
    ("dp", lambda s: dp().fit(X + 0.5, 3, state=s)),  # other values, same shape
    ("dp", lambda s: dp().fit(X[::-1].copy(), 3, state=s)),  # the same items in another order
    ("hdp", lambda s: MemoizedHDP(K=3).fit(from_counts(2 * COUNTS), 2, state=s)),
    ("hdp", lambda s: MemoizedHDP(K=3).fit(from_counts(COUNTS[::-1]), 2, state=s)),
    ("hdp", lambda s: MemoizedHDP(K=3, seed=5).fit(from_counts(COUNTS), 2, state=s)),  # another split of the documents
    ("relational", lambda s: MemoizedRelational(K=3).fit(rewired(GRAPH), 2, state=s)),
])
def test_a_state_resumed_on_other_data_of_the_same_shape_is_refused(states, kind, resume):
    # the memo's summaries belong to the items of each batch: these went on silently, mixing two datasets
    with pytest.raises(ValueError, match="cannot resume this state on these data: .* hold other items"):
        resume(states[kind])


def test_the_digests_travel_with_a_saved_state_and_an_older_state_without_them_still_resumes(tmp_path):
    part = dp(laps=2).fit(X, 3)
    assert len(part.state.digests) == 3
    pm.save_state(tmp_path / "state.pt", part.state)
    loaded = pm.load_state(tmp_path / "state.pt")
    assert loaded.digests == part.state.digests
    with pytest.raises(ValueError, match="hold other items"):
        dp(laps=5).fit(X + 1.0, 3, state=loaded)
    older = pm.load_state(tmp_path / "state.pt")
    older.digests = {}  # a checkpoint written before digests were recorded
    resumed = dp(laps=5).fit(X, 3, state=older)
    assert resumed.elbo_trace == dp(laps=5).fit(X, 3).elbo_trace and resumed.state.digests == part.state.digests


@pytest.mark.parametrize("make,data", [
    (lambda laps: pm.MemoizedVB(pm.Gaussian.from_data(X), 3, laps=laps, tol=1e-4, seed=0), (X, 3)),
    (lambda laps: MemoizedHDP(K=3, laps=laps, tol=1e-4, seed=0), (from_counts(COUNTS), 2)),
    (lambda laps: MemoizedRelational(K=3, laps=laps, tol=1e-4, seed=0), (GRAPH, 2)),
])
def test_a_converged_state_resumes_to_its_own_end_without_another_lap(make, data):
    # a checkpoint written after the converged lap (the command line writes it before the fit returns) went
    # on when resumed, adding laps of round-off: 7 of them on digits with tol=0
    done = make(200).fit(*data)
    assert done.converged and len(done.elbo_trace) < 200
    again = make(300).fit(*data, state=done.state)
    assert again.converged and again.elbo_trace == done.elbo_trace


def test_a_stochastic_fit_resumes_from_its_saved_checkpoint_as_from_memory(tmp_path):
    # the running summary was not written: the loaded state failed with AttributeError at the first step
    def svb(laps):
        return pm.StochasticVB(pm.Gaussian.from_data(X), 4, laps=laps, seed=1)

    part = svb(3).fit(X, num_batches=3)
    pm.save_state(tmp_path / "s.pt", part.state)
    resumed = svb(5).fit(X, num_batches=3, state=pm.load_state(tmp_path / "s.pt"))
    assert resumed.elbo_trace == svb(5).fit(X, num_batches=3).elbo_trace
    memoized = dp(laps=2).fit(X, 3).state
    with pytest.raises(ValueError, match="holds no running summary"):
        svb(5).fit(X, num_batches=3, state=memoized)


@pytest.mark.parametrize("fit", [lambda s: dp().fit(X, 3, state=s),
                                 lambda s: pm.StochasticVB(pm.Gaussian.from_data(X), 3, laps=2).fit(X, 3, state=s)])
@pytest.mark.parametrize("bad", ["state.pt", {"laps_done": 2}])
def test_a_state_that_is_no_memo_state_is_refused_by_type(fit, bad):
    """A path or a dict given as state= failed with AttributeError: 'str' object has no attribute 'posterior'."""
    with pytest.raises(TypeError, match=f"state must be a MemoState .*load_state.*; got a {type(bad).__name__}"):
        fit(bad)


def test_a_starting_posterior_of_another_kind_or_dimension_is_refused(states):
    """posterior= of another dimension failed in the first lap with torch's size mismatch, and a string with
    AttributeError: 'str' object has no attribute 'K'."""
    with pytest.raises(TypeError, match="posterior must be a variational posterior .*; got a str"):
        dp().fit(X, 3, posterior="posterior.pt")
    with pytest.raises(ValueError, match="cannot start from this posterior: its components are gauss of dimension 3, "
                                         "this fit's gauss of 2"):
        dp(X[:, :2]).fit(X[:, :2], 3, posterior=states["dp"].posterior)


def svb(x=X, laps=2):
    return pm.StochasticVB(pm.Gaussian.from_data(x), 3, laps=laps, seed=0)


@pytest.fixture(scope="module")
def stochastic_states():
    from pyro_memo.relational import StochasticRelational
    from pyro_memo.topics import StochasticHDP

    return {"dp": svb().fit(X, 3).state, "hdp": StochasticHDP(K=3, laps=2, seed=0).fit(from_counts(COUNTS), 2).state,
            "relational": StochasticRelational(K=3, laps=2, seed=0).fit(GRAPH, 2).state}


@pytest.mark.parametrize("kind,resume,match", [
    ("dp", lambda s: svb(X[:, :2]).fit(X[:, :2], 3, state=s), "gauss of dimension 3, this fit's gauss of 2"),
    ("hdp", lambda s: svb().fit(X, 3, state=s), "holds a HDPPosterior, not a DP mixture's posterior"),
    ("dp", lambda s: stochastic_hdp().fit(from_counts(COUNTS), 2, state=s), "DPMixturePosterior, not an HDPPosterior"),
    ("hdp", lambda s: stochastic_hdp().fit(from_counts(np.hstack([COUNTS, COUNTS])), 2, state=s),
     "its topics span 15 words, this corpus's vocabulary 30"),
    ("relational", lambda s: stochastic_hdp().fit(from_counts(COUNTS), 2, state=s), "not an HDPPosterior"),
    ("relational", lambda s: stochastic_relational().fit(Graph([[0, 1], [1, 2]], 5), 2, state=s),
     "a graph of 30 nodes, this one has 5"),
    ("hdp", lambda s: stochastic_relational().fit(GRAPH, 2, state=s), "not a RelationalPosterior"),
])
def test_a_stochastic_fit_refuses_a_state_of_another_model_or_other_data_naming_why(stochastic_states, kind, resume,
                                                                                   match):
    """The stochastic drivers did not check a resumed state: torch's size mismatch, a TypeError of the local step or
    an IndexError came out of the first step instead."""
    with pytest.raises(ValueError, match="cannot resume this state on these data: .*" + match):
        resume(stochastic_states[kind])


@pytest.mark.parametrize("name", ["StochasticRelational", "StochasticAMMSB"])
def test_a_stochastic_relational_fit_resumes_its_own_state_and_refuses_the_other_kind(name):
    """The posterior check of the stochastic relational drivers refused StochasticAMMSB's own state (an
    AMMSBPosterior is no RelationalPosterior's exact type), so an AMMSB fit could not be resumed at all; and a
    resumed fit's node sampler started afresh, drawing again the node sets of the fit's first steps."""
    from pyro_memo import relational

    def fit(cls, laps, state=None):
        return getattr(relational, cls)(K=3, laps=laps, seed=0).fit(GRAPH, 2, state=state)

    part = fit(name, 2)
    assert fit(name, 4, state=part.state).elbo_trace == fit(name, 4).elbo_trace
    other = "StochasticAMMSB" if name == "StochasticRelational" else "StochasticRelational"
    with pytest.raises(ValueError, match=f"cannot resume this state on these data: it holds a "
                                         f"{type(part.state.posterior).__name__}, not a "):
        fit(other, 4, state=part.state)


def stochastic_hdp():
    from pyro_memo.topics import StochasticHDP

    return StochasticHDP(K=3, laps=4, seed=0)


def stochastic_relational():
    from pyro_memo.relational import StochasticRelational

    return StochasticRelational(K=3, laps=4, seed=0)


@pytest.mark.parametrize("kind,resume", [
    ("dp", lambda s: pm.MemoizedVB(pm.Gaussian.from_data(X, dtype=torch.float32), 3).fit(X, 3, state=s)),
    ("hdp", lambda s: MemoizedHDP(K=3, dtype="float32").fit(from_counts(COUNTS), 2, state=s)),
    ("relational", lambda s: MemoizedRelational(K=3, dtype="float32").fit(GRAPH, 2, state=s)),
    ("stochastic dp", lambda s: pm.StochasticVB(pm.Gaussian.from_data(X, dtype=torch.float32), 3).fit(X, 3, state=s)),
    ("stochastic hdp", lambda s: StochasticHDP(K=3, dtype="float32").fit(from_counts(COUNTS), 2, state=s)),
])
def test_a_state_fitted_in_another_precision_is_refused_naming_both(states, stochastic_states, kind, resume):
    """A float64 state resumed by a float32 fit: the DP mixture and the HDP said the batches held other items than
    it was fitted to, the relational fit went on in float64, ignoring dtype="float32"."""
    state = stochastic_states[kind.split()[1]] if kind.startswith("stochastic") else states[kind]
    with pytest.raises(ValueError, match="cannot resume this state on these data: it was fitted in float64, this fit "
                                         "runs in float32"):
        resume(state)


@pytest.mark.parametrize("kind,start", [
    ("dp", lambda p: pm.MemoizedVB(pm.Gaussian.from_data(X, dtype=torch.float32), 3).fit(X, 3, posterior=p)),
    ("hdp", lambda p: MemoizedHDP(K=3, dtype="float32").fit(from_counts(COUNTS), 2, posterior=p)),
])
def test_a_starting_posterior_of_another_precision_is_refused_naming_both(states, kind, start):
    """As a resumed state's posterior is (the test above): a float64 posterior given to a float32 fit."""
    with pytest.raises(ValueError, match="cannot start from this posterior: it was fitted in float64, this fit runs "
                                         "in float32"):
        start(states[kind].posterior)


def test_a_stochastic_state_goes_on_in_a_memoized_fit_with_moves():
    """A state without a move log (a stochastic fit's) resumed with moves failed with IndexError at the first
    convergence check."""
    state = StochasticHDP(K=3, laps=2, seed=0).fit(from_counts(COUNTS), 2).state
    fit = MemoizedHDP(K=3, laps=4, seed=0, moves="merge").fit(from_counts(COUNTS), 2, state=state)
    assert len(fit.elbo_trace) == 4 and len(fit.state.move_log) == 2


def test_a_converged_state_resumed_with_moves_runs_them():
    """A converged fit resumed with moves it did not run returned at once (the moves had nothing left to try):
    the moves were silently ignored."""
    graph = assortative_graph(60, 3, expected_edges=200, seed=0)[0]
    done = MemoizedRelational(K=1, laps=50, tol=1e-4, seed=0).fit(graph, 2)
    assert done.converged
    laps = len(done.elbo_trace)
    grown = MemoizedRelational(K=1, laps=50, tol=1e-4, seed=0, moves="birth").fit(graph, 2, state=done.state)
    assert len(grown.elbo_trace) > laps
    assert sum(lap["birth"]["accepted"] for lap in grown.state.move_log[laps:]) >= 1 and grown.posterior.K > 1


@pytest.mark.parametrize("kind", ["dp-npy", "hdp-shards"])
def test_a_state_resumed_on_other_file_data_of_the_same_shape_is_refused_at_its_first_visit(tmp_path, kind):
    """Data read from files are not hashed at the start (that would read them once more): each batch is
    hashed as its first visit of the fit reads it. A state resumed on a .npy file of the same items in
    another order, or on a corpus resharded with a seed, went on silently (the HDP's bound fell from -38386
    to -39971 in the first resumed lap: the memo and warm starts of other documents); a file of the same
    items resumes to the uninterrupted trace."""
    from pyro_memo.data import write_corpus_shards

    if kind == "dp-npy":
        np.save(tmp_path / "x.npy", X)
        np.save(tmp_path / "other.npy", X[::-1].copy())

        def fit(path, laps, state=None):
            return dp(laps=laps).fit(str(tmp_path / path), 3, state=state)
        same, other = "x.npy", "other.npy"
    else:
        write_corpus_shards(from_counts(COUNTS), tmp_path / "shards", num_shards=2)
        write_corpus_shards(from_counts(COUNTS), tmp_path / "other", num_shards=2, seed=3)

        def fit(path, laps, state=None):
            return MemoizedHDP(K=3, laps=laps, tol=0, seed=0).fit(str(tmp_path / path), state=state)
        same, other = "shards", "other"
    saved = tmp_path / "state.pt"
    pm.save_state(saved, fit(same, 2).state)
    where = r"batch \d of 3 .*other.npy.*" if kind == "dp-npy" else r"batch \d of 2 "
    with pytest.raises(ValueError, match=f"cannot resume this state on these data: {where}holds other items"):
        fit(other, 4, pm.load_state(saved))
    assert fit(same, 4, pm.load_state(saved)).elbo_trace == fit(same, 4).elbo_trace
