"""The one move base: birth, merge and delete moves of every model go through it.

A move takes part in each lap of :class:`~pyro_memo.engine.MemoizedDriver` in two parts
(Hughes & Sudderth 2013 §3.1-3.2; bnpy carries the batch-side terms in its summaries):

- **batch side**, :meth:`Move.batch_terms`, :meth:`Move.batch_visit` and :meth:`Move.visit_batch`:
  after a batch's local step, terms that only that batch can supply are computed from the batch
  and its local factors. ``batch_terms`` is a pure function of the batch and the move's plan for
  the lap, and its result travels in the batch's summary (``summary.extras[move.name]``, as bnpy
  carries merge terms in its statistics bag); ``batch_visit`` is a pure function too, whose small
  result (a subsample, a candidate's summary) the driver hands to :meth:`Move.take_visit`. Both
  run wherever the local step runs (on a Dask worker, with the light copy :meth:`Move.for_workers`
  of the move), so only summaries travel. ``visit_batch`` instead runs on the driver with the batch
  and its local factors, which then travel back from the workers (a candidate's local step that
  keeps pace with the sequential schedule's updates);
- **driver side**, :meth:`Move.start_lap` chooses what to propose from the memo before the
  first batch, and :meth:`Move.end_lap` evaluates each proposal on the complete memo and
  accepts it only when the exact objective rises (:func:`optimal_elbo`), rewriting every
  cached batch summary so the memo stays the exact summary of one variational distribution.
"""

import copy
import inspect

import torch


def optimal_elbo(posterior, summary):
    """Exact objective of ``summary`` with the globals optimal for it (``posterior.optimal_for``)."""
    best = posterior.optimal_for(summary)
    return float(best.elbo(summary)), best


def rewrite_memo(state, rewrite):
    """Replace every cached batch summary ``s`` by ``rewrite(key, s)``, re-add the total from
    scratch and refit the globals to it (nothing to rewrite while the memo is still empty)."""
    cache = state.cache
    if not cache.batches:
        return
    cache.batches = {key: rewrite(key, s) for key, s in cache.batches.items()}
    cache.total = cache.recomputed_total()
    state.posterior = state.posterior.optimal_for(cache.total)


class Move:
    """Base class of every move.

    :ivar str name: the move's name in logs (``"birth"``, ``"merge"``, ...).
    """

    name = None

    def start_lap(self, state, driver):
        """Driver side, before the lap's first batch: choose the proposals."""

    def batch_terms(self, batch, local):
        """Batch side: this move's additive terms for one batch (a tensor carried in the batch's
        summary as ``extras[self.name]``), or ``None``."""
        return None

    def batch_visit(self, posterior, key, batch, local):
        """Batch side: what this move takes from batch ``key`` (its local factors ``local`` under the
        globals ``posterior``), small and picklable, or ``None``; the driver passes it to
        :meth:`~pyro_memo.Move.take_visit`. A pure function of its arguments and the move's plan for the lap."""
        return None

    def take_visit(self, state, key, payload, summary):
        """Driver side: receive batch ``key``'s :meth:`~pyro_memo.Move.batch_visit` ``payload`` (in key order within a
        round); returns the summary to memoize."""
        return summary

    def for_workers(self):
        """The move as the batch side needs it (sent to the workers with every round): itself by
        default; a move that keeps large driver-side state returns a light copy without it."""
        return self

    def visit_batch(self, state, key, batch, local, summary):
        """Driver side, after batch ``key``'s local step (``local``: its local factors; with an
        executor elsewhere, both travel back for it); returns the summary to memoize."""
        return summary

    def end_lap(self, state, driver):
        """Driver side, after the lap's last batch: accept proposals on an exact increase."""

    def collected_terms(self, state):
        """Every cached batch's :meth:`~pyro_memo.Move.batch_terms` from this lap (key -> tensor), or ``None``
        when a batch has none (it was not visited with this lap's plan)."""
        batches = state.cache.batches
        if not batches or any(self.name not in s.extras for s in batches.values()):
            return None
        return {key: s.extras[self.name] for key, s in batches.items()}

    def clear_terms(self, state):
        """Drop this move's terms from the memo (at the start of a lap: they belong to the last plan)."""
        cache = state.cache
        cache.batches = {key: s.without(self.name) for key, s in cache.batches.items()}
        if cache.total is not None:
            cache.total = cache.total.without(self.name)

    def converged(self, state):
        """Whether this move has nothing left to try (a fit with moves stops only then). A move that
        undid the last lap's batch steps (a reverted birth) answers ``False``: the objective's change
        over that lap says nothing about convergence."""
        return True

    def log(self, state, proposed=0, accepted=0):
        """Count proposals and acceptances in this lap's ``state.lap_moves``."""
        counts = state.lap_moves.setdefault(self.name, {"proposed": 0, "accepted": 0})
        counts["proposed"] += proposed
        counts["accepted"] += accepted

    def record_gain(self, state, before, after):
        """Keep the exact objective before and after an accepted move (checked by the tests)."""
        state.move_gains.append({"move": self.name, "lap": state.laps_done, "before": before, "after": after})

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def move_states(moves):
    """Move name -> a copy of each of ``moves``' state (:meth:`Move.state_dict`), to start them from again
    (:func:`restart_moves`)."""
    return {m.name: copy.deepcopy(m.state_dict()) for m in moves}


