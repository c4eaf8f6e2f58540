"""Memory-bounded variational inference for a DP mixture (Gomes, Welling & Perona 2008): data arrive once, in
epochs, and are kept only as clumps within a memory bound.

After each epoch of ``E`` items, two phases (Gomes et al. §3):

1. **Model building**: coordinate ascent on the *tied* bound of everything in memory, the clumps of earlier
   epochs and the new items as singlets (:mod:`pyro_memo.memo.clumps`), run by the one memoized driver with
   the memory as its single batch (lap 1 from the previous epoch's globals).
2. **Compression**: greedy top-down splitting chooses new clumps within the bound ``M``
   (:mod:`pyro_memo.memo.compression`); the items they summarise are purged, their statistics kept.

Where this differs from Gomes et al.: their model building proposes Ueda-style splits and merges; here
``moves=("birth", "merge")`` runs the project's birth and merge moves on the tied bound
(:mod:`pyro_memo.inference.moves.tied`), each accepted only when the exact tied bound rises, and without
moves the number of components stays ``K``; splits in compression are refined by hard assignments of whole
units to two child components and ranked by the exact change of the magnified free energy for hard
clusters (log marginal likelihoods) rather than by iterating soft restricted updates; memory is counted in
the numbers this implementation stores (a clump's count and full statistics).
"""

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..allocation import DPSticks
from ..data.batch_source import BatchSource
from ..engine import MemoizedDriver
from ..engine.moves import make_moves
from ..memo.clumps import Clumps, tied_local_step, tied_responsibilities
from ..memo.compression import Compressor
from ..summaries import Summary
from .dp_mixture_posterior import DPMixturePosterior
from .initialization import initial_responsibilities
from .moves.tied import TIED_MOVES


class MemorySource(BatchSource):
    """The memory (:class:`~pyro_memo.memo.clumps.Clumps`) as the one batch of a model-building fit."""

    num_batches = 1

    def __init__(self, clumps):
        self.clumps = clumps
        self.num_items = clumps.num_items

    def batch(self, b):
        return self.clumps


class TiedVB(MemoizedDriver):
    """The memoized driver whose local step is the tied local step of a batch of clumps and singlets."""

    def local_step(self, state, key, batch):
        return tied_local_step(self.local_globals(state), batch)


@dataclass
class MemoryBoundedResult:
    """What :meth:`MemoryBoundedVB.fit` returns.

    :ivar posterior: the globals after the last epoch's model building.
    :ivar summary: the tied summary of everything in memory then (the posterior is optimal for it).
    :ivar float elbo: the tied bound of everything in memory after the last epoch's model building.
    :ivar clumps: the memory after the last compression.
    :ivar list epochs: per epoch a dict: ``items`` seen, ``elbo`` (tied bound after model building),
        ``laps``, ``K`` (components), ``moves`` (proposed / accepted per move), ``move_gains`` (the exact tied
        bound before and after each accepted move), ``clumps``, ``singlets``, ``memory_used`` (stored numbers
        after compression), ``memory_bytes``, ``seconds``.
    """

    posterior: object
    summary: object
    elbo: float
    clumps: object
    epochs: list = field(default_factory=list)


