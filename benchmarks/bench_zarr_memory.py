"""Out of core (issue #17): a lap with births and merges over a zarr array far larger than the memory a fit may
use, and the peak resident memory of every process.

The array holds ``--n`` items (default 20,000,000) of the paper's toy data in D = 64 (8 x 8 zero-mean patches from
8 edge components, Hughes & Sudderth 2013 §4.1), float32, chunked by ``--chunk`` rows (one batch per chunk); at the
default size it takes about 5 GB on disk. It is written chunk by chunk if ``--path`` does not hold it yet (kept for
later runs). The fit is a DP mixture of zero-mean Gaussians from K = 1 with birth, merge and delete moves for
``--laps`` laps, run in a fresh process that reads the store batch by batch (``--workers 0``) or on a
``LocalCluster`` of ``--workers`` single-threaded workers that read their own chunks. Printed: the time of each lap,
K, and the peak RSS of the driver and of every worker (``resource.getrusage``).

    OMP_NUM_THREADS=1 python benchmarks/bench_zarr_memory.py [--n 20000000] [--path /tmp/toy64.zarr] [--workers 0]
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
from _common import make_parser

from pyro_memo.data import toy_patches

RUN = r"""
import json, resource, sys, time
import torch
import pyro_memo as pm
path, laps, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)

def peak_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

source = pm.make_batches(path)
family = pm.ZeroMeanGaussian.from_data(source.batch(0)[:100_000])
memo = pm.MemoizedVB(family, 1, laps=laps, tol=0, seed=0, moves="birth,merge,delete", threads=1)
laps_out = []
def callback(lap, elbo, posterior):
    laps_out.append({"lap": lap + 1, "seconds": time.perf_counter() - start, "K": posterior.K,
                     "elbo_per_item": elbo / source.num_items, "driver_peak_mb": peak_mb()})
    print(json.dumps(laps_out[-1]), file=sys.stderr, flush=True)
workers_mb = {}
start = time.perf_counter()
if workers:
    import distributed
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=50, memory_limit=0) as cluster, distributed.Client(cluster) as client:
        fit = memo.fit(path, executor=client, callback=callback)
        workers_mb = client.run(peak_mb)
else:
    fit = memo.fit(path, callback=callback)
print(json.dumps({"laps": laps_out, "batches": source.num_batches, "items": source.num_items,
                  "driver_peak_mb": peak_mb(), "workers_peak_mb": workers_mb, "moves": fit.state.move_log}))
"""


def parse_args():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=20_000_000)
    parser.add_argument("--chunk", type=int, default=100_000, help="rows per zarr chunk (one batch each)")
    parser.add_argument("--path", default="/tmp/toy64.zarr")
    parser.add_argument("--laps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0, help="0: one process reads the store batch by batch")
    return parser.parse_args()


def write_store(path, n, chunk):
    import zarr

    if os.path.exists(path):
        z = zarr.open_array(path, mode="r")
        if z.shape == (n, 64):
            print(f"# {path}: {z.shape[0]} x {z.shape[1]} {z.dtype}, chunks {z.chunks} (kept from an earlier run)")
            return
        raise SystemExit(f"{path} holds another array {z.shape}; remove it or give another --path")
    start = time.perf_counter()
    z = zarr.open_array(path + ".part", mode="w", shape=(n, 64), chunks=(chunk, 64), dtype="float32")
    for i, lo in enumerate(range(0, n, chunk)):
        z[lo:lo + chunk] = toy_patches(min(chunk, n - lo), seed=i, patch=8)[0].astype(np.float32)
    os.rename(path + ".part", path)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    print(f"# wrote {path}: {n} x 64 float32, chunks of {chunk} rows, {size / 1e9:.2f} GB on disk, "
          f"{time.perf_counter() - start:.0f} s", flush=True)


def main():
    args = parse_args()
    write_store(args.path, args.n, args.chunk)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", RUN, args.path, str(args.laps), str(args.workers)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    where = "one process" if not args.workers else f"{args.workers} Dask workers"
    print(f"# DP mixture from K = 1, birth / merge / delete, {out['batches']} batches of the store, {where}")
    for lap in out["laps"]:
        print(f"lap {lap['lap']}: {lap['seconds']:.0f} s since the start, K = {lap['K']}, "
              f"ELBO/item {lap['elbo_per_item']:.4f}, driver peak RSS {lap['driver_peak_mb']:.0f} MB")
    print(f"moves per lap: {out['moves']}")
    print(f"peak RSS: driver {out['driver_peak_mb']:.0f} MB" + "".join(
        f", worker {i + 1} {mb:.0f} MB" for i, mb in enumerate(out["workers_peak_mb"].values())))


if __name__ == "__main__":
    main()
