"""The topic model's per-token topic likelihoods as rows of a word-major table (the library's) against the
topic-major gather they replaced, alone and inside the whole document-level local step, with its peak memory.

``HDPPosterior`` forms :math:`\\Phi_{nk} = \\exp(E\\log\\phi_{k x_n})` for every token. Up to pyro-memo 5169363
``item_likelihoods`` indexed the transposed ``(K, V)`` table, ``table.T[word]``, which strides across ``K`` rows
of ``V`` numbers for each token, and the local step packed its document blocks from that flat ``(T, K)`` copy,
both alive through the sweeps. Now (``item_table``) the blocks are gathered straight from a contiguous
``(V, K)`` table by word id, and the flat responsibilities are formed only for the final sweep, after the
blocks are freed. ``topic_major`` / ``flat_items`` below are the old gather and the old flow. One batch, the
first ``--docs`` documents of the Wikipedia corpus (the bnpy 0.1.7 sdist's), under the globals after one
memoized lap over the first 5 x ``--docs`` documents at each K; the gather alone, then a warm local step (from
the cold step's counts, as in a memoized lap's later visits) each way, alternating ``--repeats`` times in one
fresh process per condition, with 1 and with 2 threads, on a quiet machine and beside a pure-Python CPU-bound
process.

Printed per condition and K: median seconds of each, their ratio old / new, the median growth of the process's
peak resident memory during the step (Linux ``/proc``; "n/a" elsewhere), and the largest difference between the
two steps' document-topic counts (zero: the same numbers, gathered differently).

    python benchmarks/bench_hdp_item_likelihoods.py [--docs 400] [--K 100,400] [--repeats 5]
        [--threads 1,2] [--busy no,yes]
"""

import json
import statistics
import sys
import time

from _common import add_condition_arguments, conditions, make_parser, run_isolated


def topic_major(posterior, word):
    """The gather up to 5169363: rows of the transposed topic-major table."""
    import torch

    e_log_phi = posterior.e_log_phi
    return torch.exp(e_log_phi - e_log_phi.max(0, keepdim=True).values).T[word]


def flat_items(posterior, word):
    """The local step's items up to 5169363: the flat ``(T, K)`` likelihoods, one row per token."""
    return topic_major(posterior, word), None


def peak_growth(step, *args, **kwargs):
    """``(result, MB)``: ``step(*args, **kwargs)`` and how far the process's peak resident memory rose above
    its resident memory before it (``None`` where ``/proc/self`` is unavailable)."""
    try:
        def status(field):
            return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))

        open("/proc/self/clear_refs", "w").write("5")  # reset the peak to the current resident memory
        before = status("VmRSS")
    except OSError:
        return step(*args, **kwargs), None
    result = step(*args, **kwargs)
    return result, (status("VmHWM") - before) / 1024


def child(args):
    """One condition in this process: the JSON line of median seconds and memory per K and way."""
    import numpy as np
    import torch

    from pyro_memo.topics import HDPPosterior, MemoizedHDP, fetch_wikipedia

    wiki = fetch_wikipedia()
    corpus, lap_corpus = (wiki.subset(np.arange(n)) for n in (args.docs, 5 * args.docs))
    doc, word, count = corpus.tokens(dtype=torch.float64)
    n = corpus.num_docs
    ways = {"word-major": (HDPPosterior.item_likelihoods, HDPPosterior.item_table),
            "topic-major": (topic_major, flat_items)}
    out = {}
    for K in (int(k) for k in args.K.split(",")):
        hdp = MemoizedHDP(K=K, laps=1, seed=0)
        posterior = hdp.fit(lap_corpus, 5, posterior=hdp.initial_posterior(lap_corpus)).posterior
        _, start, _, _ = posterior.local_step(doc, word, count, n)
        seconds, memory, counts = {}, {}, {}
        for _ in range(args.repeats):
            for name, (gather, items) in ways.items():
                begin = time.perf_counter()
                gather(posterior, word)
                seconds.setdefault(f"gather|{name}", []).append(time.perf_counter() - begin)
                posterior.item_table = items.__get__(posterior)
                begin = time.perf_counter()
                result, grown = peak_growth(posterior.local_step, doc, word, count, n, init_counts=start)
                seconds.setdefault(f"step|{name}", []).append(time.perf_counter() - begin)
                memory.setdefault(name, []).append(grown)
                counts[name] = result[1]
                del posterior.item_table, result
        out[K] = {key: statistics.median(value) for key, value in seconds.items()}
        out[K].update({f"MB|{name}": None if None in value else statistics.median(value)
                       for name, value in memory.items()})
        out[K]["max_diff"] = float((counts["word-major"] - counts["topic-major"]).abs().max())
        out[K]["tokens"] = len(word)
    print(json.dumps(out))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--docs", type=int, default=400, help="documents in the batch (the first DOCS)")
    parser.add_argument("--K", default="100,400", help="numbers of topics, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    add_condition_arguments(parser)
    args = parser.parse_args()
    if args.child:
        return child(args)
    print(f"Wikipedia, the first {args.docs} documents, float64, globals after 1 lap; median of {args.repeats} "
          "alternating runs per condition, each condition in a fresh process", flush=True)
    print("| threads | beside a CPU-bound process | K | tokens | what | old s | new s | old / new | "
          "peak MB old | peak MB new | max count difference |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for threads, busy in conditions(args):
        command = [sys.executable, __file__, "--child", "--docs", str(args.docs), "--K", args.K,
                   "--repeats", str(args.repeats)]
        for K, r in run_isolated(command, threads, busy).items():
            for what in ("gather", "step"):
                old, new = r[f"{what}|topic-major"], r[f"{what}|word-major"]
                label, memory = ("gather", "| - | -") if what == "gather" else ("warm local step", "".join(
                    "| n/a " if r[f"MB|{way}"] is None else f"| {r[f'MB|{way}']:.0f} "
                    for way in ("topic-major", "word-major")))
                print(f"| {threads} | {'yes' if busy else 'no'} | {K} | {r['tokens']:,} | {label} | {old:.3f} | "
                      f"{new:.3f} | {old / new:.2f}x {memory} | {r['max_diff']:.1e} |", flush=True)

if __name__ == "__main__":
    main()
