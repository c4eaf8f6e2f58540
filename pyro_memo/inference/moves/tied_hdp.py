"""Birth and merge moves for the memory-bounded HDP's model building (Gomes, Welling & Perona 2008, §3.1 model
building; the proposals of Hughes & Sudderth 2013, §3.1-3.2, and for the HDP of Hughes, Kim & Sudderth 2015, §5).

In the memory-bounded HDP the memory (:class:`~pyro_memo.memo.group_clumps.GroupedClumps`) is model building's one
batch, and its tied local step starts afresh every lap (``TiedVB``). Both
moves act after the lap, on the memory and its tied local factors, and a candidate replaces the memo and the globals
only when its exact tied bound, with the globals optimal for its summary (``optimal_for``: components in closed
form, sticks optimised), is higher than the fit's (the lap's tied factors with their optimal globals).

- A **birth** targets the largest component not tried since the last accepted birth. A fresh DP mixture is
  fitted to the singlets it is responsible for (the epoch's new items; ``fresh_mixture()``, as the
  DP's births), and its components are appended to the model: their statistics scaled
  to the singlets' responsibility mass, their sticks sharing the target's expected weight
  (``split_sticks()``; the target keeps the rest).
- A **merge** takes candidate pairs by the marginal-likelihood ratio of their statistics (Hughes & Sudderth
  2013, eq. 12), best first, each pair tried once until the components change, at most ``max_pairs`` a lap;
  the candidate has the pair's summed statistics and both sticks' weight
  (``merged_sticks()``).

Each candidate gets ``rounds`` tied local steps of the whole memory, each followed by its optimal globals, before it
is judged: the memory's items move to other components as well as to the merged or new ones.

Where this differs from Gomes et al.: they propose Ueda-style splits and merges; here the project's birth and
merge proposals do that work, each accepted only when the exact tied bound rises. A candidate is judged after
``rounds`` local-global rounds of its own, not after a lap of the fit.
"""

import numpy as np
import torch

from ...allocation import DPSticks
from ...allocation.hdp_sticks import merged_sticks, split_sticks
from ...checks import as_non_negative_float, as_optional_positive_int, as_positive_int
from ...engine.moves import Move, candidate_pairs
from ..dp_mixture_posterior import DPMixturePosterior
from .birth import as_fresh_K, fresh_mixture
from .merge import merge_scores


class TiedHDPMove(Move):
    """Base of the memory-bounded HDP's moves (module docstring): :meth:`visit_batch` keeps the memory and its
    tied local factors; :meth:`end_lap` calls :meth:`propose`, which judges candidates with :meth:`judge`.

    :param int rounds: tied local steps of the memory (each followed by the optimal globals) a candidate gets
        before its bound is compared with the fit's.
    """

    def __init__(self, rounds=2):
        if int(rounds) < 1:
            raise ValueError(f"rounds must be a positive integer; got {rounds}")
        self.rounds = int(rounds)
        self.memory = self.local = self.key = None
        self.local_options = {}

    def start_lap(self, state, driver):
        self.memory = self.local = self.key = None
        self.local_options = dict(getattr(driver, "local_options", {}))

    def visit_batch(self, state, key, batch, local, summary):
        self.memory, self.local, self.key = batch, local, key
        return summary

    def end_lap(self, state, driver):
        if self.memory is not None and state.cache.total is not None:
            if self.local[1].shape[1] != state.cache.total.K:  # a move before this one changed the components
                self.local = getattr(driver, "last_local", None)  # the factors of the memo's summary now
            if self.local is not None:
                self.propose(state, driver)
        self.memory = self.local = self.key = None

    def propose(self, state, driver):
        """Try this lap's candidates (a subclass's part)."""
        raise NotImplementedError

    def judge(self, state, driver, candidate):
        """Give ``candidate`` (globals) ``rounds`` tied local steps of the memory, each followed by its optimal
        globals, and make it the fit's memo and globals when its exact tied bound is higher than the fit's. Logs the
        proposal; returns whether it was accepted (its gain then in ``state.move_gains``)."""
        current = float(state.posterior.elbo(state.cache.total))
        for _ in range(self.rounds):
            local, summary = self.memory.tied_local_step(candidate, **self.local_options)
            candidate = candidate.optimal_for(summary)
        value = float(candidate.elbo(summary))
        self.log(state, proposed=1, accepted=int(value > current))
        if not value > current:
            return False
        state.cache.replace(self.key, summary)
        state.posterior = candidate
        if hasattr(driver, "last_local"):  # the factors of the memo's summary, for compression and later moves
            driver.last_local = local
        self.record_gain(state, current, value)
        return True


