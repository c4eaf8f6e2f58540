"""Sparse responsibilities searched among carried candidates (``sparse_candidates``): the candidate
groups, the restricted log-likelihoods, the restricted step against a brute-force reference, the
monotone memoized objective, moves, checkpoints and bad input."""

import json

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.families import candidate_groups, check_sparse_candidates
from pyro_memo.families._sparse import RETURN_DEPTH
from pyro_memo.inference.dp_steps import CANDIDATE_WARMUP_LAPS
from pyro_memo.inference.moves import make_moves
from pyro_memo.memo import load_state, save_state
from tests.conftest import FAMILY_NAMES, make_data


def random_support(N, K, L, seed):
    """``(N, L)`` distinct components per row, drawn at random."""
    g = torch.Generator().manual_seed(seed)
    return torch.argsort(torch.rand(N, K, generator=g), dim=1)[:, :L]


def fitted(name, K=8, laps=2, N=400, seed=0, **options):
    """A short memoized fit of ``name`` data, its family and checked data."""
    x = make_data(name, N, D=3, seed=seed, clusters=4)
    family = pm.get_family(name).from_data(x)
    fit = pm.MemoizedVB(family, K, laps=laps, tol=0, seed=seed, **options).fit(x, num_batches=4)
    return fit, family, family.check_data(x)


# ------------------------------------------------------------- candidate groups
@pytest.mark.parametrize("seed", range(6))
def test_candidate_groups_partition_the_items_and_hold_each_items_support(seed):
    N, K, L = 50 + 30 * seed, 5 + 4 * seed, 1 + seed % 4
    support = random_support(N, K, L, seed)
    extra = seed % 3
    groups = candidate_groups(support, K, extra, torch.Generator().manual_seed(seed))
    items = torch.cat([rows for rows, _ in groups])
    assert sorted(items.tolist()) == list(range(N))
    for rows, columns in groups:
        anchor = int(support[rows[0], 0])
        assert bool((support[rows, 0] == anchor).all())  # one anchor per group
        assert columns.tolist() == sorted(set(columns.tolist()))
        holding = {int(support[n, 0]) for n in range(N) if anchor in support[n, :RETURN_DEPTH].tolist()}
        union = set(support[rows].flatten().tolist()) | holding
        assert union <= set(columns.tolist())
        assert min(L, K) <= len(columns) <= max(len(union) + extra, L)
        if extra == 0:
            assert set(columns.tolist()) == union


def test_groups_of_repeated_supports_still_offer_L_candidates():
    """Supports whose zero-responsibility entries repeat the first one (as the driver keeps them)."""
    support = torch.tensor([[3, 3, 3], [3, 1, 3], [5, 5, 5], [1, 6, 1], [6, 4, 1]])
    groups = dict((int(items[0]), columns.tolist()) for items, columns in candidate_groups(support, 7))
    # 3's group holds 1 second, so 1's group gets 3; 6's holds 1 only third, so 1's group does not get 6 that way
    assert groups == {0: [0, 1, 3], 2: [0, 1, 5], 3: [1, 3, 6], 4: [1, 4, 6]}


# ---------------------------------------------------------- restricted log-likelihoods
@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_column_log_likelihoods_are_the_columns_of_the_full_ones(name):
    fit, family, x = fitted(name)
    post = fit.posterior
    columns = torch.tensor([5, 0, 3])
    full = family.log_lik_function(post.component)(x)
    got = family.column_log_lik_function(post.component)(x, columns, family.item_products(x))
    torch.testing.assert_close(got, full[:, columns], rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(family.column_log_lik_function(post.component)(x, columns), full[:, columns],
                               rtol=1e-12, atol=1e-9)


def test_zero_mean_column_log_likelihoods_in_float32():
    fit, family, x = fitted("zm-gauss")
    post = fit.posterior
    columns = torch.tensor([1, 6])
    full = family.log_lik_function(post.component)(x)
    got = family.column_log_lik_function(post.component, torch.float32)(x, columns)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), full[:, columns], rtol=1e-4, atol=1e-3)


