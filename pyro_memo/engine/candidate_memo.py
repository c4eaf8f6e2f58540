"""A candidate memo built beside the main fit during a lap, kept only when the exact objective
rises: the acceptance step of every model's births, deletes and merges that re-run local steps
(Hughes & Sudderth 2013 §3.1; for the HDP, Hughes, Kim & Sudderth 2015 §5).

A move picks a target at the start of a lap; after each batch's local step it runs a second one
under the candidate globals (the current ones with the target changed), so the candidate keeps
pace with the fit through the lap; at the lap's end the complete candidate memo gets its optimal
globals (``posterior.optimal_for``) and replaces the memo, the globals and the warm starts only if
its exact objective is higher.

A move with ``patience`` runs a candidate that fell short for up to that many more laps of its own
memoized fit beside the main one, from the optimum of its last memo: after each batch's local step under
the candidate's globals, its summary replaces the batch's in the candidate's memo and the globals are
refit to it (eq. 11, as the main fit's are), and the two are compared again at the lap's end. Fresh
components start behind a fit that has run many laps; on Wikipedia (21 topics, six three-way splits, the
whole corpus one batch) every split lost to the fit after one lap, its gain rose by 0.0005-0.0015 nats
per token in the second, and four of the six won after three.
"""

import torch

from ..checks import as_count
from ..memo.cache import SummaryCache
from ..memo.checkpoint import class_path, resolve_class
from ..posterior import VariationalPosterior
from ..summaries import AdditiveSummary
from .moves import Move

__all__ = ["CandidateMemoMove", "adopt", "candidate_total", "score_candidate", "smallest_untried"]


def candidate_total(batches):
    """The total summary of a candidate memo (batch key -> ``(warm_start, summary)``)."""
    total = None
    for _, summary in batches.values():
        total = summary if total is None else total + summary
    return total


def score_candidate(state, candidate, batches):
    """``(current, value, optimum, total)``: the exact objective of the fit's memo, that of a complete
    candidate memo ``batches`` (batch key -> ``(warm_start, summary)``, one per memo batch, from local steps
    run under the globals ``candidate``, any posterior), the candidate's globals optimal for it (started
    from ``candidate``) and the memo's total."""
    current = float(state.posterior.elbo(state.cache.total))
    total = candidate_total(batches)
    optimum = candidate.optimal_for(total)
    return current, float(optimum.elbo(total)), optimum, total


def adopt(state, optimum, batches, total):
    """Replace the fit's memo, warm starts and globals by a candidate's: its memo ``batches`` (batch
    key -> ``(warm_start, summary)``) with their ``total``, and the globals ``optimum`` optimal for it."""
    for key, (warm, summary) in batches.items():
        if warm is None:  # a model without local factors to keep
            state.warm_starts.pop(key, None)
        else:
            state.warm_starts[key] = warm
        state.cache.batches[key] = summary
    state.cache.total = total
    state.posterior = optimum


def smallest_untried(state, name, sizes, max_share):
    """The smallest component (by ``sizes``) that move ``name`` has not tried since the components
    were last renumbered and that holds at most ``max_share`` of the total; ``None`` if none."""
    tried = state.tried_components(name, len(sizes))
    share = sizes / sizes.sum()
    for k in torch.argsort(sizes).tolist():
        if k not in tried and float(share[k]) <= max_share:
            return k
    return None


