"""Collapsed Gibbs sampling for conjugate DP mixtures (Blei & Jordan 2006, §4; Neal 2000, algorithm 3)."""

import math
import time

import numpy as np
import torch

from ..families.base import item_summaries
from .gibbs import GibbsResult, GibbsSampler, hard_summary, log_crp
from .initialization import initial_responsibilities
from .predictive import log_predictive


class CollapsedGibbs(GibbsSampler):
    """Gibbs sampling of the assignments with the mixture weights and the component
    parameters integrated out.

    Item ``n`` leaves its cluster and joins cluster ``k`` with probability proportional to
    :math:`N_k^{-n}\\,p(x_n \\mid S_k^{-n})`, or a new cluster with probability proportional to
    :math:`\\alpha\\,p(x_n)`, where :math:`p(x_n \\mid S) = \\exp\\{\\log p(S + s(x_n)) - \\log p(S)\\}`
    is the conjugate posterior predictive (``family.log_marginal``). Cluster summaries are
    recomputed from the labels after every sweep, so no rounding accumulates.

    Parameters as :class:`~pyro_memo.inference.gibbs.GibbsSampler`; ``seed`` also seeds the
    item order.
    """

    def _initial_labels(self, x):
        if self.init_K == 1:
            return np.zeros(x.shape[0], dtype=np.int64)
        resp = initial_responsibilities(x, self.init_K, "kmeans++", self.seed)
        return np.unique(resp.argmax(-1).cpu().numpy(), return_inverse=True)[1].astype(np.int64)

    def _state_predictive(self, summary):
        family, weights = self.family, summary.counts / (self.alpha + summary.num_items)
        return lambda x: log_predictive(family, summary, weights, x)

    def fit(self, x, callback=None):
        """Run the sampler on ``(N, D)`` data.

        :param callback: optional ``callback(sweep, labels)`` after every sweep; returning ``True``
            stops the sampler.
        :rtype: GibbsResult
        """
        fam = self.family
        x = fam.check_data(x)
        rng = np.random.default_rng(self.seed)
        ones, item_stats = item_summaries(fam, x)
        lm_single = fam.log_marginal(ones, item_stats).cpu().numpy()  # log p(x_n) under the prior
        labels = self._initial_labels(x)
        result = GibbsResult(torch.as_tensor(labels))
        start = time.perf_counter()
        for sweep in range(self.sweeps):
            sweep_start = time.perf_counter()
            labels = self._sweep(x, labels, item_stats, lm_single, rng)
            summary = hard_summary(fam, x, torch.as_tensor(labels, device=x.device), int(labels.max()) + 1)
            result.sweep_seconds.append(time.perf_counter() - sweep_start)
            result.log_joint_trace.append(
                float(fam.log_marginal(summary.counts, summary.stats).sum()) + log_crp(summary.counts, self.alpha))
            result.num_clusters.append(summary.K)
            if self.keeps(sweep):
                result.samples.append(self._state_predictive(summary))
            if callback is not None and callback(sweep, labels) is True:
                break
        result.labels = torch.as_tensor(labels)
        result.seconds = time.perf_counter() - start
        return result

    def _sweep(self, x, labels, item_stats, lm_single, rng):
        """One pass over the items in random order; returns relabelled ``0..K-1`` labels."""
        fam, log_alpha = self.family, math.log(self.alpha)
        K = int(labels.max()) + 1
        summary = hard_summary(fam, x, torch.as_tensor(labels, device=x.device), K)
        counts = summary.counts.clone()
        stats = {k: v.clone() for k, v in summary.stats.items()}
        lm = fam.log_marginal(counts, stats)
        for i in rng.permutation(x.shape[0]):
            old = labels[i]
            counts[old] -= 1
            for key in stats:
                stats[key][old] -= item_stats[key][i]
            lm[old] = fam.log_marginal(counts[old:old + 1], {k: v[old:old + 1] for k, v in stats.items()})[0] \
                if counts[old] > 0.5 else 0.0
            active = torch.nonzero(counts > 0.5).squeeze(-1)
            joined = fam.log_marginal(counts[active] + 1, {k: v[active] + item_stats[k][i] for k, v in stats.items()})
            logp = torch.cat([torch.log(counts[active]) + joined - lm[active],
                              joined.new_tensor([log_alpha + lm_single[i]])]).cpu().numpy()
            p = np.exp(logp - logp.max())
            choice = rng.choice(p.size, p=p / p.sum())
            if choice < active.numel():
                new, value = int(active[choice]), joined[choice]
            else:
                empty = torch.nonzero(counts <= 0.5).squeeze(-1)
                if empty.numel():
                    new = int(empty[0])
                else:
                    new = counts.numel()
                    counts = torch.cat([counts, counts.new_zeros(1)])
                    stats = {k: torch.cat([v, torch.zeros_like(v[:1])]) for k, v in stats.items()}
                    lm = torch.cat([lm, lm.new_zeros(1)])
                value = float(lm_single[i])  # a numpy float32 in a float32 fit: torch refuses to assign it
            counts[new] += 1
            for key in stats:
                stats[key][new] += item_stats[key][i]
            lm[new] = value
            labels[i] = new
        return np.unique(labels, return_inverse=True)[1].astype(np.int64)

