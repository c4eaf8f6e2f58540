"""Birth moves in three phases over two laps: collect, create, adopt (Hughes & Sudderth 2013, §3.1)."""

import copy
import zlib

import numpy as np
import torch

from ...checks import as_non_negative_float, as_optional_positive_int, as_positive_int
from ...data_sources import make_batches
from ...engine import MemoizedDriver
from ...summaries import Summary
from ..initialization import initial_responsibilities
from .base import Move, optimal_elbo, rewrite_memo
from .delete import DeleteMove
from .merge import merge_scores, pair_entropies

PSEUDO_BATCH = "birth"

#: Hughes & Sudderth's (2013, §3.1) targeted subsample: "of size at most N' = 10^4"
PAPER_SUBSAMPLE = 10_000
#: the largest ``N' D^2`` of a default subsample (:meth:`BirthMove.subsample_limit`): a fresh fit's cost, here
#: that of ``5 D^2`` items at D = 25 (3,200 items, 0.25 s on one core, about one lap of the 100,000 toy
#: patches); at D <= 14 the paper's 10^4 items cost less
CREATION_BUDGET = 2_000_000


def as_fresh_K(value):
    """A birth's ``fresh_K``: a whole number of at least 2 (a birth keeps at least two fresh components;
    ``fresh_K=1`` never gave one)."""
    if as_positive_int(value, "fresh_K") < 2:
        raise ValueError(f"fresh_K must be at least 2 (a birth keeps at least two components); got {value!r}")
    return int(value)


