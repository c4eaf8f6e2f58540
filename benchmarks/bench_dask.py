"""Memoized VB on a Dask cluster (issue #17): lap time of the parallel schedule with 1 and with 2 single-threaded
workers of a ``LocalCluster``, side by side (interleaved) with the serial fit in one process, on zero-mean 8 x 8
patches written to a ``.npy`` file that every worker reads its own batches from.

Each run fits a DP mixture of zero-mean Gaussians at a fixed K (no moves) for ``--laps`` laps over ``--batches``
batches from the same start; the first lap (which also loads the batches on the workers) is reported apart and the
mean of the others is the lap time. Runs go round-robin ``--repeats`` times, quiet and beside one pure-Python
CPU-bound process (``--busy``). The final exact ELBO of every run is printed: with one schedule it must not depend
on the number of workers.

    OMP_NUM_THREADS=1 python benchmarks/bench_dask.py [--n 1000000] [--K 100] [--batches 100] [--laps 3]
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from _common import BUSY, make_parser

from pyro_memo.denoising import PHOTOGRAPHS, load_image, write_patches

RUN = r"""
import json, sys, time
import torch
import pyro_memo as pm
from pyro_memo.denoising import patch_family
path, K, batches, laps, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
window = int(sys.argv[6]) or None
torch.set_num_threads(1)
family = patch_family(path)
memo = pm.MemoizedVB(family, K, laps=laps, tol=0, seed=0, schedule="parallel" if workers else "sequential",
                     threads=1)
start = time.perf_counter()
if workers:
    import distributed
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(workers)
        start = time.perf_counter()
        fit = memo.fit(path, batches, executor=pm.engine.DaskExecutor(client, window=window))
else:
    fit = memo.fit(path, batches)
print(json.dumps({"lap_seconds": fit.lap_seconds, "elbo": fit.elbo_trace[-1], "seconds": time.perf_counter() - start}))
"""


PROBE = r"""
import time, torch
torch.set_num_threads(1)
a, b = torch.randn(1500, 1500, dtype=torch.float64), torch.randn(1500, 1500, dtype=torch.float64)
a @ b
start = time.perf_counter()
for _ in range(30):
    a @ b
print(time.perf_counter() - start)
"""


def pair_ceiling():
    """How much two single-threaded processes computing at once get done against one alone (a fixed
    matrix-multiply load): the most two workers can gain on this machine."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    solo = float(subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True).stdout)
    pair = [subprocess.Popen([sys.executable, "-c", PROBE], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    both = max(float(p.communicate()[0]) for p in pair)
    return 2 * solo / both


def parse_args():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="zero-mean 8x8 patches")
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--laps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--configs", default="serial,1,2", help="comma-separated: serial and worker counts")
    parser.add_argument("--busy", default="quiet,busy", help="quiet, busy or both")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--window", type=int, default=0, help="batch steps in flight (0: the executor's default)")
    return parser.parse_args()


def run(path, args, workers, busy):
    hog = subprocess.Popen([sys.executable, "-c", BUSY]) if busy else None
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    try:
        done = subprocess.run([sys.executable, "-c", RUN, path, str(args.K), str(args.batches), str(args.laps),
                               str(workers), str(args.window)], env=env, capture_output=True, text=True, check=False)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    args = parse_args()
    configs = [0 if c == "serial" else int(c) for c in args.configs.split(",")]
    loads = [b == "busy" for b in args.busy.split(",")]
    print(f"# {os.cpu_count()} cores; N = {args.n} zero-mean 8x8 patches, K = {args.K}, {args.batches} batches, "
          f"{args.laps} laps, {args.repeats} repeats interleaved; workers single-threaded, torch 1 thread", flush=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = os.path.join(folder, "patches.npy")
        start = time.perf_counter()
        write_patches(path, [load_image(name) for name in PHOTOGRAPHS if name != "camera"], args.n, seed=0)
        print(f"# patches written to {path} in {time.perf_counter() - start:.1f} s", flush=True)
        rows = {}
        for _ in range(args.repeats):
            for busy in loads:
                for workers in configs:
                    out = run(path, args, workers, busy)
                    rows.setdefault((busy, workers), []).append(out)
                    name = "serial (sequential)" if workers == 0 else f"{workers} worker(s) (parallel)"
                    print(f"  {'busy ' if busy else 'quiet'} {name:26s} laps {np.round(out['lap_seconds'], 2)} "
                          f"ELBO {out['elbo']:.10e}", flush=True)
    print(f"\n# this machine's ceiling for two single-threaded processes (matrix products, quiet): "
          f"{pair_ceiling():.2f}x the work of one in the same time")
    print(f"\n{'load':6s} {'executor':28s} {'lap 1 s':>8s} {'lap s (2..)':>12s} {'vs 1 worker':>12s} "
          f"{'final ELBO':>20s}")
    for busy in loads:
        one = rows.get((busy, 1))
        base = np.mean([np.mean(r["lap_seconds"][1:]) for r in one]) if one else None
        for workers in configs:
            runs = rows[(busy, workers)]
            first = np.mean([r["lap_seconds"][0] for r in runs])
            lap = np.mean([np.mean(r["lap_seconds"][1:]) for r in runs])
            name = "serial, sequential schedule" if workers == 0 else f"dask, {workers} worker(s), parallel"
            ratio = f"{base / lap:11.2f}x" if base else "-"
            print(f"{'busy' if busy else 'quiet':6s} {name:28s} {first:8.2f} {lap:12.2f} {ratio:>12s} "
                  f"{runs[-1]['elbo']:20.10e}")


if __name__ == "__main__":
    main()
