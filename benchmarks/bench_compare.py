"""Methods x seeds on one dataset through the comparison harness (``pyro_memo.comparison``),
with every run scored on the exact DP-mixture ELBO, held-out log predictive density, NMI,
Hungarian accuracy and effective K. Tables (``runs.csv``, ``runs.md``, ``summary.md``),
traces and plots go to ``--out``.

Datasets: ``toy`` (paper 000 §4.1: 100,000 zero-mean 5x5 patches, zm-gauss family),
``fashion`` (Fashion-MNIST from Debian's dataset-fashion-mnist, PCA to 50 dimensions),
``digits`` (scikit-learn's 8x8 digits). 20% of the items are held out.

    python benchmarks/bench_compare.py --data toy --seeds 5 --passes 20
    python benchmarks/bench_compare.py --data digits --family diag-gauss --methods vb,sga,sga+m,sga+f,memo
    python benchmarks/bench_compare.py --merge OUT DIR1 DIR2 ...   # one table from separate runs
"""

import os

import numpy as np
from _common import make_parser

from pyro_memo.comparison import Budget, Settings, compare, load_array_split, markdown_tables, merge_outputs
from pyro_memo.data import load_fashion_mnist, toy_patches

DEFAULT_METHODS = {
    "toy": "memo,memo-moves,vb,svi-k0.5-d10,svi-k0.5-d100,svi-k0.9-d10,pyro-svi,sga+f,gibbs-blocked,sklearn-bgm",
    "fashion": "memo,memo-moves,vb,svi-k0.5-d10,svi-k0.5-d100,svi-k0.9-d10,pyro-svi,sga,sga+m,sga+f,gibbs-blocked,"
               "sklearn-bgm",
    "digits": "memo,vb,svi-k0.5-d10,svi-k0.5-d100,svi-k0.9-d10,sga,sga+m,sga+f,gibbs-blocked,sklearn-bgm",
}


def load(name):
    if name == "toy":
        x, y, _ = toy_patches(100_000, seed=0)
        return x, y, "zm-gauss"
    if name == "fashion":
        from sklearn.decomposition import PCA

        images, y = load_fashion_mnist()
        return PCA(50, random_state=0).fit_transform(images), y, "gauss"
    if name == "digits":
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        return x.astype(np.float64), y, "gauss"
    raise SystemExit(f"unknown dataset {name}")


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--data", choices=sorted(DEFAULT_METHODS), default="toy")
    parser.add_argument("--methods", default=None)
    parser.add_argument("--family", default=None, help="scoring family (default: zm-gauss for toy, else gauss)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--seed-list", default=None, help="comma-separated seeds (instead of 0 .. --seeds - 1)")
    parser.add_argument("--passes", type=float, default=20)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--out", default=None)
    parser.add_argument("--merge", nargs="+", metavar="DIR",
                        help="OUT DIR1 DIR2 ...: combine comparison folders into OUT and print its summary")
    args = parser.parse_args()
    if args.merge:
        rows, _ = merge_outputs(args.merge[0], args.merge[1:])
        print(markdown_tables(rows)[1])
        return
    x, y, family = load(args.data)
    family = args.family or family
    methods = (args.methods or DEFAULT_METHODS[args.data]).split(",")
    out = args.out or os.path.join(os.path.dirname(__file__), "results", f"compare_{args.data}_{family}")
    train, labels, heldout = load_array_split(x, y, 0.2, seed=0)
    print(f"{args.data}: {len(train)} training, {len(heldout)} held-out items, D = {train.shape[1]}, family "
          f"{family}, K = {args.K}, {args.batches} batches per pass, {args.passes:g} passes, {args.seeds} seeds",
          flush=True)
    seeds = [int(v) for v in args.seed_list.split(",")] if args.seed_list else list(range(args.seeds))
    rows, _ = compare(train, methods, seeds=seeds, family=family, labels=labels, heldout=heldout,
                      budget=Budget(args.passes, args.seconds), settings=Settings(args.K, args.batches),
                      out_dir=out, progress=lambda m: print(m, flush=True))
    print()
    print(markdown_tables(rows)[1])
    print(f"tables and plots: {out}/")


if __name__ == "__main__":
    main()
