"""Memoized online variational inference for the HDP topic model (Sudderth's HDP talk; Hughes, Kim &
Sudderth, AISTATS 2015)."""

from collections import namedtuple

import numpy as np
import torch

from ..allocation.concentration import learnable
from ..allocation.hdp_sticks import sticks_from_sizes
from ..checks import as_non_negative_float, as_positive_int, check_positive_finite
from ..data.batch_source import BatchSource
from ..data.batches import random_parts
from ..data.corpus import check_has_tokens, check_tokens_fit
from ..data.corpus_shards import CorpusShards, is_corpus_shards
from ..engine import FitResult, MemoizedDriver, make_moves
from ..engine.driver import as_float_dtype
from ..families import check_sparse_L
from ..families.base import checked_group
from ..families.type2 import Learnt
from ..inference.initialization import initial_responsibilities
from ..memo import MemoState
from ..posterior.hdp import HDPMixturePosterior
from ..summaries import Summary
from .corpus import Corpus
from .hdp_posterior import HDPPosterior
from .topic_birth import TopicBirthMove
from .topic_delete import TopicDeleteMove
from .topic_init import INITS, initial_topics
from .topic_merge import TopicMergeMove

#: topic moves by name, in the order their lap-end evaluations run
TOPIC_MOVES = {"birth": TopicBirthMove, "delete": TopicDeleteMove, "merge": TopicMergeMove}

#: the one state of every model (kept under its HDP name)
HDPState = MemoState
#: the one fit result of every model (kept under its HDP name)
HDPFitResult = FitResult

#: a batch's local parameters: token responsibilities ``(T, K)`` and document-topic counts ``(D_b, K)``
DocumentLocal = namedtuple("DocumentLocal", ["resp", "counts"])


class HeldBatches:
    """Fixed batches held in memory as token arrays ``(doc, items, count, num_docs)``."""

    tokens = ()
    held = True  #: see :attr:`pyro_memo.data.BatchSource.held`

    @property
    def num_batches(self):
        return len(self.tokens)

    def batch(self, b):
        return self.tokens[b]


class CorpusBatches(HeldBatches):
    """A corpus split into fixed batches of documents, each held as token arrays
    ``(doc, word, count, num_docs)`` (the batch source of :class:`MemoizedHDP`)."""

    def __init__(self, corpus, parts, dtype, device):
        self.corpus = corpus
        self.parts = parts
        self.tokens = [(*corpus.tokens(b, dtype=dtype, device=device), len(b)) for b in parts]

    @property
    def num_items(self):
        return self.corpus.num_docs


class ShardBatches(BatchSource):
    """A corpus sharded on disk (:class:`~pyro_memo.data.CorpusShards`), one shard per batch, each read
    when visited as token arrays ``(doc, word, count, num_docs)`` (portable: a Dask worker reads its own
    shards)."""

    portable = True

    def __init__(self, shards, dtype, device):
        self.shards, self.dtype, self.device = shards, dtype, device
        self.num_batches, self.num_items = shards.num_batches, shards.num_items

    def batch(self, b):
        shard = self.shards.batch(b)
        return (*shard.tokens(dtype=self.dtype, device=self.device), shard.num_docs)


class GroupBatches(HeldBatches):
    """Groups of feature rows (images as groups of pixel features, ...) split into fixed batches
    of groups, each held as ``(group, x, count, num_groups)`` with unit counts (the batch source
    of :class:`MemoizedHDP` with a ``family``)."""

    def __init__(self, groups, parts, family):
        self.groups = groups
        self.parts = parts
        self.tokens = []
        for part in parts:
            x = checked_groups(family, groups, part)
            doc = torch.repeat_interleave(torch.arange(len(part), device=x.device),
                                          torch.tensor([len(groups[g]) for g in part], device=x.device))
            self.tokens.append((doc, x, torch.ones(len(x), dtype=x.dtype, device=x.device), len(part)))

    @property
    def num_items(self):
        return len(self.groups)


