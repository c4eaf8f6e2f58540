"""Additive summaries of an HDP topic model's local parameters (the memoized currency)."""

from dataclasses import dataclass, field

import torch

from .base import AdditiveSummary


@dataclass
class TopicSummary(AdditiveSummary):
    """What the HDP bound needs from a set of documents, given their local parameters
    ``r`` (token-topic responsibilities) and ``theta`` (document Dirichlets over ``K + 1``
    entries, the last one the tail beyond the truncation). Every field adds over documents.

    :ivar word_counts: ``(K, V)`` :math:`S_{kv} = \\sum_{d,n: x_{dn}=v} r_{dnk}`.
    :ivar sum_log_pi: ``(K + 1,)`` :math:`\\sum_d E_q[\\log\\pi_{dk}]`.
    :ivar doc_term: scalar :math:`\\sum_d [\\sum_k (N_{dk} - \\theta_{dk}) E_q\\log\\pi_{dk} -
        c(\\theta_d)]` with :math:`c(\\theta) = \\log\\Gamma(\\sum_k\\theta_k) - \\sum_k\\log\\Gamma(\\theta_k)`:
        the part of the document terms that does not depend on the globals.
    :ivar entropy: ``(K,)`` :math:`-\\sum_{d,n} r_{dnk}\\log r_{dnk}` (tokens weighted by count).
    :ivar int num_docs: documents summarised.
    :ivar dict extras: per-move terms computed from the batch (see :class:`~pyro_memo.summaries.AdditiveSummary`).
    """

    word_counts: torch.Tensor
    sum_log_pi: torch.Tensor
    doc_term: torch.Tensor
    entropy: torch.Tensor
    num_docs: int = 0
    extras: dict = field(default_factory=dict)

    component_fields = ("word_counts", "entropy")
    tail_fields = ("sum_log_pi",)
    scalar_fields = ("doc_term",)
    count_field = "num_docs"

    @property
    def num_items(self):
        """Alias of ``num_docs`` (the memo counts documents)."""
        return self.num_docs

    @property
    def topic_counts(self):
        """``(K,)`` expected tokens per topic."""
        return self.word_counts.sum(1)

    @property
    def sizes(self):
        """``(K,)`` expected tokens per topic (the size moves rank components by)."""
        return self.topic_counts

    @classmethod
    def zeros(cls, K, V, dtype=torch.float64, device=None):
        z = torch.zeros((), dtype=dtype, device=device)
        return cls(torch.zeros(K, V, dtype=dtype, device=device), torch.zeros(K + 1, dtype=dtype, device=device),
                   z, torch.zeros(K, dtype=dtype, device=device), 0)
