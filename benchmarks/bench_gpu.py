"""The GPU path (issue #17): memoized VB with the globals, the memo and each batch (moved there batch by batch
from a ``.npy`` file) on a CUDA device, against the same fit on the CPU, on zero-mean 8 x 8 patches from
scikit-image's photographs.

1. Fixed K (no moves), ``--n`` patches, ``--K`` components, ``--batches`` batches, ``--laps`` laps from one start:
   the CPU with torch's default thread count, the GPU in float64 and the GPU with a float32 local step (float64
   summaries). Laps after the first are timed; the final exact ELBO per item of each is printed with its
   difference from the CPU fit's.
2. Births, merges and deletes from K = 1 on ``--moves-n`` patches, on the CPU and on the GPU: components found,
   seconds and the final ELBO per item.
3. The HDP on the bars corpus and the relational model on a random graph, CPU against GPU: final ELBOs agree.

Needs a CUDA device; prints the device it ran on.

    python benchmarks/bench_gpu.py [--n 1000000] [--K 100] [--batches 100] [--laps 3]
"""

import os
import tempfile
import time

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import Graph, bars_corpus
from pyro_memo.denoising import PHOTOGRAPHS, fit_patch_mixture, load_image, patch_family, write_patches
from pyro_memo.relational import MemoizedRelational
from pyro_memo.topics import MemoizedHDP


def fixed_k(path, args, device, local_dtype):
    """``(seconds per lap after the first, final ELBO per item)`` of one fixed-K fit."""
    family = patch_family(path, device=device)
    memo = pm.MemoizedVB(family, args.K, laps=args.laps, tol=0, seed=0, local_dtype=local_dtype)
    fit = memo.fit(path, args.batches)
    return float(np.mean(fit.lap_seconds[1:])), fit.elbo_trace[-1] / args.n


def with_moves(path, args, device):
    """``(components, seconds, final ELBO per item)`` of a fit from K = 1 with births, merges and deletes."""
    start = time.perf_counter()
    fit = fit_patch_mixture(path, K=1, laps=args.moves_laps, batches=args.moves_batches, seed=0, device=device,
                            tol=0)
    return fit.posterior.K, time.perf_counter() - start, fit.elbo_trace[-1] / args.moves_n


def other_models(device):
    """Final ELBOs and seconds of the HDP on the bars corpus and the relational model on a random graph."""
    corpus, _, _ = bars_corpus(2000, 100, seed=1)
    rng = np.random.default_rng(1)
    pairs = np.array([(i, j) for i in range(300) for j in range(i + 1, 300)])
    graph = Graph(pairs[rng.random(len(pairs)) < 0.05], 300)
    out = {}
    for name, make, data in (("HDP, bars corpus", lambda: MemoizedHDP(K=10, laps=5, tol=0, seed=1, device=device),
                              corpus),
                             ("relational, 300 nodes", lambda: MemoizedRelational(K=6, laps=5, tol=0, seed=1,
                                                                                  device=device), graph)):
        start = time.perf_counter()
        fit = make().fit(data, 10)
        out[name] = (fit.elbo_trace[-1], time.perf_counter() - start)
    return out


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--laps", type=int, default=3)
    parser.add_argument("--moves-n", type=int, default=200_000)
    parser.add_argument("--moves-batches", type=int, default=20)
    parser.add_argument("--moves-laps", type=int, default=8)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA device; torch sees none")
    print(f"GPU: {torch.cuda.get_device_name()}; CPU: {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} intra-op threads")
    images = [load_image(name) for name in PHOTOGRAPHS]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_patches(os.path.join(tmp, "patches.npy"), images, args.n)
        print(f"\n1. fixed K: N = {args.n:,} patches (D = 64, read from .npy), K = {args.K}, {args.batches} batches, "
              f"{args.laps} laps")
        print(f"{'run':<24}{'s/lap':>10}{'ELBO/item':>16}{'minus CPU':>12}{'speed-up':>10}")
        rows = {}
        for name, device, local in (("cpu, float64", "cpu", None), ("cuda, float64", "cuda", None),
                                    ("cuda, float32 local", "cuda", "float32")):
            rows[name] = fixed_k(path, args, device, local)
            lap, elbo = rows[name]
            base_lap, base_elbo = rows["cpu, float64"]
            print(f"{name:<24}{lap:>10.3f}{elbo:>16.8f}{elbo - base_elbo:>12.2e}{base_lap / lap:>9.1f}x", flush=True)

        moves_path = write_patches(os.path.join(tmp, "moves.npy"), images, args.moves_n, seed=1)
        print(f"\n2. births, merges, deletes from K = 1: N = {args.moves_n:,}, {args.moves_batches} batches, "
              f"{args.moves_laps} laps")
        print(f"{'device':<10}{'K found':>10}{'seconds':>10}{'ELBO/item':>16}")
        for device in ("cpu", "cuda"):
            K, seconds, elbo = with_moves(moves_path, args, device)
            print(f"{device:<10}{K:>10}{seconds:>10.1f}{elbo:>16.8f}", flush=True)

    print("\n3. the HDP and the relational model, 10 batches, 5 laps")
    cpu, gpu = other_models("cpu"), other_models("cuda")
    print(f"{'model':<24}{'ELBO cpu':>18}{'ELBO cuda':>18}{'rel. diff':>11}{'s cpu':>8}{'s cuda':>8}")
    for name in cpu:
        (a, sa), (b, sb) = cpu[name], gpu[name]
        print(f"{name:<24}{a:>18.6f}{b:>18.6f}{abs(a - b) / abs(a):>11.1e}{sa:>8.1f}{sb:>8.1f}")


if __name__ == "__main__":
    main()
