"""Memory-bounded variational inference for a DP mixture and for an HDP over any family (Gomes, Welling & Perona
2008): data arrive once, in epochs, and are kept only as clumps within a memory bound.

After each epoch of ``E`` items, two phases (Gomes et al. §3):

1. **Model building**: coordinate ascent on the *tied* bound of everything in memory, the clumps of earlier
   epochs and the new items as singlets (:mod:`pyro_memo.memo.clumps`), run by the one memoized driver with
   the memory as its single batch (lap 1 from the previous epoch's globals).
2. **Compression**: greedy top-down splitting chooses new clumps within the bound ``M``
   (:mod:`pyro_memo.memo.compression`); the items they summarise are purged, their statistics kept.

:class:`MemoryBoundedVB` runs the loop once; :class:`MemoryBoundedHDP` fills in the HDP's steps: epochs of ``E``
groups (images, documents), the memory a :class:`~pyro_memo.memo.group_clumps.GroupedClumps` whose tied local
step also ties document groups' :math:`q(\\pi_s)`, and before compression the most similar document groups
merged (eq. 27) until at most ``max_groups`` remain.

Where this differs from Gomes et al.: their model building proposes Ueda-style splits and merges; here
``moves=("birth", "merge")`` runs the project's birth and merge moves on the tied bound
(:mod:`pyro_memo.inference.moves.tied` for the DP mixture, :mod:`pyro_memo.inference.moves.tied_hdp` for the HDP),
each accepted only when the exact tied bound rises, and without
moves the number of components stays ``K``; splits in compression are refined by hard assignments of whole
units to two child components and ranked by the exact change of the magnified free energy for hard
clusters (log marginal likelihoods) rather than by iterating soft restricted updates; for the HDP that change
includes eq. 30's document terms with each cluster's :math:`\\alpha_k` its share of :math:`\\alpha E[\\beta]`
rather than a free parameter under a Gamma prior (:mod:`pyro_memo.memo.document_terms`); memory is counted in
the numbers this implementation stores (a clump's count, full statistics and, for the HDP, its ``|S|`` group
counts).
"""

import itertools
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..allocation import DPSticks
from ..checks import as_non_negative_float, as_positive_float, as_positive_int, as_seed
from ..data.batch_source import BatchSource
from ..data.chunked import ZarrBatches, is_dask_array, is_zarr_array
from ..engine import MemoizedDriver
from ..engine.moves import make_moves, move_states, restart_moves
from ..engine.threads import ThreadPolicy
from ..families.base import NonFiniteDataError
from ..memo.clumps import Clumps
from ..memo.compression import Compressor
from ..memo.group_clumps import GroupedClumps
from ..posterior.hdp import HDPMixturePosterior
from ..summaries import Summary
from .dp_mixture_posterior import DPMixturePosterior
from .initialization import initial_responsibilities
from .moves.tied import TIED_MOVES
from .moves.tied_hdp import TIED_HDP_MOVES


class MemorySource(BatchSource):
    """The memory (:class:`~pyro_memo.memo.clumps.Clumps`) as the one batch of a model-building fit."""

    num_batches = 1

    def __init__(self, clumps):
        self.clumps = clumps
        self.num_items = clumps.num_items

    def batch(self, b):
        return self.clumps


class TiedVB(MemoizedDriver):
    """The memoized driver whose local step is the tied local step of a batch of clumps and singlets
    (:meth:`Clumps.tied_local_step <pyro_memo.memo.clumps.Clumps.tied_local_step>`, or a
    :class:`~pyro_memo.memo.group_clumps.GroupedClumps`' for the HDP). The HDP's step restarts on every
    lap, as :class:`~pyro_memo.topics.MemoizedHDP`'s does: started from the last lap's document-group counts it
    settles in worse optima (measured: -1546.4 against batch VB's -1536.5 on the test of a bound larger than
    the data) and takes as many sweeps, since the globals move between laps.

    :ivar last_local: the local factors of the last local step: with the globals of the last update they
        are the state whose bound the fit reports, and compression partitions the memory by them.
    """

    def __init__(self, local_options=None, thread_policy=None, **options):
        super().__init__(**options)
        self.local_options = dict(local_options or {})
        self.last_local = None
        if thread_policy is not None:
            self.thread_policy = thread_policy  # the stream's, measured across epochs

    def local_step(self, state, key, batch):
        self.last_local = None  # freed before the next step forms its responsibilities
        local, summary = batch.tied_local_step(self.local_globals(state), **self.local_options)
        self.last_local = local
        return local, summary


