"""Mixed precision on the toy data: memoized VB with a float32 local step (``local_dtype="float32"``;
globals, memo and exact ELBO in float64) against float64 throughout.

Paper 000 §4.1 toy data (N = 100,000 5x5 patches, zero-mean Gaussian family), K = 25, 100 fixed
batches, the same seed and initialisation for both. Runs alternate (float64, float32, float64, ...)
so that load on a shared machine falls on both alike; each run's laps after the first are timed
(the first lap holds the globals, as every lap's local step does not) and the median over runs of
their mean is reported, with the final exact ELBO of each.

    OMP_NUM_THREADS=1 python benchmarks/bench_local_dtype.py [--runs 3] [--laps 6]
"""

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import toy_patches


def run(x, family, args, local_dtype):
    """``(mean seconds per lap after the first, final exact ELBO per item)`` of one fit."""
    memo = pm.MemoizedVB(family, args.K, laps=args.laps, tol=0, seed=args.seed, local_dtype=local_dtype)
    result = memo.fit(x, num_batches=args.batches)
    return float(np.mean(result.lap_seconds[1:])), result.elbo_trace[-1] / len(x)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--laps", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x = torch.as_tensor(toy_patches(args.n, seed=args.seed)[0])
    family = pm.ZeroMeanGaussian.from_data(x)
    print(f"toy data: N = {args.n}, D = 25, K = {args.K}, {args.batches} batches, {args.laps} laps, "
          f"{args.runs} interleaved runs each, {torch.get_num_threads()} thread(s)")
    modes = {"float64": None, "float32 local": "float32"}
    seconds = {m: [] for m in modes}
    elbos = {}
    for _ in range(args.runs):
        for mode, local_dtype in modes.items():
            per_lap, elbos[mode] = run(x, family, args, local_dtype)
            seconds[mode].append(per_lap)
    base = np.median(seconds["float64"])
    print(f"\n{'local step':<15}{'s/lap (median)':>16}{'runs':>26}{'final ELBO/item':>18}{'speed-up':>10}")
    for mode in modes:
        runs = ", ".join(f"{s:.3f}" for s in seconds[mode])
        print(f"{mode:<15}{np.median(seconds[mode]):>16.3f}{runs:>26}{elbos[mode]:>18.8f}"
              f"{base / np.median(seconds[mode]):>9.2f}x")
    gap = abs(elbos["float32 local"] - elbos["float64"]) * len(x)
    print(f"\nfinal ELBO gap: {gap:.4g} nats in total ({gap / len(x):.3g} per item)")


if __name__ == "__main__":
    main()
