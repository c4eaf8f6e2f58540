"""``pyro-memo compare``: methods x seeds on one dataset, tables and plots."""

import sys

from ..datasets import BUNDLED, load_dataset
from ..families import FAMILIES, get_family
from .harness import compare, load_array_split, markdown_tables
from .methods import METHODS, Budget, Settings


def add_compare_parser(sub):
    cmp = sub.add_parser(
        "compare", help="run inference methods side by side and score them on one objective",
        description="Run METHODS x SEEDS on DATA under one budget and score every run on the exact DP-mixture "
                    "ELBO, held-out log predictive density, NMI, Hungarian accuracy and effective K. Writes "
                    "runs.csv / runs.md (per run), summary.md (mean +- sd per method), traces.csv and plots "
                    "(ELBO against passes and wall time, K against passes, final-ELBO strip plot) to --out.")
    cmp.add_argument("data", nargs="?", default="digits", metavar="DATA",
                     help=f"a .npy / .npz file or a bundled dataset: {', '.join(BUNDLED)} (default: digits)")
    cmp.add_argument("--methods", default="memo,vb,svi-k0.5-d10,sga+f,sklearn-bgm", metavar="LIST",
                     help=f"comma-separated methods from: {', '.join(METHODS)} (default: %(default)s)")
    cmp.add_argument("--seeds", default="0,1,2", metavar="LIST", help="comma-separated seeds (default 0,1,2)")
    cmp.add_argument("--passes", type=float, default=20, help="passes through the data per run (default 20)")
    cmp.add_argument("--seconds", type=float, default=None,
                     help="also stop a run after this many seconds of its own time (default: no limit)")
    cmp.add_argument("--family", choices=sorted(FAMILIES), default="gauss",
                     help="scoring family (default priors from the training data); default gauss")
    cmp.add_argument("--K", type=int, default=25, help="truncation level shared by the methods (default 25)")
    cmp.add_argument("--batches", type=int, default=20, help="batches per pass for online methods (default 20)")
    cmp.add_argument("--alpha", type=float, default=1.0, help="DP concentration (default 1.0)")
    cmp.add_argument("--heldout", type=float, default=0.2,
                     help="fraction of items held out for the predictive density (default 0.2; 0 for none)")
    cmp.add_argument("--out", metavar="DIR", default="compare-out", help="output folder (default compare-out)")
    cmp.add_argument("--quiet", action="store_true", help="print only the summary table")
    return cmp


def _ints(text, option):
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"{option} must be comma-separated integers; got '{text}'") from None


def run_compare(args):
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"--methods: unknown {unknown}; choose from {', '.join(METHODS)}")
    seeds = _ints(args.seeds, "--seeds")
    if not seeds:
        raise ValueError("--seeds: give at least one seed")
    for name in ("K", "batches"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be a positive integer; got {getattr(args, name)}")
    if not args.passes > 0 or (args.seconds is not None and not args.seconds > 0):
        raise ValueError("--passes and --seconds must be positive")
    if not args.alpha > 0:
        raise ValueError(f"--alpha must be positive; got {args.alpha}")
    x_np, labels, description = load_dataset(args.data)
    x, y, heldout = load_array_split(x_np, labels, args.heldout, seed=0)
    family = get_family(args.family).from_data(x)
    if not args.quiet:
        print(f"{description}; {len(x)} training items, {0 if heldout is None else len(heldout)} held out",
              file=sys.stderr)
    rows, _ = compare(x, methods, seeds, family=family, labels=y, heldout=heldout,
                      budget=Budget(args.passes, args.seconds), settings=Settings(args.K, args.batches, args.alpha),
                      out_dir=args.out, progress=None if args.quiet else lambda m: print(m, file=sys.stderr))
    print(markdown_tables(rows)[1], end="")
    print(f"tables, traces and plots written to {args.out}/")
    return 0
