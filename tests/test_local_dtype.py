"""Mixed precision (``local_dtype="float32"``): the local step in float32, the globals, memo and exact
objective in float64, for every model on the one engine (issue #16, item 3).

Tolerance: a float32 local step rounds each responsibility and sums each batch statistic at float32's
machine epsilon (1.2e-7), so the objective moves by about eps times the magnitude of the terms it
is the (cancelling) sum of, not of the sum itself: a DP mixture's data term is a difference of
parts of size ``N D``. The tests allow 1e-5 (about 100 eps) of the sum of the terms' magnitudes
(:data:`REL`); a local step that lost one item of these data would be off by more than that.
Measured on these cases: at most 5e-6 (the DP mixture, whose statistics sum 500 float32 rows).
"""

import json

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.data import Graph, assortative_graph, toy_patches
from pyro_memo.relational import MemoizedRelational
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP

REL = 1e-5
#: laps of every fit: enough to come near the optimum (mid-ascent the trajectories of both fits
#: part by more, rounding amplified by a fast-rising objective)
LAPS = 20


def dp_case(moves=(), laps=LAPS):
    x = torch.as_tensor(toy_patches(2000, seed=0)[0])
    family = pm.get_family("zm-gauss").from_data(x)
    return (lambda local_dtype: pm.MemoizedVB(family, 6, laps=laps, tol=0, seed=0, moves=moves,
                                              local_dtype=local_dtype)), x, 4


def hdp_case(moves=(), laps=LAPS):
    corpus = bars_corpus(150, 40, seed=3)[0]
    return (lambda local_dtype: MemoizedHDP(K=8, laps=laps, tol=0, seed=0, moves=moves, local_dtype=local_dtype)), \
        corpus, 4


def relational_case(nonlinks, moves=(), laps=LAPS):
    graph = assortative_graph(60, 3, seed=0)[0]
    return (lambda local_dtype: MemoizedRelational(K=4, laps=laps, tol=0, seed=0, nonlinks=nonlinks, moves=moves,
                                                   local_dtype=local_dtype)), graph, 3


CASES = {
    "dp": dp_case,
    "dp-moves": lambda laps=LAPS: dp_case("birth,merge,delete", laps),
    "hdp": hdp_case,
    "hdp-moves": lambda laps=LAPS: hdp_case("birth,merge,delete", laps),
    "relational-tied": lambda laps=LAPS: relational_case("tied", laps=laps),
    "relational-free": lambda laps=LAPS: relational_case("free", laps=laps),
    "relational-moves": lambda laps=LAPS: relational_case("tied", "merge,delete", laps),
}


def fit_both(case, laps):
    make, data, batches = CASES[case](laps=laps)
    mixed = make("float32")
    return make(None).fit(data, batches), mixed.fit(data, batches), mixed


@pytest.fixture(scope="module", params=list(CASES))
def fits(request):
    return fit_both(request.param, LAPS)


@pytest.fixture(scope="module", params=list(CASES))
def short_fits(request):
    """Three laps (moves included) hold the same dtypes and sums as twenty: the fixture of the dtype checks, which
    pytest-xdist may run in another worker than the twenty-lap comparison (a module fixture is per worker)."""
    return fit_both(request.param, 3)


def term_scale(fit):
    """The sum of the magnitudes of the fit's objective terms (what float32 rounding is relative to)."""
    return sum(abs(float(v)) for v in fit.posterior.elbo_terms(fit.state.cache.total).values())


def before_the_first_move(*fits):
    """The laps (indices into ``elbo_trace``) of these fits before either kept a move (all when none did).

    A move's proposal is a discrete choice that float32 rounding can flip: on ``hdp-moves`` both fits keep a
    birth at lap 3, but the KL k-means of the collected tokens gave fresh topics differing by up to 7 of their
    70 counts, and the fits then climbed to optima 7.2 nats apart (2.5e-4 of the terms' magnitudes) by lap 20,
    with the same moves kept. Until then they follow each other (lap 2: 0.016 nats apart)."""
    kept = [lap for fit in fits for lap, log in enumerate(fit.state.move_log)
            if any(counts["accepted"] for counts in log.values())]
    return range(min(kept, default=len(fits[0].elbo_trace)))


@pytest.mark.slow
def test_the_float32_local_step_follows_the_float64_objective(fits):
    full, mixed, _ = fits
    assert len(mixed.elbo_trace) == len(full.elbo_trace)
    # every lap is run, unless a fit with moves converged sooner (no move left to try, the objective flat)
    assert len(full.elbo_trace) == LAPS or (full.converged and mixed.converged)
    laps = before_the_first_move(full, mixed)
    for lap in (laps[0], laps[-1]):  # lap 1 (from the same initial globals) and the last before a kept move
        assert abs(mixed.elbo_trace[lap] - full.elbo_trace[lap]) <= REL * term_scale(full)
    assert kept_moves(mixed) == kept_moves(full)  # the same moves kept at the same laps
    assert mixed.elbo_trace != full.elbo_trace  # the local step did run in float32


def kept_moves(fit):
    """Per lap, the moves kept and how many times."""
    return [{name: c["accepted"] for name, c in log.items() if c["accepted"]} for log in fit.state.move_log]


