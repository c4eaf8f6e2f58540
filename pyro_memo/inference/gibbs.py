"""What the Gibbs samplers of DP mixtures (Blei & Jordan 2006, §4) share: their result and predictive."""

import math
from dataclasses import dataclass, field

import torch

from ..checks import as_count, as_positive_float, as_positive_int, as_seed
from ..summaries import Summary


def hard_summary(family, x, labels, K):
    """The :class:`Summary` of hard assignments ``labels`` (values in ``0..K-1``)."""
    resp = torch.zeros(x.shape[0], K, dtype=x.dtype, device=x.device)
    resp[torch.arange(x.shape[0], device=x.device), labels] = 1.0
    return Summary.from_responsibilities(family, x, resp)


def log_crp(counts, alpha):
    """Log probability of a partition with block sizes ``counts`` under the Chinese
    restaurant process: :math:`K\\log\\alpha + \\log\\Gamma(\\alpha) - \\log\\Gamma(\\alpha+N)
    + \\sum_k \\log\\Gamma(N_k)`."""
    n = float(counts.sum())
    return (counts.numel() * math.log(alpha) + math.lgamma(alpha) - math.lgamma(alpha + n)
            + float(torch.lgamma(counts).sum()))


class GibbsSampler:
    """Settings every Gibbs sampler shares, validated once.

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param float alpha: DP concentration.
    :param int sweeps: passes over all items.
    :param int burn_in: sweeps discarded before samples are kept (default ``sweeps // 2``).
    :param int thin: keep every ``thin``-th sweep after burn-in.
    :param int init_K: start from k-means++ with this many clusters (1: all in one cluster).
    :param int seed: seeds every draw and the initialisation.
    """

    def __init__(self, family, alpha=1.0, sweeps=100, burn_in=None, thin=1, init_K=1, seed=0):
        self.family = family
        self.alpha = as_positive_float(alpha, "alpha")
        self.sweeps = as_positive_int(sweeps, "sweeps")
        self.burn_in = self.sweeps // 2 if burn_in is None else as_count(burn_in, "burn_in")
        if not 0 <= self.burn_in < self.sweeps:
            raise ValueError(f"burn_in must lie in [0, sweeps); got {burn_in}")
        self.thin = as_positive_int(thin, "thin")
        self.init_K = as_positive_int(init_K, "init_K")
        self.seed = as_seed(seed)

    def keeps(self, sweep):
        """Whether the state after ``sweep`` is kept as a sample."""
        return sweep >= self.burn_in and (sweep - self.burn_in) % self.thin == 0


@dataclass
class GibbsResult:
    """What a Gibbs sampler returns.

    :ivar torch.Tensor labels: ``(N,)`` assignments after the last sweep.
    :ivar list log_joint_trace: the log joint density of the state after each sweep.
    :ivar list num_clusters: occupied clusters after each sweep.
    :ivar list sweep_seconds: wall time of each sweep.
    :ivar list samples: the kept states (after burn-in, thinned), each a callable
        ``log_predictive(x) -> (n,)`` of the predictive density given that state.
    :ivar float seconds: total wall time.
    """

    labels: torch.Tensor
    log_joint_trace: list = field(default_factory=list)
    num_clusters: list = field(default_factory=list)
    sweep_seconds: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    seconds: float = 0.0

    def log_predictive(self, x):
        """Held-out log predictive density of each row of ``x``, averaged over the kept
        samples in probability space: :math:`\\log \\frac1S \\sum_s p(x \\mid \\text{state}_s)`
        (Blei & Jordan 2006, §4)."""
        if not self.samples:
            raise ValueError("no samples were kept: raise sweeps or lower burn_in")
        per_sample = torch.stack([sample(x) for sample in self.samples])
        return torch.logsumexp(per_sample, 0) - math.log(len(self.samples))