class TiedHDPBirthMove(TiedHDPMove):
    """Births for the memory-bounded HDP (module docstring).

    :param int fresh_K: components of the fresh mixture fitted to the target's singlets.
    :param int subsample_size: most singlets it is fitted to (default ``max(1000, 5 D^2)``).
    :param float min_resp: a singlet joins the target's subsample when its responsibility exceeds this.
    :param int max_K: no birth beyond this many components.
    :param int fresh_iters: coordinate-ascent laps of the fresh mixture.
    :param float min_items: fresh components with fewer expected items (or under 2% of the subsample) are dropped;
        a birth needs at least two survivors.
    :param int rounds: see :class:`TiedHDPMove`.
    :param int seed: seeds the subsamples and the fresh mixtures.
    """

    name = "birth"

    def __init__(self, fresh_K=5, subsample_size=None, min_resp=0.1, max_K=100, fresh_iters=20, min_items=5,
                 rounds=2, seed=0):
        super().__init__(rounds)
        self.fresh_K = as_fresh_K(fresh_K)
        self.subsample_size = as_optional_positive_int(subsample_size, "subsample_size")
        self.min_resp = as_non_negative_float(min_resp, "min_resp")
        self.max_K, self.fresh_iters = as_positive_int(max_K, "max_K"), as_positive_int(fresh_iters, "fresh_iters")
        self.min_items = as_non_negative_float(min_items, "min_items")
        self.rng = np.random.default_rng(seed)
        self.cleanup_pairs = 5

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]

    def target(self, state):
        """The largest component the births have not tried since the last accepted one (``None``: none left)."""
        tried = state.tried_components(self.name, state.posterior.K)
        order = torch.argsort(state.cache.total.counts, descending=True).tolist()
        return next((k for k in order if k not in tried), None)

    def subsample(self, target):
        """``(rows, mass)``: up to ``subsample_size`` singlets whose responsibility for ``target`` exceeds
        ``min_resp``, drawn uniformly, and those singlets' summed responsibility (``None`` when too few)."""
        resp = self.local.point_resp[:, target]
        eligible = (resp > self.min_resp).nonzero().flatten()
        if len(eligible) < 2 * self.fresh_K:
            return None, 0.0
        limit = self.subsample_size or max(1000, 5 * self.memory.points.shape[1] ** 2)
        mass = float(resp[eligible].sum())
        if len(eligible) > limit:
            pick = torch.as_tensor(self.rng.choice(len(eligible), limit, replace=False), device=eligible.device)
            eligible = eligible[pick]
        return self.memory.points[eligible].to(resp.dtype), mass

    def fresh(self, posterior, rows):
        """The subsample's summary under a fresh DP mixture, its too-small components dropped (``None``: fewer than
        two left)."""
        start = DPMixturePosterior.prior(posterior.family, DPSticks(1.0), 1)
        summary = fresh_mixture(start, rows, self.fresh_K, self.fresh_iters, self.cleanup_pairs,
                                int(self.rng.integers(2**31)))
        keep = (summary.counts >= max(self.min_items, 0.02 * len(rows))).nonzero().flatten()
        return summary.select(keep) if len(keep) > 1 else None

    def candidate(self, posterior, total, target, fresh, mass):
        """``posterior`` with ``fresh``'s components appended, their statistics scaled to the target's singlet mass
        ``mass`` and their sticks taking that share of the target's expected weight."""
        scale = mass / float(fresh.counts.sum())
        born = posterior.family.posterior(fresh.counts * scale, {k: v * scale for k, v in fresh.stats.items()})
        shares = (fresh.counts * scale / total.counts[target]).to(posterior.rho.dtype)
        shares = shares * min(1.0, 0.99 / float(shares.sum()))  # the target keeps at least 1% of its weight
        rho, omega = split_sticks(posterior.rho, posterior.omega, target, shares, keep_target=True)
        component = {k: torch.cat([v, born[k]]) for k, v in posterior.component.items()}
        return posterior.with_globals(rho, omega, component=component)

    def propose(self, state, driver):
        posterior, total = state.posterior, state.cache.total
        if posterior.K >= self.max_K or not self.memory.num_singlets:
            return
        target = self.target(state)
        if target is None:
            return
        rows, mass = self.subsample(target)
        fresh = None if rows is None else self.fresh(posterior, rows)
        if fresh is None or posterior.K + fresh.K > self.max_K:
            state.tried_components(self.name, posterior.K).append(target)
            return
        if self.judge(state, driver, self.candidate(posterior, total, target, fresh, mass)):
            state.tried_components(self.name, state.posterior.K, reset=True)
        else:
            state.tried_components(self.name, posterior.K).append(target)

    def converged(self, state):
        """Every component was tried since the last accepted birth (or the model is at ``max_K``)."""
        K = state.posterior.K
        return K >= self.max_K or len(state.tried_components(self.name, K)) >= K


