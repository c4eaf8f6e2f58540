"""Additive summaries of grouped data under an HDP (groups of items, any observation family)."""

from dataclasses import dataclass, field

import torch

from .base import AdditiveSummary


@dataclass
class GroupSummary(AdditiveSummary):
    """What the HDP bound needs from a set of groups (documents, images) of items, given their
    local parameters: item responsibilities ``r`` and group Dirichlets ``theta`` over ``K + 1``
    entries (the last the tail beyond the truncation). Every field adds over groups.

    :ivar counts: ``(K,)`` expected items per component.
    :ivar dict stats: the family's responsibility-weighted statistics, each ``(K, ...)``.
    :ivar sum_log_pi: ``(K + 1,)`` :math:`\\sum_d E_q[\\log\\pi_{dk}]`.
    :ivar doc_term: scalar, the group terms that do not depend on the globals (see
        :class:`~pyro_memo.topics.TopicSummary`).
    :ivar entropy: ``(K,)`` :math:`-\\sum_{d,n} r_{dnk}\\log r_{dnk}`.
    :ivar int num_docs: groups summarised.
    :ivar dict extras: per-move terms computed from the batch (see :class:`~pyro_memo.summaries.AdditiveSummary`).
    """

    counts: torch.Tensor
    stats: dict
    sum_log_pi: torch.Tensor
    doc_term: torch.Tensor
    entropy: torch.Tensor
    num_docs: int = 0
    extras: dict = field(default_factory=dict)

    component_fields = ("counts", "stats", "entropy")
    tail_fields = ("sum_log_pi",)
    scalar_fields = ("doc_term",)
    count_field = "num_docs"

    @property
    def num_items(self):
        """Alias of ``num_docs`` (the memo counts groups)."""
        return self.num_docs

    @property
    def sizes(self):
        """``(K,)`` expected items per component."""
        return self.counts
