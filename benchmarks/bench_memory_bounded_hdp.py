"""Memory-bounded VB for the HDP: joint image segmentation (issue #18 item 4a; Gomes, Welling & Perona 2008,
§4.1, Figs. 1-2). ``--tiles`` 200 x 160 tiles cut from scikit-image's bundled colour photographs are groups of
pixels with features (x, y relative to the tile's centre, L, a, b); an HDP with full-covariance Gaussian
components (K fixed, ``--K``) is fitted

* by batch VB (memoized VB with one batch: every pixel's assignment distribution in memory), and
* by memory-bounded VB, the tiles arriving once in epochs of ``--epoch`` tiles, under memory bounds of
  ``--clumps`` clumps' worth of numbers (eq. 26: a clump stores 1 + 5 + 25 numbers and one count per document
  group), with every tile its own document group; then at the largest bound with at most ``--groups``
  document groups (eq. 27 merges),

all from the same k-means++ start on the first epoch's pixels. For each run: the final tied bound, the exact
bound of the final globals on all the pixels (optimal untied local factors), the free-energy ratio of Gomes et
al. (Fig. 1), 1 - (F_batch - F_mb) / |F_batch| with F the exact bound (1: as good as batch VB, below 1:
worse), the clumps and document groups kept, the memory savings factor (batch VB keeps the pixels, N x 5, and
their assignment distributions, N x K; memory-bounded VB at most the memory model building fits, its items'
numbers plus one assignment distribution per unit), and the wall time. ``--figure`` draws the segmentations of
three tiles side by side (Fig. 2 analogue: each pixel coloured by its component's mean Lab colour).

    OMP_NUM_THREADS=1 python benchmarks/bench_memory_bounded_hdp.py [--tiles 30] [--K 20] [--epoch 5]
        [--clumps 25,50,100,200,400] [--groups 3,9,15] [--scale 1.0] [--figure FILE.png]
        [--moves birth,merge --start-K K0 --max-K KMAX]
"""

import os
import time

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import color_tiles, pixel_features
from pyro_memo.memo import clump_size
from pyro_memo.topics import MemoizedHDP


def exact_bound(posterior, groups):
    """The bound of ``posterior``'s globals on all ``groups`` with optimal untied local factors."""
    x = torch.as_tensor(np.concatenate(groups))
    doc = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor([len(g) for g in groups]))
    _, _, summary, _ = posterior.local_step(doc, x, torch.ones(len(x), dtype=x.dtype), len(groups), tol=1e-6)
    return float(posterior.elbo(summary))


def accepted(result, move):
    """Accepted ``move``s over a memory-bounded fit's epochs."""
    return sum(e["moves"].get(move, {}).get("accepted", 0) for e in result.epochs)


