"""Issue #13: what the over-relaxed batch steps cost and what they buy, against the exact steps.

Paper 000 §4.1 toy data (N = 100,000 5x5 patches, zero-mean Gaussian family), K = 25, 100 fixed
batches, fixed K, the same seed and start for both: memoized VB with exact batch steps (Hughes &
Sudderth 2013, Alg. 1; ``overrelax=False``, the old default) and with over-relaxed steps (the default,
:mod:`pyro_memo.engine.overrelax`). Every fit runs in a fresh process, the two alternate, with 1 and
with 2 threads, on a quiet machine and beside a pure-Python CPU-bound process.

Printed per condition: the median over runs of the mean lap time from lap 2 on (lap 1 is the same held
lap for both), the over-relaxed / exact ratio, the over-relaxed rounds kept / proposed (each rejected
one costs a second local step), the final exact ELBO per item, and the ELBO per item each reaches at
equal wall time (the over-relaxed fit's objective after the last lap it finished within the exact
fit's whole time).

    python benchmarks/bench_overrelax.py [--runs 3] [--laps 10] [--threads 1,2] [--busy no,yes]

``--same-process``: instead, per condition one fresh process fits exact and over-relaxed alternately
``--runs`` times and prints the median mean lap over laps 3 on (both take exact steps before): less
noise from process start-up and memory placement than fits in separate processes.

``--other-models``: instead, the HDP on the bars corpus (2,000 documents, K = 20, 10 batches) and the
relational model on a synthetic assortative graph (2,000 nodes, 10 communities, K = 10, 10 batches),
10 laps, exact against over-relaxed steps (``overrelax=True``; off by default for these models), in
this process on the threads it is given: the final bound and the mean lap time of each, per seed.
"""

import argparse
import json
import sys

import numpy as np
from _common import add_toy_arguments, make_parser, run_isolated


def toy(n):
    """The toy patches and their zero-mean Gaussian family with default priors."""
    import torch

    import pyro_memo as pm
    from pyro_memo.data import toy_patches

    x = torch.as_tensor(toy_patches(n, seed=0)[0])
    return x, pm.ZeroMeanGaussian.from_data(x)


def child(args):
    """One fit in this process; prints its JSON record last."""
    import torch

    import pyro_memo as pm

    torch.manual_seed(0)
    x, family = toy(args.n)
    memo = pm.MemoizedVB(family, args.K, laps=args.laps, tol=0, seed=args.seed, overrelax=args.child == "over")
    fit = memo.fit(x, num_batches=args.batches)
    print(json.dumps({"laps": fit.lap_seconds, "trace": [e / len(x) for e in fit.elbo_trace],
                      "counts": memo.relax_counts, "threads": torch.get_num_threads()}))


def child_pairs(args):
    """Exact and over-relaxed fits alternating in this process; prints the mean lap from lap 3 of each."""
    import pyro_memo as pm

    x, family = toy(args.n)
    laps = {"exact": [], "over": []}
    for _ in range(args.runs):
        for mode in laps:
            memo = pm.MemoizedVB(family, args.K, laps=args.laps, tol=0, seed=args.seed, overrelax=mode == "over")
            laps[mode].append(float(np.mean(memo.fit(x, num_batches=args.batches).lap_seconds[2:])))
    print(json.dumps(laps))


def child_command(args):
    """This script with the toy settings of ``args``, for a child process."""
    return [sys.executable, __file__, "--n", str(args.n), "--K", str(args.K), "--batches", str(args.batches),
            "--laps", str(args.laps), "--seed", str(args.seed)]


def same_process(args):
    """``--same-process``: see the module docstring."""
    command = child_command(args) + ["--runs", str(args.runs), "--child", "pairs"]
    print(f"toy data: N = {args.n}, K = {args.K}, {args.batches} batches, {args.laps} laps; {args.runs} alternating "
          f"pairs of fits in one process per condition; median mean lap from lap 3 on")
    print(f"\n{'threads':>7} {'busy':>5} {'exact s/lap':>12} {'over s/lap':>11} {'ratio':>6}")
    for busy in (b == "yes" for b in args.busy.split(",")):
        for threads in (int(t) for t in args.threads.split(",")):
            laps = run_isolated(command, threads, busy)
            exact, over = np.median(laps["exact"]), np.median(laps["over"])
            print(f"{threads:>7} {'yes' if busy else 'no':>5} {exact:>12.4f} {over:>11.4f} {over / exact:>6.3f}",
                  flush=True)


