"""Memoized inference for the assortative HDP relational model over fixed batches of nodes.

A batch holds the pairs ``i < j`` whose smaller node ``i`` is one of its source nodes; every
unordered pair belongs to exactly one batch. Two variational families of the roles:

* ``nonlinks="tied"`` (default; :mod:`pyro_memo.posterior.relational_tied`): linked pairs' roles at
  their optimum (eq. R1), non-linked pairs' roles following the memberships (eq. T1), so a batch's
  summary holds its links only and the non-linked pairs enter the global step in closed form
  (eqs. T2, T3);
* ``nonlinks="free"`` (Kim, Gopalan, Blei & Sudderth 2013): every pair's roles free of the
  memberships (eqs. R1, R5 of :mod:`pyro_memo.posterior.relational_pairs`), the batches'
  non-linked factors kept as warm starts, the global step of eq. G1
  (``pyro_memo.posterior.relational``).

The driver, memo, moves and checkpoints are the engine's.
"""

from collections import namedtuple

import numpy as np
import torch

from ..allocation.concentration import learnable
from ..checks import as_bool, as_count, as_positive_int, as_seed, check_own_batch_count
from ..data.batches import random_parts
from ..data.graphs import Graph
from ..engine import MemoizedDriver, make_moves
from ..engine.driver import as_float_dtype
from ..posterior.relational import RelationalPosterior, check_hyperparameters
from ..posterior.relational_tied import TiedRelationalPosterior, graph_pairs
from .initialization import initial_memberships
from .moves import RELATIONAL_MOVES

__all__ = ["MemoizedRelational", "NodeBatches", "PairBatch"]

#: a batch of pairs: all links, the batch's source nodes (a bool mask) and all unobserved pairs
PairBatch = namedtuple("PairBatch", ["edges", "sources", "missing"])


class NodeBatches:
    """A graph's nodes in fixed batches: batch ``b`` is a :class:`PairBatch`: the graph's links
    ``(E, 2)`` and unobserved pairs ``(M, 2)`` (long tensors on ``device``, shared by every batch)
    and a ``(N,)`` bool mask of the batch's source nodes."""

    held = True  #: see :attr:`pyro_memo.data.BatchSource.held`

    def __init__(self, graph, parts, device=None):
        self.graph = graph
        self.edges = torch.as_tensor(np.array(graph.edges), dtype=torch.long, device=device).reshape(-1, 2)
        self.missing = torch.as_tensor(np.array(graph.missing), dtype=torch.long, device=device).reshape(-1, 2)
        self.masks = []
        for part in parts:
            mask = torch.zeros(graph.num_nodes, dtype=torch.bool, device=device)
            mask[torch.as_tensor(part, dtype=torch.long, device=device)] = True
            self.masks.append(mask)

    @property
    def num_batches(self):
        return len(self.masks)

    @property
    def num_items(self):
        return self.graph.num_nodes

    def batch(self, b):
        return PairBatch(self.edges, self.masks[b], self.missing)


