"""Memory-bounded VB for the HDP on a stream larger than memory (issue #18 item 4b; Gomes, Welling & Perona 2008,
§4.2, Fig. 3 analogue): Fashion-MNIST's 70,000 images as groups of 784 pixels with features (x, y, intensity),
55 million points, streamed once in epochs of ``--epoch`` images through an HDP with ``--K`` full-covariance
Gaussian topics (fixed K), under a memory bound of ``--memory`` stored numbers (eq. 26) and at most
``--groups`` document groups (eq. 27 merges).

Printed per epoch (``thr``: the thread count the stream's thread policy runs with after it): images seen,
the tied bound per item in memory, topics in use (components holding at least
0.1% of the items in memory), the units model building fitted, clumps, singlets and document groups kept, the
working memory as Gomes et al. count it (§4.2: the numbers model building holds, its items' and clumps' plus one
assignment distribution of K numbers per unit, and the document groups' Dirichlets), the process's peak RSS and
the epoch's seconds. At the end: the total time, the peak RSS, and the memory savings factor against batch VB's
requirement in the same accounting (every point's D numbers and K-number assignment distribution, in float64).
``--figure`` draws topics in use and seconds per epoch against images seen (Fig. 3 analogue), and the topics' mean
(x, y) and intensity as a picture of the fitted shapes.

    OMP_NUM_THREADS=1 python benchmarks/bench_memory_bounded_stream.py [--images 70000] [--epoch 500] [--K 50]
        [--memory 200000] [--groups 100] [--laps 3] [--figure FILE.png]
"""

import resource
import time

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import fashion_pixel_groups


def peak_rss_mb():
    """The process's peak resident set size so far, in MB (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--images", type=int, default=70_000)
    parser.add_argument("--epoch", type=int, default=500, help="images per epoch")
    parser.add_argument("--K", type=int, default=50)
    parser.add_argument("--memory", type=int, default=200_000, help="memory bound M, in stored numbers")
    parser.add_argument("--groups", type=int, default=100, help="most document groups kept")
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=5.0)
    parser.add_argument("--laps", type=int, default=3, help="most laps of each model building")
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--local-tol", type=float, default=1e-2)
    parser.add_argument("--refine", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fresh-local", action="store_true",
                        help="compression runs its own local step (the library's default) instead of reading model "
                             "building's last local factors (reuse_local=True, this script's default: one local "
                             "step fewer per epoch)")
    parser.add_argument("--figure", default=None)
    parser.add_argument("--split-prior", default="documents", choices=("documents", "crp"),
                        help="compression's partition prior (MemoryBoundedHDP's split_prior)")
    args = parser.parse_args()

    first = np.concatenate(list(fashion_pixel_groups(args.epoch)))
    family = pm.Gaussian.from_data(first)
    points, D, K = args.images * 784, first.shape[1], args.K
    del first
    print(f"Fashion-MNIST: {args.images} images as groups of 784 pixels (x, y, intensity), {points} points, "
          f"epochs of {args.epoch} images; HDP, K = {K} full-covariance Gaussian topics; M = {args.memory} "
          f"numbers, at most {args.groups} document groups, {args.laps} laps per model building; torch threads "
          f"{torch.get_num_threads()}", flush=True)
    model = pm.MemoryBoundedHDP(family, K, args.memory, args.epoch, alpha=args.alpha, gamma=args.gamma,
                                max_groups=args.groups, lifetime=points, laps=args.laps, tol=args.tol,
                                refine=args.refine, seed=args.seed, local_tol=args.local_tol,
                                reuse_local=not args.fresh_local, split_prior=args.split_prior)
    print(f"{'epoch':>5s} {'images':>6s} {'bound/item':>10s} {'topics':>6s} {'units':>7s} {'clumps':>6s} "
          f"{'singl':>6s} {'S':>4s} {'working MB':>10s} {'RSS MB':>7s} {'seconds':>7s} {'thr':>3s}", flush=True)
    rows = []

    def report(record):
        working = record["memory_building"] + record["units"] * K + record["groups_building"] * (K + 1)
        rows.append((record["documents"], record["used"], record["seconds"], working))
        print(f"{record['epoch']:5d} {record['documents']:6d} {record['elbo'] / record['items_building']:10.4f} "
              f"{record['used']:6d} {record['units']:7d} {record['clumps']:6d} {record['singlets']:6d} "
              f"{record['groups']:4d} {working * 8 / 1e6:10.1f} {peak_rss_mb():7.0f} {record['seconds']:7.1f} "
              f"{model.thread_policy.choice:3d}", flush=True)

    start = time.perf_counter()
    result = model.fit(fashion_pixel_groups(args.images), callback=report)
    seconds = time.perf_counter() - start
    batch = points * (D + K)
    peak = max(r[3] for r in rows)
    print(f"\ntotal {seconds / 60:.1f} min, {seconds / len(rows):.1f} s per epoch; peak RSS {peak_rss_mb():.0f} MB; "
          f"peak working memory {peak * 8 / 1e6:.1f} MB against batch VB's {batch * 8 / 1e9:.1f} GB "
          f"({points} x ({D} + {K}) numbers): memory savings factor {batch / peak:.0f}; thread policy's choices "
          f"(of 1 and {torch.get_num_threads()}): {model.thread_policy.history or 'none measured'}", flush=True)
    if args.figure:
        figure(args.figure, rows, result.posterior)


def figure(path, rows, posterior):
    """Topics in use and seconds per epoch (Fig. 3 analogue), and the topics as ellipses in (x, y) shaded by
    their mean intensity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Ellipse

    images = [r[0] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(images, [r[1] for r in rows])
    axes[0].set(xlabel="images seen", ylabel="topics in use", title="topics per epoch")
    axes[1].plot(images, [r[2] for r in rows])
    axes[1].set(xlabel="images seen", ylabel="seconds", title="time per epoch")
    estimates = posterior.family.point_estimates(posterior.component)
    weights = posterior.expected_beta()[:posterior.K]
    ax = axes[2]
    for k in torch.argsort(weights, descending=True)[:20].tolist():
        mean, cov = estimates["means"][k].numpy(), estimates["covariances"][k].numpy()
        values, vectors = np.linalg.eigh(cov[:2, :2])
        angle = np.degrees(np.arctan2(vectors[1, 1], vectors[0, 1]))
        shade = float(np.clip(mean[2], 0, 1))
        ax.add_patch(Ellipse(mean[:2], 2 * np.sqrt(values[1]), 2 * np.sqrt(values[0]), angle=angle,
                             facecolor=str(1 - shade), edgecolor="tab:red", alpha=0.6))
    ax.set(xlim=(-14, 14), ylim=(-14, 14), aspect="equal", title="the 20 largest topics (x, y; dark: bright pixels)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"figure written to {path}")


if __name__ == "__main__":
    main()
