"""Delete moves: reassign a component's items to the others, kept only on an exact ELBO gain."""

import copy

import torch

from ...checks import as_count, as_share
from ...families import SparseResponsibilities
from ...summaries import Summary
from .base import Move, optimal_elbo


class DeleteMove(Move):
    """Propose removing small components.

    At the start of a lap the proposals are: all components holding less than
    ``max_fraction`` of the data together, and each of the ``max_single`` smallest of them
    alone. During the lap every batch also computes its summary under each proposal's
    alternative local step, :math:`r'_{nj} \\propto \\tilde r_{nj}` over the surviving
    components (the exact local optimum without the deleted ones). After the lap each
    alternative is scored exactly with its optimal globals; the best one replaces the memo
    only if the full-data ELBO rises. With sparse responsibilities (the driver's ``sparse_L``)
    the alternative keeps each item's surviving support, at most ``L`` components, so the memo
    stays in the restricted family (Hughes & Sudderth 2016) that later local steps optimise over.

    :param int max_single: single-component proposals per lap.
    :param float max_fraction: only components holding less than this share of the data.
    """

    name = "delete"

    def __init__(self, max_single=1, max_fraction=0.05):
        self.max_single = as_count(max_single, "max_single")
        self.max_fraction = as_share(max_fraction, "max_fraction")
        self.proposals = []
        self.alternatives = []
        self.sparse_L = None

    def start_lap(self, state, driver):
        self.sparse_L = getattr(driver, "sparse_L", None)
        total = state.cache.total
        self.proposals, self.alternatives = [], []
        if total is None or total.K < 2:
            return
        order = torch.argsort(total.counts).tolist()
        small = [k for k in order if float(total.counts[k]) < self.max_fraction * total.num_items][: total.K - 1]
        proposals = [small] if len(small) > 1 else []
        proposals += [[k] for k in small[: self.max_single]]
        self.proposals = proposals
        self.alternatives = [{} for _ in proposals]
        self.num_components = total.K

    def batch_visit(self, posterior, key, x, resp):
        """Batch side: the batch's summary under each proposal's alternative local step."""
        if not self.proposals:
            return None
        post = posterior
        log_joint = None
        alternatives = []
        for removed in self.proposals:
            keep = [j for j in range(post.K) if j not in removed]
            # renormalising the surviving responsibilities is the softmax over the surviving
            # columns; rows whose survivors hold (numerically) no mass are redone in log space
            kept = resp[:, keep]
            mass = kept.sum(-1, keepdim=True)
            alt = kept / mass.clamp_min(torch.finfo(resp.dtype).tiny)
            weak = (mass.squeeze(-1) < 1e-8).nonzero().flatten()
            if len(weak):
                if log_joint is None:
                    log_joint = post.log_joint_resp(x)
                alt[weak] = self.restricted_optimum(log_joint[weak][:, keep])
            alt = alt.masked_fill(alt < torch.finfo(alt.dtype).tiny ** 0.5, 0.0)
            alternatives.append(Summary.from_responsibilities(post.family, x, alt))
        return alternatives

    def take_visit(self, state, key, payload, summary):
        """Driver side: keep the batch's alternative summaries."""
        for parts, alternative in zip(self.alternatives, payload, strict=True):
            parts[key] = alternative
        return summary

    def for_workers(self):
        """The proposals, without the lap's alternative summaries."""
        light = copy.copy(self)
        light.alternatives = []
        return light

    def restricted_optimum(self, log_joint):
        """The optimal responsibilities for unnormalised log-weights ``log_joint`` over the surviving
        components: their softmax, on each item's ``sparse_L`` largest when sparse."""
        if self.sparse_L is None:
            return torch.softmax(log_joint, dim=-1)
        return SparseResponsibilities.top(log_joint, self.sparse_L).dense()

    def end_lap(self, state, driver):
        cache = state.cache
        if not self.proposals or any(set(a) != set(cache.batches) for a in self.alternatives) \
                or cache.total.K != self.num_components:
            return  # a reverted birth changed the components: these alternatives no longer apply
        current, _ = optimal_elbo(state.posterior, cache.total)
        best = None
        for removed, parts in zip(self.proposals, self.alternatives, strict=True):
            total = sum(parts.values(), Summary.zeros(state.posterior.family, cache.total.K - len(removed)))
            value, posterior = optimal_elbo(state.posterior, total)
            if value > current and (best is None or value > best[0]):
                best = (value, posterior, parts)
        self.log(state, proposed=len(self.proposals), accepted=int(best is not None))
        if best is not None:
            value, posterior, parts = best
            cache.batches = dict(parts)
            cache.total = cache.recomputed_total()
            state.posterior = posterior.update(cache.total)
            self.record_gain(state, current, value)
        self.proposals, self.alternatives = [], []
