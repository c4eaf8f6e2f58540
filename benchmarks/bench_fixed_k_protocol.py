"""Issue #13: memoized VB's fixed-K schedule and start, measured in the acceptance protocol.

Runs full-batch VB (``vb``), stochastic VB (``svi``: kappa = 0.5, delay = 10; ``svi-d100``: delay 100;
``svi-k0.9``: kappa 0.9), memoized VB as it runs by default (``memo``: held first lap, then over-relaxed
batch steps, :mod:`pyro_memo.engine.overrelax`), memoized VB with exact steps only (``exact``: Hughes &
Sudderth 2013, Alg. 1, the default before over-relaxation) and memoized VB with the "filled" first lap
(``bench_memo_schedule.FirstLapVariant``: lap 1 updates the globals from the partial memo plus the initial
summary scaled to the unvisited items; exact steps after it), with
the settings and data order of ``pyro-memo compare`` (the data permuted by ``load_array_split`` with
seed 0, heldout 0, one start per seed shared by every method, tol 1e-9 for memo and VB), so its
numbers for ``memo``, ``vb`` and ``svi`` equal those of the compare tables in
``results/bench_memo_schedule_compare.txt``. ``--init random`` starts every method from random
responsibilities instead of k-means++ (the zero-mean family's centres mean nothing; see
``results/bench_memo_schedule.txt``).

Data: an ``.npz`` written by ``bench_memo_schedule.py --save-data`` (toy3k: K 10, 6 batches, 20 passes;
toy100k: K 25, 100 batches, 10 passes; fashion: K 25, 20 batches, 10 passes, family gauss).

    python benchmarks/bench_fixed_k_protocol.py DATA.npz --K 10 --batches 6 --passes 20 --family zm-gauss \
        --seeds 0,1,2,3,4 [--runs vb,svi,memo,exact,filled] [--init random]

Prints the final exact ELBO per item per run and seed (for ``memo`` also the over-relaxed rounds kept /
proposed: each rejected one cost a second local step), the means, and the paired differences of memo and
exact against the others.
"""

import numpy as np
import torch
from _common import make_parser
from bench_memo_schedule import FirstLapVariant

import pyro_memo as pm
from pyro_memo.comparison import load_array_split

#: stochastic schedules: name -> (kappa, delay), as ``pyro-memo compare``'s svi-k*-d* methods
STOCHASTIC = {"svi": (0.5, 10.0), "svi-d100": (0.5, 100.0), "svi-k0.9": (0.9, 10.0)}


def run(name, x, family, K, batches, passes, seed, init):
    """The fit of run ``name`` (vb, svi, svi-d100, svi-k0.9, memo, exact, filled) with one seed."""
    if name == "vb":
        return pm.FullBatchVB(family, K, max_iter=passes, tol=1e-9, seed=seed, init=init).fit(x)
    if name in STOCHASTIC:
        kappa, delay = STOCHASTIC[name]
        return pm.StochasticVB(family, K, laps=passes, kappa=kappa, delay=delay, seed=seed, init=init).fit(
            x, num_batches=batches)
    if name in ("memo", "exact"):
        memo = pm.MemoizedVB(family, K, laps=passes, tol=1e-9, seed=seed, init=init, overrelax=name == "memo")
        fit = memo.fit(x, num_batches=batches)
        fit.relax_counts = memo.relax_counts
        return fit
    if name == "filled":
        return FirstLapVariant(family, K, laps=passes, tol=1e-9, seed=seed, init=init, mode="filled",
                               overrelax=False).fit(x, num_batches=batches)
    raise ValueError(f"unknown run {name}")


def main():
    parser = make_parser(__doc__)
    parser.add_argument("data")
    parser.add_argument("--K", type=int, default=10)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--family", default="zm-gauss")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--runs", default="vb,svi,svi-d100,svi-k0.9,memo,exact")
    parser.add_argument("--init", default="kmeans++", choices=("kmeans++", "random"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    x, _, _ = load_array_split(np.load(args.data)["x"], None, 0.0, seed=0)
    x = x.to(torch.float64)
    family = pm.get_family(args.family).from_data(x)
    seeds, names = [int(s) for s in args.seeds.split(",")], args.runs.split(",")
    values = {name: {} for name in names}
    for seed in seeds:
        for name in names:
            fit = run(name, x, family, args.K, args.batches, args.passes, seed, args.init)
            values[name][seed] = fit.elbo_trace[-1] / len(x)
            counts = getattr(fit, "relax_counts", None)
            kept = f", over-relaxed rounds kept {counts['accepted']} / {counts['proposed']}" if counts and \
                counts["proposed"] else ""
            print(f"seed {seed} {name:8s} {values[name][seed]:.4f}  ({len(fit.elbo_trace)} passes{kept})", flush=True)
    print(f"{args.data}: K {args.K}, {args.batches} batches, {args.passes} passes, init {args.init}, "
          f"seeds {args.seeds}; exact ELBO per item")
    for name in names:
        print(f"  {name:8s} mean {np.mean(list(values[name].values())):8.4f}")
    for ref in ("memo", "exact", "filled"):
        for name in (n for n in names if n != ref and not (ref != "memo" and n in ("memo", "exact", "filled"))):
            if ref in values:
                d = np.array([values[ref][s] - values[name][s] for s in seeds])
                se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
                print(f"  {ref} - {name:8s} mean {d.mean():+.4f}  se {se:.4f}  {ref} ahead on {int((d > 0).sum())}"
                      f"/{len(d)} seeds")


if __name__ == "__main__":
    main()
