"""The summary of a mixture's items: counts, family statistics and assignment entropy.

A :class:`Summary` holds everything the exact ELBO (Hughes & Sudderth 2013, eq. 8) needs from
the data once the local assignments :math:`\\hat r_{nk}` are fixed: the counts
:math:`\\hat N_k`, the family's sufficient statistics :math:`s_k(x)` and the assignment entropy
per component. Summaries of disjoint batches add.
"""

from dataclasses import dataclass, field

import torch

from .base import AdditiveSummary

#: the most responsibilities :func:`entropy_per_component` takes the logarithm of at once (2 MiB of float64)
ENTROPY_CHUNK = 2**18


def entropy_per_component(resp, weights=None):
    """:math:`-\\sum_n c_n \\hat r_{nk} \\log \\hat r_{nk}` for each ``k`` (``0 log 0 = 0``), with ``weights``
    :math:`c_n` ``(N,)`` the items' multiplicities (token counts; default ones).

    Computed over chunks of :data:`ENTROPY_CHUNK` numbers as :math:`r \\log \\max(r, \\text{tiny})`, which is
    :math:`r \\log r` but for subnormal :math:`r` (a difference below 1e-305): a fresh temporary of the items'
    size would cost as much in page faults as the logarithms themselves, and ``torch.special.xlogy`` is not
    vectorised (10 million responsibilities, one thread: 0.116 s by ``xlogy`` in 16 MiB chunks, 0.053 s this
    way in 2 MiB ones)."""
    step = max(1, ENTROPY_CHUNK // max(1, resp.shape[-1]))
    dtype = resp.dtype if weights is None else torch.promote_types(resp.dtype, weights.dtype)
    total = resp.new_zeros(resp.shape[-1], dtype=dtype)
    tiny = torch.finfo(resp.dtype).tiny
    for start in range(0, len(resp), step):
        part = resp[start:start + step]
        terms = part.clamp_min(tiny).log_().mul_(part).to(dtype)
        total -= terms.sum(0) if weights is None else weights[start:start + step].to(dtype) @ terms
    return total


@dataclass
class Summary(AdditiveSummary):
    """Responsibility-weighted statistics of a set of items for ``K`` components.

    :param torch.Tensor counts: ``(K,)`` expected counts :math:`\\hat N_k`.
    :param dict stats: family statistics, each ``(K, ...)``.
    :param torch.Tensor entropy: ``(K,)`` assignment entropy :math:`-\\sum_n r_{nk}\\log r_{nk}`.
    :param int num_items: number of data items summarised.
    :param dict extras: per-move terms computed from the batch (see :class:`~pyro_memo.summaries.AdditiveSummary`).
    """

    counts: torch.Tensor
    stats: dict
    entropy: torch.Tensor
    num_items: int = field(default=0)
    extras: dict = field(default_factory=dict)

    component_fields = ("counts", "stats", "entropy")

    @classmethod
    def from_responsibilities(cls, family, x, resp):
        """Summarise items ``x`` with responsibilities ``resp`` under ``family``."""
        return cls(resp.sum(0), family.stats(x, resp), entropy_per_component(resp), x.shape[0])

    @classmethod
    def from_sparse_responsibilities(cls, family, x, resp):
        """Summarise items ``x`` with :class:`~pyro_memo.families.SparseResponsibilities` ``resp``:
        the summary of ``resp.dense()``, computed from the ``L`` kept entries per item (Hughes &
        Sudderth 2016; :meth:`~pyro_memo.ConjugateFamily.sparse_stats`)."""
        return cls(resp.counts(), family.sparse_stats(x, resp), resp.entropy(), x.shape[0])

    @classmethod
    def zeros(cls, family, K):
        """The summary of no data for ``K`` components."""
        dummy = torch.zeros((1, family.dim), dtype=family.dtype, device=family.device)
        zero = torch.zeros((1, K), dtype=family.dtype, device=family.device)
        return cls(zero.sum(0), family.stats(dummy, zero), zero.sum(0), 0)

    @property
    def sizes(self):
        """``(K,)`` expected number of items per component."""
        return self.counts

    def merge(self, a, b, entropy_ab):
        """The summary after component ``b`` is merged into ``a`` (Hughes & Sudderth 2013 §3.2):
        :math:`\\hat r_{na} \\leftarrow \\hat r_{na} + \\hat r_{nb}`. Counts and statistics add; the
        merged entropy :math:`-\\sum_n (r_{na} + r_{nb}) \\log(r_{na} + r_{nb})` is not a function of
        the two entropies and must be given (``entropy_ab``). Components after ``b`` shift down."""
        return self.merged(a, b, entropy=entropy_ab)
