"""Over-relaxed document sweeps against plain ones in the HDP's local step (``overrelax=True`` / ``False`` of
``GroupedHDPPosterior.local_step``; :mod:`pyro_memo.posterior.relaxed_sweeps`).

One batch, the first ``--docs`` documents of the Wikipedia corpus (the bnpy 0.1.7 sdist's), K topics, under the
globals after ``--laps`` memoized laps over the first 5 x ``--docs`` documents in 5 batches: a cold step (no
cached counts) at the default tolerance (1e-3, cap 100 sweeps) and at 1e-6 (cap 1000), and a warm one from the
plain cold step's counts. The plain and relaxed steps alternate ``--repeats`` times in one fresh process per
condition, with 1 and with 2 threads, on a quiet machine and beside a pure-Python CPU-bound process.

Printed per condition and step: median seconds of each, their ratio plain / relaxed, the sweeps each took and
the batch's bound after each.

    python benchmarks/bench_hdp_relaxed_sweeps.py [--docs 400] [--K 100] [--laps 3] [--repeats 3]
        [--threads 1,2] [--busy no,yes]
"""

import json
import statistics
import sys
import time

from _common import add_condition_arguments, conditions, make_parser, run_isolated

STEPS = (("cold", 1e-3, 100), ("warm", 1e-3, 100), ("cold to 1e-6", 1e-6, 1000))


def child(args):
    """One condition in this process: the JSON line of median seconds, sweeps and bounds."""
    import numpy as np
    import torch

    from pyro_memo.topics import MemoizedHDP, fetch_wikipedia

    wiki = fetch_wikipedia()
    corpus, lap_corpus = (wiki.subset(np.arange(n)) for n in (args.docs, 5 * args.docs))
    hdp = MemoizedHDP(K=args.K, laps=args.laps, seed=0)
    posterior = hdp.fit(lap_corpus, 5, posterior=hdp.initial_posterior(lap_corpus)).posterior
    doc, word, count = corpus.tokens(dtype=torch.float64)
    n = corpus.num_docs
    _, start, _, _ = posterior.local_step(doc, word, count, n, overrelax=False)
    seconds, out = {}, {}
    for _ in range(args.repeats):
        for name, tol, cap in STEPS:
            for relaxed in (False, True):
                key = f"{name}|{'relaxed' if relaxed else 'plain'}"
                begin = time.perf_counter()
                _, _, summary, sweeps = posterior.local_step(doc, word, count, n, init_counts=start if name == "warm"
                                                             else None, tol=tol, max_iter=cap, overrelax=relaxed)
                seconds.setdefault(key, []).append(time.perf_counter() - begin)
                out[key] = {"sweeps": sweeps, "bound": float(posterior.elbo(summary))}
    print(json.dumps({key: {**value, "seconds": statistics.median(seconds[key])} for key, value in out.items()}))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--docs", type=int, default=400, help="documents in the batch (the first DOCS)")
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--laps", type=int, default=3, help="memoized laps before the steps are timed")
    parser.add_argument("--repeats", type=int, default=3)
    add_condition_arguments(parser)
    args = parser.parse_args()
    if args.child:
        return child(args)
    print(f"Wikipedia, the first {args.docs} documents, K = {args.K}, float64, globals after {args.laps} laps; "
          f"median of {args.repeats} alternating runs per condition, each condition in a fresh process", flush=True)
    print("| threads | beside a CPU-bound process | step | plain s | relaxed s | plain / relaxed | sweeps | "
          "bound plain | bound relaxed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for threads, busy in conditions(args):
        command = [sys.executable, __file__, "--child", "--docs", str(args.docs), "--K", str(args.K),
                   "--laps", str(args.laps), "--repeats", str(args.repeats)]
        r = run_isolated(command, threads, busy)
        for name, _, _ in STEPS:
            plain, relaxed = r[f"{name}|plain"], r[f"{name}|relaxed"]
            print(f"| {threads} | {'yes' if busy else 'no'} | {name} | {plain['seconds']:.3f} | "
                  f"{relaxed['seconds']:.3f} | {plain['seconds'] / relaxed['seconds']:.2f}x | "
                  f"{plain['sweeps']} / {relaxed['sweeps']} | {plain['bound']:.3f} | {relaxed['bound']:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
