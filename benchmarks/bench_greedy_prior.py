"""Why GreedyMerge keeps 4 components on the toy data with pyro-memo's default prior, where
paper 000 §4.1 reports a collapse to 1: the outcome of merges judged on one 1,000-item batch
depends on the prior, and the data-scaled default prior makes separate covariances cheap.

For each Wishart prior on the toy data (zero-mean Gaussian family, nu = D + 2) it runs, from
K = 1 over ``--seeds`` seeds: GreedyMerge (births + merges accepted on the current batch's
ELBO alone) and the exact-ELBO moves (birth, merge, delete). It prints the number of
components holding > 1% of the data and the final exact ELBO per item. Priors:

* ``default``: B = the data's second-moment matrix (``ZeroMeanGaussian.from_data``);
* ``eye``: B = I, bnpy's default for this family (``ECovMat='eye', sF=1``);
* ``0.1 eye``, ``0.01 eye``: weaker identity priors; ``10 eye``, ``100 eye``: stronger ones.

GreedyMerge scores merges with ``GreedyMergeMove(score=--greedy-score)``; the stored results
(``results/bench_greedy_prior.txt``) use ``batch`` (the batch as a whole dataset, globals
refit to it), the reading whose outcome depends on the prior.

    python benchmarks/bench_greedy_prior.py [--seeds 3] [--n 100000] [--priors "default,eye,0.1 eye"]
        [--greedy-score batch]
"""

import time

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo import BirthMove, GreedyMergeMove
from pyro_memo.data import toy_patches

SCORES = GreedyMergeMove.SCORES


def make_moves(moves, seed, score):
    if moves == "birth,greedy-merge":
        return [BirthMove(seed=seed), GreedyMergeMove(score=score)]
    return moves


def big_components(result, threshold=0.01):
    return int((result.posterior.expected_weights() > threshold).sum())


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--laps", type=int, default=50)
    parser.add_argument("--priors", default="default,eye,0.1 eye,0.01 eye",
                        help="comma-separated: default, or 'S eye' for B = S * I (default: %(default)s)")
    parser.add_argument("--greedy-score", default="batch", choices=SCORES)
    args = parser.parse_args()

    x_np, _, _ = toy_patches(args.n, seed=0)
    x = torch.as_tensor(x_np)
    d = x.shape[1]
    eye = torch.eye(d, dtype=torch.float64)
    priors = {}
    for name in (p.strip() for p in args.priors.split(",")):
        if name == "default":
            priors[name] = pm.ZeroMeanGaussian.from_data(x)
        else:
            scale = float(name.split()[0]) if name != "eye" else 1.0
            priors[name] = pm.ZeroMeanGaussian.from_data(x, B=scale * eye)
    print(f"toy data N = {args.n}, D = {d}, 100 batches of {args.n // 100}; nu = D + 2 in every prior")
    summary = []
    for name, family in priors.items():
        for moves in ("birth,greedy-merge", "birth,merge,delete"):
            ks, elbos = [], []
            for seed in range(args.seeds):
                start = time.perf_counter()
                result = pm.MemoizedVB(family, 1, laps=args.laps, moves=make_moves(moves, seed, args.greedy_score),
                                           seed=seed).fit(x, num_batches=100)
                ks.append(big_components(result))
                elbos.append(result.elbo / args.n)
                print(f"prior {name:>8} | {moves:<18} | seed {seed}: K>1% {ks[-1]}, ELBO {elbos[-1]:.4f}/item, "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
            summary.append((name, moves, ks, float(np.median(elbos))))
    print("\nprior    | moves              | components > 1% per seed | median ELBO/item")
    for name, moves, ks, elbo in summary:
        print(f"{name:<8} | {moves:<18} | {str(ks):<24} | {elbo:.4f}")


if __name__ == "__main__":
    main()