@dataclass
class MemoryBoundedResult:
    """What :meth:`MemoryBoundedVB.fit <pyro_memo.MemoryBoundedVB.fit>` returns.

    :ivar posterior: the globals after the last epoch's model building.
    :ivar summary: the tied summary of everything in memory then (the posterior is optimal for it).
    :ivar float elbo: the tied bound of everything in memory after the last epoch's model building.
    :ivar clumps: the memory after the last compression.
    :ivar list epochs: per epoch a dict: ``items`` seen, ``elbo`` (tied bound after model building),
        ``laps``, ``K`` (components), ``used`` (components holding at least 0.1% of the items in memory),
        ``moves`` (proposed / accepted per move), ``move_gains`` (the exact tied bound before and after each
        accepted move), ``units`` (clumps and singlets model building fitted), ``memory_building`` (their stored
        numbers, this epoch's items included) and ``items_building`` (the items they summarise), ``clumps``,
        ``singlets``,
        ``memory_used`` (stored numbers after compression), ``memory_bytes``, ``seconds``; for the HDP also
        ``groups`` (document groups) and ``documents`` (groups seen), and ``groups_building``, ``documents_building``
        (the same during model building).
    """

    posterior: object
    summary: object
    elbo: float
    clumps: object
    epochs: list = field(default_factory=list)


def _epochs_of(stream):
    """The epochs of ``stream`` (an iterable of ``(n, D)`` arrays) as they come, each checked to be 2-D."""
    try:
        chunks = iter(stream)
    except TypeError:
        raise TypeError(f"fit's data must be an (N, D) array or tensor, a .npy path or an iterable of (n, D) arrays "
                        f"(one per epoch); got {type(stream).__name__}") from None
    for e, chunk in enumerate(chunks):
        if np.ndim(chunk) != 2:
            raise ValueError(f"fit's data: epoch {e} of the iterable must be a 2-D (n, D) array of items; got "
                             f"shape {tuple(np.shape(chunk))} (pass a single array of rows as an (N, D) array)")
        yield chunk


def _open_stream(path):
    """The array of a ``.npy`` file (memory-mapped) or a ``.zarr`` directory at ``path``, read one epoch at a time.

    :raises ValueError: naming ``path`` for another kind of file (a ``.zarr`` directory was a raw
        ``IsADirectoryError`` of ``np.load``).
    """
    if path.rstrip("/").endswith(".zarr"):
        return ZarrBatches(path.rstrip("/")).array
    if not path.endswith(".npy"):
        raise ValueError(f"{path}: memory-bounded VB streams a .npy file or a .zarr array from disk; load other "
                         f"files and pass the array, or an iterable of (n, D) arrays")
    return np.load(path, mmap_mode="r")


