"""Paper 003 §5's comparison: mean-field VB against collapsed and blocked (truncated) Gibbs
sampling on synthetic DP mixtures of Gaussians across dimensions.

For each dimension D and each of ``--reps`` datasets (``pyro_memo.synthetic.dp_gaussian_mixture``:
N = 100 training and 100 held-out items, as in the paper) it runs full-batch VB (K = 20, stop when
the ELBO's relative change is below 1e-10), the collapsed Gibbs sampler and the blocked Gibbs
sampler (T = 20), each Gibbs run ``--sweeps`` sweeps with half as burn-in. It prints, per method
and D, the mean and standard error of the wall time and of the held-out log predictive density
per item (VB: paper 003's predictive; Gibbs: the predictive averaged over kept samples), and
writes a plot next to the table.

    python benchmarks/bench_gibbs_dims.py [--dims 5,10,20,30,40,50] [--reps 5] [--sweeps 200]
"""

import os
import time

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.data import dp_gaussian_mixture


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--dims", default="5,10,20,30,40,50")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--plot", default=os.path.join(os.path.dirname(__file__), "results", "gibbs_dims.png"))
    args = parser.parse_args()
    dims = [int(d) for d in args.dims.split(",")]
    results = {}
    for d in dims:
        for rep in range(args.reps):
            x_np, _ = dp_gaussian_mixture(200, d, seed=1000 * d + rep)
            x, test = torch.as_tensor(x_np[:100]), torch.as_tensor(x_np[100:])
            family = pm.Gaussian.from_data(x)
            start = time.perf_counter()
            vb = pm.FullBatchVB(family, 20, max_iter=1000, tol=1e-10, seed=rep).fit(x)
            t_vb = time.perf_counter() - start
            runs = {"VB": (t_vb, float(pm.vb_log_predictive(vb.posterior, vb.summary, test).mean()))}
            for name, sampler in (("collapsed Gibbs", pm.CollapsedGibbs(family, sweeps=args.sweeps, seed=rep)),
                                  ("blocked Gibbs", pm.BlockedGibbs(family, T=20, sweeps=args.sweeps, seed=rep))):
                start = time.perf_counter()
                result = sampler.fit(x)
                runs[name] = (time.perf_counter() - start, float(result.log_predictive(test).mean()))
            for name, value in runs.items():
                results.setdefault((name, d), []).append(value)
            print(f"D = {d:3d} rep {rep}: " + ", ".join(f"{n} {t:.2f} s / {lp:.3f}" for n, (t, lp) in runs.items()),
                  flush=True)
    methods = ["VB", "collapsed Gibbs", "blocked Gibbs"]
    print(f"\nmean (standard error) over {args.reps} datasets; held-out log predictive per item; "
          f"Gibbs: {args.sweeps} sweeps, half burn-in")
    print(f"{'D':>4} | " + " | ".join(f"{m + ' time (s)':>22} | {m + ' held-out':>24}" for m in methods))
    for d in dims:
        cells = []
        for m in methods:
            v = np.array(results[(m, d)])
            se = v.std(0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.zeros(2)
            cells.append(f"{v[:, 0].mean():14.3f} ({se[0]:.3f}) | {v[:, 1].mean():16.3f} ({se[1]:.3f})")
        print(f"{d:4d} | " + " | ".join(cells))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for m in methods:
        v = np.array([np.mean(results[(m, d)], 0) for d in dims])
        axes[0].plot(dims, v[:, 0], marker="o", label=m)
        axes[1].plot(dims, v[:, 1], marker="o", label=m)
    axes[0].set(xlabel="dimension", ylabel="wall time (s)", yscale="log")
    axes[1].set(xlabel="dimension", ylabel="held-out log predictive per item")
    axes[0].legend()
    os.makedirs(os.path.dirname(args.plot), exist_ok=True)
    fig.savefig(args.plot, dpi=110, bbox_inches="tight")
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
