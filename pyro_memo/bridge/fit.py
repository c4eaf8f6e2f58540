"""Fit a recognised Pyro DP-mixture model with full-batch coordinate-ascent VB."""

from .guide import DPMixtureGuide


def fit_vb(model, *args, K=None, guide=None, max_iter=200, tol=1e-8, init="kmeans++", seed=0, **kwargs):
    """Recognise ``model``, run full-batch VB on its data and store the result in ``guide``.

    :param model: a DP-mixture Pyro model (see :mod:`pyro_memo.bridge.recognition`).
    :param args: the model's positional arguments (the data among them).
    :param int K: truncation level (default ``T - 1``).
    :param DPMixtureGuide guide: an existing guide to continue from, else a new one.
    :param int max_iter: iteration limit.
    :param float tol: relative ELBO tolerance.
    :param kwargs: the model's keyword arguments.
    :returns: a :class:`~pyro_memo.inference.FitResult` whose ``guide`` attribute holds
        the fitted guide (its parameters are in Pyro's param store).
    """
    guide = guide or DPMixtureGuide(model, K=K, init=init, seed=seed)
    guide.setup(*args, **kwargs)
    x = guide.spec.data(args, kwargs)
    result = guide.vb(max_iter=max_iter, tol=tol).fit(x, posterior=guide.posterior)
    guide.set_posterior(result.posterior)
    result.guide = guide
    return result


def fit_memoized(model, *args, batches=None, num_batches=10, K=None, guide=None, laps=50, tol=1e-8,
                 seed=0, shuffle=True, callback=None, **kwargs):
    """Recognise ``model`` and run memoized online VB on its data (paper 000 §3).

    :param model: a DP-mixture Pyro model (see :mod:`pyro_memo.bridge.recognition`).
    :param args: the model's positional arguments (the data among them).
    :param batches: optional list of index tensors, the fixed batches; by default the data
        are permuted once (``seed``) and cut into ``num_batches`` slices.
    :param int num_batches: ``B`` when ``batches`` is not given.
    :param int K: truncation level (default ``T - 1``).
    :param DPMixtureGuide guide: an existing guide to continue from, else a new one.
    :param int laps: maximum passes through the data.
    :param float tol: relative ELBO tolerance per lap.
    :param int seed: seed of the batch order (and of the permutation).
    :param bool shuffle: a new random batch order every lap.
    :param callback: ``callback(lap, elbo, posterior)`` after every lap.
    :param kwargs: the model's keyword arguments.
    :returns: a :class:`~pyro_memo.inference.FitResult`; ``result.guide`` holds the fitted
        guide, whose memo holds the per-batch summaries.
    """
    from ..data_sources import ArrayBatches, IndexBatches
    from ..inference import MemoizedVB, SummaryCache
    from .memoized_elbo import batch_key

    guide = guide or DPMixtureGuide(model, K=K, seed=seed)
    guide.setup(*args, **kwargs)
    x = guide.spec.data(args, kwargs)
    if batches is not None:
        source = IndexBatches(x, batches)
        index_sets = source.index_sets
    else:
        source = ArrayBatches(x, num_batches, shuffle_seed=seed)
        index_sets = [source.indices(b) for b in range(source.num_batches)]
    driver = MemoizedVB(guide.spec.family, guide.K, guide.spec.alpha, guide.sticks.truncation, laps=laps,
                        tol=tol, seed=seed, shuffle=shuffle)
    result = driver.fit(source, posterior=guide.posterior, callback=callback)
    guide.set_posterior(result.posterior)
    guide.memo = SummaryCache()
    for b, summary in result.state.cache.batches.items():
        guide.memo.replace(batch_key(index_sets[b]), summary)
    result.guide = guide
    return result