class MemoryBoundedVB:
    """Memory-bounded VB for a DP mixture of ``family`` components (module docstring).

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
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
    :param bool reuse_local: compression partitions the units by model building's last local factors instead of
        running a tied local step under the final globals (one local step fewer per epoch, but a lower tied
        bound: after 20 epochs of the Fashion-MNIST stream -4.2991 against -4.2727 per item, at 22.8 against
        24.3 s per epoch, ``benchmarks/results/bench_memory_bounded_reuse_local.txt``); off by default.
    :param int threads: the most intra-op threads (``None``: torch's setting). One
        :class:`~pyro_memo.engine.threads.ThreadPolicy` serves the whole stream: it times model building's
        local steps across epochs with one thread and with ``threads`` and keeps the faster, and compression
        runs with its choice (each model building is too short to measure on its own).
    """

    #: the model-building moves by name
    move_registry = TIED_MOVES
    #: what a clump stores beyond its count and statistics (``check_room``'s message)
    clump_extra = ""

    def __init__(self, family, K, memory_bound, epoch, alpha=1.0, lifetime=None, laps=100, tol=1e-8, refine=10,
                 seed=0, moves=(), move_options=None, reuse_local=False, threads=None):
        self.family, self.K, self.epoch = family, as_positive_int(K, "K"), as_positive_int(epoch, "epoch")
        self.memory_bound = as_positive_int(memory_bound, "memory_bound")
        self.alpha = as_positive_float(alpha, "alpha")  # inf passed DPSticks and failed in a Cholesky, as NaN
        self.sticks = DPSticks(self.alpha)
        self.lifetime = None if lifetime is None else as_positive_float(lifetime, "lifetime")
        self.laps, self.refine = as_positive_int(laps, "laps"), as_positive_int(refine, "refine")
        self.tol, self.seed = as_non_negative_float(tol, "tol"), as_seed(seed)
        self.moves = make_moves(moves, self.move_registry, seed=self.seed, **(move_options or {}))
        #: each move's state as made: every fit (stream) starts its moves from it
        self.initial_move_states = move_states(self.moves)
        self.local_options = {}
        self.thread_policy = ThreadPolicy(threads)
        self.reuse_local = bool(reuse_local)

    def epochs(self, data):
        """``data`` as epochs of at most ``epoch`` items: an ``(N, D)`` array or tensor, a zarr or dask array
        or the path of a ``.npy`` file (memory-mapped) or a ``.zarr`` array (each read one epoch at a time), or an
        iterable of ``(n, D)`` arrays taken as they come; a list of rows is the array (as
        :func:`~pyro_memo.make_batches` reads it).

        :raises TypeError: for ``None``, a number or anything else that is none of these.
        :raises ValueError: for an epoch of the iterable that is not a 2-D array of items, a path to another
            kind of file.
        """
        if isinstance(data, (str, os.PathLike)):
            data = _open_stream(os.fspath(data))
        if isinstance(data, (list, tuple)) and data and np.ndim(data[0]) < 2:  # rows, not epochs
            data = np.asarray(data)
        if isinstance(data, torch.Tensor):
            yield from (data[lo:lo + self.epoch] for lo in range(0, len(data), self.epoch))
        elif isinstance(data, np.ndarray) or is_zarr_array(data) or is_dask_array(data):
            yield from (np.asarray(data[lo:lo + self.epoch]) for lo in range(0, int(data.shape[0]), self.epoch))
        else:
            yield from _epochs_of(data)

    def initial_posterior(self, x):
        """Components fitted to k-means++ responsibilities of the first epoch."""
        resp = initial_responsibilities(x, self.K, "kmeans++", self.seed)
        return DPMixturePosterior.from_summary(self.family, self.sticks, Summary.from_responsibilities(self.family, x,
                                                                                                         resp))

    def build(self, memory, posterior):
        """Model building: coordinate ascent on the tied bound of ``memory`` from ``posterior``. Returns the
        fit and, with ``reuse_local``, the :meth:`readout` of its last local step's factors (else, or when a move
        changed the components after it, ``None``: compression runs its own local step)."""
        driver = TiedVB(laps=self.laps, tol=self.tol, seed=self.seed, shuffle=False, moves=self.moves,
                        local_options=self.local_options, thread_policy=self.thread_policy)
        fit = driver.fit(MemorySource(memory), posterior=posterior)
        local = driver.last_local
        if not self.reuse_local or local is None or local[1].shape[1] != fit.posterior.K:
            return fit, None
        return fit, self.readout(local)

    def new_memory(self, chunk, number=0, first=0):
        """One epoch's items as singlets: ``(memory, items)``. An error about its data names the epoch (``number``,
        counted from 0 as the records count them) and its rows of the stream (from ``first``), not the rows of the
        epoch alone."""
        where = f"epoch {number} (rows {first} to {first + len(chunk) - 1} of the stream)" if len(chunk) else \
            f"epoch {number} (no rows)"
        try:
            x = self.family.check_data(chunk)
        except NonFiniteDataError as err:
            raise err.within(where, first) from None
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        return Clumps.of_points(self.family, x), len(x)

    def fit(self, data, callback=None):
        """Process ``data`` epoch by epoch (see :meth:`epochs`); ``callback(epoch_record)`` after each
        (returning ``True`` stops the fit after that epoch). The moves carry their state from epoch to epoch,
        and every fit starts them as they were made.

        :rtype: MemoryBoundedResult
        """
        restart_moves(self.moves, self.initial_move_states)
        with self.thread_policy:
            return self._fit(data, callback)

    def _fit(self, data, callback):
        memory, posterior, records, seen, first = None, None, [], 0, 0
        for number, chunk in enumerate(self.epochs(data)):
            start = time.perf_counter()
            fresh, items = self.new_memory(chunk, number, first)
            seen, first = seen + items, first + len(chunk)
            memory = fresh if memory is None else memory.cat(fresh)
            self.check_room(memory, number)
            if posterior is None:
                posterior = self.initial_posterior(fresh.points)
            fit, readout = self.build(memory, posterior)
            posterior, summary, elbo = fit.posterior, fit.summary, fit.elbo_trace[-1]
            built = {"units": len(memory), "memory_building": memory.memory(), "items_building": memory.num_items,
                     "used": int((summary.counts >= 1e-3 * summary.counts.sum()).sum()),
                     **{f"{k}_building": v for k, v in self.memory_record(memory).items()}}
            memory = self.compress(memory, posterior, seen, readout)
            record = {"epoch": len(records), "items": seen, "elbo": elbo, "laps": len(fit.elbo_trace), **built,
                      "K": posterior.K, "moves": _move_counts(fit.state), "move_gains": list(fit.state.move_gains),
                      "clumps": memory.num_clumps, "singlets": memory.num_singlets, **self.memory_record(memory),
                      "memory_used": memory.memory(), "memory_bytes": memory.memory() * memory.counts.element_size(),
                      "seconds": time.perf_counter() - start}
            records.append(record)
            if callback is not None and callback(record) is True:
                break
        if posterior is None:
            raise ValueError("no data: the stream held no epoch")
        return MemoryBoundedResult(posterior, summary, records[-1]["elbo"], memory, records)

    def memory_record(self, memory):
        """A model's extra fields of an epoch's record (none for the DP mixture)."""
        return {}

    def room_needed(self, memory):
        """``(numbers, clump)``: the numbers ``memory`` takes when compression starts clumping it and the numbers
        one clump of it takes (its count and statistics, :meth:`~pyro_memo.memo.clumps.Clumps.clump_cost`)."""
        return memory.memory(), memory.clump_cost()

    def check_room(self, memory, number):
        """Raise :class:`ValueError` naming ``memory_bound`` and the numbers needed when ``memory`` (epoch
        ``number``'s, before its model building) exceeds the bound and the bound cannot hold even one clump: the
        compression after model building would fail so, the epoch's fit lost."""
        numbers, clump = self.room_needed(memory)
        if numbers > self.memory_bound and clump > self.memory_bound:
            raise ValueError(f"memory_bound {self.memory_bound} cannot hold even one clump: epoch {number}'s memory "
                             f"takes {numbers} numbers and one clump {clump} (its count and statistics"
                             f"{self.clump_extra}); raise memory_bound to at least {clump}, well above it for "
                             "clumps that summarise the data")

    def readout(self, local):
        """What compression reads of tied local factors: each unit's most responsible component
        (``owners()``). With ``reuse_local`` model building's last local factors serve (with the last
        update's globals they are the state whose bound the epoch reports), and compression runs no local step
        of its own."""
        return owners(local)

    def local_readout(self, memory, posterior):
        """The :meth:`readout` of a tied local step of ``memory`` under ``posterior`` (no summary formed)."""
        return self.readout(memory.tied_local_step(posterior, summarize=False, **self.local_options)[0])

    def compress(self, memory, posterior, seen, readout=None):
        """``memory`` within the bound: unchanged when it fits, else the clumps of a
        :class:`~pyro_memo.memo.compression.Compressor` that partitions the units first by their most
        responsible components (``readout``, :meth:`readout` of model building's last local factors; a tied
        local step under ``posterior`` finds them when ``None``)."""
        if memory.memory() <= self.memory_bound:
            return memory
        if readout is None:
            readout = self.local_readout(memory, posterior)
        return self.clump(memory, readout, seen, posterior)

    def partition_prior(self, posterior):
        """``(concentration, prior_mass)`` of compression's partition prior: the DP's ``alpha`` in the CRP term
        of a split, and no document terms."""
        return self.alpha, None

    def clump(self, memory, owner, seen, posterior):
        """The :class:`~pyro_memo.memo.compression.Compressor`'s clumps of ``memory`` within the bound, its units
        hard-partitioned first by ``owner``, each unit's most responsible component (``owners()``), splits
        ranked with the partition prior of :meth:`partition_prior` under ``posterior``."""
        magnify = 1.0 if self.lifetime is None else self.lifetime / seen
        concentration, prior_mass = self.partition_prior(posterior)
        compressor = Compressor(self.family, magnify, concentration, self.refine, self.seed + seen)
        return compressor.compress(memory, owner, self.memory_bound, prior_mass)[0]


