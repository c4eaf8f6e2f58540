"""The topic model's per-token topic likelihoods gathered from a word-major table (the library's) against the
topic-major gather it replaced, alone and inside the whole document-level local step.

``HDPPosterior.item_likelihoods`` forms :math:`\\Phi_{nk} = \\exp(E\\log\\phi_{k x_n})` for every token: up to
pyro-memo 5169363 by indexing the transposed ``(K, V)`` table, ``table.T[word]``, which strides across ``K``
rows of ``V`` numbers for each token; now by ``index_select`` on a contiguous ``(V, K)`` copy. ``topic_major``
below is the old line. One batch, the first ``--docs`` documents of the Wikipedia corpus (the bnpy 0.1.7
sdist's), under the globals after one memoized lap over the first 5 x ``--docs`` documents at each K; the gather
alone, then a warm local step (from the cold step's counts, as in a memoized lap's later visits) with each
gather, alternating ``--repeats`` times in one fresh process per condition, with 1 and with 2 threads, on a
quiet machine and beside a pure-Python CPU-bound process.

Printed per condition and K: median seconds of each, their ratio topic-major / word-major, and the largest
difference between the two steps' document-topic counts (zero: the same numbers, gathered differently).

    python benchmarks/bench_hdp_item_likelihoods.py [--docs 400] [--K 100,400] [--repeats 5]
        [--threads 1,2] [--busy no,yes]
"""

import argparse
import json
import statistics
import sys
import time

from _common import make_parser, run_isolated


def topic_major(posterior, word):
    """The gather up to 5169363: rows of the transposed topic-major table."""
    import torch

    e_log_phi = posterior.e_log_phi
    return torch.exp(e_log_phi - e_log_phi.max(0, keepdim=True).values).T[word]


def child(args):
    """One condition in this process: the JSON line of median seconds per K and gather."""
    import numpy as np
    import torch

    from pyro_memo.topics import HDPPosterior, MemoizedHDP, fetch_wikipedia

    wiki = fetch_wikipedia()
    corpus, lap_corpus = (wiki.subset(np.arange(n)) for n in (args.docs, 5 * args.docs))
    doc, word, count = corpus.tokens(dtype=torch.float64)
    n = corpus.num_docs
    gathers = {"word-major": HDPPosterior.item_likelihoods, "topic-major": topic_major}
    out = {}
    for K in (int(k) for k in args.K.split(",")):
        hdp = MemoizedHDP(K=K, laps=1, seed=0)
        posterior = hdp.fit(lap_corpus, 5, posterior=hdp.initial_posterior(lap_corpus)).posterior
        _, start, _, _ = posterior.local_step(doc, word, count, n)
        seconds, counts = {}, {}
        for _ in range(args.repeats):
            for name, gather in gathers.items():
                begin = time.perf_counter()
                gather(posterior, word)
                seconds.setdefault(f"gather|{name}", []).append(time.perf_counter() - begin)
                posterior.item_likelihoods = gather.__get__(posterior)
                begin = time.perf_counter()
                counts[name] = posterior.local_step(doc, word, count, n, init_counts=start)[1]
                seconds.setdefault(f"step|{name}", []).append(time.perf_counter() - begin)
                del posterior.item_likelihoods
        out[K] = {key: statistics.median(value) for key, value in seconds.items()}
        out[K]["max_diff"] = float((counts["word-major"] - counts["topic-major"]).abs().max())
        out[K]["tokens"] = len(word)
    print(json.dumps(out))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--docs", type=int, default=400, help="documents in the batch (the first DOCS)")
    parser.add_argument("--K", default="100,400", help="numbers of topics, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--busy", default="no,yes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    print(f"Wikipedia, the first {args.docs} documents, float64, globals after 1 lap; median of {args.repeats} "
          "alternating runs per condition, each condition in a fresh process", flush=True)
    print("| threads | beside a CPU-bound process | K | tokens | what | topic-major s | word-major s | "
          "topic-major / word-major | max count difference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        for busy in (b == "yes" for b in args.busy.split(",")):
            command = [sys.executable, __file__, "--child", "--docs", str(args.docs), "--K", args.K,
                       "--repeats", str(args.repeats)]
            for K, r in run_isolated(command, threads, busy).items():
                for what in ("gather", "step"):
                    old, new = r[f"{what}|topic-major"], r[f"{what}|word-major"]
                    label = "gather" if what == "gather" else "warm local step"
                    print(f"| {threads} | {'yes' if busy else 'no'} | {K} | {r['tokens']:,} | {label} | {old:.3f} | "
                          f"{new:.3f} | {old / new:.2f}x | {r['max_diff']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