def checked_groups(family, groups, part):
    """The rows of ``groups[g]`` for ``g`` in ``part``, concatenated and checked by ``family``; an error names the
    group it found and the row in it (:func:`~pyro_memo.families.base.checked_group`), not a row of the
    concatenation (the groups of a batch are drawn at random)."""
    try:
        return family.check_data(torch.cat([groups[g] for g in part]))
    except ValueError:
        for g in part:
            checked_group(family, groups[g], g)
        raise  # the batch as a whole (its sums), not one of its groups


def as_groups(data, family):
    """A list of ``(n_g, D)`` tensors in the family's dtype and device, or a clear error."""
    if not isinstance(data, (list, tuple)) or not data:
        raise TypeError(f"an HDP over a {family.name} family fits a non-empty list of groups, each an (n_g, D) "
                        f"array of items; got {type(data).__name__}")
    groups = [torch.as_tensor(np.asarray(g) if not torch.is_tensor(g) else g, dtype=family.dtype,
                              device=family.device) for g in data]
    for i, g in enumerate(groups):
        if g.dim() != 2 or g.shape[1] != family.dim or len(g) == 0:
            raise ValueError(f"group {i} has shape {tuple(g.shape)}; every group must be a non-empty "
                             f"(n_g, {family.dim}) array")
    return groups