# ----------------------------------------------------------- the restricted step
@pytest.mark.parametrize("name,seed", [(name, seed) for name in FAMILY_NAMES for seed in range(2)])
def test_candidate_step_is_the_top_L_softmax_over_each_groups_candidates(name, seed):
    fit, family, x = fitted(name, seed=seed)
    post, L = fit.posterior, 2 + seed
    support = random_support(x.shape[0], post.K, L, seed)
    resp, summary = post.candidate_local_step(x, support, L)
    resp = resp.dense()
    log_joint = post.log_joint_resp(x)
    want = torch.zeros_like(log_joint)
    for rows, columns in candidate_groups(support, post.K):
        part = pm.families.SparseResponsibilities.top(log_joint[rows][:, columns], L)
        block = torch.zeros(len(rows), post.K, dtype=want.dtype)
        block[:, columns] = part.dense()
        want[rows] = block
    torch.testing.assert_close(resp, want, rtol=1e-10, atol=1e-12)
    reference = pm.summaries.Summary.from_responsibilities(family, x, resp)
    torch.testing.assert_close(summary.counts, reference.counts, rtol=1e-10, atol=1e-9)
    torch.testing.assert_close(summary.entropy, reference.entropy, rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_each_items_candidate_optimum_is_at_least_its_last_supports(seed):
    """Per item, :math:`\\log\\sum_{k \\in S} \\tilde r_k` of the new support is at least that of the last."""
    name = FAMILY_NAMES[seed % len(FAMILY_NAMES)]
    fit, family, x = fitted(name, K=10, seed=seed)
    post, L = fit.posterior, 1 + seed % 3
    support = random_support(x.shape[0], post.K, L, seed)
    resp, _ = post.candidate_local_step(x, support, L, extra=seed % 2,
                                        generator=torch.Generator().manual_seed(seed))
    resp = resp.dense()
    log_joint = post.log_joint_resp(x)
    new = torch.where(resp > 0, log_joint, -torch.inf).logsumexp(1)
    old = log_joint.gather(1, support).logsumexp(1)
    assert bool((new >= old - 1e-9 * old.abs().clamp_min(1)).all())
    assert int((resp > 0).sum(1).max()) <= L


def test_candidates_covering_every_component_give_the_exact_sparse_step():
    fit, family, x = fitted("zm-gauss", K=6)
    post = fit.posterior
    support = torch.arange(6).repeat(x.shape[0], 1)  # every item's support holds all six components
    support = torch.stack([torch.roll(row, -int(i) % 6) for i, row in enumerate(support)])[:, :6]
    resp, summary = post.candidate_local_step(x, support[:, :6], 3)
    exact_resp, exact = post.local_step(x, sparse_L=3)
    torch.testing.assert_close(resp.dense(), exact_resp, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(summary.stats["xx"], exact.stats["xx"], rtol=1e-10, atol=1e-9)


# ------------------------------------------------------------ monotone fits
MONOTONE_CASES = [(name, L, seed) for name in FAMILY_NAMES for L in (1, 2) for seed in range(3)]


@pytest.mark.parametrize("name,L,seed", MONOTONE_CASES)
def test_no_batch_step_lowers_the_exact_objective_with_candidates(name, L, seed):
    x = make_data(name, 300 + 41 * seed, D=3, seed=seed, clusters=3 + seed)
    family = pm.get_family(name).from_data(x)
    exact = seed == 0
    memo = pm.MemoizedVB(family, 8, alpha=0.5 + seed, truncation="direct" if seed == 1 else "nested", laps=6,
                         tol=0, init="random" if seed else "kmeans++", init_items=60, seed=seed,
                         record_batch_elbos=True, sparse_L=L, sparse_candidates=seed, overrelax=not exact)
    result = memo.fit(x, num_batches=(2, 5, 9)[seed])
    steps = np.array(result.batch_elbos)
    assert np.isfinite(steps).all()
    assert np.diff(steps).min() >= -1e-9 * np.abs(steps).max(), np.diff(steps).min()
    assert result.state.warm_starts  # the supports were carried


@pytest.mark.parametrize("seed", range(3))
def test_full_batch_coordinate_steps_never_lower_the_objective_with_candidates(seed):
    x = make_data("zm-gauss", 400, D=4, seed=seed, clusters=4)
    family = pm.ZeroMeanGaussian.from_data(x)
    result = pm.FullBatchVB(family, 10, max_iter=8, tol=0, seed=seed, record_steps=True, sparse_L=2,
                            sparse_candidates=1).fit(x)
    steps = np.array(result.step_elbos)
    assert np.diff(steps[1:]).min() >= -1e-9 * np.abs(steps).max()


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_the_batch_check_gain_is_the_difference_of_the_exact_objectives(name):
    fit, family, x = fitted(name, K=8, laps=2, sparse_L=2)
    post = fit.posterior
    new = post.local_step(x[:150], sparse_L=2)[1]
    old = post.local_step(x[:150], sparse_L=1)[1]
    want = float(post.elbo(new)) - float(post.elbo(old))
    assert post.elbo_gain(new, old) == pytest.approx(want, rel=1e-9, abs=1e-9 * abs(float(post.elbo(old))))
    assert post.elbo_gain(new, old) > 0  # the optimum on two components beats the one on one


def test_the_search_runs_among_candidates_after_the_warm_up_laps(monkeypatch):
    calls = {"candidates": 0, "all": 0}
    post_cls = pm.inference.dp_mixture_posterior.DPMixturePosterior
    searched, full = post_cls.candidate_local_step, post_cls.sparse_local_step

    def count(name, method):
        def run(*args, **kwargs):
            calls[name] += 1
            return method(*args, **kwargs)
        return run

    monkeypatch.setattr(post_cls, "candidate_local_step", count("candidates", searched))
    monkeypatch.setattr(post_cls, "sparse_local_step", count("all", full))
    x = make_data("zm-gauss", 400, D=3, seed=1, clusters=4)
    pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), 8, laps=5, tol=0, seed=1, sparse_L=2, sparse_candidates=1,
                  overrelax=False).fit(x, num_batches=4)
    assert calls == {"candidates": 3 * 4, "all": CANDIDATE_WARMUP_LAPS * 4}