def test_globals_memo_and_objective_stay_float64(short_fits):
    _, mixed, driver = short_fits
    state, post = mixed.state, mixed.posterior
    assert post.dtype == torch.float64
    assert driver.local_globals(state).dtype == torch.float32
    assert all(s.sizes.dtype == torch.float64 for s in state.cache.batches.values())
    assert all(t.dtype == torch.float64 for s in state.cache.batches.values() for t in s.extras.values())
    total, fresh = state.cache.total, state.cache.recomputed_total()
    assert total.sizes.dtype == torch.float64
    # the running total (eq. 11's adds and subtracts) is the sum of the float64 batch summaries
    torch.testing.assert_close(total.sizes, fresh.sizes, rtol=1e-12, atol=1e-9)
    assert float(post.elbo(total)) == pytest.approx(float(post.elbo(fresh)), rel=1e-12)
    assert float(post.elbo(total)) == mixed.elbo_trace[-1]


def test_the_local_step_reads_a_float32_copy_made_once_per_global_update():
    make, x, _ = dp_case()
    driver = make("float32")
    state = driver.new_state()
    state.posterior = driver.initial_posterior(x)
    view = driver.local_globals(state)
    assert driver.local_globals(state) is view
    assert all(v.dtype == torch.float32 for v in view.component.values()) and view.eta1.dtype == torch.float32
    driver.globals_changed()
    assert driver.local_globals(state) is not view


@pytest.mark.parametrize("value", ["float16", "f32", torch.float16, 32])
def test_a_bad_local_dtype_is_refused_in_one_line(value):
    make, _, _ = dp_case()
    with pytest.raises(ValueError, match="local_dtype must be one of float32, float64") as err:
        make(value)
    assert "\n" not in str(err.value)


def test_the_estimators_take_local_dtype():
    x = toy_patches(1000, seed=1)[0]
    fits = [pm.DPMixture(6, family="zm-gauss", max_iter=LAPS, tol=0, random_state=0, local_dtype=d).fit(x)
            for d in (None, "float32")]
    scale = sum(abs(float(v)) for v in fits[0].posterior_.elbo_terms(fits[0].summary_).values())
    assert abs(fits[1].elbo_ - fits[0].elbo_) <= REL * scale and fits[1].elbo_ != fits[0].elbo_
    assert fits[1].posterior_.dtype == torch.float64
    with pytest.raises(ValueError, match="local_dtype"):
        pm.DPMixture(6, local_dtype="half").fit(x)
    rng = np.random.default_rng(0)
    counts = rng.poisson(rng.dirichlet(np.full(20, 0.3), size=3)[rng.integers(0, 3, 80)] * 30)
    topics = [pm.HDPTopics(6, max_iter=3, tol=0, random_state=0, local_dtype=d).fit(counts) for d in (None, "float32")]
    # |bound| is at most the sum of its terms' magnitudes: a stricter tolerance than REL's
    assert abs(topics[1].bound_ - topics[0].bound_) <= REL * abs(topics[0].bound_)
    assert topics[1].bound_ != topics[0].bound_


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("local_dtype")
    np.savez(d / "x.npz", x=toy_patches(600, seed=2)[0])
    graph = assortative_graph(40, 2, seed=1)[0]
    (d / "g.txt").write_text("".join(f"{i} {j}\n" for i, j in Graph(graph.edges, graph.num_nodes).edges))
    return d


def cli_fits(cli_data):
    return {"dp": ["fit", str(cli_data / "x.npz"), "--algo", "memo", "--batches", "3", "--K", "5"],
            "dp-vb": ["fit", str(cli_data / "x.npz"), "--algo", "vb", "--K", "5"],
            "hdp": ["fit", "bars", "--model", "hdp", "--K", "6", "--batches", "3"],
            "relational": ["fit", str(cli_data / "g.txt"), "--model", "relational", "--K", "3", "--batches", "2"]}


@pytest.mark.parametrize("model", ["dp", "dp-vb", "hdp", "relational"])
def test_the_cli_fits_with_a_float32_local_step(cli_data, tmp_path, model):
    """The option reaches the fit (its objective differs, slightly); its precision is tested above."""
    elbos = []
    for extra in ([], ["--local-dtype", "float32"]):
        path = tmp_path / f"out{len(elbos)}.json"
        assert main(cli_fits(cli_data)[model] + ["--laps", "3", "--tol", "0", "--quiet", "--json", str(path)]
                    + extra) == 0
        elbos.append(json.loads(path.read_text())["elbo"])
    assert elbos[1] == pytest.approx(elbos[0], rel=1e-3) and elbos[1] != elbos[0]


@pytest.mark.parametrize("model", ["dp", "hdp", "relational"])
def test_the_cli_refuses_a_bad_local_dtype_in_one_line(cli_data, capsys, model):
    with pytest.raises(SystemExit) as exit_:
        main(cli_fits(cli_data)[model] + ["--local-dtype", "float16", "--quiet"])
    assert exit_.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pyro-memo: error:") and "--local-dtype" in lines[0], lines


def test_float32_local_step_survives_a_direction_without_variance():
    """Zero-mean patches (every item sums to zero) leave one direction of the scatter without variance:
    float32 could neither factorise the posterior scale matrices nor sum their second moments without
    making them indefinite. The DP mixture's mixed precision keeps both in float64 and ends within
    float32 rounding of the float64 fit."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(40_000, 16, generator=g, dtype=torch.float64) @ torch.randn(16, 16, generator=g,
                                                                            dtype=torch.float64) * 40
    x = z - z.mean(1, keepdim=True)
    family = pm.ZeroMeanGaussian.from_data(x)
    exact = pm.MemoizedVB(family, 3, laps=3, tol=0, seed=0).fit(x, num_batches=4)
    mixed = pm.MemoizedVB(family, 3, laps=3, tol=0, seed=0, local_dtype="float32").fit(x, num_batches=4)
    assert mixed.posterior.dtype == torch.float64
    assert abs(mixed.elbo - exact.elbo) <= 1e-6 * abs(exact.elbo)