def segmentation(posterior, group, shape):
    """Each pixel coloured by the Lab mean of its most responsible component (its tile's own local step)."""
    from skimage.color import lab2rgb

    x = torch.as_tensor(group)
    resp, _, _, _ = posterior.local_step(torch.zeros(len(x), dtype=torch.long), x, torch.ones(len(x),
                                                                                           dtype=x.dtype), 1)
    means = posterior.family.point_estimates(posterior.component)["means"][:, 2:].numpy()
    return lab2rgb(means[resp.argmax(1).numpy()].reshape(shape + (3,)))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--tiles", type=int, default=30)
    parser.add_argument("--K", type=int, default=20)
    parser.add_argument("--epoch", type=int, default=5, help="tiles per epoch")
    parser.add_argument("--clumps", default="25,50,100,200,400", help="memory bounds, in clumps' worth of numbers")
    parser.add_argument("--groups", default="3,9,15", help="most document groups, at the largest bound")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every tile (quick runs)")
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=5.0)
    parser.add_argument("--laps", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", default=None)
    parser.add_argument("--split-prior", default="documents", choices=("documents", "crp"),
                        help="compression's partition prior (MemoryBoundedHDP's split_prior)")
    parser.add_argument("--moves", default="", help="model building's moves (birth, merge), each accepted on the "
                                                     "exact tied bound")
    parser.add_argument("--start-K", type=int, default=None, help="memory-bounded VB's starting K with --moves "
                                                                   "(default --K)")
    parser.add_argument("--max-K", type=int, default=None, help="no birth beyond this many components (default --K, "
                                                                 "batch VB's truncation)")
    parser.add_argument("--batch-file", default=None,
                        help="batch VB's fit is loaded from this file when it exists (the caller keeps the settings "
                             "the same), else fitted and saved there")
    args = parser.parse_args()

    tiles = color_tiles(args.tiles, scale=args.scale)
    groups = [pixel_features(t) for t in tiles]
    x = np.concatenate(groups)
    N, D = x.shape
    family = pm.Gaussian.from_data(x)
    print(f"{len(groups)} tiles of {tiles[0].shape[1]} x {tiles[0].shape[0]} pixels, N = {N} pixels, D = {D}, "
          f"K = {args.K}, epochs of {args.epoch} tiles; torch threads {torch.get_num_threads()}", flush=True)
    settings = dict(alpha=args.alpha, gamma=args.gamma, seed=args.seed, laps=args.laps, tol=args.tol)
    first = torch.as_tensor(np.concatenate(groups[:args.epoch]))
    start_posterior = pm.MemoryBoundedHDP(family, args.K, 10**12, args.epoch, **settings).initial_posterior(first)
    start_K = args.start_K or args.K
    most_K = max(start_K, args.max_K or args.K) if args.moves else args.K  # the most components model building holds
    moves = {"moves": args.moves, "move_options": {"birth": {"max_K": args.max_K or args.K}}} \
        if "birth" in args.moves else {"moves": args.moves}
    if args.moves:
        print(f"memory-bounded VB: moves {args.moves} from K = {start_K} (at most {args.max_K or args.K})")

    loaded = bool(args.batch_file) and os.path.exists(args.batch_file)
    if loaded:  # the same settings' batch VB, saved by an earlier run
        batch, batch_seconds, batch_bound = torch.load(args.batch_file, weights_only=False)
    else:
        start = time.perf_counter()
        batch = MemoizedHDP(K=args.K, alpha=args.alpha, gamma=args.gamma, family=family, laps=args.laps,
                            tol=args.tol, seed=args.seed, overrelax=False).fit(groups, 1, posterior=start_posterior)
        batch_seconds = time.perf_counter() - start
        batch_bound = exact_bound(batch.posterior, groups)
        if args.batch_file:
            torch.save((batch, batch_seconds, batch_bound), args.batch_file)
    batch_numbers = N * D + N * args.K
    print(f"batch VB: {len(batch.elbo_trace)} laps, bound {batch.elbo_trace[-1]:.6g} (exact {batch_bound:.6g}), "
          f"{batch_numbers} numbers, {batch_seconds:.1f} s"
          f"{' (loaded from ' + args.batch_file + ')' if loaded else ''}", flush=True)

    size = clump_size(family.stats(torch.as_tensor(x[:1]), torch.ones(1, 1, dtype=torch.float64)))
    runs = [(int(c), None) for c in args.clumps.split(",")]
    runs += [(runs[-1][0], int(g)) for g in args.groups.split(",") if g]
    print(f"\n{'clumps':>6s} {'groups':>6s} {'M':>8s} {'kept C':>6s} {'S':>3s} {'singl':>6s} {'tied bound':>12s} "
          f"{'exact bound':>12s} {'FE ratio':>8s} {'peak numbers':>12s} {'savings':>8s} {'seconds':>8s} "
          f"{'x batch':>7s}" + ("   K  births merges" if args.moves else ""))
    fitted = {}
    for clumps, max_groups in runs:
        memory_bound = clumps * (size + (max_groups or len(groups)))
        model = pm.MemoryBoundedHDP(family, start_K, memory_bound, args.epoch, max_groups=max_groups,
                                    lifetime=N, split_prior=args.split_prior, **moves, **settings)
        start = time.perf_counter()
        result = model.fit(groups)
        seconds = time.perf_counter() - start
        bound = exact_bound(result.posterior, groups)
        ratio = 1 - (batch_bound - bound) / abs(batch_bound)
        peak = max(e["memory_building"] + e["units"] * most_K for e in result.epochs)
        memory = result.clumps
        print(f"{clumps:6d} {str(max_groups or '-'):>6s} {memory_bound:8d} {memory.num_clumps:6d} "
              f"{memory.num_groups:3d} {memory.num_singlets:6d} {result.elbo:12.6g} {bound:12.6g} {ratio:8.4f} "
              f"{peak:12d} {batch_numbers / peak:8.1f} {seconds:8.1f} {seconds / batch_seconds:7.2f}"
              + (f" {result.posterior.K:3d} {accepted(result, 'birth'):7d} {accepted(result, 'merge'):6d}"
                 if args.moves else ""), flush=True)
        fitted[(clumps, max_groups)] = result.posterior
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        shown = [0, len(groups) // 2, len(groups) - 1]
        columns = [("tile", None), ("batch VB", batch.posterior),
                   (f"memory-bounded, {runs[-1][0]} clumps, {runs[-1][1]} groups", fitted[runs[-1]]),
                   (f"memory-bounded, {runs[len(args.clumps.split(',')) - 1][0]} clumps, no merges",
                    fitted[runs[len(args.clumps.split(',')) - 1]])]
        fig, axes = plt.subplots(len(shown), len(columns), figsize=(3 * len(columns), 2.4 * len(shown)))
        for row, t in enumerate(shown):
            for col, (title, post) in enumerate(columns):
                image = tiles[t] if post is None else segmentation(post, groups[t], tiles[t].shape[:2])
                axes[row, col].imshow(image)
                axes[row, col].set_axis_off()
                if row == 0:
                    axes[row, col].set_title(title, fontsize=8)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=90)
        print(f"segmentations written to {args.figure}")


if __name__ == "__main__":
    main()