def restart_moves(moves, initial, saved=None):
    """Each of ``moves`` from its state in ``saved`` (a resumed fit's ``move_states``) where that holds one,
    else from ``initial`` (:func:`move_states` of the moves as made, copied again): a fit from scratch starts its
    moves afresh, not with the last fit's pending births, generators and failure counts."""
    for move in moves:
        state = (saved or {}).get(move.name)
        if state is None and move.name in initial:
            state = copy.deepcopy(initial[move.name])
        if state is not None:
            move.load_state_dict(state)


def candidate_pairs(pairs, scores, K, per_component, max_pairs=None):
    """Merge candidates: each of ``K`` components with its ``per_component`` best partners by
    ``scores`` (one per row of ``pairs``), ordered by decreasing score, at most ``max_pairs``."""
    if len(pairs) == 0:
        return pairs
    chosen = set()
    for k in range(K):
        involved = ((pairs[:, 0] == k) | (pairs[:, 1] == k)).nonzero().flatten()
        best = involved[torch.argsort(scores[involved], descending=True)[:per_component]]
        chosen.update(best.tolist())
    order = sorted(chosen, key=lambda p: -float(scores[p]))[:max_pairs]
    return pairs[torch.tensor(order, dtype=torch.long, device=pairs.device)]


def listed_moves(moves, names=True):
    """``moves``, an iterable of :class:`Move` objects (and of move names, where ``names``), as a list.

    :raises TypeError: naming the first item that is neither (or ``moves`` itself, if it is no iterable):
        ``moves=[1]`` otherwise failed at fit on ``1.name``.
    """
    kinds, wanted = ((str, Move), "move names (e.g. 'birth,merge') or Move objects") if names else \
        ((Move,), "Move objects")
    try:
        listed = [moves] if isinstance(moves, str) and not names else list(moves)
    except TypeError:
        listed = [moves]
    for move in listed:
        if not isinstance(move, kinds):
            raise TypeError(f"moves must be {wanted}; got {move!r}")
    return listed


