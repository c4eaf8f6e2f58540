"""Over-relaxed batch steps: memoized coordinate ascent that moves faster and never loses ground.

Memoized VB (Hughes & Sudderth 2013, Alg. 1) refreshes one batch's summary per step and refits
the globals to the whole memo, whose other batches were summarised under older globals: a lap
moves the globals by about what one full-batch VB iteration would, and coordinate ascent is slow
where components and assignments are strongly coupled. Stochastic VI moves faster early on
because its steps over-relax (:math:`\\rho_t B > 1`), at the price of a noisy, non-monotone
objective.

Adaptive over-relaxed bound optimisation (Salakhutdinov & Roweis 2003) gets the speed and keeps
the guarantee. The globals are affine in the whole-data summary :math:`S` (eq. 10: natural
parameters = prior + :math:`S`), so a step in summary space is a step of the globals. Before a
batch step the driver extrapolates the summary along the last step's change
:math:`\\Delta = S_t - S_{t-1}`,

.. math:: \\tilde S = S_t + (\\omega - 1)\\,\\Delta,

runs the batch's local step under the globals optimal for :math:`\\tilde S` and keeps its summary
only when the exact memoized objective (eq. 8) of the new memo, with its own optimal globals, is
at least the objective before the step:

.. math:: \\mathcal L(M', G^*(S')) \\ge \\mathcal L(M_t, G^*(S_t)).

Any local factors give an exact ELBO with the globals optimal for their summary, so an accepted
step is as exact as an ordinary one; a rejected one is redone by exact batch steps, which never
lower the objective.

One over-relaxed step covers a whole number of batches run against the proposal's globals, at least
``step_items`` items but at most a third of a lap (``min_steps``): the proposal and its check, a
few small dense operations on the ``K`` components, then cost little beside the local steps they
serve, and the direction stays fresh. The step's batches read one set of globals, so the local step's
terms of the globals alone are computed once a step instead of once a batch
(:meth:`~pyro_memo.DPMixturePosterior.log_joint_function`): on the toy data (5 batches of
1,000 items a step) an over-relaxed lap takes 0.84-0.94 times an exact lap, 1 and 2 threads, quiet
and busy (``benchmarks/bench_overrelax.py --same-process``). The change :math:`\\Delta` is
that of the last step (over-relaxed or exact), kept across laps and in checkpoints. The factor
:math:`\\omega` grows by ``grow`` after each accepted step (up to ``max_factor``) and falls back to 1
after a rejection, as in Salakhutdinov & Roweis' adaptive rule; so rejections, the only extra cost
(the step's local steps run again), stay rare (``benchmarks/bench_overrelax.py`` counts them).

Over-relaxation starts after ``warmup_laps`` laps of exact steps (default 2: the first lap builds the
memo, the second refreshes every batch under globals fitted to the complete memo). Extrapolating earlier,
while the first laps' large changes still decide which components survive, amplifies the shrinking of
small components; on 100,000 toy patches (K = 25, 100 batches, 10 laps) one seed in five then ended with
two true components merged (12.00 nats per item against 12.46-12.48), and starting at lap 3 kept all
five seeds in the good basin (mean 12.470 against 12.376) while doing no worse on 3,000 toy patches and
Fashion-MNIST (``benchmarks/results/bench_memo_schedule_compare.txt``).

Two limits keep proposals valid distributions: each component's extrapolation may remove at most
``shrink`` of its size (a shrinking component is extrapolated less, never below zero), and
components whose extrapolated factors are not valid distributions (a scale matrix that is not
positive definite: zero-mean image patches have a direction with almost no variance) are not
extrapolated (:meth:`~pyro_memo.posterior.VariationalPosterior.valid_components`).
"""

import math

import torch


