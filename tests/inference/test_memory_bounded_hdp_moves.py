"""The memory-bounded HDP's model building with birth and merge moves (issue #18 item 1): every accepted move
raises the exact tied bound, and the bound it records is the one the fit continues from; the model grows from one
component as new clusters arrive in later epochs; redundant components merge; all within the memory."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.allocation.hdp_sticks import expected_beta, merged_sticks, split_sticks
from pyro_memo.inference.memory_bounded import MemoryBoundedHDP, MemorySource, TiedVB
from pyro_memo.inference.moves.tied_hdp import TiedHDPBirthMove, TiedHDPMergeMove
from pyro_memo.metrics import nmi
from tests.inference.test_memory_bounded_hdp import setting, tie

MEANS = np.array([[-8.0, 0.0], [8.0, 0.0], [0.0, 8.0], [0.0, -8.0]])


def late_groups(seed, per_epoch=10, per_group=60):
    """Four epochs of ``per_epoch`` groups: components 0 and 1 in the first two, all four in the last two."""
    rng = np.random.default_rng(seed)
    groups, labels = [], []
    for epoch in range(4):
        used = 2 if epoch < 2 else 4
        for _ in range(per_epoch):
            z = rng.choice(used, per_group, p=rng.dirichlet(np.full(used, 0.5)))
            groups.append(MEANS[z] + rng.normal(size=(per_group, 2)))
            labels.append(z)
    return groups, np.concatenate(labels)


def accepted_gains_are_exact(fit_state):
    """Every accepted move raised the exact tied bound, and the last one of each lap recorded the bound the lap
    ended with (the state the fit continued from)."""
    gains = fit_state.move_gains
    assert all(g["after"] > g["before"] for g in gains)
    last = {g["lap"]: g["after"] for g in gains}
    for lap, after in last.items():
        np.testing.assert_allclose(fit_state.elbo_trace[lap], after, rtol=1e-12)
    return gains


@pytest.mark.parametrize("seed", range(8))
def test_a_move_is_accepted_only_when_the_exact_tied_bound_rises(seed):
    """Random memories (clumps across groups, merged document groups) and starting K: model building with both
    moves; every accepted move's bound is higher than before it and is the lap's reported bound."""
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 7))
    groups, family, x, doc, post = setting(seed, num_groups=10, per_group=40, K=K)
    memory, _, _, _ = tie(family, x, doc, len(groups), 5 + seed, 200, merges=seed % 3, seed=seed)
    moves = [TiedHDPBirthMove(fresh_K=3, subsample_size=150, seed=seed), TiedHDPMergeMove(max_pairs=3)]
    driver = TiedVB(laps=12, tol=0, seed=seed, shuffle=False, moves=moves, local_options={"max_iter": 200})
    fit = driver.fit(MemorySource(memory), posterior=post)
    accepted_gains_are_exact(fit.state)
    proposed = sum(c["proposed"] for lap in fit.state.move_log for c in lap.values())
    assert proposed > 0


@pytest.mark.parametrize("seed", range(3))
def test_births_grow_the_model_as_clusters_arrive_and_every_move_raises_the_tied_bound(seed):
    groups, labels = late_groups(seed)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    bound = 3000
    stream = MemoryBoundedHDP(family, 1, bound, 10, seed=seed, laps=60, moves="birth,merge")
    fit = stream.fit(groups)
    records = fit.epochs
    assert [r["K"] for r in records] == [2, 2, 4, 4]  # two components, then four once the new clusters arrive
    assert sum(r["moves"]["birth"]["accepted"] for r in records[2:]) >= 1
    gains = [g for r in records for g in r["move_gains"]]
    assert gains and all(g["after"] > g["before"] for g in gains)
    assert all(r["memory_used"] <= bound for r in records)
    found = fit.posterior.family.expected_log_lik(torch.as_tensor(np.concatenate(groups)),
                                                  fit.posterior.component).argmax(1)
    assert nmi(labels, found.numpy()) > 0.95


@pytest.mark.parametrize("seed", range(2))
def test_merges_remove_redundant_components_and_raise_the_tied_bound(seed):
    groups, _ = late_groups(seed, per_epoch=5)
    groups = groups[:10]  # the two-component epochs
    family = pm.Gaussian.from_data(np.concatenate(groups))
    fixed = MemoryBoundedHDP(family, 8, 3000, 5, seed=seed, laps=60).fit(groups)
    merged = MemoryBoundedHDP(family, 8, 3000, 5, seed=seed, laps=60, moves="merge").fit(groups)
    assert [r["K"] for r in merged.epochs][-1] == 2
    assert all(r["K"] == 8 for r in fixed.epochs)
    assert sum(r["moves"]["merge"]["accepted"] for r in merged.epochs) == 6
    assert merged.elbo > fixed.elbo


@pytest.mark.parametrize("seed", range(4))
def test_the_sticks_of_a_merge_and_of_a_birth_keep_the_weights_they_move(seed):
    g = torch.Generator().manual_seed(seed)
    K = 5
    rho = 0.1 + 0.8 * torch.rand(K, generator=g, dtype=torch.float64)
    omega = 1 + 10 * torch.rand(K, generator=g, dtype=torch.float64)
    weights = expected_beta(rho)
    a, b = sorted(torch.randperm(K, generator=g)[:2].tolist())
    merged = expected_beta(merged_sticks(rho, omega, a, b)[0])
    keep = [k for k in range(K + 1) if k != b]
    expect = weights.clone()
    expect[a] += weights[b]
    torch.testing.assert_close(merged, expect[keep], rtol=1e-12, atol=0)
    target, shares = seed % K, 0.3 * torch.rand(3, generator=g, dtype=torch.float64)
    rho2, omega2 = split_sticks(rho, omega, target, shares, keep_target=True)
    grown = expected_beta(rho2)
    torch.testing.assert_close(grown[K:K + 3], weights[target] * shares, rtol=1e-12, atol=0)
    torch.testing.assert_close(grown[target], weights[target] * (1 - shares.sum()), rtol=1e-12, atol=0)
    torch.testing.assert_close(grown[-1], weights[-1], rtol=1e-12, atol=0)
    assert torch.equal(omega2[K:], omega[target].expand(3))


def test_a_random_stream_with_moves_stays_within_memory():
    rng = np.random.default_rng(3)
    groups, _ = late_groups(3, per_epoch=6, per_group=int(rng.integers(20, 40)))
    family = pm.Gaussian.from_data(np.concatenate(groups))
    bound = 400
    fit = MemoryBoundedHDP(family, 1, bound, 4, max_groups=3, seed=3, laps=40, moves="birth,merge",
                           lifetime=2 * sum(map(len, groups))).fit(groups)
    assert all(r["memory_used"] <= bound for r in fit.epochs)
    assert fit.clumps.num_items == sum(map(len, groups))
    assert max(r["K"] for r in fit.epochs) >= 2


def test_the_cli_grows_the_hdp_from_one_component_with_moves(tmp_path, capsys):
    import json

    from pyro_memo.cli import main

    groups, _ = late_groups(0, per_epoch=4, per_group=50)
    np.savez(tmp_path / "groups.npz", x=np.concatenate(groups), groups=np.repeat(np.arange(len(groups)), 50))
    argv = ["fit", str(tmp_path / "groups.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "1500",
            "--epoch", "4", "--K", "1", "--moves", "birth,merge", "--json", str(tmp_path / "out.json"), "--quiet"]
    assert main(argv) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert [e["K"] for e in out["epochs"]] == [2, 2, 4, 4]
    assert all(e["memory_used"] <= 1500 for e in out["epochs"])
    assert sum(e["moves"]["birth"]["accepted"] for e in out["epochs"]) == 3
    assert main(argv[:-5] + ["--moves", "delete"]) == 2
    assert "--moves delete is not available for --model hdp --algo memory-bounded (birth, merge)" in \
        capsys.readouterr().err


def test_a_second_fit_starts_its_moves_afresh():
    """The same MemoryBoundedHDP fitted twice to the same groups gives the same result: the birth's generator starts
    from its seed at every fit, not where the last fit left it (it has a state_dict now)."""
    rng = np.random.default_rng(0)
    groups = [rng.normal(size=(int(rng.integers(3, 12)), 2)) + int(rng.integers(0, 3)) * 5 for _ in range(30)]
    model = MemoryBoundedHDP(pm.Gaussian.from_data(torch.tensor(np.concatenate(groups))), K=1, memory_bound=200,
                             epoch=10, moves="birth,merge", laps=20, seed=1)
    first, second = model.fit(groups), model.fit(groups)
    assert second.elbo == first.elbo
    assert [e["moves"] for e in second.epochs] == [e["moves"] for e in first.epochs]
