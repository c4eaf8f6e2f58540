"""Additive per-batch summaries: the one currency of pyro-memo.

A :class:`Summary` holds everything the exact ELBO (paper 000 eq. 8) needs from the
data once the local assignments :math:`\\hat r_{nk}` are fixed: the counts
:math:`\\hat N_k`, the family's sufficient statistics :math:`s_k(x)` and the
assignment entropy per component. Summaries of disjoint batches add; memoized
inference, births, merges and out-of-core runs are ways of adding and subtracting them.
"""

from dataclasses import dataclass, field

import torch


def entropy_per_component(resp):
    """:math:`-\\sum_n \\hat r_{nk} \\log \\hat r_{nk}` for each ``k`` (``0 log 0 = 0``)."""
    return -torch.special.xlogy(resp, resp).sum(0)


@dataclass
class Summary:
    """Responsibility-weighted statistics of a set of items for ``K`` components.

    :param torch.Tensor counts: ``(K,)`` expected counts :math:`\\hat N_k`.
    :param dict stats: family statistics, each ``(K, ...)``.
    :param torch.Tensor entropy: ``(K,)`` assignment entropy :math:`-\\sum_n r_{nk}\\log r_{nk}`.
    :param int num_items: number of data items summarised.
    """

    counts: torch.Tensor
    stats: dict
    entropy: torch.Tensor
    num_items: int = field(default=0)

    @classmethod
    def from_responsibilities(cls, family, x, resp):
        """Summarise items ``x`` with responsibilities ``resp`` under ``family``."""
        return cls(resp.sum(0), family.stats(x, resp), entropy_per_component(resp), x.shape[0])

    @classmethod
    def zeros(cls, family, K):
        """The summary of no data for ``K`` components."""
        dummy = torch.zeros((1, family.dim), dtype=family.dtype, device=family.device)
        zero = torch.zeros((1, K), dtype=family.dtype, device=family.device)
        return cls(zero.sum(0), family.stats(dummy, zero), zero.sum(0), 0)

    @property
    def K(self):
        return self.counts.shape[0]

    def _combine(self, other, sign):
        if not isinstance(other, Summary):
            return NotImplemented
        if other.K != self.K or other.stats.keys() != self.stats.keys():
            raise ValueError(f"cannot combine summaries with K={self.K} and K={other.K}")
        return Summary(
            self.counts + sign * other.counts,
            {k: v + sign * other.stats[k] for k, v in self.stats.items()},
            self.entropy + sign * other.entropy,
            self.num_items + sign * other.num_items,
        )

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def scaled(self, factor):
        """Every additive quantity multiplied by ``factor`` (a batch blown up to data scale)."""
        return Summary(self.counts * factor, {k: v * factor for k, v in self.stats.items()},
                       self.entropy * factor, self.num_items)

    def select(self, index):
        """The summary restricted (and reordered) to components ``index``."""
        index = torch.as_tensor(index, device=self.counts.device)
        return Summary(
            self.counts[index],
            {k: v[index] for k, v in self.stats.items()},
            self.entropy[index],
            self.num_items,
        )

    def expand(self, K):
        """This summary with zero components appended up to ``K`` (nested truncation: the
        new components have no assignments yet)."""
        extra = K - self.K
        if extra < 0:
            raise ValueError(f"cannot expand a summary with K={self.K} to K={K}")

        def pad(t):
            return torch.cat([t, t.new_zeros((extra,) + t.shape[1:])])

        return Summary(pad(self.counts), {k: pad(v) for k, v in self.stats.items()}, pad(self.entropy),
                       self.num_items)

    def merge(self, a, b, entropy_ab):
        """The summary after component ``b`` is merged into ``a`` (paper 000 §3.2):
        :math:`\\hat r_{na} \\leftarrow \\hat r_{na} + \\hat r_{nb}`. Counts and statistics add; the
        merged entropy :math:`-\\sum_n (r_{na} + r_{nb}) \\log(r_{na} + r_{nb})` is not a function of
        the two entropies and must be given (``entropy_ab``). Components after ``b`` shift down."""
        keep = [k for k in range(self.K) if k != b]

        def combine(t):
            t = t.clone()
            t[a] = t[a] + t[b]
            return t[keep]

        entropy = self.entropy.clone()
        entropy[a] = entropy_ab
        return Summary(combine(self.counts), {k: combine(v) for k, v in self.stats.items()}, entropy[keep],
                       self.num_items)

    def to(self, dtype=None, device=None):
        """This summary with every tensor moved to ``dtype`` / ``device``."""

        def move(t):
            return t.to(dtype=dtype or t.dtype, device=device)

        return Summary(
            move(self.counts), {k: move(v) for k, v in self.stats.items()}, move(self.entropy), self.num_items
        )