class CandidateMemoMove(Move):
    """Base of the moves that build a candidate memo beside the main fit through a lap: a
    subclass picks ``target`` and records ``num_components`` in ``start_lap``, and fills
    ``batches`` (key -> ``(warm_start, summary)``) and ``candidate`` (its globals) in
    ``visit_batch``; ``end_lap`` accepts the candidate only when its exact objective is higher,
    and remembers rejected targets in the state (:meth:`~pyro_memo.MemoState.tried_components`).

    :param int patience: laps a candidate that fell short runs on (see the module docstring) before it
        is rejected. A subclass that takes it calls :meth:`take_continued` in ``start_lap``, runs the
        lap's candidate steps under the globals it returns and, after each, takes the refit globals
        from :meth:`run_on`; a move kept meanwhile (the components renumbered) ends the continuation.
        (The relational moves instead refine their candidate at the lap's end, over the batches they keep.)
    """

    name = None

    def __init__(self, patience=0):
        self.target, self.candidate, self.batches, self.num_components = None, None, {}, None
        self.patience = as_count(patience, "patience")
        #: a candidate that fell short and runs on: ``{"posterior", "summaries", "plan", "laps", "K", "gains"}``
        self.continued = None
        #: the memo of the candidate that runs on this lap (:class:`~pyro_memo.inference.SummaryCache`), or ``None``
        self.running = None
        #: laps the lap's candidate ran before this one (``0`` for a new candidate)
        self.laps_run = 0

    def end_lap(self, state, driver):
        complete = self.target is not None and set(self.batches) == set(state.cache.batches) \
            and state.cache.total.K == self.num_components
        if complete:
            current, value, optimum, total = score_candidate(state, self.candidate, self.batches)
            laps = self.laps_run + 1
            self.log(state, proposed=1, accepted=int(value > current))
            if value > current:
                adopt(state, optimum, self.batches, total)
                self.record_gain(state, current, value)
                state.tried_components(self.name, state.posterior.K, reset=True)
            elif laps <= self.patience:
                summaries = {key: summary for key, (_, summary) in self.batches.items()}
                self.continued = {"posterior": optimum, "summaries": summaries, "plan": self.kept_plan(), "laps": laps,
                                  "K": state.posterior.K, "gains": len(state.move_gains)}
            else:
                self.mark_tried(state)
        self.target, self.candidate, self.batches, self.running = None, None, {}, None

    def take_continued(self, state, dtype=None, device=None):
        """In ``start_lap``: ``(globals, plan)`` of the candidate that runs on this lap (the optimum of its
        last memo, in ``running``, and what :meth:`kept_plan` returned for it), on the fit's ``dtype`` and
        ``device`` (those read from a checkpoint are on the CPU); or ``None`` (a new candidate: none runs
        on, or a move kept since renumbered the components)."""
        continued, self.continued, self.laps_run, self.running = self.continued, None, 0, None
        if continued is None or continued["K"] != state.posterior.K or continued["gains"] != len(state.move_gains):
            return None
        self.laps_run = continued["laps"]
        self.running = SummaryCache()
        for key, summary in continued["summaries"].items():
            self.running.replace(key, summary.to(dtype, device))
        return continued["posterior"].to(dtype=dtype, device=device), continued["plan"]

    def run_on(self, key):
        """After a candidate that runs on put batch ``key``'s ``(warm_start, summary)`` in ``batches``: that
        summary replaces the batch's in the candidate's memo, and returns the globals optimal for the memo
        (started from ``candidate``)."""
        self.running.replace(key, self.batches[key][1])
        return self.candidate.optimal_for(self.running.total)

    def kept_plan(self):
        """What a candidate that runs on needs of this lap's plan besides its globals (default: the target)."""
        return {"target": self.target}

    def mark_tried(self, state):
        """A rejected candidate: its target counts as tried (:meth:`~pyro_memo.MemoState.tried_components`)."""
        state.tried_components(self.name, state.posterior.K).append(self.target)

    def converged(self, state):
        """Not while a candidate runs on."""
        return self.continued is None

    def state_dict(self):
        continued = self.continued
        if continued is not None:
            posterior, summaries = continued["posterior"], continued["summaries"]
            continued = dict(continued, posterior=posterior.state_dict(), posterior_class=class_path(posterior),
                             summary_class=class_path(next(iter(summaries.values()))),
                             summaries=[[key, s.to(device="cpu").to_dict()] for key, s in summaries.items()])
        return {"continued": continued}

    def load_state_dict(self, state):
        """Read the output of ``state_dict``; the candidate's globals and memo stay on the CPU until
        :meth:`~pyro_memo.engine.candidate_memo.CandidateMemoMove.take_continued` hands them on."""
        continued = state.get("continued")
        if continued is not None:
            where = "a move's checkpoint"
            posterior = resolve_class(continued["posterior_class"], VariationalPosterior, where)
            summary = resolve_class(continued["summary_class"], AdditiveSummary, where)
            summaries = {key: summary.from_dict(s) for key, s in continued["summaries"]}
            continued = {k: v for k, v in continued.items() if k not in ("posterior_class", "summary_class")}
            continued.update(posterior=posterior.from_state_dict(continued["posterior"], None), summaries=summaries)
        self.continued = continued
