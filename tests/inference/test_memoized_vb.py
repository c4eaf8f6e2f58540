"""Memoized online VB: monotone exact ELBO after lap 1, B = 1 is full VB, no drift, sources, resume."""

import pickle
import re
import warnings

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.data_sources import ArrayBatches, FileBatches
from tests.conftest import FAMILY_NAMES, make_data

CASES = [
    (name, K, B, seed)
    for name in FAMILY_NAMES
    for K in (1, 3, 12)
    for B in (2, 7, 25)
    for seed in (0, 1)
]


@pytest.mark.parametrize("name,K,B,seed", CASES)
def test_no_batch_step_lowers_the_exact_elbo_after_lap_one(name, K, B, seed):
    x = make_data(name, 400 + 37 * seed, D=3, seed=seed)
    family = pm.get_family(name).from_data(x)
    exact = seed == 0  # seed 1: over-relaxed steps (the default), each over several batches
    memo = pm.MemoizedVB(family, K, alpha=0.5 + seed, truncation="direct" if seed else "nested", laps=5, tol=0,
                         init="random" if seed else "kmeans++", init_items=50, seed=seed, record_batch_elbos=True,
                         overrelax=not exact)
    result = memo.fit(x, num_batches=B)
    steps = np.array(result.batch_elbos)
    laps = len(result.elbo_trace) - 1  # after lap 1; its last batch step completes the memo
    if exact:
        assert len(steps) == laps * B + 1
    else:  # at least three steps a lap
        assert len(steps) >= laps * min(B, 3) + 1
    assert np.isfinite(steps).all()
    assert np.diff(steps).min() >= -1e-9 * np.abs(steps).max(), np.diff(steps).min()


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_one_batch_equals_full_batch_vb(name):
    x = make_data(name, 500, D=3, seed=2)
    family = pm.get_family(name).from_data(x)
    vb = pm.FullBatchVB(family, 8, max_iter=25, tol=0).fit(x)
    # FullBatchVB is MemoizedVB with one batch and exact steps
    memo = pm.MemoizedVB(family, 8, laps=25, tol=0, init_items=10**9, overrelax=False).fit(x, num_batches=1)
    np.testing.assert_allclose(memo.elbo_trace, vb.elbo_trace, rtol=1e-10)
    for key, value in vb.posterior.component.items():
        torch.testing.assert_close(memo.posterior.component[key], value, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_running_summary_equals_summary_recomputed_from_scratch(name):
    x = make_data(name, 600, D=3, seed=3)
    family = pm.get_family(name).from_data(x)
    result = pm.MemoizedVB(family, 10, laps=6, tol=0).fit(x, num_batches=12)
    cache = result.state.cache
    fresh = cache.recomputed_total()
    running = cache.total
    torch.testing.assert_close(running.counts, fresh.counts, rtol=1e-10, atol=1e-9)
    for key in running.stats:
        torch.testing.assert_close(running.stats[key], fresh.stats[key], rtol=1e-10, atol=1e-8)
    post = result.posterior
    assert float(post.elbo(running)) == pytest.approx(float(post.elbo(fresh)), rel=1e-10)
    assert result.elbo == float(post.elbo(running))
    assert running.num_items == 600


def test_cache_holds_summaries_not_responsibilities():
    x = make_data("gauss", 2000, D=4, seed=4)
    result = pm.MemoizedVB(pm.Gaussian.from_data(x), 6, laps=2).fit(x, num_batches=5)
    cache = result.state.cache
    assert len(cache) == 5
    for summary in cache.batches.values():
        sizes = [summary.counts.numel(), summary.entropy.numel()] + [v.numel() for v in summary.stats.values()]
        assert max(sizes) <= 6 * 4 * 4  # O(K D^2), independent of N


def test_all_data_sources_give_the_same_fit(tmp_path):
    x = make_data("diag-gauss", 300, D=3, seed=5)
    family = pm.DiagGaussian.from_data(x)
    memo = pm.MemoizedVB(family, 5, laps=4, tol=0, shuffle=False)
    reference = memo.fit(x, num_batches=3).elbo_trace
    np.save(tmp_path / "x.npy", x.numpy())
    np.savez(tmp_path / "x.npz", x=x.numpy())
    mmap = np.load(tmp_path / "x.npy", mmap_mode="r")
    sources = {
        "numpy": (x.numpy(), 3),
        "npy file": (str(tmp_path / "x.npy"), 3),
        "npz file": (str(tmp_path / "x.npz"), 3),
        "memmap": (mmap, 3),
        "list of batches": ([x[:100], x[100:200].numpy(), mmap[200:300]], None),
        "float32 tensor": (x.float(), 3),
    }
    assert isinstance(pm.make_batches(mmap, 3), FileBatches)  # read from the file, not through the map
    assert isinstance(pm.make_batches(str(tmp_path / "x.npy"), 3), FileBatches)
    for label, (data, B) in sources.items():
        trace = memo.fit(data, num_batches=B).elbo_trace
        np.testing.assert_allclose(trace, reference, rtol=1e-6 if label == "float32 tensor" else 1e-12,
                                   err_msg=label)


def test_read_only_data_fit_without_a_warning_and_unchanged(tmp_path):
    """A read-only array (a memory map opened with mode "r") given as batches made torch warn that writing to
    it was undefined, a warning about the library's internals the user could do nothing about."""
    x = make_data("gauss", 300, D=3, seed=5).numpy()
    np.save(tmp_path / "x.npy", x)
    mmap = np.load(tmp_path / "x.npy", mmap_mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = pm.MemoizedVB(pm.Gaussian.from_data(x), 1, laps=6, moves="birth,merge,delete", seed=0).fit(
            [mmap[:100], mmap[100:200], mmap[200:]])
    assert np.array_equal(np.asarray(mmap), x) and len(fit.elbo_trace) == 6


def test_resume_continues_exactly(tmp_path):
    x = make_data("gauss", 400, D=2, seed=6)
    family = pm.Gaussian.from_data(x)
    full = pm.MemoizedVB(family, 6, laps=8, tol=0, seed=3).fit(x, num_batches=4)
    first = pm.MemoizedVB(family, 6, laps=3, tol=0, seed=3).fit(x, num_batches=4)
    pm.save_state(tmp_path / "state.pt", first.state)
    state = pm.load_state(tmp_path / "state.pt")
    resumed = pm.MemoizedVB(family, 6, laps=8, tol=0, seed=3).fit(x, num_batches=4, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, full.elbo_trace, rtol=1e-12)
    assert len(resumed.lap_seconds) == 8


def test_save_replaces_atomically_and_rejects_garbage(tmp_path):
    x = make_data("bern", 100, D=3, seed=7)
    result = pm.MemoizedVB(pm.Bernoulli.from_data(x), 3, laps=2).fit(x, num_batches=2)
    path = tmp_path / "state.pt"
    pm.save_state(path, result.state)
    before = path.read_bytes()
    bad_state = result.state
    bad_state.posterior = None  # cannot be serialised
    with pytest.raises(AttributeError):
        pm.save_state(path, bad_state)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["state.pt"]
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint"):
        pm.load_state(tmp_path / "junk.pt")


def test_batch_sources_validate():
    x = make_data("gauss", 10, D=2)
    with pytest.raises(ValueError, match="batches"):
        ArrayBatches(x, 11)
    with pytest.raises(ValueError, match="2-D"):
        pm.make_batches(x[:, 0], 2)
    with pytest.raises(ValueError, match="same item shape"):
        pm.make_batches([x, x[:, :1]])
    bad = x.clone()
    bad[7, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        pm.MemoizedVB(pm.Gaussian.from_data(x), 2, laps=1).fit(bad, num_batches=3)


@pytest.mark.parametrize("init_items", [10_000, 5])
def test_bad_values_name_the_batch_and_the_row_of_the_data(tmp_path, init_items):
    """NaN in a later batch: the error names the batch, its rows (and file) and the data's row, whether the
    initialisation's items hold it (all of them) or not (5 of them)."""
    x = make_data("gauss", 90, D=2).numpy()
    x[70, 1] = float("inf")
    np.save(tmp_path / "x.npy", x)
    fit = pm.MemoizedVB(pm.Gaussian.from_data(x[:60]), 2, laps=1, init_items=init_items)
    where = "1 of the 30 rows of batch 3 of 3 (rows 60 to 89{}); the first is row 70"
    with pytest.raises(pm.families.NonFiniteDataError, match=re.escape(where.format(""))) as caught:
        fit.fit(x, num_batches=3)
    copy = pickle.loads(pickle.dumps(caught.value))  # as from a worker process
    assert type(copy) is pm.families.NonFiniteDataError and str(copy) == str(caught.value) and copy.first == 10
    with pytest.raises(ValueError, match=re.escape(where.format(f" of {tmp_path / 'x.npy'}"))):
        fit.fit(str(tmp_path / "x.npy"), num_batches=3)
    with pytest.raises(ValueError, match=re.escape("1 of its 90 rows; the first is row 70")):
        pm.FullBatchVB(pm.Gaussian.from_data(x[:60]), 2).fit(x)
    shuffled = pm.make_batches(x, 3, shuffle_seed=0)
    batch = next(b for b in range(3) if not np.isfinite(shuffled.batch(b)).all())
    row = int(np.flatnonzero(~np.isfinite(shuffled.batch(batch)).all(1))[0])
    where = f"rows of batch {batch + 1} of 3; the first is the batch's row {row}"
    with pytest.raises(ValueError, match=re.escape(where)):
        fit.fit(shuffled)


@pytest.mark.parametrize("data", [np.array([[1.0, "a"]], dtype=object), [[1.0, "a"]], np.array([["1", "2"]])])
def test_data_that_are_not_numbers_get_one_clear_error(data):
    with pytest.raises(ValueError, match="gauss data must be a numeric"):
        pm.Gaussian.from_data(make_data("gauss", 10, D=2)).check_data(data)


def test_a_family_built_from_a_number_says_what_a_prior_is():
    with pytest.raises(TypeError, match=r"ZeroMeanGaussian\(prior\): the prior is a dict with keys \['B', 'nu'\], "
                                        r"not int 16; ZeroMeanGaussian.from_data\(x\)"):
        pm.ZeroMeanGaussian(16)


def test_each_fit_scans_every_batch_once():
    """A batch's values are scanned on its first read in a fit only, and again in the next fit of the
    same source: values changed in place between fits are caught."""
    x = make_data("gauss", 60, D=2)
    source = ArrayBatches(x.clone(), 3)
    memo = pm.MemoizedVB(pm.Gaussian.from_data(x), 2, laps=3, tol=0)
    scans = []
    check = memo.family.check_data
    memo.family.check_data = lambda batch, values_checked=False: (scans.append(values_checked),
                                                                  check(batch, values_checked))[1]
    memo.fit(source)
    assert scans.count(False) >= 3 and scans.count(True) >= 6  # laps 2 and 3 read every batch unscanned
    source.data[45, 0] = float("nan")  # batch 2
    with pytest.raises(ValueError, match="NaN"):
        memo.fit(source)


@pytest.mark.parametrize("name", ["gauss", "diag-gauss", "zm-gauss"])
def test_near_empty_components_with_drifted_counts_stay_finite(name):
    """Subtract-old / add-new can leave an emptied component with counts like -1e-13 and
    residual statistics of rounding size; its posterior must stay proper."""
    x = make_data(name, 200, D=3, seed=9)
    family = pm.get_family(name).from_data(x)
    resp = torch.zeros(200, 2, dtype=torch.float64)
    resp[:, 0] = 1.0
    summary = pm.Summary.from_responsibilities(family, x, resp)
    summary.counts[1] = -1e-13
    for value in summary.stats.values():
        value[1] = 1e-12 * torch.randn_like(value[1])
    post = pm.DPMixturePosterior.from_summary(family, pm.DPSticks(1.0), summary)
    assert torch.isfinite(post.family.expected_log_lik(x, post.component)).all()
    assert np.isfinite(float(post.elbo(summary)))


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_the_log_joint_terms_are_kept_until_the_globals_change(name):
    """The globals' terms of the local step are computed once per globals (an over-relaxed step reads
    one proposal for several batches) and never outlive them: after an update, a copy's update, a
    change of precision or a pickle round trip the local step equals one from freshly built globals."""
    import copy
    import pickle

    x = make_data(name, 300, D=3, seed=4)
    family = pm.get_family(name).from_data(x)
    post = pm.MemoizedVB(family, 5, laps=2, tol=0).fit(x, num_batches=3).posterior

    def fresh(p):
        return pm.DPMixturePosterior(p.family, p.sticks, dict(p.component), p.eta1, p.eta0, p.q_alpha)

    kept = post.log_joint_function()
    assert post.log_joint_function() is kept
    before = kept(x).clone()
    other = copy.copy(post)
    other.update(other.local_step(x[:100])[1])
    torch.testing.assert_close(post.log_joint_function()(x), before, rtol=0, atol=0)
    assert other.log_joint_function() is not kept
    torch.testing.assert_close(other.log_joint_function()(x), fresh(other).log_joint_function()(x), rtol=0, atol=0)
    post.update(post.local_step(x[100:])[1])
    assert post.log_joint_function() is not kept
    torch.testing.assert_close(post.log_joint_function()(x), fresh(post).log_joint_function()(x), rtol=0, atol=0)
    assert post.log_joint_function(torch.float32)(x).dtype == torch.float32
    back = pickle.loads(pickle.dumps(post))
    assert "_log_joint" not in vars(back)
    torch.testing.assert_close(back.responsibilities(x), post.responsibilities(x), rtol=0, atol=0)


@pytest.mark.parametrize("name,scale,dtype", [("poisson", 1e160, torch.float64), ("mult", 1e160, torch.float64),
                                              ("poisson", 1e20, torch.float32), ("mult", 1e20, torch.float32)])
def test_count_data_whose_squares_overflow_start_from_kmeans_plus_plus(name, scale, dtype):
    """Counts whose sums fit the dtype but whose squared distances do not (1e160 in float64, 1e20 in float32: the
    count families bound their sums only) failed in k-means++ with torch's "probability tensor contains either
    inf, nan or element < 0"; k-means++ now measures them in float64 scaled by a power of two, so they start where
    the same counts scaled down start."""
    from pyro_memo.inference.initialization import initial_responsibilities

    counts = np.concatenate([np.full((10, 3), 2.0), np.full((10, 3), 9.0)]) + np.arange(3)
    fit = pm.MemoizedVB(pm.get_family(name).from_data(counts * scale, dtype=dtype), K=2, laps=3).fit(counts * scale)
    assert np.isfinite(fit.elbo_trace).all()
    starts = [initial_responsibilities(torch.as_tensor(counts * s, dtype=dtype), 2, seed=3) for s in (scale, 1.0)]
    assert torch.equal(*starts) and starts[0].dtype == dtype
