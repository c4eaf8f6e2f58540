"""Scoring any method's result on the one objective: the exact DP-mixture ELBO (Hughes & Sudderth 2013, eq. 8)."""

import torch

from ..allocation import DPSticks
from .dp_mixture_posterior import DPMixturePosterior
from .gibbs import hard_summary


def full_data_elbo(posterior, source, family=None):
    """Exact full-data ELBO of ``posterior``'s globals with the optimal local factors,
    computed by one pass of local steps over every batch of ``source`` (Hughes & Sudderth 2013, eq. 8).
    This is how a stochastic method, whose running quantities are noisy, is scored.

    :returns: ``(elbo, summary)``: the ELBO (float, total nats) and the whole-data summary.
    """
    family = family or posterior.family
    total = None
    for b in range(source.num_batches):
        _, part = posterior.local_step(family.check_data(source.batch(b)))
        total = part if total is None else total + part
    return float(posterior.elbo(total)), total


def labels_posterior(family, x, labels, alpha=1.0, by_size=True, chunk=50_000):
    """The optimal globals for a hard clustering (Hughes & Sudderth 2013, eq. 10) and its summary: labels
    compacted to ``0..K-1`` and, with ``by_size``, ordered by cluster size.

    :returns: ``(posterior, summary)``.
    """
    labels = torch.as_tensor(labels, device=x.device).long()
    if labels.shape != (x.shape[0],):
        raise ValueError(f"labels must have shape ({x.shape[0]},); got {tuple(labels.shape)}")
    _, labels = torch.unique(labels, return_inverse=True)
    sizes = torch.bincount(labels)
    if by_size:
        rank = torch.empty_like(sizes)
        rank[torch.argsort(sizes, descending=True)] = torch.arange(sizes.numel(), device=sizes.device)
        labels = rank[labels]
    total = None
    for lo in range(0, x.shape[0], chunk):
        part = hard_summary(family, x[lo:lo + chunk], labels[lo:lo + chunk], int(sizes.numel()))
        total = part if total is None else total + part
    return DPMixturePosterior.from_summary(family, DPSticks(alpha), total), total


def labels_elbo(family, x, labels, alpha=1.0):
    """Exact ELBO of a hard clustering: ``q(z_n)`` puts all mass on ``labels[n]`` and the
    globals are the optimum for those assignments (Hughes & Sudderth 2013, eq. 10), components ordered by
    size. This scores methods that return labels or point estimates (SGA, Gibbs,
    scikit-learn) on the same objective as the variational ones.

    :param family: the :class:`~pyro_memo.ConjugateFamily` (with its prior).
    :param torch.Tensor x: ``(N, D)`` data.
    :param labels: ``(N,)`` integer labels.
    :param float alpha: DP concentration.
    :returns: the ELBO in total nats (float).
    """
    x = family.check_data(x)
    posterior, summary = labels_posterior(family, x, labels, alpha)
    return float(posterior.elbo(summary))
