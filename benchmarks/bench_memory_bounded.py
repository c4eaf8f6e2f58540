"""Memory-bounded VB on a DP-mixture stream (issue #18 item 4c; Gomes, Welling & Perona 2008): Fashion-MNIST
(Debian's dataset-fashion-mnist, PCA to 50 dimensions, float64) seen once in epochs of ``--epoch`` items, under
several memory bounds ``M``, against memoized VB with a full memo (every batch revisited for ``--laps`` laps) at
the same K from the same k-means++ start of the first epoch's items.

For each M: the final tied bound, the *exact* ELBO of the final globals on all the data (optimal untied local
factors, as memoized VB's is scored), the free-energy ratio of Gomes et al. (2008, Fig. 1),
1 - (F_memo - F_mb) / |F_memo| with F the bound (1: as good as memoized VB, below 1: worse), the memory kept
(stored numbers) and the memory savings factor against the numbers batch VB keeps (the items, N x D, and their
assignment distributions, N x K; the paper's accounting), and the wall time.

    OMP_NUM_THREADS=1 python benchmarks/bench_memory_bounded.py [--n 70000] [--K 25] [--epoch 1000]
        [--memories 20000,100000,500000] [--moves birth,merge --start-K 1]

``--moves birth,merge``: the memory-bounded fits also run births and merges in each epoch's model building,
from ``--start-K`` components (births up to ``K``); the memoized reference keeps ``K`` fixed.
"""

import time

import numpy as np
import torch
from _common import make_parser
from sklearn.decomposition import PCA

import pyro_memo as pm
from pyro_memo.data import load_fashion_mnist


def exact_elbo(posterior, x, batch=5000):
    return float(pm.full_data_elbo(posterior, pm.make_batches([x[lo:lo + batch] for lo in range(0, len(x), batch)]))[0])


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=70_000)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--epoch", type=int, default=1000)
    parser.add_argument("--memories", default="20000,100000,500000")
    parser.add_argument("--laps", type=int, default=10, help="memoized VB's laps")
    parser.add_argument("--build-laps", type=int, default=20, help="model-building laps per epoch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--moves", default="", help="model-building moves of the memory-bounded fits: birth,merge")
    parser.add_argument("--start-K", type=int, default=None, help="their first K with --moves (default: --K)")
    args = parser.parse_args()

    images, _ = load_fashion_mnist()
    order = np.random.default_rng(args.seed).permutation(len(images))[:args.n]
    x = torch.as_tensor(PCA(50, random_state=0).fit_transform(images[order].astype(np.float64)))
    family = pm.Gaussian.from_data(x)
    n, d = x.shape
    print(f"Fashion-MNIST PCA 50: N = {n}, D = {d}, K = {args.K}, epochs of {args.epoch}; {torch.get_num_threads()} "
          f"thread(s); data {n * d:,} numbers")

    start_post = pm.MemoryBoundedVB(family, args.K, 1, args.epoch, seed=args.seed).initial_posterior(x[:args.epoch])
    start = time.perf_counter()
    memo = pm.MemoizedVB(family, args.K, laps=args.laps, tol=0, seed=args.seed).fit(x, n // args.epoch,
                                                                                    posterior=start_post)
    memo_seconds = time.perf_counter() - start
    memo_elbo = memo.elbo_trace[-1]
    print(f"memoized VB, full memo: {args.laps} laps, {n // args.epoch} batches, ELBO {memo_elbo:.6g} "
          f"({memo_elbo / n:.4f} per item), {memo_seconds:.1f} s")
    if args.moves:
        print(f"memory-bounded fits: moves {args.moves} from K = {args.start_K or args.K} (births up to {args.K})")
    print(f"\n{'M (numbers)':>12}{'kept':>10}{'savings':>9}{'clumps':>8}{'singlets':>10}{'tied bound':>14}"
          f"{'exact ELBO':>14}{'FE ratio':>10}{'K':>5}{'seconds':>9}")
    for bound in (int(m) for m in args.memories.split(",")):
        start = time.perf_counter()
        mb = pm.MemoryBoundedVB(family, args.start_K or args.K, bound, args.epoch, lifetime=n, laps=args.build_laps,
                                tol=1e-6, seed=args.seed, moves=args.moves,
                                move_options={"birth": {"max_K": args.K}} if "birth" in args.moves else None)
        fit = mb.fit(x)
        seconds = time.perf_counter() - start
        exact = exact_elbo(fit.posterior, x)
        ratio = 1 - (memo_elbo - exact) / abs(memo_elbo)
        kept = fit.clumps.memory()
        savings = n * (d + args.K) / kept
        print(f"{bound:>12,}{kept:>10,}{savings:>8.1f}x{fit.clumps.num_clumps:>8}{fit.clumps.num_singlets:>10}"
              f"{fit.elbo:>14.6g}{exact:>14.6g}{ratio:>10.4f}{fit.posterior.K:>5}{seconds:>9.1f}", flush=True)


if __name__ == "__main__":
    main()