class MemoryBoundedVB:
    """Memory-bounded VB for a DP mixture of ``family`` components (module docstring).

    :param family: a :class:`~pyro_memo.families.ConjugateFamily`.
    :param int K: number of components (the start when there are moves).
    :param int memory_bound: ``M``, the most numbers the clumps and singlets kept between epochs may take.
    :param int epoch: ``E``, items per epoch.
    :param float alpha: DP concentration.
    :param int lifetime: ``T``, the items expected over the system's lifetime, which sets the data
        magnification of compression (``T`` over the items seen so far); ``None``: no magnification.
    :param int laps: most coordinate-ascent laps of each model building; ``tol`` its relative stopping change.
    :param int refine: restricted update rounds of each split proposal in compression.
    :param int seed: seeds the initialisation, the split proposals and the moves.
    :param moves: model-building moves, names out of ``"birth"``, ``"merge"`` (a comma-separated string or a
        list; :data:`~pyro_memo.inference.moves.tied.TIED_MOVES`) or move objects; they persist across epochs.
    :param dict move_options: keyword arguments per move name (e.g. ``{"birth": {"max_K": 50}}``).
    """

    def __init__(self, family, K, memory_bound, epoch, alpha=1.0, lifetime=None, laps=100, tol=1e-8, refine=10,
                 seed=0, moves=(), move_options=None):
        if int(K) < 1 or int(epoch) < 1:
            raise ValueError(f"K and epoch must be positive integers; got K={K}, epoch={epoch}")
        self.family, self.K, self.epoch = family, int(K), int(epoch)
        self.memory_bound = int(memory_bound)
        self.sticks = DPSticks(alpha)
        self.alpha = float(alpha)
        self.lifetime = lifetime
        self.laps, self.tol, self.refine, self.seed = int(laps), float(tol), int(refine), int(seed)
        self.moves = make_moves(moves, TIED_MOVES, seed=self.seed, **(move_options or {}))

    def epochs(self, data):
        """``data`` as epochs of at most ``epoch`` items: an ``(N, D)`` array or tensor, a ``.npy`` path
        (memory-mapped, read one epoch at a time) or an iterable of ``(n, D)`` arrays taken as they come."""
        if isinstance(data, str):
            data = np.load(data, mmap_mode="r")
        if isinstance(data, (np.ndarray, torch.Tensor)):
            for lo in range(0, len(data), self.epoch):
                yield np.asarray(data[lo:lo + self.epoch]) if isinstance(data, np.ndarray) else data[lo:lo + self.epoch]
        else:
            yield from data

    def initial_posterior(self, x):
        """Components fitted to k-means++ responsibilities of the first epoch."""
        resp = initial_responsibilities(x, self.K, "kmeans++", self.seed)
        return DPMixturePosterior.from_summary(self.family, self.sticks, Summary.from_responsibilities(self.family, x,
                                                                                                         resp))

    def build(self, memory, posterior):
        """Model building: coordinate ascent on the tied bound of ``memory`` from ``posterior``."""
        driver = TiedVB(laps=self.laps, tol=self.tol, seed=self.seed, shuffle=False, moves=self.moves)
        return driver.fit(MemorySource(memory), posterior=posterior)

    def fit(self, data, callback=None):
        """Process ``data`` epoch by epoch (see :meth:`epochs`); ``callback(epoch_record)`` after each.

        :rtype: MemoryBoundedResult
        """
        memory, posterior, records, seen = None, None, [], 0
        for chunk in self.epochs(data):
            start = time.perf_counter()
            x = self.family.check_data(chunk)
            seen += len(x)
            fresh = Clumps.of_points(self.family, x)
            memory = fresh if memory is None else memory.cat(fresh)
            if posterior is None:
                posterior = self.initial_posterior(x)
            fit = self.build(memory, posterior)
            posterior, summary, elbo = fit.posterior, fit.summary, fit.elbo_trace[-1]
            memory = self.compress(memory, posterior, seen)
            record = {"epoch": len(records), "items": seen, "elbo": elbo, "laps": len(fit.elbo_trace),
                      "K": posterior.K, "moves": _move_counts(fit.state), "move_gains": list(fit.state.move_gains),
                      "clumps": memory.num_clumps, "singlets": memory.num_singlets,
                      "memory_used": memory.memory(), "memory_bytes": memory.memory() * memory.counts.element_size(),
                      "seconds": time.perf_counter() - start}
            records.append(record)
            if callback is not None:
                callback(record)
        if posterior is None:
            raise ValueError("no data: the stream held no epoch")
        return MemoryBoundedResult(posterior, summary, records[-1]["elbo"], memory, records)

    def compress(self, memory, posterior, seen):
        """``memory`` within the bound: unchanged when it fits, else the clumps of a
        :class:`~pyro_memo.memo.compression.Compressor` fed the units' tied responsibilities."""
        if memory.memory() <= self.memory_bound:
            return memory
        clump_resp, point_resp = tied_responsibilities(posterior, memory)
        magnify = 1.0 if self.lifetime is None else self.lifetime / seen
        compressor = Compressor(self.family, magnify, self.alpha, self.refine, self.seed + seen)
        return compressor.compress(memory, torch.cat([clump_resp, point_resp]), self.memory_bound)[0]


def _move_counts(state):
    """``{move: {"proposed": n, "accepted": m}}`` summed over one model building's laps."""
    counts = {}
    for lap in state.move_log:
        for name, c in lap.items():
            total = counts.setdefault(name, {"proposed": 0, "accepted": 0})
            total["proposed"] += c["proposed"]
            total["accepted"] += c["accepted"]
    return counts
