"""Does the thread policy hold for every model? Lap time of the memoized HDP topic model and of the memoized
relational model with 1 and 2 threads, quiet and beside a CPU-bound process, with a peer where one exists.

``bench_threads.py`` measures the DP mixture on the toy data against bnpy. Every driver runs the same
:class:`~pyro_memo.engine.ThreadPolicy`, but the models' local steps differ (the HDP's document sweeps on
packed blocks, the relational model's pair sweeps), so this script checks the policy's promise on each:
never slower with two threads than with one, quiet or loaded.

* ``hdp``: memoized HDP, K = 100, on the first ``--docs`` training documents of the Wikipedia corpus (bnpy
  0.1.7 sdist) in ``--batches`` batches; the peer is tomotopy's LDA (collapsed Gibbs, K = 100) on the same
  documents with ``workers`` = the thread cap, its "lap" ``--sweeps`` Gibbs sweeps (skipped with a message
  where tomotopy is not installed). The peer shows how a C++ sampler's own threading fares beside a busy
  process; its seconds are not comparable with a variational lap.
* ``relational``: memoized relational model, K = 50, on a synthetic assortative graph (``--nodes``,
  ``--edges``), ``--batches`` batches. No peer ships for the assortative HDP relational model.

Every run is a fresh process whose thread pools are capped by OMP_NUM_THREADS and friends; pyro-memo runs
with its default thread policy. "busy" runs a pure-Python CPU-bound process beside it. Runs are interleaved:
for each repetition, every condition, every system in turn. Mean lap = mean seconds over laps 2.. (lap 1
holds the globals after the start and builds the memo).

    python benchmarks/bench_threads_models.py [--models hdp,relational] [--reps 2] [--laps 4]
"""

import os
import sys

import numpy as np
from _common import make_parser, paired, run_isolated

HDP_RUN = """
import json, sys, torch
from _common import document_split
from pyro_memo.topics import MemoizedHDP
docs, batches, laps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
train = document_split()[1].subset(list(range(docs)))
model = MemoizedHDP(K=100, laps=laps, tol=0, seed=0)
fit = model.fit(train, batches)
policy = model.thread_policy
print(json.dumps({"lap_seconds": fit.state.lap_seconds, "objective": fit.elbo_trace[-1] / train.num_tokens,
                  "threads": policy.history[-1:] or [1], "held": policy.held}))
"""

TOMOTOPY_RUN = """
import json, os, sys, time
from _common import document_split
from pyro_memo.comparison import TopicSettings, tomotopy_lda_model
docs, laps, sweeps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
train = document_split()[1].subset(list(range(docs)))
model = tomotopy_lda_model(train, TopicSettings(K=100), 0)
workers = int(os.environ["OMP_NUM_THREADS"])
seconds = []
for lap in range(laps):
    start = time.perf_counter()
    model.train(sweeps, workers=workers)
    seconds.append(time.perf_counter() - start)
print(json.dumps({"lap_seconds": seconds, "objective": model.ll_per_word, "threads": [workers]}))
"""

RELATIONAL_RUN = """
import json, sys
from pyro_memo.data import assortative_graph
from pyro_memo.relational import MemoizedRelational
nodes, edges, batches, laps = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
graph = assortative_graph(nodes, 50, alpha=0.01, expected_edges=edges, sparse=True, seed=0)[0]
model = MemoizedRelational(K=50, laps=laps, tol=0, seed=0)
fit = model.fit(graph, batches)
policy = model.thread_policy
print(json.dumps({"lap_seconds": fit.state.lap_seconds, "objective": fit.elbo_trace[-1] / graph.num_edges,
                  "threads": policy.history[-1:] or [1], "held": policy.held}))
"""


def systems(args):
    """``{name: command}`` of the runs for ``args.models``, with the peers that are installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    prefix = f"import sys; sys.path.insert(0, {here!r})\n"
    runs = {}
    models = args.models.split(",")
    if "hdp" in models:
        runs["pyro-memo HDP"] = [sys.executable, "-c", prefix + HDP_RUN, str(args.docs), str(args.batches),
                                 str(args.laps)]
        try:
            import tomotopy  # noqa: F401
            runs["tomotopy LDA"] = [sys.executable, "-c", prefix + TOMOTOPY_RUN, str(args.docs), str(args.laps),
                                    str(args.sweeps)]
        except ImportError:
            print("tomotopy skipped: not installed (pip install tomotopy)")
    if "relational" in models:
        runs["pyro-memo relational"] = [sys.executable, "-c", prefix + RELATIONAL_RUN, str(args.nodes),
                                        str(args.edges), str(args.batches), str(args.laps)]
    return runs


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--models", default="hdp,relational")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--laps", type=int, default=4)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--docs", type=int, default=1600, help="Wikipedia training documents for the HDP")
    parser.add_argument("--sweeps", type=int, default=10, help="tomotopy's Gibbs sweeps per lap")
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--edges", type=float, default=200_000)
    parser.add_argument("--conditions", default="1,2,1-busy,2-busy", help="comma-separated THREADS or THREADS-busy")
    args = parser.parse_args()
    conditions = [(int(c.split("-")[0]), c.endswith("-busy")) for c in args.conditions.split(",")]
    runs = systems(args)
    print(f"models {args.models}: {args.laps} laps, {args.batches} batches; HDP on {args.docs} Wikipedia documents, "
          f"relational on {args.nodes} nodes / {args.edges:.0f} expected links; {args.reps} interleaved "
          f"repetitions; {os.cpu_count()} CPUs", flush=True)
    laps = {(name, c): [] for name in runs for c in conditions}
    for rep in range(args.reps):
        for condition in conditions:
            for name, command in runs.items():
                out = run_isolated(command, *condition)
                laps[name, condition].append(float(np.mean(out["lap_seconds"][1:])))
                held = f", {out['held']} probe(s) held by the load" if out.get("held") is not None else ""
                print(f"  rep {rep}  {name:21s} {condition[0]} thread(s){' busy' if condition[1] else '':5s} "
                      f"mean lap {laps[name, condition][-1]:7.3f} s  objective {out['objective']:.5f}  "
                      f"ran {out['threads'][0]} thread(s){held}", flush=True)

    print(f"\n{'system':21s} {'condition':10s} {'s/lap':>8s} {'2 threads / 1':>14s}")
    for name in runs:
        for busy in (False, True):
            for threads in (1, 2):
                c = (threads, busy)
                if c not in conditions:
                    continue
                ratio = ""
                if threads == 2 and (1, busy) in conditions:
                    one = laps[name, (1, busy)]
                    ratio = f"{np.mean(laps[name, c]) / np.mean(one):13.2f}x{paired(laps[name, c], one)}"
                print(f"{name:21s} {threads} thr{' busy' if busy else '':5s} {np.mean(laps[name, c]):8.3f} {ratio}")


if __name__ == "__main__":
    main()
