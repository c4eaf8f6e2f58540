"""HDP topic-model methods side by side on a corpus under one wall-time budget each, through
the comparison harness (``pyro_memo.comparison.compare_topics``): memoized HDP with and without
births/merges, stochastic online HDP, and gensim's / tomotopy's HDP when installed. Every run
is scored by the same document completion on the same held-out documents.

    python benchmarks/bench_hdp_compare.py [--data wiki|bars] [--seconds 300] [--methods memo,...] [--out DIR]
"""


import torch
from _common import document_split, make_parser

from pyro_memo.comparison import TOPIC_COLUMNS, TOPIC_METHODS, Budget, TopicSettings, compare_topics, summarize
from pyro_memo.data import bars_corpus


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--data", choices=("wiki", "bars"), default="wiki")
    parser.add_argument("--methods", default=",".join(TOPIC_METHODS))
    parser.add_argument("--seconds", type=float, default=300.0, help="wall-time budget per run")
    parser.add_argument("--laps", type=float, default=1000, help="lap (sweep) budget per run")
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--float32", action="store_true")
    parser.add_argument("--out", default=None, help="write the harness's tables here")
    args = parser.parse_args()

    corpus, train, test = document_split(None if args.data == "wiki" else bars_corpus(2000, 100, alpha=0.2, seed=0)[0])
    methods = [m for m in args.methods.split(",") if m]
    print(f"{corpus}; train {train.num_docs} docs, test {test.num_docs} docs; K = {args.K}, {args.batches} "
          f"batches, {args.seconds:g} s per run, {torch.get_num_threads()} threads", flush=True)
    settings = TopicSettings(K=args.K, batches=args.batches, dtype=torch.float32 if args.float32 else torch.float64)
    rows, _ = compare_topics(train, test, methods, seeds=[int(s) for s in args.seeds.split(",")],
                             budget=Budget(passes=args.laps, seconds=args.seconds), settings=settings,
                             out_dir=args.out, progress=lambda m: print(m, flush=True))
    print("\n| " + " | ".join(TOPIC_COLUMNS) + " |\n|" + "---|" * len(TOPIC_COLUMNS))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c]) for c in TOPIC_COLUMNS)
              + " |")
    stats = summarize(rows, TOPIC_COLUMNS)
    best = max(stats, key=lambda m: stats[m]["heldout_per_token"][0])
    print(f"\nbest held-out: {best} ({stats[best]['heldout_per_token'][0]:.4f} nats/token)")


if __name__ == "__main__":
    main()
