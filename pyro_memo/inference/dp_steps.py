"""The DP mixture's steps for the engine's drivers: batches, batch reading and the initial globals,
shared by memoized, full-batch and stochastic inference."""

import weakref
import zlib

import torch

from ..allocation import DPSticks
from ..checks import as_positive_int
from ..data_sources import make_batches
from ..families import check_sparse_candidates, check_sparse_L
from .dp_mixture_posterior import DPMixturePosterior
from .initialization import check_batch, initial_summary

#: laps of full searches before a fit with ``sparse_candidates`` searches among candidates: the memo is
#: built, then refreshed once under its own globals, whose components move most in these laps
#: (``benchmarks/bench_sparse.py --candidates``)
CANDIDATE_WARMUP_LAPS = 2


class DPMixtureSteps:
    """Mixin of a driver (:class:`~pyro_memo.engine.MemoizedDriver`,
    :class:`~pyro_memo.engine.StochasticDriver`) for a DP mixture of ``family`` components."""

    #: keep each item's ``sparse_L`` largest responsibilities in the memoized local step (``None``: all)
    sparse_L = None
    #: search each item's sparse responsibilities among its candidates only, with this many random
    #: components per group (``None``: among all components)
    sparse_candidates = None
    #: the local step's precision (:class:`~pyro_memo.engine.MemoizedDriver` sets it; ``None``: the fit's own)
    local_dtype = None

    def set_sparse_L(self, sparse_L, sparse_candidates=None):
        """Validate and keep ``sparse_L`` and ``sparse_candidates`` (see
        :meth:`DPMixturePosterior.local_step` and :meth:`DPMixturePosterior.candidate_local_step`)."""
        self.sparse_L = check_sparse_L(sparse_L)
        self.sparse_candidates = check_sparse_candidates(sparse_candidates, self.sparse_L)

    def fit_dtype(self):
        """The family's precision."""
        return self.family.dtype

    def resume_mismatch(self, posterior, source):
        """A DP mixture goes on from a DP mixture of this fit's family and dimension."""
        if not isinstance(posterior, DPMixturePosterior):
            return f"it holds a {type(posterior).__name__}, not a DP mixture's posterior"
        theirs, mine = posterior.family, self.family
        if theirs.name != mine.name or theirs.dim != mine.dim:
            return f"its components are {theirs.name} of dimension {theirs.dim}, this fit's {mine.name} of {mine.dim}"
        return None

    @property
    def local_step_reads_memo(self):
        """A candidate search compares its result with the batch's cached summary."""
        return self.sparse_candidates is not None

    def local_step(self, state, key, batch):
        """The posterior's local step of ``batch``, sparse when :attr:`sparse_L` is set, its products with
        the data in ``local_dtype`` when set (:meth:`DPMixturePosterior.local_step`: a DP mixture's
        mixed precision keeps its globals' terms and statistics in float64).

        With :attr:`sparse_candidates`, a batch whose last support is kept (:meth:`keep_local`) is searched
        among its candidates only (:meth:`DPMixturePosterior.candidate_local_step`). Its result is at least
        as good for the batch as its cached summary while the components keep their numbering; a move
        that renumbered them (a merge, a delete, a reordering) can make it worse, and then the step
        searches all components instead, so no visit lowers the objective."""
        post = state.posterior
        support = self.candidate_support(state, key, batch, post.K)
        if support is not None:
            generator = torch.Generator().manual_seed(
                (self.seed * 1_000_003 + zlib.crc32(repr(key).encode()) + int(support[:, 0].sum())) % 2**62)
            resp, summary = post.candidate_local_step(
                batch, support, self.sparse_L, self.local_dtype, self.sparse_candidates, generator)
            old = state.cache.batches.get(key)
            if old is None or old.K != post.K or not post.elbo_gain(summary, old) < 0:
                return self.carry(resp), summary
        if self.sparse_candidates is not None and self.sparse_L < post.K:
            resp, summary = post.sparse_local_step(batch, self.sparse_L, self.local_dtype)
            return self.carry(resp), summary
        return post.local_step(batch, self.sparse_L, local_dtype=self.local_dtype)

    def carry(self, resp):
        """The dense responsibilities of the sparse ``resp`` of a step, its supports kept beside them for
        :meth:`keep_local` (which then needs no top-``L`` over the dense matrix)."""
        local = resp.dense()
        self._carried = (local, resp.indices, resp.values)
        return local

    def candidate_support(self, state, key, batch, K):
        """Batch ``key``'s last support (its :meth:`keep_local`) when a candidate search can start from it:
        ``sparse_candidates`` set, :data:`CANDIDATE_WARMUP_LAPS` laps done, one row of ``sparse_L``
        components below ``K`` per item; else ``None``."""
        if self.sparse_candidates is None or self.sparse_L >= K:
            return None
        laps_done = getattr(self, "_laps_done", None)  # set on the copies sent to workers (for_workers)
        if (state.laps_done if laps_done is None else laps_done) < CANDIDATE_WARMUP_LAPS:
            return None
        support = state.warm_starts.get(key)
        if support is None or tuple(support.shape) != (len(batch), self.sparse_L) or int(support.max()) >= K:
            return None
        return support

    def for_workers(self, state):
        """The driver's copy for batch steps elsewhere (:meth:`~pyro_memo.engine.MemoizedDriver.for_workers`),
        told how many laps are done: a worker's one-batch state does not know."""
        other, posterior = super().for_workers(state)
        other._laps_done = state.laps_done
        return other, posterior

    def keep_local(self, local):
        """With :attr:`sparse_candidates`, each item's support ``(N, sparse_L)``, most probable first, its
        entries of zero responsibility replaced by the first (they need not be candidates, and which of
        the zeros a top-``L`` picks depends on the device): the next visit's candidates (:meth:`local_step`);
        else nothing."""
        if self.sparse_candidates is None or local is None or self.sparse_L >= local.shape[1]:
            return None
        carried, self._carried = getattr(self, "_carried", None), None
        if carried is not None and carried[0] is local:  # the step's own supports (carry)
            indices, values = carried[1], carried[2]
        else:  # the responsibilities were converted since (local_dtype)
            values, indices = torch.topk(local, self.sparse_L, dim=1)
        return torch.where(values > 0, indices, indices[:, :1])

    def set_model(self, family, K, alpha=1.0, truncation="nested", init="kmeans++", init_items=10_000,
                  alpha_prior=None):
        """Keep the model and the initialisation settings (see the drivers' parameters)."""
        self.family = family
        self.sticks = DPSticks(alpha, truncation, alpha_prior)
        self.K = as_positive_int(K, "K")
        self.init = init
        self.init_items = as_positive_int(init_items, "init_items")

    def make_source(self, data, num_batches):
        """Fixed batches of anything :func:`~pyro_memo.make_batches` accepts (a fit's start:
        :meth:`read_batch` scans every batch's values again)."""
        self._scanned = weakref.WeakKeyDictionary()
        return make_batches(data, num_batches)

    def read_batch(self, source, b):
        """Batch ``b``, validated by the family; its values are scanned (finite, in the support) on its
        first read from ``source`` only: a batch source holds the same items in batch ``b`` on every
        lap, and the scan cost 4% of a toy lap (1,000 items, D = 25)."""
        # per batch source (held weakly), the batches scanned in this fit (absent in copies: __getstate__)
        scanned = self.__dict__.setdefault("_scanned", weakref.WeakKeyDictionary()).setdefault(source, set())
        x = check_batch(self.family, source, b, values_checked=b in scanned, local_dtype=self.local_dtype)
        scanned.add(b)
        return x

    def __getstate__(self):
        """Copies and pickles (the readers sent to Dask workers) leave the scanned batches and the last
        step's carried supports behind."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_scanned", "_carried")}

    def initial_summary(self, source):
        """``(summary, items)``: initial responsibilities' summary on the items
        :func:`~pyro_memo.inference.initialization.initial_items` picks (at most ``init_items``
        of them, chosen by ``seed`` whatever the batching)."""
        return initial_summary(self.family, source, self.K, self.init, self.init_items, self.seed,
                               self.local_dtype)

    def initial_posterior(self, data, order=None):
        """Globals fitted to the initial responsibilities of ``data`` (a batch source or an
        ``(N, D)`` array). They depend on the data and ``seed`` only, not on the batches or
        ``order``: full-batch, memoized and stochastic VB with one seed start from one place."""
        source = make_batches(data)
        return DPMixturePosterior.from_summary(self.family, self.sticks, self.initial_summary(source)[0])