def test_the_kept_supports_are_the_steps_own_and_equal_a_top_L_of_the_dense_responsibilities():
    fit, family, x = fitted("zm-gauss", K=8, laps=2, sparse_L=3)
    memo = pm.MemoizedVB(family, 8, sparse_L=3, sparse_candidates=0)
    resp, _ = fit.posterior.sparse_local_step(x, 3)
    local = memo.carry(resp)
    carried = memo.keep_local(local)
    assert memo._carried is None  # used once
    recomputed = memo.keep_local(local.clone())  # not the carried tensor: a top-L of the dense matrix
    torch.testing.assert_close(carried, recomputed, rtol=0, atol=0)
    assert bool((carried[:, 0] == local.argmax(1)).all())


def test_a_renumbering_the_supports_do_not_follow_is_caught_by_the_batch_check():
    """Supports that name the wrong components (as after a move renumbered them) cannot lower the objective:
    the step is compared with the batch's cached summary and searches all components when it is worse."""
    fit, family, x = fitted("gauss", K=8, laps=3, sparse_L=2)
    memo = pm.MemoizedVB(family, 8, sparse_L=2, sparse_candidates=0)
    state, post = fit.state, fit.posterior
    batches = pm.data_sources.make_batches(x, 4)
    for key in state.cache.batches:
        batch = family.check_data(batches.batch(key))
        state.warm_starts[key] = (post.local_step(batch, 2)[0].topk(2, dim=1).indices + 3) % 8  # renumbered
        before = float(post.elbo(state.cache.batches[key]))
        _, summary = memo.local_step(state, key, batch)
        assert float(post.elbo(summary)) >= before - 1e-9 * abs(before)


# ------------------------------------------------------------------ moves
@pytest.mark.parametrize("name,seed", [(name, seed) for name in FAMILY_NAMES for seed in range(2)])
def test_moves_with_candidates_accept_only_exact_gains_and_keep_the_memo_exact(name, seed):
    x = make_data(name, 500, D=3, seed=seed, clusters=2 + seed)
    family = pm.get_family(name).from_data(x)
    moves = make_moves("birth,merge,delete", seed=seed, birth={"fresh_K": 4, "subsample_size": 200})
    result = pm.MemoizedVB(family, 6, laps=6, tol=0, seed=seed, moves=moves, sparse_L=2,
                           sparse_candidates=1).fit(x, num_batches=5)
    for gain in result.state.move_gains:
        assert gain["after"] > gain["before"], gain
    cache = result.state.cache
    torch.testing.assert_close(cache.total.counts, cache.recomputed_total().counts, rtol=1e-9, atol=1e-8)
    assert float(cache.total.counts.sum()) == pytest.approx(len(x), rel=1e-9)
    assert result.elbo == pytest.approx(float(result.posterior.elbo(cache.total)), rel=1e-12)