class Overrelaxation:
    """The adaptive over-relaxation of :class:`~pyro_memo.engine.MemoizedDriver`'s batch steps.

    :param float grow: :math:`\\omega` is multiplied by this after each accepted proposal (and starts
        from it after a rejection and one exact step).
    :param float max_factor: the largest :math:`\\omega` (``None``: the number of steps in a lap, so that
        one step's change extrapolates at most to a whole lap's, and at least 2).
    :param float shrink: the largest fraction of a component's size one extrapolation may remove.
    :param int step_items: the fewest items one over-relaxed step covers (whole batches; 1: one batch
        per step), unless a lap would then take fewer than ``min_steps`` steps.
    :param int min_steps: the fewest steps a lap takes (fewer only when it has fewer batches).
    :param int warmup_laps: laps of exact steps before the first over-relaxed one (at least 1: the
        first lap builds the memo). With 2, the second lap refreshes every batch under globals fitted
        to the complete memo before any step extrapolates.
    """

    def __init__(self, grow=1.5, max_factor=None, shrink=0.5, step_items=5000, min_steps=3, warmup_laps=2):
        if not grow > 1:
            raise ValueError(f"grow must be greater than 1; got {grow!r}")
        if max_factor is not None and not max_factor >= 1:
            raise ValueError(f"max_factor must be at least 1 (or None: the number of steps in a lap); "
                             f"got {max_factor!r}")
        if not 0 < shrink < 1:
            raise ValueError(f"shrink must be in (0, 1); got {shrink!r}")
        self.grow, self.max_factor, self.shrink = float(grow), max_factor, float(shrink)
        self.step_items = _positive_int("step_items", step_items)
        self.min_steps = _positive_int("min_steps", min_steps)
        self.warmup_laps = _positive_int("warmup_laps", warmup_laps, " (the first lap builds the memo)")

    def span(self, num_items, num_rounds):
        """Rounds per over-relaxed step: enough for ``step_items`` items when the lap's ``num_items``
        fall evenly into its ``num_rounds`` rounds, but no more than leaves ``min_steps`` steps a lap."""
        per_round = num_items / max(num_rounds, 1)
        enough = math.ceil(self.step_items / max(per_round, 1.0))
        return max(1, min(enough, num_rounds // self.min_steps))

    def limit(self, num_steps):
        """The largest factor when a lap takes ``num_steps`` steps."""
        return float(max(num_steps, 2) if self.max_factor is None else self.max_factor)

    def factors(self, total, step, omega):
        """``(K,)`` extrapolation factors :math:`\\omega - 1`, each cut so that no component loses more
        than ``shrink`` of its size."""
        size, change = total.sizes, step.sizes
        falling = (-change).clamp(min=0)
        tiny = torch.finfo(size.dtype).tiny
        room = torch.where(falling > 0, self.shrink * size.clamp(min=0) / falling.clamp(min=tiny),
                           torch.full_like(size, math.inf))
        return room.clamp(max=omega - 1.0)

    def proposal(self, posterior, total, step, omega):
        """The globals optimal for the extrapolated summary, or ``None`` when nothing can be extrapolated.

        :param posterior: the current globals (optimal for ``total``).
        :param total: the memo's whole-data summary :math:`S_t`.
        :param step: the last step's change :math:`\\Delta` (same components as ``total``).
        :param float omega: the factor :math:`\\omega > 1`.
        """
        factors = self.factors(total, step, omega)
        if not bool((factors > 0).any()):
            return None
        candidate = posterior.optimal_for(total.extrapolated(step, factors))
        valid = candidate.valid_components()
        if valid is None or bool(valid.all()):
            return candidate
        # the other components keep their exact factors, which are valid
        factors = torch.where(valid, factors, torch.zeros_like(factors))
        if not bool((factors > 0).any()):
            return None
        return posterior.optimal_for(total.extrapolated(step, factors))

    def after(self, omega, accepted, num_steps):
        """The next factor (a lap of ``num_steps`` steps): grown after an accepted proposal, 1 after a
        rejected one, ``grow`` after an exact step taken at 1."""
        if accepted is None:
            return self.grow if omega <= 1.0 else omega
        return min(omega * self.grow, self.limit(num_steps)) if accepted else 1.0


def _positive_int(name, value, why=""):
    """``value`` if it is a positive integer (not a bool), else a one-line ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer{why}; got {value!r}")
    return value


def as_overrelaxation(value):
    """``overrelax`` as an :class:`Overrelaxation` or ``None``: ``True`` (the defaults), ``False`` /
    ``None`` (off) or an instance."""
    if value is True:
        return Overrelaxation()
    if value is False or value is None:
        return None
    if isinstance(value, Overrelaxation):
        return value
    raise ValueError(f"overrelax must be True, False or an Overrelaxation; got {value!r}")
