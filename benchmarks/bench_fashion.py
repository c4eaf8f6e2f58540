"""Fashion-MNIST (Debian's dataset-fashion-mnist; 70,000 images, PCA to 50 dimensions, as paper
000 §4.2 did for MNIST): memoized VB with birth/merge/delete from K = 1 against fixed K = 100
memoized runs with k-means++ initialisation, and against scikit-learn's BayesianGaussianMixture
(DP, K = 100) given the same wall time. Full-covariance Gaussian family, default priors, 100 batches.

    python benchmarks/bench_fashion.py [--fixed-runs 10] [--laps 40]
"""

import time

import numpy as np
import torch
from _common import bgm_iterations, make_parser, sklearn_bgm
from sklearn.decomposition import PCA
from sklearn.metrics import normalized_mutual_info_score

import pyro_memo as pm
from pyro_memo.data import load_fashion_mnist


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--fixed-runs", type=int, default=10)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--laps", type=int, default=40)
    parser.add_argument("--fixed-laps", type=int, default=30)
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()

    images, labels = load_fashion_mnist()
    x_np = PCA(50, random_state=0).fit_transform(images)
    x = torch.as_tensor(x_np)
    family = pm.Gaussian.from_data(x)
    n = len(x)
    print(f"Fashion-MNIST: N = {n}, PCA to D = 50, {args.batches} batches, float64")

    def nmi(posterior):
        pred = torch.cat([posterior.responsibilities(x[lo:lo + 10000]).argmax(-1) for lo in range(0, n, 10000)])
        return normalized_mutual_info_score(labels, pred.numpy())

    start = time.perf_counter()
    moves = pm.MemoizedVB(family, 1, laps=args.laps, moves="birth,merge,delete", seed=0).fit(
        x, num_batches=args.batches)
    t_moves = time.perf_counter() - start
    k_moves = int((moves.posterior.expected_weights() > 1e-3).sum())
    nmi_moves = nmi(moves.posterior)
    print(f"birth/merge/delete from K=1: ELBO {moves.elbo / n:.4f}/item, K {k_moves}, NMI {nmi_moves:.3f}, "
          f"{t_moves:.0f} s, {len(moves.elbo_trace)} laps", flush=True)

    fixed = []
    for seed in range(args.fixed_runs):
        start = time.perf_counter()
        run = pm.MemoizedVB(family, args.K, laps=args.fixed_laps, tol=1e-6, seed=seed).fit(
            x, num_batches=args.batches)
        fixed.append((run.elbo / n, int((run.posterior.expected_weights() > 1e-3).sum()), nmi(run.posterior),
                      time.perf_counter() - start))
        print(f"fixed K={args.K} seed {seed}: ELBO {fixed[-1][0]:.4f}/item, K {fixed[-1][1]}, NMI {fixed[-1][2]:.3f}, "
              f"{fixed[-1][3]:.0f} s", flush=True)

    bgm = sklearn_bgm(args.K, seed=0)
    seconds = bgm_iterations(bgm, x_np, lambda done: sum(done) >= t_moves)
    spent, iters = sum(seconds), len(seconds)
    nmi_sk = normalized_mutual_info_score(labels, bgm.predict(x_np))
    print(f"sklearn BGM (DP, K={args.K}): {iters} EM iterations in {spent:.0f} s, NMI {nmi_sk:.3f}")

    best = max(f[0] for f in fixed)
    print(f"\nfinal ELBO per item: moves from K=1 {moves.elbo / n:.4f}; fixed K={args.K}: best {best:.4f}, "
          f"median {np.median([f[0] for f in fixed]):.4f} -> moves higher than all {len(fixed)}: "
          f"{moves.elbo / n > best}")
    print(f"NMI at equal wall time ({t_moves:.0f} s): pyro-memo moves {nmi_moves:.3f} vs sklearn {nmi_sk:.3f} "
          f"-> ratio {nmi_moves / nmi_sk:.2f}")


if __name__ == "__main__":
    main()