def make_moves(names, registry, seed=0, **options):
    """Move objects for ``names`` (an iterable or comma-separated string of keys of ``registry``,
    or move objects), in ``registry`` order (the order their lap-end evaluations run): a given object
    takes the place of its kind (its ``name``), and objects of kinds the registry lacks go last, in
    their order.

    ``options`` maps a move name to its keyword arguments (a move given by name: options for one that is
    not are an error, never silently unused); moves whose constructor takes a ``seed`` get ``seed``.
    """
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = listed_moves(names)
    objects = [m for m in names if not isinstance(m, str)]
    names = [m for m in names if isinstance(m, str)]
    unknown = (set(names) | set(options)) - set(registry)
    if unknown:
        raise ValueError(f"unknown moves {sorted(unknown)}; choose from {', '.join(registry)}")
    unnamed = sorted(set(options) - set(names))
    if unnamed:
        raise ValueError(f"options for the {', '.join(unnamed)} move{'s' if len(unnamed) > 1 else ''}, which the moves "
                         f"do not name ({', '.join(names) or 'none by name'}): add it to the moves by name or "
                         f"configure the move object itself")
    moves = []
    for name, cls in registry.items():
        if name in names:
            kwargs = dict(options.get(name, {}))
            accepted = inspect.signature(cls).parameters
            wrong = sorted(set(kwargs) - set(accepted))
            if wrong:
                raise ValueError(f"the {name} move has no option {', '.join(wrong)}; it takes {', '.join(accepted)}")
            if "seed" in accepted:
                kwargs.setdefault("seed", seed)
            moves.append(cls(**kwargs))
    order = list(registry)  # objects join their kind's place; other kinds go last, in their order
    return sorted(moves + objects, key=lambda m: order.index(m.name) if m.name in order else len(order))


def sort_components(state):
    """Reorder components by decreasing size when that raises the exact objective
    (stick-breaking favours big components first; used after births and merges)."""
    total = state.cache.total
    order = torch.argsort(total.sizes, descending=True)
    if bool((order == torch.arange(len(order), device=order.device)).all()):
        return False
    before, _ = optimal_elbo(state.posterior, total)
    after, _ = optimal_elbo(state.posterior, total.select(order))
    if after <= before:
        return False
    rewrite_memo(state, lambda key, s: s.select(order))
    return True


