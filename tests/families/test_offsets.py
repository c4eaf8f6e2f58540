"""The Gaussian families with an unknown mean are translation invariant: data shifted far from the
origin give the same default priors, the same fit and the same bound as the same data about the
origin, and the bound of a fit stays a bound (it never falls from lap to lap and equals a fresh
recomputation) whatever the data's offset and scale, identical points included."""

import math

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.families import DiagGaussian, Gaussian, KnownCovGaussian, KnownDiagGaussian, family_from_state

#: each family's data-scaled prior keys other than the mean
SPREAD = {Gaussian: ("kappa", "nu", "B"), DiagGaussian: ("kappa", "a", "b"),
          KnownCovGaussian: ("S", "noise"), KnownDiagGaussian: ("S", "noise")}
FAMILY_CLASSES = list(SPREAD)


def two_groups(seed=0, n=100, D=2):
    """Two unit-spread groups 6 apart (the reviewer's reproduction)."""
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randn(n, D, generator=g, dtype=torch.float64) - 3,
                      torch.randn(n, D, generator=g, dtype=torch.float64) + 3])


def fit(family, x, **options):
    options = {"K": 4, "laps": 30, "seed": 0, **options}
    return pm.MemoizedVB(family, options.pop("K"), **options).fit(x, num_batches=2)


@pytest.mark.parametrize("offset", [1e6, 1e8])
@pytest.mark.parametrize("cls", FAMILY_CLASSES, ids=lambda c: c.name)
def test_translated_data_give_the_same_default_prior_fit_and_bound(cls, offset):
    """``shifted - offset`` is exactly the shifted data moved back (Sterbenz), so the two problems are
    one problem translated and differ only by the rounding of the computations: the priors' spreads to
    1e-12, their means by the mean's rounding at the offset, the lap bounds to 1e-7 (the prior means
    differ by ~1e-8 at 1e8) and the clustering not at all. Before, the default spread of gauss /
    known-gauss fell back to the data's mean square (1e12 at 1e6: one cluster, ELBO -3194 instead of
    -767), and the diag-gauss bound from raw moments drifted from lap to lap (1e8: 2125, -1126, ...)."""
    shifted = two_groups() + offset
    back = shifted - offset
    fam, ref = cls.from_data(shifted), cls.from_data(back)
    result, expected = fit(fam, shifted), fit(ref, back)
    assert len(result.elbo_trace) == len(expected.elbo_trace)
    np.testing.assert_allclose(result.elbo_trace, expected.elbo_trace, rtol=1e-7, atol=0)
    np.testing.assert_array_less(-1e-9 * np.abs(result.elbo_trace[:-1]), np.diff(result.elbo_trace))
    labels = result.posterior.responsibilities(shifted).argmax(1)
    assert torch.equal(labels, expected.posterior.responsibilities(back).argmax(1))
    torch.testing.assert_close(result.posterior.expected_weights(), expected.posterior.expected_weights(),
                               rtol=0, atol=1e-4)
    _, fresh = result.posterior.local_step(shifted)
    assert float(result.posterior.elbo(fresh)) >= result.elbo_trace[-1] - 1e-9 * abs(result.elbo_trace[-1])
    if len(result.elbo_trace) < 30:  # converged: a fresh pass changes nothing
        assert float(result.posterior.elbo(fresh)) == pytest.approx(result.elbo_trace[-1], rel=1e-6)
    for key in SPREAD[cls]:
        torch.testing.assert_close(fam.prior[key], ref.prior[key], rtol=1e-12, atol=0, msg=key)
    torch.testing.assert_close(fam.prior["m"] - offset, ref.prior["m"], rtol=0, atol=4 * offset * 2.0 ** -52)


