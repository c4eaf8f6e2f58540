"""The DP mixture's steps for the engine's drivers: batches, batch reading and the initial globals,
shared by memoized, full-batch and stochastic inference."""

import weakref

import numpy as np
import torch

from ..allocation import DPSticks
from ..data_sources import make_batches
from ..families import check_sparse_L
from .dp_mixture_posterior import DPMixturePosterior
from .initialization import initial_summary


class DPMixtureSteps:
    """Mixin of a driver (:class:`~pyro_memo.engine.MemoizedDriver`,
    :class:`~pyro_memo.engine.StochasticDriver`) for a DP mixture of ``family`` components."""

    #: keep each item's ``sparse_L`` largest responsibilities in the memoized local step (``None``: all)
    sparse_L = None

    def set_sparse_L(self, sparse_L):
        """Validate and keep ``sparse_L`` (see :meth:`DPMixturePosterior.local_step`)."""
        self.sparse_L = check_sparse_L(sparse_L)

    def local_step(self, state, key, batch):
        """The posterior's local step of ``batch``, sparse when :attr:`sparse_L` is set, its products with
        the data in ``local_dtype`` when set (:meth:`DPMixturePosterior.local_step`: a DP mixture's
        mixed precision keeps its globals' terms and statistics in float64)."""
        return state.posterior.local_step(batch, self.sparse_L, local_dtype=self.local_dtype)

    def set_model(self, family, K, alpha=1.0, truncation="nested", init="kmeans++", init_items=10_000,
                  alpha_prior=None):
        """Keep the model and the initialisation settings (see the drivers' parameters)."""
        if int(K) < 1:
            raise ValueError(f"K must be a positive integer; got {K}")
        self.family = family
        self.sticks = DPSticks(alpha, truncation, alpha_prior)
        self.K = int(K)
        self.init = init
        self.init_items = int(init_items)

    def make_source(self, data, num_batches):
        """Fixed batches of anything :func:`~pyro_memo.data_sources.make_batches` accepts (a fit's start:
        :meth:`read_batch` scans every batch's values again)."""
        self._scanned = weakref.WeakKeyDictionary()
        return make_batches(data, num_batches)

    def read_batch(self, source, b):
        """Batch ``b``, validated by the family; its values are scanned (finite, in the support) on its
        first read from ``source`` only: a batch source holds the same items in batch ``b`` on every
        lap, and the scan cost 4% of a toy lap (1,000 items, D = 25)."""
        x = source.batch(b)
        # per batch source (held weakly), the batches scanned in this fit (absent in copies: __getstate__)
        scanned = self.__dict__.setdefault("_scanned", weakref.WeakKeyDictionary()).setdefault(source, set())
        x = self.family.check_data(x if torch.is_tensor(x) else np.asarray(x), values_checked=b in scanned)
        scanned.add(b)
        return x

    def __getstate__(self):
        """Copies and pickles (the readers sent to Dask workers) leave the scanned batches behind."""
        return {k: v for k, v in self.__dict__.items() if k != "_scanned"}

    def initial_summary(self, source):
        """``(summary, items)``: initial responsibilities' summary on the items
        :func:`~pyro_memo.inference.initialization.initial_items` picks (at most ``init_items``
        of them, chosen by ``seed`` whatever the batching)."""
        return initial_summary(self.family, source, self.K, self.init, self.init_items, self.seed)

    def initial_posterior(self, data, order=None):
        """Globals fitted to the initial responsibilities of ``data`` (a batch source or an
        ``(N, D)`` array). They depend on the data and ``seed`` only, not on the batches or
        ``order``: full-batch, memoized and stochastic VB with one seed start from one place."""
        source = make_batches(data)
        return DPMixturePosterior.from_summary(self.family, self.sticks, self.initial_summary(source)[0])