def other_models(seeds):
    """The HDP and the relational model, exact against over-relaxed steps (see the module docstring)."""
    import torch

    from pyro_memo.data import assortative_graph, bars_corpus
    from pyro_memo.relational import MemoizedRelational
    from pyro_memo.topics import MemoizedHDP

    corpus, _, _ = bars_corpus(2000, 100, seed=0)
    graph = assortative_graph(2000, 10, seed=0)[0]
    print(f"{torch.get_num_threads()} thread(s); 10 laps, 10 batches; mean lap from lap 2 on")
    print(f"{'model':<11} {'seed':>4} {'exact bound':>14} {'over bound':>14} {'exact s/lap':>12} {'over s/lap':>11}"
          f" {'ratio':>6}")
    for name, make, data in (("HDP", lambda s, o: MemoizedHDP(K=20, laps=10, tol=0, seed=s, overrelax=o), corpus),
                             ("relational", lambda s, o: MemoizedRelational(K=10, laps=10, tol=0, seed=s,
                                                                            overrelax=o), graph)):
        for seed in seeds:
            fits = [make(seed, on).fit(data, 10) for on in (False, True)]
            laps = [np.mean(f.lap_seconds[1:]) for f in fits]
            print(f"{name:<11} {seed:>4} {fits[0].elbo:>14.2f} {fits[1].elbo:>14.2f} {laps[0]:>12.3f} {laps[1]:>11.3f}"
                  f" {laps[1] / laps[0]:>6.2f}", flush=True)


def at_time(record, seconds):
    """The objective after the last lap ``record`` finished within ``seconds``."""
    done = np.cumsum(record["laps"]) <= seconds + 1e-9
    return record["trace"][int(done.sum()) - 1] if done.any() else float("nan")


def main():
    parser = add_toy_arguments(make_parser(__doc__))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--busy", default="no,yes")
    parser.add_argument("--other-models", action="store_true")
    parser.add_argument("--seeds", default="0,1", help="with --other-models")
    parser.add_argument("--same-process", action="store_true")
    parser.add_argument("--child", choices=("exact", "over", "pairs"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        (child_pairs if args.child == "pairs" else child)(args)
        return
    if args.same_process:
        same_process(args)
        return
    if args.other_models:
        other_models([int(s) for s in args.seeds.split(",")])
        return
    command = child_command(args) + ["--child"]
    print(f"toy data: N = {args.n}, D = 25, K = {args.K}, {args.batches} batches, {args.laps} laps, seed {args.seed}, "
          f"{args.runs} interleaved runs per condition, each in a fresh process")
    print(f"\n{'threads':>7} {'busy':>5} {'exact s/lap':>12} {'over s/lap':>11} {'ratio':>6} {'kept/proposed':>14} "
          f"{'ELBO exact':>11} {'ELBO over':>10} {'over at exact time':>19}")
    for busy in (b == "yes" for b in args.busy.split(",")):
        for threads in (int(t) for t in args.threads.split(",")):
            records = {"exact": [], "over": []}
            for _ in range(args.runs):
                for mode in records:
                    records[mode].append(run_isolated(command + [mode], threads, busy))
            laps = {m: [np.mean(r["laps"][1:]) for r in rs] for m, rs in records.items()}
            exact, over = np.median(laps["exact"]), np.median(laps["over"])
            counts = records["over"][0]["counts"]
            pairs = zip(records["over"], records["exact"], strict=True)
            equal_time = np.median([at_time(o, sum(e["laps"])) for o, e in pairs])
            print(f"{threads:>7} {'yes' if busy else 'no':>5} {exact:>12.3f} {over:>11.3f} {over / exact:>6.2f} "
                  f"{counts['accepted']:>6}/{counts['proposed']:<7} {records['exact'][0]['trace'][-1]:>11.4f} "
                  f"{records['over'][0]['trace'][-1]:>10.4f} {equal_time:>19.4f}", flush=True)
            print(f"{'':>14}runs: exact {', '.join(f'{v:.3f}' for v in laps['exact'])}; "
                  f"over {', '.join(f'{v:.3f}' for v in laps['over'])}", flush=True)


if __name__ == "__main__":
    main()
