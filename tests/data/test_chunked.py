"""zarr and dask arrays as fixed batches (issue #17): chunks are batches, a fit on them equals the fit on
the same batches in memory, the initialisation reads only the rows it needs, and bad input gets one
clear error."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.data import DaskArrayBatches, FileBatches, ZarrBatches, toy_patches
from pyro_memo.inference.initialization import initial_items

zarr = pytest.importorskip("zarr")
da = pytest.importorskip("dask.array")


@pytest.fixture
def x():
    return toy_patches(1300, seed=3, patch=2, num_components=4)[0]


def write_zarr(path, x, rows):
    z = zarr.open_array(str(path), mode="w", shape=x.shape, chunks=(rows, x.shape[1]), dtype=x.dtype)
    z[:] = x
    return z


def test_zarr_chunks_are_the_batches(tmp_path, x):
    z = write_zarr(tmp_path / "x.zarr", x, 300)
    for source in (ZarrBatches(z), pm.make_batches(z), pm.make_batches(str(tmp_path / "x.zarr"))):
        assert source.num_batches == 5 and source.num_items == 1300 and source.portable
        np.testing.assert_array_equal(np.concatenate(list(source)), x)
        assert [len(b) for b in source] == [300, 300, 300, 300, 100]
    even = ZarrBatches(z, 4)
    assert [len(b) for b in even] == [325] * 4


def test_an_empty_zarr_array_is_named(tmp_path):
    """A zarr array of no rows had no batches, and a fit failed in its initialisation with torch's raw
    "torch.cat(): expected a non-empty list of Tensors"."""
    z = zarr.open_array(str(tmp_path / "e.zarr"), mode="w", shape=(0, 2), chunks=(10, 2), dtype="f8")
    family = pm.Gaussian.from_data(np.random.default_rng(0).normal(size=(20, 2)))
    for data in (z, str(tmp_path / "e.zarr")):
        with pytest.raises(ValueError, match=r"the data are empty \(N = 0\)"):
            pm.MemoizedVB(family, 2, laps=1).fit(data)


def test_dask_array_blocks_are_the_batches(x):
    d = da.from_array(x, chunks=(400, 2))
    source = pm.make_batches(d)
    assert isinstance(source, DaskArrayBatches) and source.num_batches == 4
    np.testing.assert_array_equal(np.concatenate(list(source)), x)


def test_a_dask_arrays_num_batches_is_kept(x):
    """fit(dask_array, 5) fitted one batch per block, silently: a dask array of one block gave one batch."""
    d = da.from_array(x, chunks=(1300, 2))
    source = pm.make_batches(d, 5)
    assert source.num_batches == 5 and [len(b) for b in source] == [260] * 5
    np.testing.assert_array_equal(np.concatenate(list(source)), x)
    family = pm.ZeroMeanGaussian.from_data(x)
    memory = pm.MemoizedVB(family, 5, laps=3, tol=0, seed=1).fit(torch.as_tensor(x), 5)
    fit = pm.MemoizedVB(family, 5, laps=3, tol=0, seed=1).fit(d, 5)
    np.testing.assert_allclose(fit.elbo_trace, memory.elbo_trace, rtol=1e-12)
    with pytest.raises(ValueError, match="number of batches must be between 1 and N = 1300; got 0"):
        pm.make_batches(d, 0)


def test_a_dask_arrays_blocks_of_no_rows_are_no_batches(x):
    """A filtered dask array (x[mask], compute_chunk_sizes()) may have blocks of no rows; each was a batch of no
    items, and the fit failed in its first lap: "batch 2 of 3 (rows 400 to 399): ... data is empty"."""
    d = da.from_array(x, chunks=((400, 0, 900), (x.shape[1],)))
    source = pm.make_batches(d)
    assert source.num_batches == 2 and [len(b) for b in source] == [400, 900]
    family = pm.ZeroMeanGaussian.from_data(x)
    memory = pm.MemoizedVB(family, 3, laps=2, tol=0, seed=1).fit([x[:400], x[400:]])
    fit = pm.MemoizedVB(family, 3, laps=2, tol=0, seed=1).fit(d)
    np.testing.assert_allclose(fit.elbo_trace, memory.elbo_trace, rtol=1e-12)


def test_a_fit_on_zarr_or_dask_equals_the_fit_on_the_same_batches_in_memory(tmp_path, x):
    family = pm.ZeroMeanGaussian.from_data(x)
    z = write_zarr(tmp_path / "x.zarr", x, 260)
    memory = pm.MemoizedVB(family, 5, laps=4, tol=0, seed=1).fit(pm.make_batches(torch.as_tensor(x), 5))
    for data in (z, str(tmp_path / "x.zarr"), da.from_zarr(str(tmp_path / "x.zarr"))):
        fit = pm.MemoizedVB(family, 5, laps=4, tol=0, seed=1).fit(data)
        np.testing.assert_allclose(fit.elbo_trace, memory.elbo_trace, rtol=1e-12)


@pytest.mark.parametrize("init_items", [50, 5000])
def test_the_initial_items_are_the_same_rows_read_alone(tmp_path, x, init_items):
    np.save(tmp_path / "x.npy", x)
    z = write_zarr(tmp_path / "x.zarr", x, 260)
    expected = np.concatenate(initial_items(pm.make_batches(x, 3), init_items, seed=2))
    for source in (FileBatches.from_npy(tmp_path / "x.npy", 4), ZarrBatches(z)):
        np.testing.assert_array_equal(np.concatenate(initial_items(source, init_items, seed=2)), expected)


def test_bad_chunked_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="expected a 2-D"):
        ZarrBatches(zarr.open_array(str(tmp_path / "a.zarr"), mode="w", shape=(10,), dtype="f8"))
    with pytest.raises(ValueError, match="not a zarr array"):
        pm.make_batches(str(tmp_path / "missing.zarr"))
    with pytest.raises(ValueError, match="expected a 2-D"):
        pm.make_batches(da.zeros((4, 3, 2)))
