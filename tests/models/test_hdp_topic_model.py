"""The HDP topic model as a Pyro program: Pyro's own Trace_ELBO of the fitted guide equals the
memoized bound plus the stick surrogate's gap (both estimated independently)."""

import math

import numpy as np
import pyro
import pytest
import torch
from pyro.infer import Trace_ELBO

from pyro_memo.models import HDPTopicGuide, HDPTopicModel
from pyro_memo.topics import MemoizedHDP, from_counts
from pyro_memo.topics.hdp_posterior import expected_log_dirichlet


@pytest.mark.parametrize("seed", range(2))
def test_trace_elbo_of_the_fitted_guide_matches_the_bound(seed):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(1.5, size=(4, 6)) + np.eye(4, 6, dtype=int)
    corpus = from_counts(counts)
    fit = MemoizedHDP(K=3, laps=5, seed=seed).fit(corpus, 1)
    post = fit.posterior
    # one token per count unit: the model's input
    doc = torch.as_tensor(np.repeat(np.arange(4), counts.sum(1)))
    word = torch.as_tensor(np.concatenate([np.repeat(np.arange(6), row) for row in counts]))
    ones = torch.ones(len(doc), dtype=torch.float64)
    resp, _, summary, _ = post.local_step(doc, word, ones, 4)
    theta = torch.cat([torch.zeros(4, post.K, dtype=torch.float64).index_add_(0, doc, resp),
                       torch.zeros(4, 1, dtype=torch.float64)], 1) + post.alpha * post.expected_beta()
    torch.testing.assert_close(summary.sum_log_pi, expected_log_dirichlet(theta).sum(0))
    bound = float(post.elbo(summary))

    model = HDPTopicModel(6, post.K, post.alpha, post.gamma, post.lam0)
    guide = HDPTopicGuide(post, theta, resp)
    pyro.set_rng_seed(seed)
    elbo = Trace_ELBO(num_particles=4000, vectorize_particles=True, max_plate_nesting=1)
    estimates = [-elbo.loss(model, guide, doc, word, 4) for _ in range(8)]
    pyro_mean, pyro_se = np.mean(estimates), np.std(estimates, ddof=1) / math.sqrt(len(estimates))

    # the surrogate's gap D * E_q[log G(alpha) - sum log G(alpha beta) - K log alpha - sum log beta]
    u = torch.distributions.Beta(post.rho * post.omega, (1 - post.rho) * post.omega).sample((200_000,))
    rest = torch.cumprod(1 - u, 1)
    beta = torch.cat([u * torch.cat([torch.ones_like(u[:, :1]), rest[:, :-1]], 1), rest[:, -1:]], 1)
    a = torch.tensor(post.alpha, dtype=torch.float64)
    gap = 4 * (torch.lgamma(a) - torch.lgamma(a * beta).sum(1) - post.K * torch.log(a) - torch.log(beta).sum(1))
    gap_mean, gap_se = float(gap.mean()), float(gap.std() / math.sqrt(len(gap)))
    assert gap_mean >= 0
    assert abs(pyro_mean - (bound + gap_mean)) < 4 * math.hypot(pyro_se, gap_se)
