"""Bad data and arguments to the Python API get one clear ValueError naming the problem, never a raw
library error, a silent drop or a wrong result: float32 magnitudes, complex and bool data, (N, 0)
arrays, autograd tensors, seeds, whole-number counts, index batches and graphs."""

import warnings

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo import DPMixture
from pyro_memo.data import Graph, from_adjacency
from pyro_memo.data.batches import IndexBatches, make_batches
from pyro_memo.relational import MemoizedRelational
from pyro_memo.topics import from_counts


def two_clusters(n=30, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(n, 2))
    y[n // 2:] += 8
    return y


# ---------------------------------------------------------------- 1. magnitude for the dtype
@pytest.mark.parametrize("scale", [1e-20, 1e-30, 1e-40])
def test_float32_fit_refuses_data_whose_squares_underflow(scale):
    with pytest.raises(ValueError, match=r"only up to .* float32.*underflow.*float64"):
        DPMixture(n_components=2, random_state=0, max_iter=5, dtype="float32").fit(two_clusters() * scale)


@pytest.mark.parametrize("scale", [1e-40, 1e40])
def test_mixed_precision_fit_refuses_data_outside_float32(scale):
    with pytest.raises(ValueError, match=r"float32.*local_dtype"):
        DPMixture(n_components=2, random_state=0, max_iter=5, local_dtype="float32").fit(two_clusters() * scale)


def test_small_data_fit_in_float64_and_at_moderate_scales_in_float32():
    for kw, scale in [({}, 1e-30), ({}, 1e-100), ({"dtype": "float32"}, 1e-10), ({"local_dtype": "float32"}, 1e-30)]:
        est = DPMixture(n_components=2, random_state=0, max_iter=20, **kw).fit(two_clusters() * scale)
        assert sorted(np.bincount(est.labels_, minlength=2)) == [15, 15], (kw, scale)


def test_float32_family_with_a_given_prior_refuses_tiny_data_at_initialisation():
    fam = pm.Gaussian.from_data(torch.tensor(two_clusters()), dtype=torch.float32)
    with pytest.raises(ValueError, match="underflow"):
        pm.MemoizedVB(fam, 2, laps=2, seed=0).fit(torch.tensor(two_clusters() * 1e-25, dtype=torch.float32),
                                                  num_batches=2)


def test_a_batch_of_near_zero_items_among_larger_ones_is_fine():
    x = two_clusters(40)
    x[:10] *= 1e-20  # one batch of tiny values: its squares only add terms too small to count
    fam = pm.Gaussian.from_data(torch.tensor(x, dtype=torch.float32), dtype=torch.float32)
    pm.MemoizedVB(fam, 2, laps=2, seed=0, shuffle=False).fit(torch.tensor(x, dtype=torch.float32), num_batches=4)


# ---------------------------------------------------------------- 2, 4, 5, 7. dtypes, shapes, autograd
def test_complex_data_are_refused_by_name():
    x = two_clusters()
    fam = pm.Gaussian.from_data(torch.tensor(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not torch's "discards the imaginary part" warning
        with pytest.raises(ValueError, match="complex"):
            pm.MemoizedVB(fam, 2, laps=2, seed=0).fit(x + 1j * x, num_batches=2)
        with pytest.raises(ValueError, match="complex"):
            pm.Gaussian.from_data(x + 1j)
        with pytest.raises(ValueError, match="complex"):
            from_counts(np.ones((3, 4)) + 5j)
        with pytest.raises(ValueError, match="complex"):
            from_counts(torch.ones(3, 4) + 5j)
        with pytest.raises(ValueError, match="complex"):
            from_counts([[1 + 1j, 2], [3, 4]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_count_matrices_as_torch_tensors_are_read(dtype):
    """A (D, V) torch tensor of counts is a matrix of numbers (the complex check read its dtype as numpy's
    and raised numpy's TypeError)."""
    corpus = from_counts(torch.tensor([[1, 0, 2], [0, 1, 0]], dtype=dtype))
    assert corpus.num_docs == 2 and float(corpus.num_tokens) == 4.0


def test_data_without_columns_get_a_shape_error():
    with pytest.raises(ValueError, match=r"no columns \(D = 0\).*\(5, 0\)"):
        pm.Gaussian.from_data(torch.zeros(5, 0))
    with pytest.raises(ValueError, match=r"no columns"):
        pm.Gaussian.from_data(torch.zeros(5, 1)).check_data(torch.zeros(5, 0))


def test_data_that_require_grad_are_detached():
    x = torch.tensor(two_clusters())
    fam = pm.Gaussian.from_data(x)
    want = pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(x, num_batches=2).elbo_trace
    given = x.clone().requires_grad_()
    assert pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(given, num_batches=2).elbo_trace == want
    assert pm.FullBatchVB(fam, 2, seed=0).fit(given).elbo_trace == pm.FullBatchVB(fam, 2, seed=0).fit(x).elbo_trace
    assert not fam.check_data(given).requires_grad


def test_big_endian_data_are_read_as_their_values(tmp_path):
    """A .npy file written big-endian (by another machine, or from FITS) holds numbers like any other; torch
    cannot wrap such an array, and every fit refused it: "data must be a numeric (N, D) array; got >f8"."""
    x = two_clusters()
    np.save(tmp_path / "be.npy", x.astype(">f8"))
    fam = pm.Gaussian.from_data(x)
    want = pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(x, num_batches=2).elbo_trace
    for data in (str(tmp_path / "be.npy"), np.load(tmp_path / "be.npy", mmap_mode="r"), x.astype(">f8")):
        assert pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(data, num_batches=2).elbo_trace == want
    assert pm.MemoryBoundedVB(fam, K=2, memory_bound=50, epoch=10).fit(str(tmp_path / "be.npy")).elbo == \
        pm.MemoryBoundedVB(fam, K=2, memory_bound=50, epoch=10).fit(x).elbo
    assert pm.Gaussian.from_data(x.astype(">f8")).check_data(x.astype(">i4")).dtype == torch.float64


def test_reversed_numpy_views_are_read_as_their_copies():
    """A numpy view with a negative stride (``x[::-1]``, ``np.flip``) is data like any other (torch cannot
    wrap it: every fitter refused it as "not a numeric array", the estimator with torch's error)."""
    x = two_clusters()
    flipped, copied = np.flip(x, 0), np.flip(x, 0).copy()
    fam = pm.Gaussian.from_data(flipped)
    assert pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(flipped, num_batches=2).elbo_trace == \
        pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(copied, num_batches=2).elbo_trace
    assert pm.FullBatchVB(fam, 2, max_iter=3, seed=0).fit(x[:, ::-1]).elbo_trace == \
        pm.FullBatchVB(fam, 2, max_iter=3, seed=0).fit(x[:, ::-1].copy()).elbo_trace
    est = DPMixture(n_components=2, max_iter=5, random_state=0).fit(flipped)
    assert np.array_equal(est.labels_, DPMixture(n_components=2, max_iter=5, random_state=0).fit(copied).labels_)
    assert np.array_equal(est.predict(flipped), est.predict(copied))


@pytest.mark.parametrize("make,shown", [(lambda: {"x": 1}, "str"), (lambda: iter([1.0, 2.0]), "float"),
                                        (lambda: [np.ones((2, 2)), 3], "int")])
def test_batches_that_are_not_arrays_of_items_are_named(make, shown):
    """An iterable whose batches are scalars or strings (a dict, a generator of numbers) raised an
    IndexError from inside ListBatches."""
    with pytest.raises(ValueError, match=f"each batch must be an array of items.*is a {shown}"):
        make_batches(make())
    with pytest.raises(ValueError, match="each batch must be an array of items"):
        pm.MemoizedVB(pm.Gaussian.from_data(two_clusters()), 2, laps=2).fit(make())


def test_bool_data_are_read_as_zeros_and_ones():
    rng = np.random.default_rng(0)
    x = rng.random((40, 5)) < 0.3
    fam = pm.Bernoulli.from_data(x)
    a = pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(x, num_batches=2).elbo_trace
    b = pm.MemoizedVB(fam, 2, laps=3, seed=0).fit(x.astype(np.float64), num_batches=2).elbo_trace
    assert a == b


# ---------------------------------------------------------------- 6. seeds
def test_as_seed_keeps_whole_numbers_and_draws_from_generators():
    from pyro_memo.checks import as_seed

    assert as_seed(7) == 7 and as_seed(np.int64(7)) == 7 and as_seed(2**63 - 1) == 2**63 - 1
    assert as_seed(3.0) == 3 and as_seed(np.float64(3.0)) == 3  # whole numbers, as as_positive_int reads them
    assert as_seed(np.random.default_rng(0)) == as_seed(np.random.default_rng(0))
    assert as_seed(np.random.RandomState(0)) == as_seed(np.random.RandomState(0))
    for bad in (-1, 2**63, 2**70, 1.5, "3", None, True):
        with pytest.raises(ValueError, match="seed must be a whole number"):
            as_seed(bad)


@pytest.mark.parametrize("seed", [np.random.default_rng(0), np.random.RandomState(0), -1, 2**70])
def test_every_fitter_checks_its_seed(seed):
    x = torch.tensor(two_clusters())
    fam = pm.Gaussian.from_data(x)
    fits = [lambda: pm.MemoizedVB(fam, 2, laps=2, seed=seed).fit(x, num_batches=2),
            lambda: pm.FullBatchVB(fam, 2, max_iter=2, seed=seed).fit(x),
            lambda: MemoizedRelational(K=2, laps=2, seed=seed).fit(Graph([[0, 1], [1, 2], [2, 3]], 4)),
            lambda: pm.MemoryBoundedVB(fam, 2, memory_bound=500, epoch=60, laps=2, seed=seed).fit(x),
            lambda: pm.HDPGuide(pm.models.HDPTopicModel(5, 2), seed=seed),
            lambda: pm.RelationalGuide(pm.models.HDPRelationalModel(4, 2), seed=seed)]
    for fit in fits:
        if isinstance(seed, int):
            with pytest.raises(ValueError, match="seed must be a whole number"):
                fit()
        else:
            fit()


@pytest.mark.parametrize("seed", [-1, "a", 2**70])
def test_every_data_generator_and_split_checks_its_seed(seed):
    # was numpy's "expected non-negative integer" (or SeedSequence's TypeError), not naming seed
    from pyro_memo.data import assortative_graph, bars_corpus, split_documents, split_pairs

    graph = assortative_graph(20, 2, seed=0)[0]
    corpus = bars_corpus(20, seed=0)[0]
    for make in (lambda: split_pairs(graph, 0.1, seed=seed), lambda: bars_corpus(seed=seed),
                 lambda: assortative_graph(20, 2, seed=seed), lambda: split_documents(corpus, seed=seed)):
        with pytest.raises(ValueError, match="seed must be a whole number"):
            make()


def test_a_generator_seed_is_used_as_it_is():
    from pyro_memo.data import bars_corpus

    a, b = bars_corpus(20, seed=np.random.default_rng(4))[0], bars_corpus(20, seed=np.random.default_rng(4))[0]
    assert np.array_equal(a.word_ids, b.word_ids) and np.array_equal(a.counts, b.counts)


def test_an_int_seed_gives_the_fit_it_gave_before():
    x = torch.tensor(two_clusters())
    fam = pm.Gaussian.from_data(x)
    a = pm.MemoizedVB(fam, 3, laps=3, seed=5).fit(x, num_batches=3).elbo_trace
    b = pm.MemoizedVB(fam, 3, laps=3, seed=np.int64(5)).fit(x, num_batches=3).elbo_trace
    assert a == b


# ---------------------------------------------------------------- 8. whole numbers
@pytest.mark.parametrize("value", [2.9, "3", True])
def test_a_number_of_batches_must_be_a_whole_number(value):
    x = torch.tensor(two_clusters())
    with pytest.raises(ValueError, match="whole number"):
        make_batches(x, value)
    with pytest.raises(ValueError, match="whole number"):
        pm.MemoizedVB(pm.Gaussian.from_data(x), 2, laps=2).fit(x, num_batches=value)


def test_num_nodes_must_be_a_whole_number():
    for value in (2.5, "3"):
        with pytest.raises(ValueError, match="num_nodes must be a positive integer"):
            Graph([[0, 1]], value)
    assert Graph([[0, 1]], 2.0).num_nodes == 2


# ---------------------------------------------------------------- 9. index batches
def test_index_batches_must_partition_the_items():
    x = torch.zeros(6, 2)
    IndexBatches(x, [[0, 2, 4], [5, 3, 1]])
    with pytest.raises(ValueError, match=r"2 of the 6 items are in no batch"):
        IndexBatches(x, [[0, 1], [2, 3]])
    with pytest.raises(ValueError, match=r"2 are in more than one"):
        IndexBatches(x, [[0, 1, 2, 3], [2, 3, 4, 5]])
    with pytest.raises(ValueError, match=r"lie in \[0, 6\)"):
        IndexBatches(x, [[0, 1, 2], [3, 4, 5, 6]])
    with pytest.raises(ValueError, match="whole-number ids"):
        IndexBatches(x, [[0, 1, 2.5], [3, 4, 5]])


# ---------------------------------------------------------------- 10. graphs
def test_adjacency_of_another_rank_and_huge_ids_are_named():
    with pytest.raises(ValueError, match=r"square 2-D.*\(2, 2, 2\)"):
        from_adjacency(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match=r"found \[0, 9223372036854775808\]"):
        Graph(np.array([[0, 2**63]], dtype=np.uint64), 5)


@pytest.mark.parametrize("seed", [-1, "a", 2.5])
def test_make_batches_names_a_bad_shuffle_seed(seed):
    with pytest.raises(ValueError, match="shuffle_seed must be a whole number"):
        make_batches(np.zeros((10, 2)), 2, shuffle_seed=seed)
    make_batches(np.zeros((10, 2)), 2, shuffle_seed=np.int64(3))