def test_moves_with_candidates_find_separated_clusters_from_one_component():
    x = make_data("gauss", 3000, D=2, seed=11, clusters=4)
    result = pm.MemoizedVB(pm.Gaussian.from_data(x), 1, laps=30, moves="birth,merge,delete", sparse_L=2,
                           sparse_candidates=1).fit(x, num_batches=6)
    assert int((result.posterior.expected_weights() > 0.05).sum()) == 4


# ------------------------------------------------------------- checkpoints
def test_a_resumed_candidate_fit_ends_where_an_uninterrupted_one_ends(tmp_path):
    x = make_data("zm-gauss", 600, D=3, seed=2, clusters=5)
    family = pm.ZeroMeanGaussian.from_data(x)

    def memo(laps):
        return pm.MemoizedVB(family, 10, laps=laps, tol=0, seed=2, sparse_L=2, sparse_candidates=1)

    whole = memo(6).fit(x, num_batches=4)
    part = memo(3).fit(x, num_batches=4)
    save_state(tmp_path / "state.pt", part.state)
    state = load_state(tmp_path / "state.pt")
    assert set(state.warm_starts) == set(part.state.warm_starts)
    resumed = memo(6).fit(x, num_batches=4, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, whole.elbo_trace, rtol=1e-12)


# -------------------------------------------------------------- validation
@pytest.mark.parametrize("bad", [-1, 1.5, True, "4"])
def test_bad_sparse_candidates_are_refused(bad):
    with pytest.raises(ValueError, match="sparse_candidates must be a non-negative integer"):
        check_sparse_candidates(bad, 4)
    family = pm.Gaussian.from_data(make_data("gauss", 20, D=2))
    with pytest.raises(ValueError, match="sparse_candidates must be a non-negative integer"):
        pm.MemoizedVB(family, 5, sparse_L=2, sparse_candidates=bad)


def test_sparse_candidates_without_sparse_L_is_refused():
    family = pm.Gaussian.from_data(make_data("gauss", 20, D=2))
    with pytest.raises(ValueError, match="give sparse_L too"):
        pm.MemoizedVB(family, 5, sparse_candidates=2)


def test_estimator_fits_with_sparse_candidates():
    x = make_data("gauss", 600, D=2, seed=4, clusters=3).numpy()
    est = pm.DPMixture(n_components=10, sparse_L=2, sparse_candidates=1, random_state=0, max_iter=20).fit(x)
    assert est.get_params()["sparse_candidates"] == 1
    assert np.isfinite(est.elbo_) and est.predict_proba(x).shape == (600, len(est.weights_))
    with pytest.raises(ValueError, match="give sparse_L too"):
        pm.DPMixture(n_components=5, sparse_candidates=1).fit(x)


def test_cli_sparse_candidates_fit_and_report(tmp_path):
    np.save(tmp_path / "x.npy", make_data("gauss", 400, D=3, seed=0, clusters=3).numpy())
    out = tmp_path / "r.json"
    assert main(["fit", str(tmp_path / "x.npy"), "--K", "8", "--laps", "5", "--sparse-L", "2",
                 "--sparse-candidates", "1", "--json", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert result["sparse_candidates"] == 1 and np.isfinite(result["elbo"])


@pytest.mark.parametrize("argv,message", [(["--sparse-candidates", "-1", "--sparse-L", "2"],
                                           "--sparse-candidates must be zero or more"),
                                          (["--sparse-candidates", "2"], "--sparse-candidates needs --sparse-L")])
def test_cli_bad_sparse_candidates_is_one_error_line(tmp_path, argv, message, capsys):
    np.save(tmp_path / "x.npy", make_data("gauss", 50, D=2).numpy())
    assert main(["fit", str(tmp_path / "x.npy")] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyro-memo: error:")
    assert message in err[0]
