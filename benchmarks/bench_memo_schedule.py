"""Groundwork for issue #13 (memoized VB at fixed K below full-batch VB): final exact ELBO per item
of memoized VB by first-lap schedule and start, against full-batch VB, over seeds.

Toy data of Hughes & Sudderth (2013) §4.1 (zero-mean Gaussian DP mixture), fixed K, one thread.
Rows: full-batch VB from its own start (k-means++ on the data in order); memoized VB from its own
start (k-means++ on the first lap's batches, i.e. the data permuted) and from full VB's start, with
the incremental first lap (the default) and with the globals held through lap 1 (the HDP's
default, ``MemoizedDriver(hold_first_lap=True)``). Every fit starts from its own copy of the start
(a fit never changes the posterior it is given).

    python benchmarks/bench_memo_schedule.py [--N 3000] [--K 10] [--batches 6] [--laps 20] [--seeds 5]
"""

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import toy_patches


def memoized(family, K, laps, seed, hold, x, batches, start=None):
    model = pm.MemoizedVB(family, K, laps=laps, seed=seed)
    model.hold_first_lap = hold
    return model.fit(x, num_batches=batches, posterior=start).elbo / len(x)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--N", type=int, default=3000)
    parser.add_argument("--K", type=int, default=10)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--laps", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = {}
    for seed in range(args.seeds):
        x = torch.as_tensor(toy_patches(args.N, seed=seed)[0], dtype=torch.float64)
        family = pm.ZeroMeanGaussian.from_data(x)
        start = pm.FullBatchVB(family, args.K, seed=seed).initial_posterior(x)
        rows.setdefault("full-batch VB", []).append(
            pm.FullBatchVB(family, args.K, max_iter=args.laps, seed=seed).fit(x).elbo / len(x))
        for hold in (False, True):
            schedule = "held first lap" if hold else "incremental first lap"
            rows.setdefault(f"memoized, {schedule}, own start", []).append(
                memoized(family, args.K, args.laps, seed, hold, x, args.batches))
            rows.setdefault(f"memoized, {schedule}, full VB's start", []).append(
                memoized(family, args.K, args.laps, seed, hold, x, args.batches, start))
    print(f"toy data N = {args.N}, K = {args.K}, {args.batches} batches, {args.laps} passes, "
          f"{args.seeds} seeds; exact ELBO per item")
    for name, values in rows.items():
        print(f"{name:45s} mean {np.mean(values):7.3f}  sd {np.std(values):.3f}  {np.round(values, 3).tolist()}")


if __name__ == "__main__":
    main()
