"""Issue #13 (b): the over-relaxation's settings compared on seeds the acceptance does not use.

The acceptance table of issue #13 (b) uses seeds 0-4 of ``pyro-memo compare`` (toy data, N = 100,000,
K = 25, 100 batches, 10 passes). There a single seed that falls into a basin where two true components
share one (ELBO/item about 12.0 against 12.4-12.5) moves a 5-seed mean by 0.09, more than the gaps the
bar compares. Choosing the over-relaxation's settings on those seeds would fit the noise, so this script
compares them on other seeds (default 5-24): the mean final exact ELBO per item, the seeds that end in
a basin below 12.2 and the mean effective K, for exact steps and a few settings of
:class:`~pyro_memo.engine.Overrelaxation`.

The data and the start are the harness's: ``toy_patches(100_000, seed=0)`` permuted by
``load_array_split(seed=0)`` (what ``pyro-memo compare`` does with ``--heldout 0``), alpha = 1, k-means++.

    python benchmarks/bench_overrelax_settings.py [--seeds 5-24] [--variants default,exact,...]
"""

import json

import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.comparison import load_array_split
from pyro_memo.data import toy_patches
from pyro_memo.engine import Overrelaxation

#: name -> the ``overrelax=`` argument (``False``: exact steps) as keyword arguments of Overrelaxation
VARIANTS = {
    "default": {},
    "exact": None,
    "max_factor=2": {"max_factor": 2.0},
    "grow=1.2": {"grow": 1.2},
    "shrink=0.1": {"shrink": 0.1},
}
MERGED = 12.2  # ELBO/item below this: two true components share one (the good basin ends at 12.4-12.5)


def effective_k(posterior, x):
    labels = posterior.responsibilities(x).argmax(-1)
    counts = torch.bincount(labels, minlength=posterior.K)
    return int((counts >= 0.01 * len(x)).sum())


def run(x, family, variant, seed, laps, batches):
    kwargs = VARIANTS[variant]
    overrelax = False if kwargs is None else Overrelaxation(**kwargs)
    memo = pm.MemoizedVB(family, 25, 1.0, laps=laps, tol=1e-9, seed=seed, overrelax=overrelax)
    fit = memo.fit(x, num_batches=batches)
    return fit.elbo_trace[-1] / len(x), effective_k(fit.posterior, x)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--seeds", default="5-24", help="LO-HI (inclusive) or a comma list")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--laps", type=int, default=10)
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    if "-" in args.seeds:
        lo, hi = map(int, args.seeds.split("-"))
        seeds = list(range(lo, hi + 1))
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
    torch.set_num_threads(1)
    x, _, _ = toy_patches(100_000, seed=0)
    x, _, _ = load_array_split(x, None, 0.0, seed=0)
    family = pm.ZeroMeanGaussian.from_data(x)
    rows = {}
    for variant in args.variants.split(","):
        for seed in seeds:
            elbo, K = run(x, family, variant, seed, args.laps, args.batches)
            rows.setdefault(variant, []).append((elbo, K))
            print(json.dumps({"variant": variant, "seed": seed, "elbo_per_item": round(elbo, 6), "effective_k": K}),
                  flush=True)
    print(f"\nseeds {seeds[0]}..{seeds[-1]} ({len(seeds)}), {args.laps} laps, {args.batches} batches, K = 25")
    print(f"{'variant':<14} {'mean ELBO/item':>15} {'merged basin':>13} {'mean effective K':>17}")
    for variant, values in rows.items():
        elbos = [e for e, _ in values]
        print(f"{variant:<14} {sum(elbos) / len(elbos):>15.4f} {sum(e < MERGED for e in elbos):>9}/{len(elbos):<3}"
              f" {sum(k for _, k in values) / len(values):>17.2f}")


if __name__ == "__main__":
    main()
