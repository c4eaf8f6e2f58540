"""The one engine against an older checkout, side by side in one session: same exact objective,
same held-out score, same speed.

Runs each fit in a fresh subprocess whose ``PYTHONPATH`` points at a checkout, alternating
old and new (``--reps`` times each for the toy fit), one thread each:

* toy data (Hughes & Sudderth 2013 §4.1: N = 100,000 5x5 patches, D = 25), zero-mean Gaussian
  DP mixture, K = 25, 100 batches, seed 0, float64, ``--toy-laps`` laps: final exact ELBO and
  seconds per lap;
* small fits of every other driver (full-batch, stochastic, memoized with moves, HDP with
  moves, stochastic HDP): their objective traces, old against new;
* Wikipedia (the bnpy 0.1.7 corpus, 80/20 document split), memoized HDP at the README's
  settings (K = 100, 20 batches, float32, k-means start), ``--wiki-laps`` laps: held-out
  log-likelihood per token by document completion and seconds per lap.

    git worktree add /tmp/old <older commit>
    python benchmarks/bench_engine_parity.py --old /tmp/old [--new .] [--reps 2] [--toy-laps 10] [--wiki-laps 3]
    python benchmarks/bench_engine_parity.py --old /tmp/old --toy-only --threads 2 --busy
"""

import argparse
import json
import os
import subprocess
import sys

TOY = """
import json, torch
import pyro_memo as pm
import pyro_memo as pm_module
from pyro_memo.synthetic import toy_patches
torch.set_num_threads({threads})
x = torch.as_tensor(toy_patches(100_000, seed=0)[0], dtype=torch.float64)
family = pm.ZeroMeanGaussian.from_data(x)
fit = pm.MemoizedVB(family, K=25, laps={laps}, tol=0, seed=0).fit(x, num_batches=100)
print(json.dumps({{"elbo": fit.elbo, "trace": fit.elbo_trace, "lap_seconds": fit.lap_seconds}}))
"""

SMALL = """
import json, torch
import pyro_memo as pm
import pyro_memo as pm_module
from pyro_memo.synthetic import toy_patches, bars_corpus
from pyro_memo.topics import MemoizedHDP, StochasticHDP
torch.set_num_threads(1)
x = torch.as_tensor(toy_patches(6000, seed=1)[0], dtype=torch.float64)
fam = pm.ZeroMeanGaussian.from_data(x)
out = {{}}
out["full-batch VB"] = pm.FullBatchVB(fam, 10, max_iter=15, tol=0, seed=0).fit(x).elbo_trace
out["stochastic VB"] = pm.StochasticVB(fam, 10, laps=4, seed=0).fit(x, num_batches=6).elbo_trace
out["memoized VB, births/merges/deletes from K=1"] = pm.MemoizedVB(fam, 1, laps=12, seed=0,
    moves="birth,merge,delete").fit(x, num_batches=6).elbo_trace
corpus = bars_corpus(200, 80, alpha=0.2, seed=4)[0]
out["memoized HDP, births/merges from K=2"] = MemoizedHDP(K=2, laps=8, seed=0, local_iters=30,
    moves="birth,merge").fit(corpus, 3).elbo_trace
out["stochastic HDP (rate (t + d)^-kappa now counts t from 1)"] = StochasticHDP(K=8, laps=3, seed=0).fit(
    corpus, 3).elbo_trace
print(json.dumps(out))
"""

WIKI = """
import json, torch
import pyro_memo as pm_module
from pyro_memo.topics import MemoizedHDP, document_completion, load_wikipedia, split_documents
torch.set_num_threads(1)
train, test = split_documents(load_wikipedia(), 0.2, seed=0)
fit = MemoizedHDP(K=100, laps={laps}, tol=0, seed=0, dtype=torch.float32).fit(train, 20)
print(json.dumps({{"heldout": document_completion(fit.posterior, test), "bound_per_token":
                   fit.elbo / train.num_tokens, "lap_seconds": fit.lap_seconds}}))
"""


