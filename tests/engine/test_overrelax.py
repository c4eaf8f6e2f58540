"""Over-relaxed batch steps (issue #13; Salakhutdinov & Roweis 2003 on the memoized bound): proposals are
kept only when the exact objective rises, so no batch step lowers it, while the fits get ahead of the
exact steps; the pieces (closed-form bound, extrapolated summaries, validity of factors) are exact."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.allocation import DPSticks
from pyro_memo.engine import MemoizedDriver, Overrelaxation
from pyro_memo.engine.overrelax import as_overrelaxation
from pyro_memo.memo import load_state, save_state
from pyro_memo.summaries import Summary

FAMILIES = ["zm-gauss", "gauss", "diag-gauss", "known-gauss", "known-diag-gauss", "poisson", "bern", "mult"]


def family_data(name, seed, n=400, clusters=4, dim=3):
    g = torch.Generator().manual_seed(seed)
    cls = pm.get_family(name)
    x = cls.example_data(torch.randint(clusters, (n,), generator=g), clusters, dim, g).to(torch.float64)
    return cls.from_data(x), x


def random_summary(family, x, K, seed):
    g = torch.Generator().manual_seed(seed)
    resp = torch.softmax(3 * torch.randn(len(x), K, generator=g, dtype=torch.float64), -1)
    return Summary.from_responsibilities(family, x, resp)


# ----------------------------------------------------------------------------- the property
# steps of one batch (step_items=1), of a third of a lap (the default's span on 500 items), and between
CASES = [(seed, FAMILIES[seed % len(FAMILIES)], 2 + seed % 5, 3 + seed % 6, (1, 5000, 150)[seed % 3])
         for seed in range(24)]


@pytest.mark.parametrize("seed,name,batches,K,step_items", CASES)
def test_no_over_relaxed_batch_step_lowers_the_exact_elbo(seed, name, batches, K, step_items):
    family, x = family_data(name, seed, n=500, clusters=6)
    relax = Overrelaxation(step_items=step_items)
    fit = pm.MemoizedVB(family, K, laps=8, tol=0, seed=seed, record_batch_elbos=True,
                        overrelax=relax).fit(x, num_batches=batches)
    steps = np.diff(fit.batch_elbos)
    assert len(steps) >= batches
    assert steps.min() >= -1e-9 * abs(fit.batch_elbos[-1]), steps.min()
    recomputed = fit.state.cache.recomputed_total()
    torch.testing.assert_close(recomputed.counts, fit.state.cache.total.counts, rtol=1e-9, atol=1e-9)
    final = float(fit.posterior.elbo(fit.summary))
    assert final == pytest.approx(fit.elbo_trace[-1], rel=1e-12)


def test_over_relaxed_fits_move_ahead_of_the_exact_steps_on_most_seeds():
    """The point of the option: at equal laps the over-relaxed fit is higher (toy patches, 8 seeds)."""
    x = torch.as_tensor(pm.data.toy_patches(3000, seed=0, patch=4, num_components=8)[0])
    family = pm.ZeroMeanGaussian.from_data(x)
    ahead, proposals = 0, 0
    for seed in range(8):
        fits = [pm.MemoizedVB(family, 10, laps=10, tol=0, seed=seed, overrelax=on).fit(x, num_batches=6)
                for on in (False, True)]
        assert fits[0].elbo_trace[0] == fits[1].elbo_trace[0]  # lap 1 is the same held lap
        ahead += fits[1].elbo > fits[0].elbo
        proposals += fits[1].state.relax != 1.0 or fits[1].elbo != fits[0].elbo
    assert proposals == 8
    assert ahead >= 6


def test_the_dp_mixture_over_relaxes_by_default_and_the_other_models_only_when_asked():
    assert pm.MemoizedVB(pm.Gaussian.from_data(torch.randn(20, 2)), 3).overrelax is not None
    assert pm.MemoizedVB(pm.Gaussian.from_data(torch.randn(20, 2)), 3, overrelax=False).overrelax is None
    assert pm.topics.MemoizedHDP(K=3).overrelax is None
    assert pm.topics.MemoizedHDP(K=3, overrelax=True).overrelax is not None
    assert pm.relational.MemoizedRelational(K=3).overrelax is None
    assert MemoizedDriver(overrelax=Overrelaxation(grow=2.0)).overrelax.grow == 2.0


@pytest.mark.parametrize("seed", range(3))
def test_the_hdp_and_the_relational_model_over_relax_without_lowering_their_bounds(seed):
    from pyro_memo.data import Graph
    from pyro_memo.synthetic import bars_corpus

    corpus, _, _ = bars_corpus(80, 30, seed=seed)
    rng = np.random.default_rng(seed)
    pairs = np.array([(i, j) for i in range(40) for j in range(i + 1, 40)])
    graph = Graph(pairs[rng.random(len(pairs)) < 0.15], 40)
    for model, data, batches in ((pm.topics.MemoizedHDP(K=6, laps=6, tol=0, seed=seed, overrelax=True,
                                                        record_batch_elbos=True), corpus, 4),
                                 (pm.relational.MemoizedRelational(K=4, laps=6, tol=0, seed=seed, overrelax=True,
                                                                   record_batch_elbos=True), graph, 4)):
        fit = model.fit(data, batches)
        steps = np.diff(fit.batch_elbos)
        assert steps.min() >= -1e-9 * abs(fit.batch_elbos[-1])


def test_a_resumed_over_relaxed_fit_ends_where_an_uninterrupted_one_ends(tmp_path):
    family, x = family_data("gauss", 3, n=600)
    relax = Overrelaxation(step_items=1)  # a step per batch: the factor and direction change within laps
    whole = pm.MemoizedVB(family, 6, laps=7, tol=0, seed=1, overrelax=relax).fit(x, num_batches=5)
    part = pm.MemoizedVB(family, 6, laps=3, tol=0, seed=1, overrelax=relax).fit(x, num_batches=5)
    assert part.state.relax != 1.0  # the factor is part of the state
    save_state(tmp_path / "state.pt", part.state)
    state = load_state(tmp_path / "state.pt")
    assert state.relax == part.state.relax
    torch.testing.assert_close(state.relax_step.counts, part.state.relax_step.counts)  # and its direction
    resumed = pm.MemoizedVB(family, 6, laps=7, tol=0, seed=1, overrelax=relax).fit(x, num_batches=5, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, whole.elbo_trace, rtol=1e-12)


@pytest.mark.parametrize("warmup", [1, 2, 3])
def test_the_warm_up_laps_take_exact_steps_and_the_next_lap_over_relaxes(warmup):
    family, x = family_data("zm-gauss", warmup, n=600, clusters=6)
    exact = pm.MemoizedVB(family, 8, laps=warmup + 2, tol=0, seed=warmup, overrelax=False).fit(x, num_batches=6)
    memo = pm.MemoizedVB(family, 8, laps=warmup + 2, tol=0, seed=warmup,
                         overrelax=Overrelaxation(step_items=1, warmup_laps=warmup))
    fit = memo.fit(x, num_batches=6)
    assert fit.elbo_trace[:warmup] == exact.elbo_trace[:warmup]  # the same steps, bit for bit
    assert memo.relax_counts["proposed"] > 0
    assert fit.elbo_trace[warmup + 1] != exact.elbo_trace[warmup + 1]
    assert np.diff(fit.elbo_trace).min() >= -1e-9 * abs(fit.elbo_trace[-1])


def test_moves_that_visit_batches_take_exact_steps_and_merges_alone_over_relax():
    family, x = family_data("gauss", 5, n=600)
    memo = pm.MemoizedVB(family, 2, laps=4, tol=0, seed=0, moves="birth,merge,delete")
    fit = memo.fit(x, num_batches=4)
    assert fit.state.relax == 1.0 and memo.relax_counts["proposed"] == 0  # births visit batches: every step exact
    memo = pm.MemoizedVB(family, 6, laps=6, tol=0, seed=0, moves="merge", record_batch_elbos=True)
    fit = memo.fit(x, num_batches=4)
    assert memo.relax_counts["accepted"] > 0
    assert np.diff(fit.batch_elbos).min() >= -1e-9 * abs(fit.batch_elbos[-1])


def test_a_step_spans_whole_batches_for_at_least_step_items_items_and_at_most_a_lap():
    relax = Overrelaxation(step_items=5000)
    assert relax.span(100_000, 100) == 5  # 1,000-item batches
    assert relax.span(56_000, 20) == 2
    assert relax.span(3_000, 6) == 2  # at least three steps a lap
    assert relax.span(3_000, 2) == 1
    assert relax.span(4_000, 4) == 1  # a span of 2 would leave 2 steps
    for rounds in range(1, 40):  # the lap takes at least min_steps steps (or one per round)
        assert -(-rounds // relax.span(1_000 * rounds, rounds)) >= min(rounds, 3)
    assert relax.span(100_000, 1) == 1
    assert Overrelaxation(min_steps=1).span(3_000, 6) == 6  # the whole lap
    assert Overrelaxation(step_items=1).span(100_000, 100) == 1
    assert relax.limit(20) == 20.0 and relax.limit(1) == 2.0 and Overrelaxation(max_factor=3).limit(20) == 3.0
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="step_items"):
            Overrelaxation(step_items=bad)
        with pytest.raises(ValueError, match="min_steps"):
            Overrelaxation(min_steps=bad)


def test_a_lap_of_over_relaxed_steps_costs_about_the_batches_local_steps():
    """With the default span (5 batches of 1,000 items) one proposal serves five local steps."""
    x = torch.as_tensor(pm.data.toy_patches(20_000, seed=0)[0])
    memo = pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), 8, laps=4, tol=0, seed=0)
    memo.fit(x, num_batches=20)
    assert 0 < memo.relax_counts["proposed"] <= 3 * 20 // 5
    assert memo.relax_counts["accepted"] >= memo.relax_counts["proposed"] // 2


# --------------------------------------------------------------------------------- the pieces
@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("truncation", ["nested", "direct"])
def test_the_closed_form_bound_equals_the_elbo_of_the_optimal_globals(name, truncation):
    family, x = family_data(name, 11)
    for seed in range(3):
        summary = random_summary(family, x, 5, seed)
        sticks = DPSticks(0.3 + seed, truncation)
        post = pm.DPMixturePosterior.prior(family, sticks, 5)
        bound, best = post.optimal_bound(summary)
        assert bound == pytest.approx(float(best.elbo(summary)), rel=1e-10, abs=1e-8)
        assert bound == pytest.approx(float(post.optimal_for(summary).elbo(summary)), rel=1e-10, abs=1e-8)


def test_the_closed_form_stick_terms_are_the_stick_elbo_at_its_optimum():
    counts = torch.tensor([30.0, 0.0, 12.5, 1e-3, 4.0], dtype=torch.float64)
    for truncation in ("nested", "direct"):
        for alpha in (0.1, 1.0, 7.0):
            sticks = DPSticks(alpha, truncation)
            expected = sticks.elbo(counts, *sticks.posterior(counts))
            assert float(sticks.optimal_elbo(counts)) == pytest.approx(float(expected), rel=1e-12)


def test_a_learnt_concentration_is_bounded_through_its_own_optimum():
    family, x = family_data("gauss", 2)
    post = pm.DPMixturePosterior.prior(family, DPSticks(1.0, alpha_prior=(1.0, 1.0)), 4)
    summary = random_summary(family, x, 4, 0)
    bound, best = post.optimal_bound(summary)
    assert bound == float(best.elbo(summary))


def test_an_extrapolated_summary_scales_the_step_component_by_component():
    family, x = family_data("gauss", 4)
    total, step = random_summary(family, x, 4, 0), random_summary(family, x[:50], 4, 1)
    same = total.extrapolated(step, torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(same.stats["xx"], total.stats["xx"])
    uniform = total.extrapolated(step, torch.full((4,), 2.5, dtype=torch.float64))
    torch.testing.assert_close(uniform.stats["xx"], (total + step.scaled(2.5)).stats["xx"])
    factors = torch.tensor([0.0, 1.0, 3.0, 0.5], dtype=torch.float64)
    mixed = total.extrapolated(step, factors)
    for k in range(4):
        torch.testing.assert_close(mixed.counts[k], total.counts[k] + factors[k] * step.counts[k])
        torch.testing.assert_close(mixed.stats["x"][k], total.stats["x"][k] + factors[k] * step.stats["x"][k])
    assert mixed.num_items == total.num_items
    torch.testing.assert_close(mixed.entropy, total.entropy + factors * step.entropy)
    with pytest.raises(ValueError, match="K=4.*K=3"):
        total.extrapolated(step.select([0, 1, 2]), factors)


def test_the_hdp_summary_extrapolates_its_tail_with_the_smallest_factor():
    from pyro_memo.summaries import TopicSummary

    K, V = 3, 5
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.rand(shape, generator=g, dtype=torch.float64)

    def summary():
        return TopicSummary(rand(K, V), rand(K + 1), rand(), rand(K), 10)

    total, step = summary(), summary()
    factors = torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)
    out = total.extrapolated(step, factors)
    torch.testing.assert_close(out.sum_log_pi, total.sum_log_pi + torch.tensor([0.5, 2.0, 1.0, 0.5]).double()
                               * step.sum_log_pi)
    torch.testing.assert_close(out.doc_term, total.doc_term)


def test_proposals_never_take_more_than_shrink_of_a_component_and_keep_valid_factors():
    family, x = family_data("zm-gauss", 6)
    total = random_summary(family, x, 5, 0)
    step = random_summary(family, x[:80], 5, 1) - random_summary(family, x[80:160], 5, 2)
    relax = Overrelaxation(shrink=0.5)
    factors = relax.factors(total, step, omega=50.0)
    extrapolated = total.extrapolated(step, factors)
    assert bool((extrapolated.counts >= 0.5 * total.counts - 1e-12).all())
    assert bool((factors <= 49.0).all())
    post = pm.DPMixturePosterior.from_summary(family, DPSticks(1.0), total)
    proposal = relax.proposal(post, total, step, omega=50.0)
    assert proposal is None or bool(proposal.valid_components().all())


@pytest.mark.parametrize("name", FAMILIES)
def test_log_marginal_from_a_given_posterior_is_the_same(name):
    family, x = family_data(name, 3)
    summary = random_summary(family, x, 4, 0)
    post = family.posterior(summary.counts, summary.stats)
    torch.testing.assert_close(family.log_marginal(summary.counts, summary.stats, post),
                               family.log_marginal(summary.counts, summary.stats))


def test_a_family_tells_which_components_are_valid_distributions():
    family, x = family_data("gauss", 0)
    post = family.posterior(*(lambda s: (s.counts, s.stats))(random_summary(family, x, 4, 0)))
    assert family.valid(post).tolist() == [True] * 4
    broken = {k: v.clone() for k, v in post.items()}
    broken["B"][1] = -broken["B"][1]  # not positive definite
    broken["kappa"][2] = -1.0
    broken["m"][3, 0] = float("nan")
    assert family.valid(broken).tolist() == [True, False, False, False]
    poisson, y = family_data("poisson", 0)
    post = poisson.posterior(*(lambda s: (s.counts, s.stats))(random_summary(poisson, y, 3, 0)))
    post["a"][0, 1] = float("nan")
    assert poisson.valid(post).tolist() == [False, True, True]


def test_bad_settings_are_refused_in_one_line():
    for kwargs, word in (({"grow": 1.0}, "grow"), ({"max_factor": 0.5}, "max_factor"), ({"shrink": 1.0}, "shrink")):
        with pytest.raises(ValueError, match=word):
            Overrelaxation(**kwargs)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="warmup_laps"):
            Overrelaxation(warmup_laps=bad)
    with pytest.raises(ValueError, match="overrelax must be"):
        as_overrelaxation("yes")
    assert Overrelaxation().limit(20) == 20.0 and Overrelaxation(max_factor=5).limit(20) == 5.0