class BirthMove(Move):
    """Add fresh components where the data ask for them.

    * **Collection** (lap ``t``): ``targets`` target components are chosen (components in
      decreasing size, the next ``targets`` of them each lap, from the largest again after each
      birth); while visiting batches, up to ``subsample_size`` items with
      :math:`\\hat r_{nk} > \\tau` are gathered for each target (bottom-k sampling, so every
      eligible item is equally likely to be kept).
    * **Creation** (end of lap ``t``): for each target, a fresh DP mixture with ``fresh_K``
      components is fitted to its subsample by full-batch VB; their summaries of the subsamples,
      side by side, are :math:`S'` (empty fresh components dropped).
    * **Adoption** (lap ``t + 1``): the model grows to ``K + K'`` components; every batch
      summary gains ``K'`` empty components (nested truncation), and :math:`S'` enters the
      memo as a pseudo-batch so the fresh components have mass while the batches are
      revisited with the expanded model. After that lap :math:`S'` is subtracted: the memo
      is again exactly the summary of the data.

    After the adoption lap the expanded model is kept only if its exact full-data ELBO beats
    the ELBO before adoption. A target often keeps a remnant of its items beside its fresh
    components (a broad component that costs more than the split gains, in high dimensions most
    of all), so where the expanded model alone does not pay, each fresh component's best old
    partner (eq. 12, chosen when the birth is adopted; the lap's batches carry the pair's merged
    entropy) may absorb it, a merge kept only where the exact ELBO rises (:meth:`absorb_remnants`).
    The lap's batches also carry their summaries with those old partners deleted (their items'
    responsibilities renormalised over the other components, as :class:`~pyro_memo.DeleteMove` does), and
    that memo replaces the expanded one where its exact ELBO is higher still
    (:meth:`without_remnants`): the fresh components then replace their target, the split the merges
    after a birth reach in Hughes & Sudderth (2013, §3.1, Fig. 1). The birth is judged with the
    best of the three. Otherwise the memo and globals go back to their saved state, and
    the lap's batch steps go with them. A reverted lap creates nothing (its subsample was drawn
    under the model it reverted), so the next lap adopts nothing: it redoes those batch steps
    without a birth and collects a new subsample under the restored model. A rejected birth
    thus costs one lap (taking every adoption lap's batch steps also without the birth would
    cost a second local step per batch in every adoption lap, kept births included). A
    reverted lap leaves the objective where it was, so it never counts towards convergence
    (:meth:`converged`).
    With several targets, their fresh components are adopted and judged together, as one
    birth. The move log counts a birth as proposed when adopted and accepted when kept.

    :param int fresh_K: components of the fresh mixture.
    :param int subsample_size: largest targeted subsample ``N'`` (default :meth:`subsample_limit`: Hughes &
        Sudderth's ``N' = 10^4`` where a fresh fit on it is cheap, at least ``5 D^2``).
    :param float min_resp: responsibility threshold :math:`\\tau` of the collection.
    :param int max_K: no adoption beyond this many components.
    :param int fresh_iters: VB iterations of the creation step.
    :param float min_items: fresh components with fewer expected items (or under 2% of the
        subsample) are dropped; a birth needs at least two survivors.
    :param int targets: components targeted per lap (more grow a fit from K = 1 in fewer laps).
    :param int seed: seeds target choice and reservoir sampling.
    """

    name = "birth"

    def __init__(self, fresh_K=10, subsample_size=None, min_resp=0.1, max_K=100, fresh_iters=20, min_items=5,
                 targets=1, seed=0):
        if int(targets) < 1:
            raise ValueError(f"a birth needs at least one target component per lap; got targets={targets}")
        self.fresh_K = as_fresh_K(fresh_K)
        self.num_targets = int(targets)
        self.min_items = float(min_items)
        self.cleanup_pairs = 5
        self.subsample_size = as_optional_positive_int(subsample_size, "subsample_size")
        self.min_resp = as_non_negative_float(min_resp, "min_resp")
        self.max_K = as_positive_int(max_K, "max_K")
        self.fresh_iters = as_positive_int(fresh_iters, "fresh_iters")
        self.rng = np.random.default_rng(seed)
        self.pending = None  # S' of created, not yet adopted components
        self.failures = 0  # births failed (not created, or reverted) since the last kept one
        self.adopting = False
        self.reverted = False  # the last lap's adoption was reverted, and its batch steps with it
        self.pending_targets = 0  # targets whose fresh components are pending (then adopted)
        self.snapshot = None  # memo, posterior and exact ELBO before an adoption
        self.targets = []
        self.absorb = None  # (old, fresh) pairs an adoption lap's batches carry merged entropies of
        self.remnants = None  # a DeleteMove whose one proposal is the adopted birth's old partners
        self._without_remnants = None  # batch key -> its summary with the remnants deleted, in an adoption lap
        self.lap_seed = 0
        self._kept = None  # per target: the (rows, keys) kept so far this lap, or None

    # --------------------------------------------------------------- adoption
    def start_lap(self, state, driver):
        self.clear_terms(state)
        self.absorb = self.remnants = self._without_remnants = None
        post = state.posterior
        # a pending birth joins a complete memo; a fit that starts with an empty one (a memory-bounded
        # epoch's model building) keeps it for the next lap
        ready = state.cache.total is not None
        self.adopting = ready and self.pending is not None and post.K + self.pending.K <= self.max_K
        if self.adopting:
            cache = state.cache
            self.snapshot = (dict(cache.batches), cache.total, post, float(post.elbo(cache.total)))
            fresh, K = self.pending.to(post.dtype, post.family.device), post.K  # a checkpoint's is on the CPU
            rewrite_memo(state, lambda key, s: s.expand(K + fresh.K))
            zeros = Summary.zeros(post.family, K)
            pseudo = Summary(torch.cat([zeros.counts, fresh.counts]),
                             {k: torch.cat([v, fresh.stats[k]]) for k, v in zeros.stats.items()},
                             torch.cat([zeros.entropy, torch.zeros_like(fresh.entropy)]), fresh.num_items)
            state.cache.replace(PSEUDO_BATCH, pseudo)
            state.posterior = post.optimal_for(state.cache.total)
            self.absorb = absorb_candidates(post.family, state.cache.total, K)
            self.remnants = DeleteMove()
            self.remnants.proposals = [sorted(set(self.absorb[:, 0].tolist()))]
            self.remnants.sparse_L = getattr(driver, "sparse_L", None)
            self._without_remnants = {}
            self.log(state, proposed=1)
        if ready:
            self.pending = None
        # collection targets for this lap: components in decreasing size, the next ones each lap,
        # starting again from the largest after every successful birth, so each is tried within K laps
        total = state.cache.total
        K = state.posterior.K
        if total is None:  # no sizes yet: the first components
            self.targets = list(range(min(self.num_targets, K)))
        else:
            ranks = torch.argsort(total.counts[:K], descending=True)
            self.targets = [int(ranks[(self.failures + j) % K]) for j in range(min(self.num_targets, K))]
        self.lap_seed = int(self.rng.integers(2**62))
        self._kept = [None] * len(self.targets)

    # ------------------------------------------------------------- collection
    def subsample_limit(self, dim):
        """The largest subsample ``N'`` for ``dim``-dimensional items: ``subsample_size`` when given, else
        Hughes & Sudderth's (2013, §3.1) ``N' = 10^4``, fewer where a fresh fit's cost ``N' D^2`` would pass
        ``CREATION_BUDGET``, and never fewer than ``5 D^2``, the items a full covariance per fresh
        component needs. The creation's cleanup judges the fresh components on the subsample alone: a
        split whose gain grows with its items but whose cost (its components' prior terms) does not is
        merged away on a subsample that holds too few of the target's items (four unit-covariance clusters
        in D = 10, each mean 3 standard deviations along its own axis, stayed at two or three components
        from K = 1 with ``N' = 1000``, 60% of a pair of clusters)."""
        if self.subsample_size:
            return self.subsample_size
        return max(5 * dim ** 2, min(PAPER_SUBSAMPLE, CREATION_BUDGET // dim ** 2))

    def batch_visit(self, posterior, key, x, resp):
        """``(collected, without_remnants)``, or ``None`` when both are: the batch's
        :meth:`~pyro_memo.BirthMove.collect` and, in an adoption lap, its summary with the adopted birth's old
        partners deleted (:meth:`~pyro_memo.BirthMove.remnant_summary`)."""
        collected = self.collect(key, x, resp)
        without = self.remnant_summary(posterior, key, x, resp)
        return None if collected is None and without is None else (collected, without)

    def remnant_summary(self, posterior, key, x, resp):
        """In an adoption lap: batch ``key``'s summary under the alternative local step without the old
        partners of the fresh components (:class:`~pyro_memo.DeleteMove`'s, their
        responsibilities renormalised over the other components), else ``None``. About one summary more
        per batch in adoption laps (3% of a toy fit's time)."""
        if self.remnants is None:
            return None
        return self.remnants.batch_visit(posterior, key, x, resp)[0]

    def collect(self, key, x, resp):
        """Bottom-k sampling, batch side: for each target, every eligible item of batch ``key`` gets a
        uniform key (from the lap's seed and the batch, so the sample does not depend on where the batch
        ran) and the batch's ``subsample_size`` smallest come back as ``(rows, keys)`` (``None`` for a
        target without eligible items); one entry per target, or ``None`` when no target has any."""
        rng = np.random.default_rng([self.lap_seed, zlib.crc32(repr(key).encode())])
        found = []
        for target in self.targets:
            if target >= resp.shape[1]:  # merged away during the lap (GreedyMerge)
                found.append(None)
                continue
            eligible = resp[:, target] > self.min_resp
            rows = x[eligible]
            keys = torch.as_tensor(rng.random(rows.shape[0]), dtype=x.dtype, device=x.device)
            found.append(self._smallest(rows, keys) if rows.shape[0] else None)
        return found if any(f is not None for f in found) else None

    def batch_terms(self, batch, local):
        """In an adoption lap: the merged entropy of each ``absorb`` pair in this batch."""
        return None if self.absorb is None else self.batch_pair_entropy(batch, local, self.absorb)

    def batch_pair_entropy(self, batch, local, pairs):
        """``(P,)`` merged-assignment entropy of each pair in ``batch`` with responsibilities ``local``."""
        return pair_entropies(local, pairs)

    def take_visit(self, state, key, payload, summary):
        """Bottom-k sampling, driver side: for each target, the ``subsample_size`` smallest keys seen so
        far are kept, a uniform sample of all its eligible items of the lap; in an adoption lap, the batch's
        summary without the remnants is kept too."""
        collected, without = payload
        if without is not None and self._without_remnants is not None:
            self._without_remnants[key] = without
        for j, found in enumerate(collected or ()):
            if found is None:
                continue
            rows, keys = found
            if self._kept[j] is not None:
                rows, keys = torch.cat([self._kept[j][0], rows]), torch.cat([self._kept[j][1], keys])
            self._kept[j] = self._smallest(rows, keys)
        return summary

    def _smallest(self, rows, keys):
        limit = self.subsample_limit(rows.shape[1])
        if rows.shape[0] > limit:
            best = torch.topk(keys, limit, largest=False).indices
            rows, keys = rows[best], keys[best]
        return rows, keys

    def for_workers(self):
        """The target and the lap's seed, without the pending summary, the snapshot or the subsample."""
        light = copy.copy(self)
        light.pending = light.snapshot = light._kept = light._without_remnants = light.rng = None
        return light

    # ------------------------------------------------------- removal, creation
    def end_lap(self, state, driver):
        cache = state.cache
        self.reverted = False
        if PSEUDO_BATCH in cache.batches:
            cache.batches.pop(PSEUDO_BATCH)
            cache.total = cache.recomputed_total()
            value, state.posterior = optimal_elbo(state.posterior, cache.total)
            batches, total, posterior, before = self.snapshot
            without = self.without_remnants(state)
            if value <= before:
                value = self.absorb_remnants(state, value)
            if without is not None and without[0] > value:
                value, state.posterior, cache.batches = without
                cache.total = cache.recomputed_total()
            if value > before:
                self.log(state, accepted=1)
                self.record_gain(state, before, value)
                self.failures = 0
            else:  # the expanded model did not pay for itself over one lap: back to the old memo
                cache.batches, cache.total, state.posterior = batches, total, posterior
                self.failures += self.pending_targets  # still the adopted birth's: creation comes below
                self.reverted = True
            self.snapshot = None
        # no creation after a revert: the next lap, plain, redoes the undone batch steps and collects anew
        kept = [] if self.reverted else [found for found in self._kept or () if found is not None]
        subsamples = [rows for rows, _ in kept if len(rows) >= 2 * self.fresh_K]
        births = []
        if subsamples and state.posterior.K < self.max_K:
            for sub in subsamples:
                fresh = self.create(state.posterior, sub)
                keep = (fresh.counts >= max(self.min_items, 0.02 * len(sub))).nonzero().flatten()
                if len(keep) > 1:  # one fresh component would only repeat the target
                    births.append(fresh.select(keep))
            self.pending = side_by_side(births) if births else None
            self.pending_targets = len(births)
        if not (self.adopting or self.reverted):
            # every target of the lap that gave no birth: one that split into fewer than two, and one whose
            # subsample was missing or too small (not counted, it was the next lap's target again, forever);
            # in adoption laps targets may dissolve, and a reverted lap counted its birth's targets above
            self.failures += len(self._kept or ()) - len(births)
        self._kept = None

    def without_remnants(self, state):
        """After an adoption lap: ``(ELBO, globals, memo)`` of the expanded model with the fresh components'
        old partners deleted (eq. 8, exact: every batch's summary under :meth:`remnant_summary`, with their
        optimal globals), or ``None`` when a batch has none. A target keeps a broad remnant of its items
        beside its fresh components after one lap; merging it into a fresh component
        (:meth:`absorb_remnants`) spreads that component over the target's clusters, while deleting it
        hands each item to the fresh component that explains it, the split Hughes & Sudderth (2013, §3.1)
        expect the merges after a birth to reach."""
        parts = self._without_remnants
        if not parts or set(parts) != set(state.cache.batches) \
                or next(iter(parts.values())).K != state.cache.total.K - len(self.remnants.proposals[0]):
            return None
        total = sum(parts.values(), Summary.zeros(state.posterior.family, next(iter(parts.values())).K))
        value, posterior = optimal_elbo(state.posterior, total)
        return value, posterior, dict(parts)

    def absorb_remnants(self, state, value):
        """Merge old components into fresh ones after an adoption lap (eq. 8, exact: the batches
        carried each ``absorb`` pair's merged entropy): each old component's best pair, where it
        raises the exact ELBO above ``value``, and at most one merge per component. Returns the ELBO."""
        terms, pairs = self.collected_terms(state), self.absorb
        cache = state.cache
        if terms is None or pairs is None or cache.total.K != int(pairs[:, 1].max()) + 1:
            return value
        entropy = sum(terms.values())
        best = {}  # old component -> (ELBO, pair)
        for p, (a, b) in enumerate(pairs.tolist()):
            merged, _ = optimal_elbo(state.posterior, cache.total.merge(a, b, entropy[p]))
            if merged > best.get(a, (value,))[0]:
                best[a] = (merged, p)
        # the highest fresh index first: a merge removes its fresh component, renumbering only those above it
        for _, p in sorted(best.values(), key=lambda v: -int(pairs[v[1], 1])):
            a, b = pairs[p].tolist()
            merged, _ = optimal_elbo(state.posterior, cache.total.merge(a, b, entropy[p]))
            if merged > value:
                rewrite_memo(state, lambda key, s, a=a, b=b, p=p: s.merge(a, b, terms[key][p]))
                value = merged
        return value

    def create(self, posterior, sub):
        """The subsample's summary under a fresh mixture (``fresh_mixture()``, seeded from the move's
        generator)."""
        return fresh_mixture(posterior, sub, self.fresh_K, self.fresh_iters, self.cleanup_pairs,
                             int(self.rng.integers(2**31)))

    def converged(self, state):
        """Births failed ``2 K`` times since the last kept one: every component was targeted twice
        (fresh subsample and initialisation each time), and each time its subsample did not split
        or its birth was reverted (a birth created meanwhile is left untried). Never right after a
        reverted lap: the revert undid the lap's batch steps, so the objective's change over that
        lap says nothing about convergence (the next lap, plain, redoes them). At ``max_K`` components
        nothing is left to try: no birth is created there."""
        K = state.posterior.K
        return (self.failures >= 2 * K or K >= self.max_K) and not self.reverted

    def state_dict(self):
        return {"pending": None if self.pending is None else self.pending.to(device="cpu").to_dict(),
                "rng": self.rng.bit_generator.state, "failures": self.failures, "pending_targets": self.pending_targets,
                "reverted": self.reverted}

    def load_state_dict(self, d):
        self.pending = None if d["pending"] is None else Summary.from_dict(d["pending"])
        self.rng.bit_generator.state = d["rng"]
        self.failures = int(d.get("failures", 0))
        self.pending_targets = int(d.get("pending_targets", self.pending is not None))
        self.reverted = bool(d.get("reverted", False))


def absorb_candidates(family, total, K):
    """``(F, 2)`` pairs ``(old, fresh)``: each fresh component (index ``K`` and up in the expanded
    ``total``) with the old component that merges best with it by eq. 12, its target as a rule."""
    device = total.counts.device
    fresh = torch.arange(K, total.K, device=device)
    pairs = torch.cartesian_prod(torch.arange(K, device=device), fresh)
    _, scores = merge_scores(family, total, pairs)
    old = scores.reshape(K, len(fresh)).argmax(0)
    return torch.stack([old, fresh], 1)


def side_by_side(summaries):
    """The mixture summaries of several fresh models as one, their components in order (each
    birth's subsample summarised by its own fresh components)."""
    if len(summaries) == 1:
        return summaries[0]
    return Summary(torch.cat([s.counts for s in summaries]),
                   {k: torch.cat([s.stats[k] for s in summaries]) for k in summaries[0].stats},
                   torch.cat([s.entropy for s in summaries]), sum(s.num_items for s in summaries))


def fresh_mixture(posterior, sub, fresh_K, iters, cleanup_pairs, seed):
    """A birth's creation step: fit a fresh DP mixture of ``posterior``'s kind (a
    :class:`~pyro_memo.DPMixturePosterior`) with ``fresh_K`` components to the subsample ``sub``
    (k-means++ start, ``iters`` laps of full-batch coordinate ascent), then merge its redundant components
    (the ``cleanup_pairs`` best pairs by Hughes & Sudderth 2013, eq. 12 tried each round) while the
    subsample's exact ELBO rises (a single cluster then yields a single component, and no birth). Returns the
    subsample's summary under the fresh model."""
    resp = initial_responsibilities(sub, fresh_K, "kmeans++", seed)
    start = posterior.optimal_for(Summary.from_responsibilities(posterior.family, sub, resp))
    # full-batch coordinate ascent: the one driver with the subsample as its only batch
    fit = MemoizedDriver(laps=iters, tol=1e-6, seed=seed, shuffle=False).fit(make_batches(sub, 1), posterior=start)
    post = fit.posterior
    while post.K > 1:
        resp, summary = post.local_step(sub)
        current, _ = optimal_elbo(post, summary)
        pairs, scores = merge_scores(post.family, summary)
        pairs = pairs[torch.argsort(scores, descending=True)[:cleanup_pairs]]  # eq. 12 ranking
        entropies = pair_entropies(resp, pairs)
        best = None
        for p, (a, b) in enumerate(pairs.tolist()):
            value, merged = optimal_elbo(post, summary.merge(a, b, entropies[p]))
            if value > current and (best is None or value > best[0]):
                best = (value, merged)
        if best is None:
            return summary
        post = best[1]  # optimal for the merged summary; the next round's local step refines it
    return post.local_step(sub)[1]