class PairMergeMove(Move):
    """Merges of pairs of components, accepted only when the exact objective rises
    (Hughes & Sudderth 2013 §3.2), for any model.

    Driver side: at the start of a lap the candidate pairs are the ``per_component`` best
    partners of each component by :meth:`pair_scores` (the marginal-likelihood ratio, eq. 12);
    after the lap the candidates are tried in order, each component in at most one accepted
    merge per lap. Batch side: every batch computes the merged-assignment entropy of each
    candidate (:meth:`batch_pair_entropy`), the one term of the objective that is not a
    function of the summaries, and carries it in its summary. A model fills in :meth:`pair_scores`,
    :meth:`batch_pair_entropy`, :meth:`current`, :meth:`evaluate` and :meth:`apply`.

    A pair rejected since the components were last renumbered is proposed again only once either
    component's size has changed by more than ``retry_change`` (relative) since its rejection, as
    bnpy reactivates a rejected proposal only after its component changes: where an evaluation is
    dear (a topic merge re-optimises the top-level sticks) the same rejected pairs are not paid for
    lap after lap while the fit converges.

    :param int per_component: candidate partners per component.
    :param int max_pairs: at most this many candidates per lap (``None``: no limit).
    :param float retry_change: see above (``None``: every candidate is proposed every lap).
    """

    name = "merge"

    def __init__(self, per_component=3, max_pairs=None, retry_change=None):
        self.per_component = int(per_component)
        self.max_pairs = None if max_pairs is None else int(max_pairs)
        if retry_change is not None and not float(retry_change) >= 0:
            raise ValueError(f"retry_change must be a non-negative number or None; got {retry_change}")
        self.retry_change = None if retry_change is None else float(retry_change)
        self.pairs, self.pair_entropy, self.num_components = None, {}, None

    # ------------------------------------------------------ the model's part
    def pair_scores(self, state, total):
        """``(pairs (P, 2), scores (P,))`` for every pair of components of ``total``."""
        raise NotImplementedError

    def batch_pair_entropy(self, batch, local, pairs):
        """``(P,)`` merged-assignment entropy of each pair in ``batch`` with local factors ``local``."""
        raise NotImplementedError

    def current(self, state):
        """The exact objective the candidates must beat."""
        return float(state.posterior.elbo(state.cache.total))

    def evaluate(self, state, a, b, p):
        """``(exact objective, candidate)`` after merging ``b`` into ``a`` (candidate pair ``p``)."""
        raise NotImplementedError

    def apply(self, state, candidate, a, b, p):
        """Make ``candidate`` the memo and the globals."""
        raise NotImplementedError

    # ------------------------------------------------------------- the hooks
    def start_lap(self, state, driver):
        self.clear_terms(state)
        total = state.cache.total
        self.pairs, self.pair_entropy = None, {}
        self.num_components = None if total is None else total.K
        if total is None or total.K < 2 or not state.cache.batches:
            return
        pairs, scores = self.pair_scores(state, total)
        self.pairs = self.worth_retrying(state, candidate_pairs(pairs, scores, total.K, self.per_component,
                                                                self.max_pairs))

    def worth_retrying(self, state, pairs):
        """``pairs`` less those rejected since the components were last renumbered whose components have
        both kept their sizes within ``retry_change`` (relative) since."""
        if self.retry_change is None or len(pairs) == 0:
            return pairs
        sizes = state.cache.total.sizes
        rejected = {(a, b): (sa, sb) for a, b, sa, sb in state.tried_components(self.name, len(sizes))}

        def changed(a, b):
            then = sizes.new_tensor(rejected[(a, b)])
            return bool(((sizes[[a, b]] - then).abs() > self.retry_change * then.clamp_min(1e-12)).any())

        keep = [p for p, (a, b) in enumerate(pairs.tolist()) if (a, b) not in rejected or changed(a, b)]
        return pairs[keep]

    def remember_rejected(self, state, a, b):
        """Note the pair ``(a, b)`` (current numbers) rejected at the components' current sizes."""
        if self.retry_change is None:
            return
        sizes = state.cache.total.sizes
        tried = state.tried_components(self.name, len(sizes))
        tried[:] = [t for t in tried if (t[0], t[1]) != (a, b)]
        tried.append((a, b, float(sizes[a]), float(sizes[b])))

    def batch_terms(self, batch, local):
        if self.pairs is not None and len(self.pairs):
            return self.batch_pair_entropy(batch, local, self.pairs)
        return None

    def ready(self, state):
        """Every batch carries this lap's pair entropies and the components are those they were
        computed for (an accepted birth or delete earlier in the lap renumbers them)."""
        total = state.cache.total
        return self.pairs is not None and len(self.pairs) > 0 and self.pair_entropy is not None \
            and total.K == self.num_components == state.posterior.K

    def end_lap(self, state, driver):
        self.pair_entropy = self.collected_terms(state)
        if not self.ready(state):
            self.pairs, self.pair_entropy = None, {}
            return
        self.total_entropy = sum(self.pair_entropy.values())
        current = self.current(state)
        position = list(range(self.num_components))  # original index -> current index (None once merged)
        used = set()
        proposed = accepted = 0
        for p, (a0, b0) in enumerate(self.pairs.tolist()):
            if a0 in used or b0 in used:
                continue
            a, b = position[a0], position[b0]
            proposed += 1
            value, candidate = self.evaluate(state, a, b, p)
            if value > current:
                self.apply(state, candidate, a, b, p)
                self.record_gain(state, current, value)
                current = value
                accepted += 1
                used.update((a0, b0))
                position = [None if i == b0 else (q - 1 if q is not None and q > b else q)
                            for i, q in enumerate(position)]
            else:
                self.remember_rejected(state, a, b)
        self.log(state, proposed, accepted)
        self.pairs, self.pair_entropy = None, {}