@pytest.mark.parametrize("cls", FAMILY_CLASSES, ids=lambda c: c.name)
def test_centred_data_keep_the_prior_and_their_statistics_are_about_the_data_mean(cls):
    """From data about the origin the default prior is the one of before (variance + 1e-4 of its mean);
    the statistics are centred at the data mean, so they no longer grow with the data's offset."""
    x = two_groups(seed=3, n=40, D=3) * torch.tensor([1.0, 10.0, 0.1], dtype=torch.float64)
    fam = cls.from_data(x + 1e7)
    mean = (x + 1e7).mean(0)
    torch.testing.assert_close(fam.centre, mean)
    resp = torch.softmax(torch.randn(len(x), 3, generator=torch.Generator().manual_seed(0), dtype=x.dtype), -1)
    torch.testing.assert_close(fam.stats(x + 1e7, resp)["x"], resp.T @ (x + 1e7 - mean), rtol=1e-9, atol=1e-9)
    centred = x - x.mean(0)
    cov = centred.T @ centred / len(x)
    spread = cov + 1e-4 * torch.diagonal(cov).mean() * torch.eye(3, dtype=x.dtype)
    key = SPREAD[cls][-1]
    expected = {"B": spread, "b": torch.diagonal(spread), "noise": 0.1 * spread}[key]
    if cls is KnownDiagGaussian:
        expected = torch.diag_embed(torch.diagonal(expected))
    torch.testing.assert_close(cls.from_data(x).prior[key], expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("value", [5.976364918983912, -3e7])
@pytest.mark.parametrize("D", [1, 2])
def test_identical_points_give_a_finite_bound_that_never_falls(value, D):
    """Identical points have a round-off variance (3e-30 at 5.98): it is no spread, and the default
    prior falls back to the data's mean square instead of taking it as the prior's
    variance, whose components then held rounding errors of 1e20 nats (trace 1.1e20, 1.6e20, ...)."""
    z = torch.full((300, D), value, dtype=torch.float64)
    fam = DiagGaussian.from_data(z)
    magnitude = value * value
    torch.testing.assert_close(fam.prior["b"], torch.full((D,), 1e-4 * magnitude, dtype=z.dtype), rtol=1e-9, atol=0)
    result = pm.MemoizedVB(fam, K=3, laps=10, seed=0).fit(z, num_batches=3)
    trace = np.array(result.elbo_trace)
    assert np.isfinite(trace).all()
    np.testing.assert_array_less(-1e-9 * np.abs(trace[:-1]), np.diff(trace))
    # all the points in one component: the bound is that component's log marginal likelihood less the
    # allocation's few nats (5.7 here)
    post = result.posterior
    one = fam.log_marginal(torch.tensor([300.0], dtype=z.dtype), fam.stats(z, torch.ones(300, 1, dtype=z.dtype)))
    assert float(one) - 10 < trace[-1] < float(one)
    _, fresh = post.local_step(z)
    assert float(post.elbo(fresh)) == pytest.approx(trace[-1], rel=1e-9, abs=1e-9)


def random_case(rng):
    """Data of a random kind, dimension, offset and scale for :func:`test_lap_bound_never_falls_and_is_exact`."""
    D = int(rng.integers(1, 4))
    n = int(rng.integers(30, 160))
    scale = 10.0 ** rng.uniform(-6, 6)
    offset = float(rng.choice([0.0, 1e3, 1e6, 1e8])) * float(rng.choice([-1, 1])) * 10.0 ** rng.uniform(0, 0.5)
    kind = str(rng.choice(["groups", "identical", "duplicates", "constant column"]))
    centres = rng.normal(scale=6.0, size=(int(rng.integers(1, 4)), D))
    x = centres[rng.integers(len(centres), size=n)] + rng.normal(size=(n, D))
    if kind == "identical":
        x = np.repeat(x[:1], n, axis=0)
    elif kind == "duplicates":
        x = x[rng.integers(0, 4, size=n)]
    elif kind == "constant column":
        x[:, 0] = x[0, 0]
    x = torch.as_tensor(x * scale + offset)
    options = {"K": int(rng.integers(2, 6)), "laps": 60, "seed": int(rng.integers(1000)),
               "overrelax": bool(rng.integers(2))}
    return x, int(rng.integers(1, 4)), options, f"D={D} n={n} scale={scale:.3g} offset={offset:.3g} {kind} {options}"


def test_lap_bound_never_falls_and_is_exact():
    """Property test over 40 random diag-gauss problems (offsets to +-3e8, scales 1e-6 to 1e6, identical
    and duplicated points, constant columns, D = 1 to 3, 1 to 3 batches, with and without
    over-relaxation): the memoized bound never falls from lap to lap beyond 1e-9 of itself, a fresh
    pass (``posterior.elbo`` of a new ``local_step``) is at least the last lap's bound and equals it at
    convergence, and the data term read off the statistics equals the sum of the items' own expected
    log-likelihoods (no cancellation in either)."""
    rng = np.random.default_rng(20250607)
    for _ in range(40):
        x, batches, options, case = random_case(rng)
        fam = DiagGaussian.from_data(x)
        result = pm.MemoizedVB(fam, options.pop("K"), **options).fit(x, num_batches=batches)
        trace = np.array(result.elbo_trace)
        assert np.isfinite(trace).all(), case
        drops = np.diff(trace) / np.abs(trace[:-1])
        assert drops.min(initial=0.0) >= -1e-9, f"{case}: the bound fell by {-drops.min():.3g} of itself"
        post = result.posterior
        resp, fresh = post.local_step(x)
        again = float(post.elbo(fresh))
        assert again >= trace[-1] - 1e-9 * abs(trace[-1]), f"{case}: fresh {again} below the last lap {trace[-1]}"
        if len(trace) < 60:  # converged: a fresh pass changes nothing
            assert again == pytest.approx(trace[-1], rel=1e-6, abs=1e-6), case
        per_item = resp * fam.expected_log_lik(x, post.component)
        from_stats = fam.expected_log_lik_from_stats(fresh.counts, fresh.stats, post.component)
        size = (resp * fam.expected_log_lik(x, post.component).abs()).sum(0) + 1.0
        assert bool(((from_stats - per_item.sum(0)).abs() <= 1e-9 * size).all()), case


@pytest.mark.parametrize("cls", FAMILY_CLASSES, ids=lambda c: c.name)
def test_the_centre_is_kept_by_copies_and_states_and_a_state_without_one_reads_raw_moments(cls):
    """The centre defines what the statistics mean: copies (``to``, ``with_prior``) and checkpoints keep
    it, so saved summaries stay valid; a state written before the statistics were centred has none, and
    is read with centre 0 (raw moments), which is what its saved summaries hold."""
    x = two_groups(seed=1, n=30, D=2) + 50.0
    fam = cls.from_data(x)
    assert torch.equal(family_from_state(fam.state_dict()).centre, fam.centre)
    assert torch.equal(fam.to(torch.float32).centre, fam.centre.float())
    assert torch.equal(fam.with_prior(2.0, m=torch.zeros(2)).centre, fam.centre)
    state = fam.state_dict()
    del state["centre"]
    legacy = family_from_state(state)
    assert bool((legacy.centre == 0).all())
    resp = torch.softmax(torch.randn(len(x), 3, generator=torch.Generator().manual_seed(2), dtype=x.dtype), -1)
    torch.testing.assert_close(legacy.stats(x, resp)["x"], resp.T @ x)
    counts = resp.sum(0)
    new, old = fam.posterior(counts, fam.stats(x, resp)), legacy.posterior(counts, legacy.stats(x, resp))
    for key in new:
        torch.testing.assert_close(new[key], old[key], rtol=1e-9, atol=1e-9, msg=key)
    torch.testing.assert_close(fam.expected_log_lik_from_stats(counts, fam.stats(x, resp), new),
                               legacy.expected_log_lik_from_stats(counts, legacy.stats(x, resp), old),
                               rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="centre"):
        cls(fam.prior, centre=torch.zeros(3))
    with pytest.raises(ValueError, match="centre"):
        cls(fam.prior, centre=math.nan)


def three_clusters(offset, seed=0, n=1500):
    """Three unit-spread clusters 4 apart in 2-D, shifted by ``offset``: ``(x, labels)``."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 2)) + np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])[labels] + offset
    return torch.as_tensor(x), torch.as_tensor(labels)


def agreement(a, b):
    """The fraction of items two labellings put in the same cluster, under the best matching of their labels."""
    counts = torch.zeros(int(a.max()) + 1, int(b.max()) + 1)
    counts.index_put_((a, b), torch.ones(len(a)), accumulate=True)
    total = 0.0
    while counts.numel() and float(counts.max()) > 0:
        i, j = divmod(int(counts.argmax()), counts.shape[1])
        total += float(counts[i, j])
        counts[i, :], counts[:, j] = 0, 0
    return total / len(a)


@pytest.mark.parametrize("cls", FAMILY_CLASSES, ids=lambda c: c.name)
def test_a_float32_default_prior_of_data_far_from_the_origin_keeps_their_spread(cls):
    """The default prior's moments are taken in float64 (``data_moments``) whatever the fit's dtype. In float32
    itself, data shifted by 2e6 (16 of its steps per unit of spread) had a variance about their rounded mean
    below the round-off bound, so the prior's spread fell back to their mean square, 4e12, and a fit merged
    every cluster into one. The data are compared as float32 holds them (steps of 1/8 at 2e6), shifted back
    exactly in float64."""
    x = three_clusters(2e6)[0].float().double()
    shifted, back = cls.from_data(x, dtype=torch.float32), cls.from_data(x - 2e6, dtype=torch.float32)
    for key in SPREAD[cls]:
        torch.testing.assert_close(shifted.prior[key], back.prior[key], rtol=1e-5, atol=0, msg=key)


@pytest.mark.parametrize("local", [False, True], ids=["float32", "local float32"])
def test_a_float32_fit_of_data_far_from_the_origin_finds_the_clusters_float64_finds(local):
    """Shifted by 2e6, three clusters give a float32 fit (or a float64 fit with a float32 local step) the
    clusters of the float64 fit; before, the float32 fit ended in one cluster."""
    x, _ = three_clusters(2e6)
    expected = fit(Gaussian.from_data(x), x, K=3, laps=40)
    if local:
        result = fit(Gaussian.from_data(x), x, K=3, laps=40, local_dtype="float32")
    else:
        result = fit(Gaussian.from_data(x, dtype=torch.float32), x, K=3, laps=40)
    labels = result.posterior.responsibilities(x).argmax(1)
    assert agreement(labels, expected.posterior.responsibilities(x).argmax(1)) > 0.98


def test_data_float32_cannot_resolve_are_refused_with_the_fix():
    """Unit-spread data shifted by 1e8 are steps of 8 in float32: a float32 fit (or a float32 local step)
    saw a handful of distinct values and merged every cluster into one, silently. Now the fit refuses them,
    naming the column and the fix; float64 fits them, and a constant column has no spread to lose."""
    x, labels = three_clusters(1e8)
    with pytest.raises(ValueError, match=r"gauss data column 0 .* float32's steps .* centre the data .* float64"):
        fit(Gaussian.from_data(x, dtype=torch.float32), x, K=3)
    with pytest.raises(ValueError, match=r"float32's steps .* or leave local_dtype unset"):
        fit(Gaussian.from_data(x), x, K=3, local_dtype="float32")
    result = fit(Gaussian.from_data(x), x, K=3, laps=40)
    assert agreement(result.posterior.responsibilities(x).argmax(1), labels) > 0.95
    centred = x - x.mean(0)
    result = fit(Gaussian.from_data(centred, dtype=torch.float32), centred, K=3, laps=40)
    assert agreement(result.posterior.responsibilities(centred).argmax(1), labels) > 0.95
    constant = torch.cat([torch.full((len(x), 1), 1e8, dtype=x.dtype), centred], 1)
    fit(Gaussian.from_data(constant, dtype=torch.float32), constant, K=3, laps=2)