CHECK = """
import os as _os
assert _os.path.dirname(_os.path.dirname(_os.path.abspath(pm_module.__file__))) == {root!r}, pm_module.__file__
"""


def run(checkout, code, threads=1):
    root = os.path.abspath(checkout)
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    # run inside the checkout: `python -c` puts the working folder first on sys.path
    out = subprocess.run([sys.executable, "-c", code + CHECK.format(root=root)], env=env, cwd=root,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{checkout}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def mean(values):
    return sum(values) / len(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="checkout of the older commit")
    parser.add_argument("--new", default=".", help="checkout of the newer commit (default: this one)")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--toy-laps", type=int, default=10)
    parser.add_argument("--wiki-laps", type=int, default=3)
    parser.add_argument("--skip-wiki", action="store_true")
    parser.add_argument("--toy-only", action="store_true", help="only the toy fit (for --threads / --busy runs)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the toy fits")
    parser.add_argument("--busy", action="store_true", help="keep a CPU-bound process running beside the fits")
    args = parser.parse_args()
    checkouts = {"old": args.old, "new": args.new}

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        compare(args, checkouts)
    finally:
        if busy is not None:
            busy.kill()


def compare(args, checkouts):
    print(f"{args.threads} thread(s) per fit{', beside a CPU-bound process' if args.busy else ''}", flush=True)
    toy = {"old": [], "new": []}
    for rep in range(args.reps):
        for name in ("old", "new") if rep % 2 == 0 else ("new", "old"):
            toy[name].append(run(checkouts[name], TOY.format(laps=args.toy_laps, threads=args.threads),
                                 args.threads))
            r = toy[name][-1]
            print(f"toy {name} rep {rep}: ELBO {r['elbo']!r}, {mean(r['lap_seconds']):.3f} s/lap", flush=True)
    old, new = toy["old"][0]["elbo"], toy["new"][0]["elbo"]
    old_lap = mean([mean(r["lap_seconds"]) for r in toy["old"]])
    new_lap = mean([mean(r["lap_seconds"]) for r in toy["new"]])
    print(f"toy: relative ELBO difference {abs(new - old) / abs(old):.2e}; largest over the trace "
          f"{max(abs(a - b) / abs(a) for a, b in zip(toy['old'][0]['trace'], toy['new'][0]['trace'], strict=True)):.2e}"
          f"; s/lap old {old_lap:.3f}, new {new_lap:.3f}, new/old {new_lap / old_lap:.3f}", flush=True)
    old_later = mean([mean(r["lap_seconds"][1:]) for r in toy["old"]])
    new_later = mean([mean(r["lap_seconds"][1:]) for r in toy["new"]])
    print(f"toy, laps 2 on (the first lap's schedule may differ): s/lap old {old_later:.3f}, new {new_later:.3f}, "
          f"new/old {new_later / old_later:.3f}", flush=True)
    if args.toy_only:
        return
    small = {name: run(checkouts[name], SMALL.format()) for name in ("old", "new")}
    for fit, old_trace in small["old"].items():
        new_trace = small["new"][fit]
        worst = max(abs(a - b) / abs(a) for a, b in zip(old_trace, new_trace, strict=False))
        print(f"{fit}: {len(old_trace)} / {len(new_trace)} laps, final old {old_trace[-1]!r} new {new_trace[-1]!r}, "
              f"largest relative difference {worst:.1e}", flush=True)
    if args.skip_wiki:
        return
    wiki = {}
    for name in ("old", "new"):
        wiki[name] = run(checkouts[name], WIKI.format(laps=args.wiki_laps))
        r = wiki[name]
        print(f"wiki {name}: held-out {r['heldout']:.5f} nats/token after {args.wiki_laps} laps, bound "
              f"{r['bound_per_token']:.5f}/token, {mean(r['lap_seconds']):.1f} s/lap", flush=True)
    print(f"wiki: held-out new - old {wiki['new']['heldout'] - wiki['old']['heldout']:+.5f} nats/token; s/lap "
          f"new/old {mean(wiki['new']['lap_seconds']) / mean(wiki['old']['lap_seconds']):.3f}")


if __name__ == "__main__":
    main()
