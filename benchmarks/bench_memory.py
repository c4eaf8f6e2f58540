"""Memory of memoized inference on data that does not fit the budget: one lap over a
10,000,000 x 25 .npy file read batch by batch from disk.

The memo is O(B K D^2) (never O(N K)) and a file source holds one batch at a time, so peak
resident memory stays far below the file size. Prints the file size, the peak RSS of this
process (resource.getrusage), the memo size and the lap time.

    python benchmarks/bench_memory.py [--n 10000000] [--batches 1000] [--keep]
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import toy_patches


def write_npy(path, n, chunk=500_000, seed=0):
    """Write an (n, 25) float64 .npy file chunk by chunk (never the whole array in memory)."""
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, 25))
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        mm[lo:hi] = toy_patches(hi - lo, seed=seed + lo)[0]
        mm.flush()
    del mm


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_lap(path, num_batches, K):
    """One memoized lap over the file at ``path``; prints the measurements (run in a child)."""
    size_gb = os.path.getsize(path) / 1e9
    source = pm.make_batches(path, num_batches)
    family = pm.ZeroMeanGaussian.from_data(np.asarray(source.batch(0)))
    memo = pm.MemoizedVB(family, K, laps=1, seed=0)
    start = time.perf_counter()
    result = memo.fit(source)
    seconds = time.perf_counter() - start
    cache = result.state.cache
    memo_mb = sum(
        t.numel() * t.element_size() for s in cache.batches.values() for t in [s.counts, s.entropy, *s.stats.values()]
    ) / 1e6
    n = source.num_items
    print(f"file: {n:,} x 25 float64 = {size_gb:.2f} GB, {num_batches} batches of {n // num_batches:,}")
    print(f"one memoized lap at K = {K}: {seconds:.1f} s, exact ELBO {result.elbo / n:.4f} per item")
    print(f"memo: {len(cache)} batch summaries, {memo_mb:.1f} MB (O(B K D^2); an O(N K) cache of responsibilities "
          f"would be {n * K * 8 / 1e9:.1f} GB)")
    peak = peak_rss_mb()
    print(f"peak RSS of the fitting process: {peak:.0f} MB = {peak / 1000 / size_gb:.2f} x the file size; "
          f"budget 2048 MB -> {'OK' if peak < 2048 else 'OVER'}")


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument("--lap-only", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.lap_only:
        run_lap(args.lap_only, args.batches, args.K)
        return

    path = os.path.join(args.dir, f"pyro_memo_bench_{args.n}x25.npy")
    if not os.path.exists(path):
        start = time.perf_counter()
        write_npy(path, args.n)
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    try:
        # a fresh process, so that its peak RSS measures the lap alone
        subprocess.run([sys.executable, __file__, "--lap-only", path, "--batches", str(args.batches),
                        "--K", str(args.K)], check=True)
    finally:
        if not args.keep:
            os.remove(path)


if __name__ == "__main__":
    main()
