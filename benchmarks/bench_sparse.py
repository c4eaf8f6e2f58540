"""Issue #16 item 2: sparse top-L responsibilities (Hughes & Sudderth 2016) against dense ones.

Zero-mean 8x8 image patches (D = 64): random patches of scikit-image's bundled grayscale images,
pixels scaled to [0, 1], each patch's mean subtracted (DC removed). A zero-mean full-covariance
Gaussian DP mixture at fixed K is fitted by memoized VB twice from one initialisation and one batch
order: with dense responsibilities and with each item's L largest kept (``sparse_L``). The two
fits run interleaved, lap by lap, so a change in the machine's load hits both alike.

With ``--candidates R`` a third fit runs interleaved with them: the same top ``L`` searched among each item's
candidates only (``sparse_candidates=R``: the components of the last supports of the items of its batch that
share its most probable one, plus ``R`` at random per such group; a batch's first visit searches all ``K``).

Printed: seconds of every lap of each, the mean lap seconds from lap 2 on (lap 1 included when there
is only one), their ratio dense / sparse, and the final exact ELBO of each (the sparse one is the
exact ELBO of its sparse posterior) with their relative difference. With ``--split``, one batch's local step
under the dense fit's final globals is also timed in parts (median of ``--reps``): the K expected
log-likelihoods alone, the dense step, the sparse step. Both steps must compute all K log-likelihoods to find
each item's top L, so dense / log-likelihoods is the most a sparse step can gain however cheap its statistics;
with ``--candidates`` the split also times the candidate step from the supports of the dense fit's final
responsibilities, which is not bound by it.

    python benchmarks/bench_sparse.py [--n 1000000] [--K 200] [--L 8] [--batches 20] [--laps 5] [--split]
        [--candidates 4]
"""

import statistics
import time

import numpy as np
import torch
from _common import make_parser, report_dense_sparse

import pyro_memo as pm
from pyro_memo.families import candidate_groups

#: scikit-image's bundled grayscale photographs and scans (no download needed)
IMAGES = ("camera", "moon", "coins", "brick", "grass", "gravel", "clock", "cell", "page", "text")


def zero_mean_patches(n, size=8, seed=0):
    """``n`` random ``size x size`` patches of :data:`IMAGES`, as ``(n, size**2)`` float64 rows with each
    row's mean removed, images drawn uniformly and positions uniformly within an image."""
    import skimage.data

    rng = np.random.default_rng(seed)
    images = [getattr(skimage.data, name)().astype(np.float64) / 255.0 for name in IMAGES]
    which = rng.integers(len(images), size=n)
    out = np.empty((n, size * size))
    for i, image in enumerate(images):
        rows = np.flatnonzero(which == i)
        top = rng.integers(image.shape[0] - size + 1, size=len(rows))
        left = rng.integers(image.shape[1] - size + 1, size=len(rows))
        offsets = np.arange(size)
        patches = image[top[:, None, None] + offsets[None, :, None], left[:, None, None] + offsets[None, None, :]]
        out[rows] = patches.reshape(len(rows), -1)
    return out - out.mean(1, keepdims=True)


def interleaved(fits, source, initial, laps):
    """Run each ``(driver, state)`` of ``fits`` from the globals ``initial``, one lap at a time, in turn,
    for ``laps`` laps."""
    for lap in range(1, laps + 1):
        for driver, state in fits:
            driver.laps = lap
            driver.fit(source, posterior=initial, state=state)
            name = "dense " if driver.sparse_L is None else "sparse" if driver.sparse_candidates is None else "cands "
            print(f"  lap {lap} {name}: "
                  f"{state.lap_seconds[-1]:7.2f} s  ELBO {state.elbo_trace[-1]:.8e}", flush=True)


