"""What make_batches and random_parts accept: arrays, lists of rows, fixed batches; and what they refuse
with one clear error (sparse matrices, ragged rows, a number of batches that is not a whole number in range);
the topic and relational fits' dtype by name."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import pyro_memo as pm
from pyro_memo.data.batches import make_batches, random_parts
from pyro_memo.relational import MemoizedRelational
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP


def test_a_list_of_rows_is_the_array_not_a_list_of_batches():
    x = np.random.default_rng(0).normal(size=(30, 2))
    rows, array = make_batches(x.tolist(), 3), make_batches(x, 3)
    assert len(rows) == len(array) == 3
    for b in range(3):
        torch.testing.assert_close(torch.as_tensor(rows.batch(b)), torch.as_tensor(array.batch(b)))


def test_rows_of_different_lengths_are_named_not_numpys_error():
    with pytest.raises(ValueError, match=r"data rows must all have the same length; got rows of lengths \[2, 3\]"):
        make_batches([[1.0, 2.0, 3.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match=r"data rows must make an \(N, D\) array of numbers"):
        pm.MemoizedVB(pm.Gaussian.from_data(np.ones((4, 2))), 2, laps=1).fit([[1.0, [2.0, 3.0]], [1.0, [2.0]]])


def test_fixed_batches_stay_batches():
    x = np.random.default_rng(0).normal(size=(30, 2))
    assert len(make_batches([x[:10], x[10:]])) == 2


def test_num_batches_that_disagrees_with_fixed_batches_is_refused():
    """make_batches([a, b], 5) and MemoizedVB.fit([a, b], 5) fitted 2 batches, the 5 silently ignored (as documented
    then); a num_batches other than the given batches' number is a ValueError now, as for a sharded corpus (None
    or the same number pass)."""
    x = torch.randn(20, 2, dtype=torch.float64)
    parts = [x[:10], x[10:]]
    with pytest.raises(ValueError, match=r"num_batches=5, .* 2 batches .*pass num_batches=None or 2"):
        make_batches(parts, 5)
    source = make_batches(parts)
    assert make_batches(parts, 2).num_batches == 2 and make_batches(source, 2) is source
    with pytest.raises(ValueError, match=r"num_batches=3, .* 2 batches"):
        make_batches(source, 3)
    with pytest.raises(ValueError, match=r"num_batches=5, .* 2 batches"):
        pm.MemoizedVB(pm.Gaussian.from_data(x), 2, laps=1).fit(parts, 5)


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.coo_matrix, sp.csr_array])
def test_a_sparse_matrix_is_refused_naming_the_dense_form(kind):
    x = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(TypeError, match=r"sparse .*x\.toarray\(\)"):
        pm.MemoizedVB(pm.Gaussian.from_data(x), 2, laps=1).fit(kind(x), num_batches=2)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, 11])
def test_random_parts_refuses_a_number_of_batches_out_of_range_or_not_whole(bad):
    with pytest.raises(ValueError, match="num_batches must be a whole number in \\[1, 10\\]"):
        random_parts(10, bad)


def test_hdp_and_relational_fits_refuse_zero_batches_instead_of_taking_one():
    corpus = bars_corpus(20, seed=0)[0]
    with pytest.raises(ValueError, match="num_batches"):
        MemoizedHDP(K=2, laps=1).fit(corpus, num_batches=0)
    graph = pm.data.Graph([[0, 1], [1, 2], [2, 3]], 4)
    with pytest.raises(ValueError, match="num_batches"):
        MemoizedRelational(K=2, laps=1).fit(graph, num_batches=0)


@pytest.mark.parametrize("cls", [MemoizedHDP, MemoizedRelational])
def test_the_topic_and_relational_fits_take_a_dtype_by_name_and_refuse_others(cls):
    assert cls(K=2, dtype="float32").dtype == torch.float32 and cls(K=2).dtype == torch.float64
    for bad in (torch.int64, "f16", "cpu"):
        with pytest.raises(ValueError, match="dtype must be one of float32, float64; got"):
            cls(K=2, dtype=bad)


def test_a_truncated_npy_file_is_refused_naming_it_before_any_batch_is_read(tmp_path):
    x = np.random.default_rng(0).normal(size=(30, 2))
    np.save(tmp_path / "x.npy", x)
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-8])
    with pytest.raises(ValueError, match=r"short.npy: truncated: an array of shape \(30, 2\) and dtype float64 needs"):
        make_batches(str(tmp_path / "short.npy"), 3)
    np.testing.assert_array_equal(make_batches(str(tmp_path / "x.npy"), 3).batch(2), x[20:])


def test_a_shuffle_seed_for_data_read_in_their_own_order_is_refused(tmp_path):
    """make_batches("x.npy", 4, shuffle_seed=3) returned the file's rows in order, the seed ignored without a word
    (as for zarr and dask arrays, iterables of batches and sources); arrays in memory are permuted as before."""
    x = np.arange(40.0).reshape(20, 2)
    np.save(tmp_path / "x.npy", x)
    for data in (str(tmp_path / "x.npy"), [x[:10], x[10:]], make_batches(x, 2)):
        with pytest.raises(ValueError, match="shuffle_seed permutes data held in memory; .* reads its batches in "
                                             "their own order"):
            make_batches(data, 2, shuffle_seed=3)
    shuffled = make_batches(np.load(tmp_path / "x.npy", mmap_mode="r"), 2, shuffle_seed=3)
    assert not np.array_equal(np.concatenate(list(shuffled)), x)
    assert sorted(np.concatenate(list(shuffled))[:, 0]) == sorted(x[:, 0])