class TiedHDPMergeMove(TiedHDPMove):
    """Merges for the memory-bounded HDP (module docstring): after each lap, up to ``max_pairs`` candidate pairs, best
    first by eq. 12 and none rejected since the components last changed, each judged after ``rounds`` tied local
    steps of its own; the first accepted ends the lap's merges.

    Measured against judging a pair on the lap's tied factors with its responsibilities added (no local step) on the
    full-size joint segmentation (30 tiles of 200 x 160 pixels, 1,000 clumps, births and merges): that accepted 1
    merge in 30 epochs and reached FE ratio 0.9691; these candidates, whose items move to other components as well,
    42 merges and 1.0028 (``benchmarks/results/bench_memory_bounded_hdp_moves.txt``).

    :param int pairs_per_component: candidate partners per component by eq. 12.
    :param int max_pairs: most candidates tried per lap (each costs ``rounds`` tied local steps).
    :param int rounds: see :class:`TiedHDPMove`.
    """

    name = "merge"

    def __init__(self, pairs_per_component=2, max_pairs=2, rounds=2):
        super().__init__(rounds)
        self.pairs_per_component = as_positive_int(pairs_per_component, "pairs_per_component")
        self.max_pairs = as_positive_int(max_pairs, "max_pairs")

    def pairs(self, state):
        """This lap's candidate pairs ``[(a, b), ...]``, best first by eq. 12, none rejected since the components
        last changed."""
        total = state.cache.total
        pairs, scores = merge_scores(state.posterior.family, total)
        ranked = candidate_pairs(pairs, scores, total.K, self.pairs_per_component).tolist()
        tried = state.tried_components(self.name, total.K)
        return [tuple(p) for p in ranked if tuple(p) not in tried][:self.max_pairs]

    @staticmethod
    def candidate(posterior, total, a, b):
        """``posterior`` with component ``b`` merged into ``a``: the pair's summed statistics, both sticks' weight."""
        keep = [k for k in range(posterior.K) if k != b]
        counts = total.counts.clone()
        counts[a] += counts[b]
        stats = {}
        for k, v in total.stats.items():
            v = v.clone()
            v[a] += v[b]
            stats[k] = v[keep]
        rho, omega = merged_sticks(posterior.rho, posterior.omega, a, b)
        return posterior.with_globals(rho, omega, component=posterior.family.posterior(counts[keep], stats))

    def propose(self, state, driver):
        if state.posterior.K < 2:
            return
        for a, b in self.pairs(state):
            K = state.posterior.K
            if self.judge(state, driver, self.candidate(state.posterior, state.cache.total, a, b)):
                return  # the components changed: the next lap ranks the pairs afresh
            state.tried_components(self.name, K).append((a, b))


#: the moves the memory-bounded HDP's model building takes, by name, in the order they run
TIED_HDP_MOVES = {"birth": TiedHDPBirthMove, "merge": TiedHDPMergeMove}