def cost_split(posterior, x, L, reps, candidates=None):
    """Median seconds of the parts of a local step of items ``x`` under ``posterior`` (module docstring)."""
    log_joint = posterior.log_joint_function(None)
    parts = {"K expected log-likelihoods": lambda: [log_joint(chunk) for chunk in posterior.chunks(x)],
             "dense local step": lambda: posterior.local_step(x),
             f"sparse local step (L = {L})": lambda: posterior.local_step(x, sparse_L=L)}
    if candidates is not None:
        support = torch.topk(posterior.local_step(x)[0], L, dim=1).indices
        groups = candidate_groups(support, posterior.K, candidates, torch.Generator().manual_seed(0))
        per_item = sum(len(items) * len(columns) for items, columns in groups) / len(x)
        parts[f"candidate step ({per_item:.1f} per item)"] = lambda: posterior.candidate_local_step(
            x, support, L, extra=candidates, generator=torch.Generator().manual_seed(0))[0].dense()
    times = {name: [] for name in parts}
    for _ in range(reps):
        for name, run in parts.items():  # interleaved
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\none batch of {len(x):,} items under the dense fit's globals (median of {reps}):")
    for name, seconds in median.items():
        print(f"  {name:32s} {seconds:7.3f} s")
    dense, sparse, log_lik = (median[name] for name in ("dense local step", f"sparse local step (L = {L})",
                                                       "K expected log-likelihoods"))
    print(f"  dense / sparse = {dense / sparse:.2f}x; ceiling dense / log-likelihoods = {dense / log_lik:.2f}x "
          f"(a sparse step whose top-L selection, statistics and entropy cost nothing)")
    if candidates is not None:
        cand = median[list(parts)[-1]]
        print(f"  dense / candidate step = {dense / cand:.2f}x")


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="patches")
    parser.add_argument("--K", type=int, default=200, help="truncation level")
    parser.add_argument("--L", type=int, default=8, help="responsibilities kept per item")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--laps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", action="store_true", help="also time one batch's local step in parts")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of --split's timings")
    parser.add_argument("--candidates", type=int, default=None,
                        help="also fit with sparse_candidates=R (random candidates per group)")
    args = parser.parse_args()

    start = time.perf_counter()
    x = torch.as_tensor(zero_mean_patches(args.n, seed=args.seed))
    family = pm.ZeroMeanGaussian.from_data(x)
    print(f"{args.n:,} zero-mean 8x8 patches of {len(IMAGES)} scikit-image images (D = 64), made in "
          f"{time.perf_counter() - start:.1f} s; K = {args.K}, L = {args.L}, {args.batches} batches, "
          f"{args.laps} laps, float64, torch threads {torch.get_num_threads()}", flush=True)
    source = pm.make_batches(x, args.batches)
    dense = pm.MemoizedVB(family, args.K, laps=1, tol=0, seed=args.seed)
    sparse = pm.MemoizedVB(family, args.K, laps=1, tol=0, seed=args.seed, sparse_L=args.L)
    start = time.perf_counter()
    initial = dense.initial_posterior(source)
    print(f"initialisation (k-means++ on {dense.init_items:,} items): {time.perf_counter() - start:.1f} s")
    fits = [(dense, dense.new_state()), (sparse, sparse.new_state())]
    if args.candidates is not None:
        cands = pm.MemoizedVB(family, args.K, laps=1, tol=0, seed=args.seed, sparse_L=args.L,
                              sparse_candidates=args.candidates)
        fits.append((cands, cands.new_state()))
    interleaved(fits, source, initial, args.laps)

    dense_state, sparse_state = fits[0][1], fits[1][1]
    report_dense_sparse(dense_state, sparse_state, args.L, "ELBO")
    if args.candidates is not None:
        report_dense_sparse(dense_state, fits[2][1], args.L, "ELBO",
                            label=f"candidates L={args.L} R={args.candidates}")
    if args.split:
        cost_split(dense_state.posterior, source.batch(0), args.L, args.reps, args.candidates)

if __name__ == "__main__":
    main()
