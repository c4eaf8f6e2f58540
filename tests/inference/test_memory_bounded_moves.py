"""Memory-bounded VB's model building with birth and merge moves (issue #18 item 1): the tied pair entropy is
the entropy of the merged tied summary, every accepted move raises the exact tied bound, the model grows from
one component as new clusters arrive in later epochs, redundant components merge, all within the memory."""

import json

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.inference.memory_bounded import MemoryBoundedVB
from pyro_memo.inference.moves.tied import tied_pair_entropies
from pyro_memo.memo.clumps import Clumps, tied_summary
from pyro_memo.metrics import nmi

CENTERS = torch.tensor([[-8.0, 0.0], [8.0, 0.0], [0.0, 8.0], [0.0, -8.0]], dtype=torch.float64)


def blobs(labels, seed):
    g = torch.Generator().manual_seed(seed)
    return CENTERS[labels] + torch.randn(len(labels), 2, generator=g, dtype=torch.float64)


def late_stream(seed, per_epoch=300):
    """Four epochs: clusters 0 and 1 in the first two, clusters 2 and 3 join in the last two."""
    g = torch.Generator().manual_seed(seed)
    early = torch.randint(0, 2, (2 * per_epoch,), generator=g)
    late = torch.randint(0, 4, (2 * per_epoch,), generator=g)
    labels = torch.cat([early, late])
    return blobs(labels, seed), labels


@pytest.mark.parametrize("seed", range(6))
def test_the_tied_pair_entropy_is_the_merged_tied_summarys(seed):
    g = torch.Generator().manual_seed(seed)
    K, C, S = 3 + seed % 3, 4 + seed, 7
    x = torch.randn(40, 2, generator=g, dtype=torch.float64)
    family = pm.Gaussian.from_data(x)
    groups = torch.cat([torch.arange(C), torch.randint(C, (30 - C,), generator=g)])
    clumps = Clumps.from_groups(family, x[:30], groups, C).cat(Clumps.of_points(family, x[30:30 + S]))
    clump_resp = torch.softmax(2 * torch.randn(C, K, generator=g, dtype=torch.float64), -1)
    point_resp = torch.softmax(2 * torch.randn(S, K, generator=g, dtype=torch.float64), -1)
    pairs = torch.combinations(torch.arange(K), 2)
    entropies = tied_pair_entropies(clumps, (clump_resp, point_resp), pairs)
    for p, (a, b) in enumerate(pairs.tolist()):
        keep = [k for k in range(K) if k != b]

        def merged(r, a=a, b=b, keep=keep):
            r = r.clone()
            r[:, a] += r[:, b]
            return r[:, keep]

        summary = tied_summary(family, clumps, merged(clump_resp), merged(point_resp))
        torch.testing.assert_close(entropies[p], summary.entropy[keep.index(a)], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_births_grow_the_model_as_clusters_arrive_and_every_move_raises_the_tied_bound(seed):
    x, labels = late_stream(seed)
    family = pm.Gaussian.from_data(x)
    bound = 700
    fit = MemoryBoundedVB(family, 1, bound, 300, seed=seed, laps=60, moves="birth,merge").fit(x)
    records = fit.epochs
    assert [r["K"] for r in records][:2] == [2, 2]  # the two early clusters, from one component
    assert records[-1]["K"] == 4
    gains = [g for r in records for g in r["move_gains"]]
    assert gains and all(g["after"] > g["before"] for g in gains)
    assert sum(r["moves"]["birth"]["accepted"] for r in records[2:]) >= 1  # grown after the new arrivals
    assert all(r["memory_used"] <= bound for r in records)
    labels_found = fit.posterior.responsibilities(x).argmax(-1)
    assert nmi(labels.numpy(), labels_found.numpy()) > 0.95


def test_merges_remove_redundant_components_and_raise_the_tied_bound():
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 2, (900,), generator=g)
    x = blobs(labels, 1)
    family = pm.Gaussian.from_data(x)
    fit = MemoryBoundedVB(family, 8, 500, 300, seed=1, laps=60, moves="merge").fit(x)
    weights = fit.posterior.expected_weights()
    assert int((weights > 0.05).sum()) == 2
    assert fit.posterior.K < 8
    gains = [g for r in fit.epochs for g in r["move_gains"]]
    assert gains and all(g["after"] > g["before"] for g in gains)
    without = MemoryBoundedVB(family, 8, 500, 300, seed=1, laps=60).fit(x)
    assert without.posterior.K == 8 and all(r["moves"] == {} for r in without.epochs)


def test_the_cli_grows_a_stream_with_moves(tmp_path, capsys):
    from pyro_memo.cli import main

    x, _ = late_stream(0)
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["fit", str(tmp_path / "x.npy"), "--algo", "memory-bounded", "--memory", "700", "--epoch", "300",
            "--K", "1", "--moves", "birth,merge", "--laps", "60", "--json", str(tmp_path / "out.json")]
    assert main(argv) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["K"] == 4 and [e["K"] for e in out["epochs"]][-1] == 4
    assert all(g["after"] > g["before"] for e in out["epochs"] for g in e["move_gains"])
    assert "K 4" in capsys.readouterr().err
    bad = argv[:-2] + ["--moves", "birth,delete"]
    assert main(bad) == 2
    assert "--moves delete is not available with --algo memory-bounded (birth, merge)" in capsys.readouterr().err


def test_a_birth_created_at_the_end_of_an_epoch_is_adopted_in_the_next():
    """With two model-building laps, births are created at an epoch's last lap; the next epoch's model
    building starts from an empty memo and adopts them in its second lap (regression: the adoption read
    the empty memo's total)."""
    x, labels = late_stream(1)
    family = pm.Gaussian.from_data(x)
    fit = MemoryBoundedVB(family, 1, 700, 300, seed=1, laps=2, moves="birth,merge").fit(x)
    gains = [g for r in fit.epochs for g in r["move_gains"]]
    assert gains and all(g["after"] > g["before"] for g in gains)
    assert fit.epochs[-1]["K"] > 1


def test_a_second_fit_starts_its_moves_afresh():
    """Moves carry their state from epoch to epoch of a stream, not from one ``fit`` to the next: the same
    MemoryBoundedVB fitted twice to the same stream gives the same result. (Before, the second fit's birth went on
    with the first one's generator and failure count, and its tied bound differed.)"""
    from pyro_memo.data.synthetic import dp_gaussian_mixture

    x = dp_gaussian_mixture(200, 2, seed=2)[0]
    model = MemoryBoundedVB(pm.Gaussian.from_data(torch.tensor(x)), K=1, memory_bound=10_000, epoch=40,
                            moves="birth,merge", laps=20, seed=1)
    first, second = model.fit(x), model.fit(x)
    assert second.elbo == first.elbo
    assert [e["moves"] for e in second.epochs] == [e["moves"] for e in first.epochs]
