"""The sparse local steps on an accelerator against the CPU: the same memoized fits (dense, top-``L``,
``L`` among carried candidates) on zero-mean patches run on ``--device`` and on the CPU, and their ELBO
traces compared; then one batch's dense, top-``L`` and candidate steps timed on the device.

    python benchmarks/check_device_sparse.py [--device cuda] [--n 100000] [--K 200] [--L 8]
"""

import time

import numpy as np
import torch
from _common import make_parser
from bench_sparse import zero_mean_patches

import pyro_memo as pm


def fit(x, device, args, **options):
    family = pm.ZeroMeanGaussian.from_data(x, device=device)
    memo = pm.MemoizedVB(family, args.K, laps=args.laps, tol=0, seed=0, **options)
    start = time.perf_counter()
    result = memo.fit(x.to(device), args.batches)
    return result, time.perf_counter() - start


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--K", type=int, default=200)
    parser.add_argument("--L", type=int, default=8)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--laps", type=int, default=4)
    args = parser.parse_args()
    x = torch.as_tensor(zero_mean_patches(args.n))
    print(f"{args.n:,} patches, K = {args.K}, L = {args.L}, {args.batches} batches, {args.laps} laps; device "
          f"{args.device}" + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else ""))
    for name, options in (("dense", {}), ("top-L", {"sparse_L": args.L}),
                          ("candidates", {"sparse_L": args.L, "sparse_candidates": 4})):
        on_device, dev_s = fit(x, args.device, args, **options)
        on_cpu, cpu_s = fit(x, "cpu", args, **options)
        a, b = np.array(on_device.elbo_trace), np.array(on_cpu.elbo_trace)
        rel = float(np.max(np.abs(a - b) / np.abs(b)))
        print(f"{name:10s} device {dev_s:6.1f} s, cpu {cpu_s:6.1f} s; final ELBO device {a[-1]:.10e} cpu {b[-1]:.10e}; "
              f"largest relative difference over the laps {rel:.2e}", flush=True)
        if name == "dense":
            post = on_device.posterior
    batch = x[: args.n // args.batches].to(args.device)
    support = torch.topk(post.local_step(batch)[0], args.L, dim=1).indices
    steps = {"dense": lambda: post.local_step(batch), "top-L": lambda: post.local_step(batch, sparse_L=args.L),
             "candidates": lambda: post.candidate_local_step(batch, support, args.L, extra=4,
                                                             generator=torch.Generator().manual_seed(0))[0].dense()}
    for name, run in steps.items():
        run()
        sync(args.device)
        start = time.perf_counter()
        for _ in range(3):
            run()
        sync(args.device)
        print(f"one batch of {len(batch):,} on the device: {name:10s} {(time.perf_counter() - start) / 3:.3f} s")


if __name__ == "__main__":
    main()