class MemoryBoundedHDP(MemoryBoundedVB):
    """Memory-bounded VB for an HDP mixture of ``family`` components over groups of items (module docstring;
    Gomes, Welling & Perona 2008, §3): epochs of ``epoch`` groups, seen once; clumps of items across groups
    and document groups of groups sharing one :math:`q(\\pi_s)`.

    :param family: a :class:`~pyro_memo.ConjugateFamily` of the items (e.g. pixel features).
    :param int K: number of components (top-level truncation).
    :param int memory_bound: ``M``, the most numbers clumps and singlets may take between epochs (eq. 26, each
        clump paying one number per document group).
    :param int epoch: ``E``, groups per epoch.
    :param float alpha: group-level concentration; ``gamma``: top-level concentration.
    :param int max_groups: the most document groups kept after each epoch; ``None``: every group keeps its
        own :math:`q(\\pi)`.
    :param int lifetime: ``T_pts``, the items expected over the stream's lifetime (compression's data
        magnification); ``None``: none.
    :param laps: as :class:`MemoryBoundedVB`.
    :param tol: as :class:`MemoryBoundedVB` (1e-6 by default, as :class:`~pyro_memo.topics.MemoizedHDP`'s).
    :param refine: as :class:`MemoryBoundedVB`.
    :param seed: as :class:`MemoryBoundedVB`.
    :param reuse_local: as :class:`MemoryBoundedVB`.
    :param threads: as :class:`MemoryBoundedVB`.
    :param moves: model-building moves, names out of ``"birth"``, ``"merge"`` (a comma-separated string or a list;
        :data:`~pyro_memo.inference.moves.tied_hdp.TIED_HDP_MOVES`) or move objects; each candidate gets its own
        tied local steps and is kept only when the exact tied bound rises (:mod:`pyro_memo.inference.moves.tied_hdp`).
    :param dict move_options: keyword arguments per move name (e.g. ``{"birth": {"max_K": 50}}``).
    :param int local_iters: most sweeps of each tied local step; ``local_tol`` its stopping change of the
        document groups' counts (mean absolute, per entry; :class:`~pyro_memo.topics.MemoizedHDP`'s default).
    :param str split_prior: the partition prior by which compression ranks its splits: ``"documents"`` (default),
        eq. 30's document terms (:mod:`pyro_memo.memo.document_terms`); ``"crp"``, a Chinese-restaurant term with
        ``gamma`` that ignores the groups (this module's ranking before the document terms; it ranks a split
        along the document groups no cheaper than one across them).
    """

    move_registry = TIED_HDP_MOVES
    clump_extra = ", and one count per document group kept"

    def __init__(self, family, K, memory_bound, epoch, alpha=1.0, gamma=1.0, max_groups=None, lifetime=None,
                 laps=100, tol=1e-6, refine=10, seed=0, moves=(), move_options=None, local_iters=100, local_tol=1e-3,
                 reuse_local=False, threads=None, split_prior="documents"):
        super().__init__(family, K, memory_bound, epoch, alpha=alpha, lifetime=lifetime, laps=laps, tol=tol,
                         refine=refine, seed=seed, moves=moves, move_options=move_options, reuse_local=reuse_local,
                         threads=threads)
        self.gamma = as_positive_float(gamma, "gamma")
        self.max_groups = None if max_groups is None else as_positive_int(max_groups, "max_groups")
        self.local_options = {"max_iter": as_positive_int(local_iters, "local_iters"),
                              "tol": as_non_negative_float(local_tol, "local_tol")}
        if split_prior not in ("documents", "crp"):
            raise ValueError(f"split_prior must be 'documents' or 'crp'; got {split_prior!r}")
        self.split_prior_kind = split_prior

    def epochs(self, data):
        """``data``, an iterable of groups (each an ``(n_d, D)`` array or tensor), as lists of ``epoch`` groups.

        :raises TypeError: for ``None``, a number or anything else not iterable.
        """
        try:
            groups = iter(data)
        except TypeError:
            raise TypeError(f"fit's data must be an iterable of groups, each an (n_d, D) array or tensor; got "
                            f"{type(data).__name__}") from None
        while True:
            chunk = list(itertools.islice(groups, self.epoch))
            if not chunk:
                return
            yield chunk

    def new_memory(self, chunk, number=0, first=0):
        """One epoch's groups as singlets, each group its own document group: ``(memory, items)``. An error about
        its data names the epoch (``number``) and the group of the stream (counted from ``first``)."""
        try:
            memory = GroupedClumps.of_groups(self.family, chunk, first)
        except NonFiniteDataError:
            raise  # names the group of the stream already
        except ValueError as err:
            raise ValueError(f"epoch {number} (groups {first} to {first + len(chunk) - 1} of the stream): {err}") \
                from None
        return memory, memory.num_singlets

    def initial_posterior(self, x):
        """Components fitted to k-means++ responsibilities of the first epoch's items, sticks at the prior."""
        resp = initial_responsibilities(x, self.K, "kmeans++", self.seed)
        return HDPMixturePosterior.from_summary(self.family, self.alpha, self.gamma,
                                                Summary.from_responsibilities(self.family, x, resp))

    def memory_record(self, memory):
        return {"groups": memory.num_groups, "documents": memory.num_docs}

    def room_needed(self, memory):
        """As :meth:`MemoryBoundedVB.room_needed`, once :meth:`compress` has merged the document groups to at
        most ``max_groups`` (each clump stores one count per group)."""
        groups = memory.num_groups if self.max_groups is None else min(memory.num_groups, self.max_groups)
        clump = memory.clump_cost() - memory.num_groups + groups
        return memory.num_clumps * clump + memory.points.numel(), clump

    def partition_prior(self, posterior):
        """Eq. 30's document terms with the components' prior masses :math:`\\alpha E[\\beta_k]` (``split_prior=
        "documents"``), or a CRP term with the top-level ``gamma`` (``"crp"``)."""
        if self.split_prior_kind == "crp":
            return self.gamma, None
        return self.alpha, posterior.alpha * posterior.expected_beta()[:-1]

    def readout(self, local):
        """Each unit's most responsible component (``owners()``) and the document groups' counts
        :math:`N_{sk}` (:class:`~pyro_memo.memo.group_clumps.TiedGroupLocal`)."""
        return owners(local), local.counts

    def compress(self, memory, posterior, seen, readout=None):
        """Document groups merged (:meth:`merge_groups`), then the clumps within the bound, their singlets in
        document-group order. One :meth:`readout` serves both (model building's last; a tied local step under
        ``posterior`` finds it when ``None``): the units' first hard partition comes from the responsibilities
        before the groups merge."""
        merge = self.max_groups is not None and memory.num_groups > self.max_groups
        if not merge and memory.memory() <= self.memory_bound:
            return memory
        if readout is None:
            readout = self.local_readout(memory, posterior)
        owner, counts = readout
        if merge:
            memory = self.merge_groups(memory, posterior, counts)
        if memory.memory() > self.memory_bound:
            memory = self.clump(memory, owner, seen, posterior)
        return memory.sorted_by_group()

    def merge_groups(self, memory, posterior, counts=None):
        """Merge the pair of document groups with the most similar expected weights (Gomes et al. eq. 27, the
        cosine of :math:`E[\\pi_s]` and :math:`E[\\pi_{s'}]`) until at most ``max_groups`` remain; a merged
        group's :math:`\\theta` follows eq. 20 from the pair's summed counts and sizes. The merges are chosen on
        the groups' counts alone (one similarity row updated per merge) and applied to the memory at once.
        ``counts``: the groups' counts :math:`N_{sk}` when the caller has them (else a tied local step finds
        them)."""
        if self.max_groups is None or memory.num_groups <= self.max_groups:
            return memory
        if counts is None:
            counts = self.local_readout(memory, posterior)[1]
        prior = (posterior.alpha * posterior.expected_beta()).to(counts.dtype)
        sizes = memory.group_sizes.to(counts.dtype).clone()
        counts = torch.cat([counts, counts.new_zeros(len(counts), 1)], 1)  # N_s, tail zero

        def direction(s):
            mean = counts[s] / sizes[s, None] + prior
            mean = mean / mean.sum(-1, keepdim=True)
            return mean / mean.norm(dim=-1, keepdim=True)

        S = memory.num_groups
        unit = direction(torch.arange(S, device=counts.device))
        similarity = unit @ unit.T
        similarity.fill_diagonal_(-float("inf"))
        target = torch.arange(S, device=counts.device)
        for _ in range(S - self.max_groups):
            keep, drop = sorted(divmod(int(similarity.argmax()), S))
            counts[keep] += counts[drop]
            sizes[keep] += sizes[drop]
            target[target == drop] = keep
            similarity[drop, :] = similarity[:, drop] = -float("inf")
            alive = similarity[keep] > -float("inf")
            unit[keep] = direction(keep)
            row = torch.where(alive, unit @ unit[keep], -float("inf"))
            similarity[keep, :] = similarity[:, keep] = row
            similarity[keep, keep] = -float("inf")
        _, target = torch.unique(target, return_inverse=True)
        return memory.regroup(target)


def owners(local):
    """Each unit's most responsible component, ``(C + P,)``, from tied local factors (clump responsibilities,
    singlet responsibilities, ...)."""
    return torch.cat([local[0].argmax(1), local[1].argmax(1)])


def _move_counts(state):
    """``{move: {"proposed": n, "accepted": m}}`` summed over one model building's laps."""
    counts = {}
    for lap in state.move_log:
        for name, c in lap.items():
            total = counts.setdefault(name, {"proposed": 0, "accepted": 0})
            total["proposed"] += c["proposed"]
            total["accepted"] += c["accepted"]
    return counts
