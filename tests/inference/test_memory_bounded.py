"""Memory-bounded VB (issue #18, Gomes, Welling & Perona 2008): the tied bound is a lower bound of the untied
one and equals it with no clumps, clump statistics are exact sums of their items' statistics, the memory
never exceeds its bound over random streams, and with a bound larger than the data the fit is batch VB's."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.allocation import DPSticks
from pyro_memo.engine import MemoizedDriver
from pyro_memo.inference.dp_mixture_posterior import DPMixturePosterior
from pyro_memo.inference.memory_bounded import MemoryBoundedVB
from pyro_memo.memo.clumps import Clumps, tied_local_step
from pyro_memo.memo.compression import Compressor, unique_rows
from pyro_memo.summaries import Summary
from tests.conftest import FAMILY_NAMES, four_blobs, make_data


def random_posterior(family, x, K, seed):
    """Globals fitted to random soft responsibilities of ``x``."""
    g = torch.Generator().manual_seed(seed)
    resp = torch.softmax(3 * torch.randn(len(x), K, generator=g, dtype=x.dtype), -1)
    return DPMixturePosterior.from_summary(family, DPSticks(1.0), Summary.from_responsibilities(family, x, resp))


def clumped(family, x, num_clumps, num_singlets, seed):
    """The first ``len(x) - num_singlets`` items of ``x`` in ``num_clumps`` random clumps, the rest singlets."""
    g = torch.Generator().manual_seed(seed)
    n = len(x) - num_singlets
    groups = torch.randint(num_clumps, (n,), generator=g)
    groups[:num_clumps] = torch.arange(num_clumps)  # no empty clump
    clumps = Clumps.from_groups(family, x[:n], groups, num_clumps)
    return clumps.cat(Clumps.of_points(family, x[n:])), groups


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("seed", range(3))
def test_the_tied_bound_never_exceeds_the_untied_one_and_equals_it_without_clumps(name, seed):
    x = make_data(name, 200, D=3, seed=seed)
    family = pm.get_family(name).from_data(x)
    x = family.check_data(x)
    post = random_posterior(family, x, 4, seed)
    _, untied = post.local_step(x)
    best = float(post.elbo(untied))
    memory, _ = clumped(family, x, 7 + seed, 30, seed)
    _, tied = tied_local_step(post, memory)
    assert float(post.elbo(tied)) <= best + 1e-9 * abs(best)
    # every item its own clump: the tied bound is the ELBO
    alone = Clumps.from_groups(family, x, torch.arange(len(x)), len(x))
    _, same = tied_local_step(post, alone)
    np.testing.assert_allclose(float(post.elbo(same)), best, rtol=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_clump_statistics_are_the_sums_of_their_items(seed):
    x, _ = four_blobs(600)
    family = pm.Gaussian.from_data(x)
    memory, groups = clumped(family, x, 5, 100, seed)
    one = torch.ones(1, dtype=x.dtype)
    for c in range(5):
        items = x[:500][groups == c]
        direct = family.stats(items, one.expand(len(items), 1))
        for key, value in direct.items():
            torch.testing.assert_close(memory.stats[key][c], value[0], rtol=1e-12, atol=1e-9)
    g = torch.Generator().manual_seed(seed)
    resp = torch.softmax(torch.randn(len(memory), 4, generator=g, dtype=x.dtype), -1)
    compressed, leaves = Compressor(family, seed=seed).compress(memory, resp, 40 * 7)
    assert compressed.memory() <= 40 * 7
    units_counts = torch.cat([memory.counts, torch.ones(memory.num_singlets, dtype=x.dtype)])
    stored = [leaf for leaf in leaves if not (bool((leaf >= 5).all()) and len(leaf) * 2 <= 7)]  # D = 2: a clump
    # stores 1 + 2 + 4 numbers, so leaves of at most 3 singlets keep them
    for c, leaf in enumerate(stored):
        assert float(compressed.counts[c]) == float(units_counts[leaf].sum())
        clump_items = [x[:500][groups == u] for u in leaf.tolist() if u < 5] + [x[500 + u - 5].unsqueeze(0)
                                                                               for u in leaf.tolist() if u >= 5]
        items = torch.cat(clump_items)
        for key, value in family.stats(items, one.expand(len(items), 1)).items():
            torch.testing.assert_close(compressed.stats[key][c], value[0], rtol=1e-12, atol=1e-9)
    assert compressed.num_items == len(x)


@pytest.mark.parametrize("seed", range(6))
def test_the_memory_never_exceeds_its_bound_over_a_random_stream(seed):
    rng = np.random.default_rng(seed)
    x, _ = four_blobs(int(rng.integers(800, 1600)))
    family = pm.Gaussian.from_data(x)
    bound = int(rng.integers(60, 400))
    epoch = int(rng.integers(50, 300))
    records = []
    fit = MemoryBoundedVB(family, int(rng.integers(2, 6)), bound, epoch, seed=seed, laps=30,
                          lifetime=len(x) * int(rng.integers(1, 4))).fit(x, callback=records.append)
    assert len(records) == -(-len(x) // epoch)
    assert all(r["memory_used"] <= bound for r in records)
    assert fit.clumps.num_items == len(x) and fit.clumps.memory() <= bound
    total = sum(Summary.from_responsibilities(family, x, torch.ones(len(x), 1, dtype=x.dtype)).stats["xx"])
    points = fit.clumps.points - family.centre  # the gauss statistics are about the family's centre
    kept = fit.clumps.stats["xx"].sum(0) + points.T @ points
    torch.testing.assert_close(kept, total, rtol=1e-10, atol=1e-6)


def test_with_a_bound_larger_than_the_data_it_is_batch_vb():
    x, _ = four_blobs(1200)
    family = pm.Gaussian.from_data(x)
    stream = MemoryBoundedVB(family, 4, memory_bound=10**6, epoch=400, seed=3, laps=500, tol=1e-13)
    fit = stream.fit(x)
    assert fit.clumps.num_clumps == 0 and fit.clumps.num_singlets == len(x)
    start = stream.initial_posterior(x[:400])
    batch = MemoizedDriver(laps=500, tol=1e-13, shuffle=False).fit(pm.make_batches(x, 1), posterior=start)
    np.testing.assert_allclose(fit.elbo, batch.elbo_trace[-1], rtol=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_unique_rows_is_torch_unique_over_rows(seed):
    """The column-by-column ranks give torch.unique(dim=0)'s rows, inverse and counts, many columns (re-ranked
    keys), few, and no rows included."""
    g = torch.Generator().manual_seed(seed)
    n, F = [(2000, 40), (500, 3), (0, 4), (7, 1), (3000, 13), (1, 2)][seed]
    rows = torch.randint(-3, 4, (n, F), generator=g).double() / 3
    rows[: n // 2] = rows[n - n // 2:][torch.randperm(n // 2, generator=g)] if n > 1 else rows[: n // 2]
    expected = torch.unique(rows, dim=0, return_inverse=True, return_counts=True)
    for got, want in zip(unique_rows(rows), expected, strict=True):
        assert torch.equal(got, want)


def test_bad_settings_are_clear_errors():
    x, _ = four_blobs(300)
    family = pm.Gaussian.from_data(x)
    with pytest.raises(ValueError, match="cannot hold even one clump"):
        MemoryBoundedVB(family, 3, memory_bound=4, epoch=100).fit(x)
    with pytest.raises(ValueError, match="epoch must be a positive integer; got 0"):
        MemoryBoundedVB(family, 3, memory_bound=100, epoch=0)
    with pytest.raises(ValueError, match="epoch must be a positive integer; got 2.5"):
        MemoryBoundedVB(family, 3, memory_bound=100, epoch=2.5)
    for bad in (float("nan"), float("inf"), 60.7):
        with pytest.raises(ValueError, match="memory_bound must be a positive integer"):
            MemoryBoundedVB(family, 3, memory_bound=bad, epoch=100)
    for bad in (-5, 0, float("nan"), float("inf")):  # a lifetime clamped to 1 was silently no magnification
        with pytest.raises(ValueError, match="lifetime must be a positive finite number"):
            MemoryBoundedVB(family, 3, memory_bound=100, epoch=100, lifetime=bad)


def test_data_that_are_not_an_array_or_a_stream_of_epochs_are_named():
    x, _ = four_blobs(60)
    family = pm.Gaussian.from_data(x)
    fit = MemoryBoundedVB(family, 2, memory_bound=500, epoch=30, laps=2)
    for bad in (None, 5):
        with pytest.raises(TypeError, match=r"fit's data must be an \(N, D\) array.*got " + type(bad).__name__):
            fit.fit(bad)
    with pytest.raises(ValueError, match=r"epoch 1 of the iterable must be a 2-D \(n, D\) array.*shape \(2,\)"):
        fit.fit(iter([x[:30], x[30, :2]]))
    with pytest.raises(TypeError, match=r"fit's data must be an iterable of groups.*got NoneType"):
        pm.MemoryBoundedHDP(family, 2, memory_bound=500, epoch=3, laps=2).fit(None)
    rows = fit.fit(x.tolist())  # a list of rows is the array, as make_batches reads it
    assert rows.elbo == MemoryBoundedVB(family, 2, memory_bound=500, epoch=30, laps=2).fit(x.numpy()).elbo


def test_bad_data_are_named_by_their_epoch_and_row_of_the_stream():
    """An epoch's bad data name the epoch and the row of the whole stream: a NaN in row 25 was reported as "row 5"
    of "its 20 rows" (of the second epoch, which the message did not name, after the first had been fitted), and a
    value outside the support or an empty epoch of an iterable named no epoch at all."""
    x, _ = four_blobs(60)
    family = pm.Gaussian.from_data(x)
    bad = x.clone()
    bad[25, 1] = float("nan")
    fit = MemoryBoundedVB(family, 2, memory_bound=500, epoch=20, laps=2)
    with pytest.raises(pm.families.NonFiniteDataError,
                       match=r"1 of the 20 rows of epoch 1 \(rows 20 to 39 of the stream\); the first is row 25"):
        fit.fit(bad)
    with pytest.raises(pm.families.NonFiniteDataError, match=r"epoch 2 \(rows 21 to 59 of the stream\); the first "
                                                             r"is row 25"):
        fit.fit([bad[:20], bad[20:21], bad[21:]])
    with pytest.raises(ValueError, match=r"epoch 1 \(no rows\): gauss data is empty"):
        fit.fit([x[:20], x[20:20]])
    binary = (x > 0).double()
    binary[33, 0] = 0.5
    with pytest.raises(ValueError, match=r"epoch 1 \(rows 20 to 39 of the stream\): bern data must be binary"):
        MemoryBoundedVB(pm.Bernoulli.from_data((x > 0).double()), 2, memory_bound=500, epoch=20, laps=2).fit(binary)


def test_a_stream_from_a_path_object_is_read_as_from_its_string(tmp_path):
    x, _ = four_blobs(300)
    np.save(tmp_path / "x.npy", x.numpy())
    family = pm.Gaussian.from_data(x)
    fits = [MemoryBoundedVB(family, 3, memory_bound=400, epoch=100, laps=5).fit(path).elbo
            for path in (tmp_path / "x.npy", str(tmp_path / "x.npy"))]
    assert fits[0] == fits[1]


def test_a_stream_from_a_zarr_or_dask_array_is_read_as_from_the_array(tmp_path):
    """A zarr or dask array, or a .zarr path, is an (N, D) array read one epoch at a time (they were iterated
    row by row, "epoch 0 of the iterable must be a 2-D (n, D) array ... shape (2,)", and a .zarr path was
    np.load's raw IsADirectoryError)."""
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    x, _ = four_blobs(300)
    x = x.numpy()
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=x.shape, chunks=(70, x.shape[1]), dtype=x.dtype)
    z[:] = x
    family = pm.Gaussian.from_data(x)
    make = lambda: MemoryBoundedVB(family, 3, memory_bound=400, epoch=100, laps=5)  # noqa: E731
    want = make().fit(x).elbo
    for data in (z, str(tmp_path / "x.zarr"), tmp_path / "x.zarr", da.from_array(x, chunks=(70, x.shape[1]))):
        assert make().fit(data).elbo == want
    np.savez(tmp_path / "x.npz", x=x)
    with pytest.raises(ValueError, match=r"x.npz: memory-bounded VB streams a .npy file or a .zarr array"):
        make().fit(str(tmp_path / "x.npz"))


