"""Issue #14 item 2: the learnt DP concentration E_q[alpha] on data drawn from a DP mixture.

For each seed: 10,000 items from a Chinese restaurant process with alpha = 5 (about 30-50 clusters,
many of one or two items), each cluster a unit-covariance Gaussian in D = 10 around a centre drawn from
N(0, 10^2 I). Memoized VB with the known-covariance Gaussian family (prior matching the generator),
alpha ~ Gamma(1, 0.1), K = 100 k-means++ start, 10 batches and birth / merge / delete moves.
Printed per seed: true and found clusters, E_q[alpha], and two exact posterior means of alpha:
- given the number of clusters alone (Antoniak: p(alpha | K) proportional to p(alpha) alpha^K Gamma(alpha) /
  Gamma(alpha + N)), for the true and the found count;
- given the assignments to labelled sticks, the stick-breaking likelihood the model writes
  (``ordered_alpha_posterior_mean``: an extra factor prod_k 1 / (alpha + N_{>=k})), for the true clusters
  in decreasing size (the labelling of highest likelihood, the one variational inference settles in) and
  for the fit's own expected sizes in its stick order.
"""

import time

import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.allocation import alpha_posterior_mean, ordered_alpha_posterior_mean
from pyro_memo.data import crp_gaussian_mixture
from pyro_memo.families import KnownCovGaussian


def _crp(n, alpha, D, seed):
    x, labels = crp_gaussian_mixture(n, D, alpha, seed=seed)
    return torch.as_tensor(x), labels


def fit_alpha(x, seed, D, spread=10.0, prior=(1.0, 0.1), K=100, laps=100):
    """Memoized VB with moves and a learnt alpha; returns the fitted posterior."""
    fam = KnownCovGaussian({"m": torch.zeros(D), "S": spread**2 * torch.eye(D), "noise": torch.eye(D)})
    moves = [pm.BirthMove(min_items=1, max_K=200, seed=seed), pm.DeleteMove(max_single=5), pm.MergeMove()]
    vb = pm.MemoizedVB(fam, K, alpha_prior=prior, moves=moves, laps=laps, seed=seed)
    return vb.fit(x, 10).posterior


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=5.0)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--laps", type=int, default=100)
    args = parser.parse_args()
    prior = (1.0, 0.1)
    for seed in range(args.seeds):
        x, labels = _crp(args.n, args.alpha, args.dim, seed)
        start = time.perf_counter()
        post = fit_alpha(x, seed, args.dim, prior=prior, laps=args.laps)
        sizes = post.responsibilities(x).sum(0)
        found = int((sizes > 0.5).sum())
        true = int(labels.max()) + 1
        exact_true, exact_found = (alpha_posterior_mean(c, args.n, *prior) for c in (true, found))
        true_sizes = torch.as_tensor(labels).bincount().sort(descending=True).values
        ordered_true, ordered_found = (ordered_alpha_posterior_mean(n, *prior) for n in (true_sizes, sizes))
        print(f"seed {seed}: clusters true {true} found {found} (K = {post.K}); E_q[alpha] = "
              f"{post.expected_alpha():.3f}; exact E[alpha | K] true {exact_true:.3f} found {exact_found:.3f}; "
              f"exact E[alpha | labelled sticks] true (by size) {ordered_true:.3f} found {ordered_found:.3f}; "
              f"{time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
