"""Fitting a DP mixture of zero-mean Gaussians to image patches by memoized VB (Hughes & Sudderth 2013,
§4.4): the patch prior of :class:`~pyro_memo.denoising.GaussianMixturePrior.from_posterior`."""

import os

import numpy as np

from ..families import ZeroMeanGaussian
from ..inference import MemoizedVB

#: the default prior of the family is scaled to at most this many leading patches
PRIOR_ITEMS = 100_000
#: the moves of a fit from K = 1
MOVES = "birth,merge,delete"


def patch_family(data, prior_items=PRIOR_ITEMS, prior_scale=1.0, device=None):
    """The zero-mean Gaussian family with its default Wishart prior (``nu`` = D + 2, ``B`` the
    patches' second-moment matrix, times ``prior_scale``) scaled to the first ``prior_items``
    patches of ``data`` (an ``(N, D)`` array or a ``.npy`` path, of which only those rows are read)."""
    if isinstance(data, (str, os.PathLike)):
        data = np.load(data, mmap_mode="r")
    head = np.array(data[:prior_items], dtype=np.float64)
    return ZeroMeanGaussian.from_data(head, device=device).with_prior(prior_scale)


def fit_patch_mixture(data, K=1, laps=10, batches=10, moves=MOVES, seed=0, prior_scale=1.0, device=None,
                      tol=1e-8, callback=None, **options):
    """Memoized VB for a DP mixture of zero-mean Gaussians on the patches ``data``: an ``(N, D)``
    array in memory or a ``.npy`` file read from disk batch by batch
    (:class:`~pyro_memo.data.FileBatches`), over ``batches`` fixed batches for at most ``laps`` laps,
    from ``K`` components, with birth / merge / delete ``moves`` (``""`` for a fixed-K fit).
    ``device`` holds the family, the posterior and every batch (``"cuda"`` for a GPU). Other keyword
    ``options`` go to :class:`~pyro_memo.MemoizedVB` (``local_dtype="float32"``, ``sparse_L``, ``threads``).

    :returns: the :class:`~pyro_memo.FitResult` (``result.posterior``, ``result.summary``).
    """
    family = patch_family(data, prior_scale=prior_scale, device=device)
    memo = MemoizedVB(family, K, laps=laps, tol=tol, moves=moves or (), seed=seed, **options)
    return memo.fit(data, batches, callback=callback)