def test_the_cli_streams_a_npy_file_epoch_by_epoch(tmp_path, monkeypatch):
    """fit DATA.npy --algo memory-bounded read the whole file into memory (load_dataset, then one float64 tensor
    of N x D) before its first epoch: on a 1,500,000 x 8 float32 file (48 MB), epochs of 20,000 items, the process
    held 562 MB over its first 27 epochs against 298 MB read epoch by epoch. It reads the file's epochs from disk
    now, and fits as before."""
    import json

    import pyro_memo.datasets
    from pyro_memo.cli import main

    x, _ = four_blobs(900)
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["fit", str(tmp_path / "x.npy"), "--algo", "memory-bounded", "--memory", "300", "--epoch", "200", "--K",
            "4", "--quiet", "--json"]
    assert main(argv + [str(tmp_path / "read.json")]) == 0

    def whole(path):
        raise AssertionError(f"{path} was read whole")

    monkeypatch.setattr(pyro_memo.datasets, "load_dataset", whole)  # the CLI imports it from there at each run
    assert main(argv + [str(tmp_path / "streamed.json")]) == 0
    read, streamed = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("read", "streamed"))
    assert streamed["N"] == 900 and streamed["elbo_trace"] == read["elbo_trace"]


def test_the_cli_fits_a_stream_within_its_memory(tmp_path, capsys):
    from pyro_memo.cli import main

    x, _ = four_blobs(900)
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["fit", str(tmp_path / "x.npy"), "--algo", "memory-bounded", "--memory", "300", "--epoch", "200",
            "--K", "4", "--json", str(tmp_path / "out.json"), "--save", str(tmp_path / "run")]
    assert main(argv) == 0
    import json

    out = json.loads((tmp_path / "out.json").read_text())
    assert out["algo"] == "memory-bounded" and len(out["epochs"]) == 5
    assert all(e["memory_used"] <= 300 and e["memory_bytes"] == 8 * e["memory_used"] for e in out["epochs"])
    assert out["elbo"] == out["epochs"][-1]["elbo"] and out["K"] == 4
    # laps counts model building's laps (--laps bounds each epoch's), not the epochs as it did (5 here)
    assert out["laps"] == sum(e["laps"] for e in out["epochs"]) > len(out["epochs"])
    assert (tmp_path / "run" / "model.pt").exists()
    text = capsys.readouterr()
    assert "memory-bounded VB: 5 epochs of 200 items" in text.out and "epoch 5: 900 items" in text.err
    assert main(["fit", str(tmp_path / "x.npy"), "--algo", "memory-bounded", "--epoch", "200"]) == 2
    assert "needs --memory M" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "x.npy"), "--memory", "300"]) == 2
    assert "--memory needs --algo memory-bounded" in capsys.readouterr().err


def test_a_bound_too_small_for_one_clump_is_refused_before_model_building(monkeypatch):
    """memory_bound below one clump's numbers was found by compression, after the first epoch's model building
    had run (0.6 s for 2,000 items of D = 10); it is refused before, naming the bound and the numbers needed.
    A bound the data fit in as singlets needs no clump and is not refused."""
    x = make_data("gauss", 400, D=10, seed=1, clusters=3).to(torch.float64)
    family = pm.Gaussian.from_data(x)
    built = []
    real_build = MemoryBoundedVB.build
    monkeypatch.setattr(MemoryBoundedVB, "build", lambda self, *a: built.append(1) or real_build(self, *a))
    with pytest.raises(ValueError, match=r"memory_bound 50 cannot hold even one clump: epoch 0's memory takes 4000 "
                                         r"numbers .* one clump 111 .*memory_bound to at least 111"):
        MemoryBoundedVB(family, 3, memory_bound=50, epoch=400).fit(x)
    assert built == []
    fit = MemoryBoundedVB(family, 3, memory_bound=100, epoch=10, laps=2).fit(x[:10])  # 100 numbers as singlets
    assert fit.clumps.num_singlets == 10 and built == [1]