class HDPSteps:
    """Mixin of a driver (:class:`~pyro_memo.engine.MemoizedDriver`,
    :class:`~pyro_memo.engine.StochasticDriver`) for the HDP topic model: corpus batches, the
    initial topics and the document-level local step."""

    #: documents a sharded corpus's initial topics are computed from (drawn across its shards)
    init_docs = 20_000

    def set_model(self, K, alpha, gamma, lam0, local_iters, local_tol, dtype, device, init, family=None,
                  alpha_prior=None, gamma_prior=None, learn_lam0=False, sparse_L=None):
        """Validate and keep the model's settings (see :class:`MemoizedHDP`); with a Gamma prior a
        concentration becomes a :class:`~pyro_memo.allocation.concentration.GammaConcentration`."""
        self.family = family
        self.sparse_L = check_sparse_L(sparse_L)
        K, local_iters = as_positive_int(K, "K"), as_positive_int(local_iters, "local_iters")
        for name, value in (("alpha", alpha), ("gamma", gamma), ("lam0", lam0)):
            check_positive_finite(value, name)
        if init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)}; got {init!r}")
        self.K, self.local_iters = int(K), int(local_iters)
        self.alpha = learnable(alpha, alpha_prior, "alpha_prior")
        self.gamma = learnable(gamma, gamma_prior, "gamma_prior")
        self.lam0 = float(lam0)
        if learn_lam0:
            if family is not None:
                raise ValueError("learn_lam0 learns the topics' Dirichlet prior; an HDP over a family keeps the "
                                 "family's prior")
            self.lam0 = Learnt(lam0)
        self.local_tol = as_non_negative_float(local_tol, "local_tol")  # NaN or < 0 never stops a local step
        self.dtype, self.device = as_float_dtype(dtype), device
        self.init = init

    @staticmethod
    def batches(corpus, num_batches, seed=0):
        """A fixed random partition of the corpus's documents into ``num_batches`` index arrays."""
        return random_parts(corpus.num_docs, num_batches, seed)

    def fit_dtype(self):
        """``dtype`` (with a ``family``, the family's precision)."""
        return self.dtype if self.family is None else self.family.dtype

    def resume_mismatch(self, posterior, source):
        """An HDP goes on from an HDP of the same kind: topics over this corpus's vocabulary, or
        components of this fit's family and dimension."""
        kind = HDPPosterior if self.family is None else HDPMixturePosterior
        if not isinstance(posterior, kind):
            return f"it holds a {type(posterior).__name__}, not an {kind.__name__}"
        if self.family is None:
            vocab = source.corpus.vocab_size if hasattr(source, "corpus") else source.shards.vocab_size
            if posterior.V != vocab:
                return f"its topics span {posterior.V} words, this corpus's vocabulary {vocab}"
        elif (posterior.family.name, posterior.family.dim) != (self.family.name, self.family.dim):
            return (f"its components are {posterior.family.name} of dimension {posterior.family.dim}, this fit's "
                    f"{self.family.name} of {self.family.dim}")
        return None

    def make_source(self, data, num_batches):
        """The corpus (or, with a ``family``, the list of groups) in ``num_batches`` fixed batches of
        documents (see :meth:`batches`); a corpus sharded on disk (a
        :class:`~pyro_memo.data.CorpusShards` or its directory) in its shards, read one at a time."""
        if self.family is not None:
            groups = as_groups(data, self.family)
            parts = random_parts(len(groups), 1 if num_batches is None else num_batches, self.seed)
            return GroupBatches(groups, parts, self.family)
        if is_corpus_shards(data):
            data = CorpusShards(data)
        if isinstance(data, CorpusShards):
            if num_batches not in (None, data.num_batches):
                raise ValueError(f"{data.directory}: a sharded corpus is fitted one shard per batch "
                                 f"({data.num_batches} shards); got num_batches={num_batches} (pass None, or reshard "
                                 f"with write_corpus_shards)")
            check_has_tokens(data, f"{type(self).__name__}.fit")
            check_tokens_fit(data, self.dtype, f"{type(self).__name__}.fit")
            return ShardBatches(data, self.dtype, self.device)
        if not isinstance(data, Corpus):
            raise TypeError(f"fit needs a pyro_memo.topics.Corpus or a CorpusShards directory; got "
                            f"{type(data).__name__} (a documents x words count matrix becomes a Corpus by "
                            "pyro_memo.topics.from_counts(matrix); an .ldac file by read_ldac(path))")
        check_has_tokens(data, f"{type(self).__name__}.fit")
        check_tokens_fit(data, self.dtype, f"{type(self).__name__}.fit")
        parts = self.batches(data, 1 if num_batches is None else num_batches, self.seed)
        return CorpusBatches(data, parts, self.dtype, self.device)

    def initial_posterior(self, source, order=None):
        """Topics from :func:`~pyro_memo.topics.topic_init.initial_topics` (``self.init``), largest
        first, and sticks whose expected weights follow their sizes
        (:func:`~pyro_memo.allocation.hdp_sticks.sticks_from_sizes`, each document counted as one draw from
        the top level; ``source``: a :class:`CorpusBatches` or a corpus; for a sharded corpus, from
        :attr:`init_docs` documents drawn across its shards); with a ``family``,
        components fitted to k-means++ responsibilities of the items."""
        if self.family is not None:
            return self.initial_mixture(source)
        if isinstance(source, ShardBatches):  # a sample read shard by shard stands in for the corpus
            corpus = source.shards.sample(self.init_docs, self.seed)
        else:
            corpus = source.corpus if isinstance(source, CorpusBatches) else source
        lam = initial_topics(corpus, self.K, self.lam0, self.init, self.seed, self.dtype, self.device)
        sizes = (lam - self.lam0).sum(1)
        largest_first = torch.argsort(sizes, descending=True)
        rho, omega = sticks_from_sizes(sizes[largest_first], self.gamma, corpus.num_docs)
        return HDPPosterior(lam[largest_first], rho, omega, self.alpha, self.gamma, self.lam0)

    def initial_mixture(self, source, max_items=10_000):
        """Components fitted to k-means++ (``init="kmeans"``) or random (``"documents"``)
        responsibilities of up to ``max_items`` items drawn at random, sticks at the prior."""
        x = torch.cat(source.groups)
        pick = torch.as_tensor(np.random.default_rng(self.seed).permutation(len(x))[:max_items], device=x.device)
        x = x[pick]
        resp = initial_responsibilities(x, self.K, "kmeans++" if self.init == "kmeans" else "random", self.seed)
        summary = Summary.from_responsibilities(self.family, x, resp)
        return HDPMixturePosterior.from_summary(self.family, self.alpha, self.gamma, summary)

    def document_step(self, posterior, batch, init_counts=None):
        """``(DocumentLocal, summary, iterations)``: the document-level local step of ``batch``."""
        doc, word, count, num_docs = batch
        resp, counts, summary, iters = posterior.local_step(doc, word, count, num_docs, init_counts=init_counts,
                                                            max_iter=self.local_iters, tol=self.local_tol,
                                                            sparse_L=self.sparse_L)
        return DocumentLocal(resp, counts), summary, iters