class MemoizedRelational(MemoizedDriver):
    """Memoized coordinate ascent for the assortative HDP relational model.

    :param int K: truncation (number of communities).
    :param float alpha: membership concentration (unused with ``alpha_prior``).
    :param float gamma: top-level concentration (unused with ``gamma_prior``).
    :param tau: ``(tau_a, tau_b)``, Beta prior of the communities' link probabilities.
    :param float eps: background link probability (fixed, as Kim et al. 2013; or the start of ``learn_eps``).
    :param bool learn_eps: learn ``eps`` by maximising the exact bound after every global step
        (empirical Bayes, eq. E1 of ``pyro_memo.posterior.relational``).
    :param str nonlinks: the non-linked pairs' roles: ``"tied"`` to the memberships (default) or
        ``"free"`` (Kim et al. 2013); see the module docstring.
    :param int nonlink_iters: block rounds of the non-linked factors per visit (eq. R5; ``"free"`` only).
    :param alpha_prior: ``(s1, s2)``: learn alpha with a Gamma prior; ``gamma_prior`` likewise.
    :param int laps: maximum passes; ``tol``: relative change of the bound over a lap to stop at.
    :param int seed: seeds the batches, the initial memberships and the batch order.
    :param dtype: ``torch.float64`` (default) or ``torch.float32``; ``device``: torch device.
    :param bool record_batch_elbos: compute the exact bound after every batch step once the memo
        is complete (for checks; one evaluation per batch).
    :param str init: initial memberships: ``"spectral"`` (default) or ``"random"``.
    :param moves: ``"birth"``, ``"delete"``, ``"merge"`` (comma-separated) or move objects
        (``pyro_memo.relational.moves``): community changes accepted only when the exact bound
        of the whole graph rises; with ``K=1`` and births the data choose the number of communities.
    :param dict move_options: keyword arguments per move name, for moves given by name (e.g.
        ``{"birth": {"min_nodes": 10}}``; see :mod:`pyro_memo.relational.moves`).
    :param local_dtype: ``"float32"``: mixed precision, the batches' pairs (local step) in float32
        against globals, memo and bound in ``dtype`` (see :class:`~pyro_memo.engine.MemoizedDriver`);
        ``None`` (default): ``dtype`` throughout.

    Each visit continues the batch's non-linked factors from its last visit (block coordinate
    ascent from there cannot lower the batch's terms) and sets its linked pairs to their optimum,
    so from the end of lap 1 no batch step lowers the exact bound.

    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    :param str schedule: ``"sequential"`` or ``"parallel"`` laps, and
    :param int round_size: batches per parallel round; see :class:`~pyro_memo.engine.MemoizedDriver`
        (``fit(..., executor=client)`` runs the local steps on a Dask cluster).
    :param overrelax: over-relaxed batch steps after the warm-up laps: ``True``, ``False`` or an
        :class:`~pyro_memo.engine.overrelax.Overrelaxation`; ``None`` (default): off for the relational model (its
        ``overrelax_default``); see :class:`~pyro_memo.engine.MemoizedDriver`.
    """

    def __init__(self, K=10, alpha=1.0, gamma=5.0, tau=(1.0, 1.0), eps=1e-4, nonlink_iters=5, laps=50, tol=1e-7,
                 seed=0, dtype=torch.float64, device=None, alpha_prior=None, gamma_prior=None,
                 record_batch_elbos=False, init="spectral", moves=(), nonlinks="tied", learn_eps=False,
                 local_dtype=None, threads=None, schedule=None, round_size=None, overrelax=None, move_options=None):
        K = as_positive_int(K, "K")
        check_hyperparameters(alpha, gamma, tau, eps)
        seed = as_seed(seed)  # one seed for the moves and the driver, drawn once from a Generator
        super().__init__(laps=laps, tol=tol, seed=seed, record_batch_elbos=record_batch_elbos,
                         moves=make_moves(moves, RELATIONAL_MOVES, seed=seed, **(move_options or {})),
                         local_dtype=local_dtype, threads=threads,
                         schedule=schedule, round_size=round_size, overrelax=overrelax)
        self.K, self.tau, self.eps = int(K), (float(tau[0]), float(tau[1])), float(eps)
        self.alpha = learnable(alpha, alpha_prior, "alpha_prior")
        self.gamma = learnable(gamma, gamma_prior, "gamma_prior")
        self.nonlink_iters = as_count(nonlink_iters, "nonlink_iters")
        self.dtype, self.device = as_float_dtype(dtype), device
        if init not in ("spectral", "random"):
            raise ValueError(f"init must be 'spectral' or 'random'; got {init!r}")
        self.init = init
        if nonlinks not in ("tied", "free"):
            raise ValueError(f"nonlinks must be 'tied' or 'free'; got {nonlinks!r}")
        self.nonlinks = nonlinks
        self.learn_eps = as_bool(learn_eps, "learn_eps")  # bool('False') is True: eps learnt, silently

    def make_source(self, data, num_batches):
        """A :class:`~pyro_memo.data.Graph` in ``num_batches`` fixed random batches of source nodes."""
        if isinstance(data, NodeBatches):
            check_own_batch_count(data, num_batches)
            return data
        if not isinstance(data, Graph):
            raise TypeError(f"fit needs a pyro_memo.data.Graph; got {type(data).__name__} (an adjacency matrix "
                            "becomes a Graph by pyro_memo.data.from_adjacency(matrix); an edge list file by "
                            "read_edge_list(path), a networkx graph by from_networkx(graph))")
        if data.num_nodes < 2:
            raise ValueError(f"a relational model needs at least 2 nodes; the graph has {data.num_nodes}")
        parts = random_parts(data.num_nodes, 1 if num_batches is None else num_batches, self.seed)
        return NodeBatches(data, parts, self.device)

    def resume_mismatch(self, posterior, source):
        """A relational fit goes on from one of the same non-link treatment on a graph of as many nodes."""
        kind = RelationalPosterior if self.nonlinks == "free" else TiedRelationalPosterior
        if type(posterior) is not kind:
            return f"it holds a {type(posterior).__name__}, not a {kind.__name__} (nonlinks={self.nonlinks!r})"
        if posterior.N != source.num_items:
            return f"it was fitted to a graph of {posterior.N} nodes, this one has {source.num_items}"
        return None

    def initial_posterior(self, source, order=None):
        """Memberships from the graph's spectral embedding (``init="spectral"``,
        ``spectral_memberships()``) or a flat Dirichlet draw per
        node (``"random"``), worth one pair each (``nonlinks="free"``) or the node's links plus one
        (``"tied"``, where only links inform a membership); sticks and links at their prior."""
        m = initial_memberships(source.graph, self.K, self.init, self.seed, self.dtype, self.device)
        if self.nonlinks == "free":
            return RelationalPosterior.from_memberships(m, self.alpha, self.gamma, self.tau, self.eps, scale=1.0,
                                                        learn_eps=self.learn_eps)
        pairs = graph_pairs(source.edges, source.missing, source.num_items, self.dtype)
        links = (source.num_items - 1 - pairs.nonlinks).to(m.device)[:, None]  # each node's links (and unobserved)
        return TiedRelationalPosterior.from_memberships(m, self.alpha, self.gamma, self.tau, self.eps, links + 1.0,
                                                        pairs, self.learn_eps)

    def local_step(self, state, key, batch):
        """The batch's pairs under the current globals, its non-linked factors continued from its
        last visit, under :meth:`~pyro_memo.engine.MemoizedDriver.local_globals` (``local_dtype``).
        Returns ``(factors, summary)``."""
        post = self.local_globals(state)
        start = state.warm_starts.get(key)  # (2, N, K): the factors m, m_bar
        start = None if start is None or start.shape[2] != post.K else tuple(start.to(post.dtype))
        return post.local_step(batch.edges, batch.sources, start, self.nonlink_iters, batch.missing)

    def keep_local(self, local):
        """The batch's non-linked factors ``(2, N_b, K)``: the next visit's start."""
        return None if local is None else torch.stack(local)