class MemoizedHDP(HDPSteps, MemoizedDriver):
    """Memoized coordinate ascent for the HDP topic model over fixed batches of documents.

    Each batch visit runs the document-level local step (restarted, or warm-started from the
    batch's last visit, whichever is better, so it never lowers the bound), swaps the
    batch's summary in the memo, and updates the globals from the whole-corpus summary:
    topics in closed form, top-level sticks on the exact bound by closed-form Newton steps (gradient and Hessian)
    from the last global step's sticks, with an L-BFGS-B fallback
    (``optimize_sticks()``). From the end of lap 1 the bound is exact for
    the whole corpus and no batch step lowers it.

    :param int K: truncation (number of topics).
    :param float alpha: document-level concentration (unused with ``alpha_prior``).
    :param float gamma: top-level concentration (unused with ``gamma_prior``).
    :param float lam0: symmetric Dirichlet prior on topic-word distributions.
    :param alpha_prior: ``(s1, s2)``: learn the document-level concentration,
        :math:`\\alpha \\sim Gamma(s_1, s_2)` (shape, rate), with a closed-form Gamma factor
        :math:`q(\\alpha)` updated with the sticks at every global step (see
        ``pyro_memo.allocation.concentration``); the local steps use :math:`E_q[\\alpha]`.
    :param gamma_prior: ``(s1, s2)``: learn the top-level concentration likewise.
    :param bool learn_lam0: learn the topics' symmetric Dirichlet prior :math:`\\lambda_0` (from
        ``lam0``) by type-II maximum likelihood on the exact bound at every global step
        (``pyro_memo.families.type2``).
    :param int laps: maximum passes through the corpus.
    :param float tol: stop when the bound's relative change over a lap is below this.
    :param int local_iters: cap on document-level iterations per visit.
    :param float local_tol: document-level convergence threshold (mean change in counts).
    :param bool local_restart: start each visit's local step afresh (from the global
        weights) and keep it when it beats the batch's cached local parameters under the
        current globals, else continue from those; ``False``: always continue from them.
        Restarts escape the documents' local optima; both choices never lower the bound.
    :param int seed: seeds the initial topics and batch order.
    :param dtype: ``torch.float64`` (default) or ``torch.float32``.
    :param device: torch device.
    :param bool record_batch_elbos: compute the bound after every batch step once the memo
        is complete (for checks).
    :param str init: initial topics: ``"kmeans"`` (default; a k-means of the documents
        under the KL divergence, bnpy's Bregman k-means) or ``"documents"`` (``K`` random
        documents); see ``pyro_memo.topics.topic_init``.
    :param bool incremental_first_lap: update the globals after every batch of the first
        lap from the partial memo. Default ``False``: the first lap runs every batch's local
        step against the initial topics and updates the globals once, when the memo is
        complete, so the initial topics are not refit to the first batch alone (on
        Wikipedia with 20 batches that refit costs about 0.1 nats/token held out).
    :param family: ``None`` for the topic model (a :class:`~pyro_memo.topics.Corpus` of
        documents); or any :class:`~pyro_memo.ConjugateFamily`, to fit an HDP mixture
        to a list of groups of items (each an ``(n_g, D)`` array; e.g. images as groups of
        pixel features) with :class:`~pyro_memo.posterior.hdp.HDPMixturePosterior` (no moves yet).
    :param moves: ``"birth"``, ``"merge"``, ``"delete"`` (comma-separated) or move objects
        (:class:`~pyro_memo.topics.TopicBirthMove`, :class:`~pyro_memo.topics.TopicMergeMove`,
        :class:`~pyro_memo.topics.TopicDeleteMove`): topic births / merges / deletes accepted
        only when the exact bound rises (logged per lap in
        ``state.move_log``, gains in ``state.move_gains``); a fit with moves converges only
        after a lap with no accepted move.
    :param dict move_options: keyword arguments per move name, for moves given by name (e.g.
        ``{"birth": {"num_new": 5}}``: five new topics a birth; see :class:`~pyro_memo.topics.TopicBirthMove`).
    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    :param local_dtype: ``"float32"``: mixed precision, the document-level local step in float32
        against globals, memo and bound in ``dtype`` (see :class:`~pyro_memo.engine.MemoizedDriver`);
        ``None`` (default): ``dtype`` throughout.
    :param int sparse_L: keep only each token's ``sparse_L`` largest topic responsibilities,
        renormalised over them, in every sweep of the document-level local step (Hughes & Sudderth
        2016; see :meth:`~pyro_memo.posterior.hdp.GroupedHDPPosterior.local_step`): the optimal
        :math:`q(z_{dn})` on at most ``L`` topics, with each document's Dirichlet exact given them, so
        the bound stays exact for that sparse posterior and no batch step lowers it after lap 1.
        ``None`` (the default) or ``sparse_L >= K`` keeps them all. The moves' candidate local steps
        use the same ``L``, and moves see the responsibilities as a ``(T, K)`` matrix, zero outside
        each token's support.
    :param str schedule: ``"sequential"`` or ``"parallel"`` laps, and
    :param int round_size: batches per parallel round; see :class:`~pyro_memo.engine.MemoizedDriver`
        (``fit(..., executor=client)`` runs the local steps on a Dask cluster).
    :param overrelax: over-relaxed batch steps after the warm-up laps: ``True``, ``False`` or an
        :class:`~pyro_memo.engine.overrelax.Overrelaxation`; ``None`` (default): off for the HDP (its
        ``overrelax_default``); see :class:`~pyro_memo.engine.MemoizedDriver`.
    """

    def __init__(self, K=100, alpha=0.5, gamma=10.0, lam0=0.1, laps=50, tol=1e-6, local_iters=100,
                 local_tol=1e-3, local_restart=True, seed=0, dtype=torch.float64, device=None,
                 record_batch_elbos=False, moves=(), init="kmeans", incremental_first_lap=False, family=None,
                 alpha_prior=None, gamma_prior=None, learn_lam0=False, local_dtype=None, threads=None,
                 sparse_L=None, schedule=None, round_size=None, overrelax=None, move_options=None):
        self.set_model(K, alpha, gamma, lam0, local_iters, local_tol, dtype, device, init, family, alpha_prior,
                       gamma_prior, learn_lam0, sparse_L)
        if family is not None and moves:
            raise ValueError("birth / merge / delete moves are implemented for the topic model only; fit an HDP "
                             "over a family without moves")
        moves = make_moves(moves, TOPIC_MOVES, seed=seed, **(move_options or {}))
        super().__init__(laps=laps, tol=tol, seed=seed, record_batch_elbos=record_batch_elbos, moves=moves,
                         hold_first_lap=not incremental_first_lap, local_dtype=local_dtype, threads=threads,
                         schedule=schedule, round_size=round_size, overrelax=overrelax)
        self.local_restart = bool(local_restart)
        self.incremental_first_lap = bool(incremental_first_lap)

    local_step_reads_memo = True  # a restart is compared with the batch's cached summary

    # ---------------------------------------------------------- the HDP's steps
    def local_step(self, state, key, batch):
        """The document-level local step of batch ``key``: restarted (or warm-started from the
        batch's last visit when ``local_restart`` is off); a restart that is worse for the batch
        than its cached local parameters under the current globals continues from those
        instead, so no visit lowers the bound (compared in the globals' precision). The steps run
        under :meth:`~pyro_memo.engine.MemoizedDriver.local_globals` (``local_dtype``). Returns
        ``(DocumentLocal, summary)``, the summary in the globals' precision."""
        warm = state.warm_starts.get(key)
        post = state.posterior
        if warm is not None and warm.shape[1] != post.K:
            warm = None
        start = None if self.local_restart else warm
        local, summary, iters = self.document_step(self.local_globals(state), batch, start)
        summary = self.memo_summary(state, summary)
        old = state.cache.batches.get(key)
        if start is None and warm is not None and old is not None and old.K == post.K \
                and float(post.elbo(summary)) < float(post.elbo(old)):
            local, summary, more = self.document_step(self.local_globals(state), batch, warm)
            summary = self.memo_summary(state, summary)
            iters += more
        state.local_iterations.append(iters)
        return local, summary

    def keep_local(self, local):
        """The batch's document-topic counts: the next visit's warm start."""
        return local.counts
