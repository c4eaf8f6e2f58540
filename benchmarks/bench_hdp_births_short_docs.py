"""HDP topic births from K = 1 on short documents: topics found, bound per token, held-out document
completion and seconds, with each birth's fresh topics made from the target's tokens of a whole lap
(the default, ``collect="lap"``), likewise with the candidate's local step run on every document rather
than on those holding the target alone (``hold_tokens=0``, the births before 2026-12-02), and from the first
batch of the candidate's lap (``collect="batch"``, the births before the collection lap), with a candidate
that fell short running on for up to two laps (``patience=2``), with 5 and 8 fresh topics a birth
(``num_new``, default 3), and a fixed K = 20 fit for reference,
interleaved in one session (``--variants`` picks some of them).
(Records before 2026-12-02 compared refined first births, ``refine_steps=10``, with k-means-only ones,
``refine_steps=0``, both collecting one batch.)

The review's case: 20 LDA topics (``lda_corpus``: Dirichlet(0.05) over 1,000 words, document weights
Dirichlet(0.05)), 3,000 documents of 20 tokens, 20% of the documents held out, 4 batches; births
stayed at one topic (held-out -6.49 nats per token against about -5.7 at fixed K = 20). ``--data
bars`` runs the CLI's default bars corpus (500 documents of 60 tokens, 10 bars) instead.

    python benchmarks/bench_hdp_births_short_docs.py --seeds 0,1,2 [--data lda|bars] [--laps 50]
"""

import time

from _common import make_parser

from pyro_memo.data import bars_corpus, lda_corpus
from pyro_memo.topics import MemoizedHDP, TopicBirthMove, document_completion, split_documents

#: the fits of each seed, in order: name, TopicBirthMove's settings (``None``: fixed K = 20); "every document"
#: runs the candidate's local step on every document, not only on those holding the target (``hold_tokens=0``)
VARIANTS = (("births, lap collected", {}), ("births, refine every", {"refine": "every"}),
            ("births, 3 targets", {"num_targets": 3}),
            ("births, patience 2", {"patience": 2}),
            ("births, 5 fresh topics", {"num_new": 5}), ("births, 8 fresh topics", {"num_new": 8}),
            ("births, every document", {"hold_tokens": 0.0}),
            ("births, one batch", {"collect": "batch"}), ("fixed K = 20", None))


def corpus_of(data, seed):
    if data == "lda":
        return lda_corpus(3000, 20, vocab_size=1000, num_topics=20, seed=seed)[0]
    return bars_corpus(seed=seed)[0]


def run(train, test, seed, laps, settings):
    """One fit; ``settings`` ``None`` is the fixed K = 20 fit."""
    batches = 4 if train.num_docs > 1000 else 2
    start = time.perf_counter()
    if settings is None:
        fit = MemoizedHDP(K=20, laps=laps, seed=seed).fit(train, batches)
    else:
        moves = [TopicBirthMove(**settings), "delete", "merge"]
        fit = MemoizedHDP(K=1, laps=laps, seed=seed, moves=moves).fit(train, batches)
    seconds = time.perf_counter() - start
    post = fit.posterior
    topics = int((post.expected_beta()[:post.K] > 0.01).sum())
    return dict(K=post.K, topics=topics, bound=fit.elbo / train.num_tokens, heldout=document_completion(post, test),
                seconds=seconds, laps=len(fit.elbo_trace))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--data", choices=("lda", "bars"), default="lda")
    parser.add_argument("--laps", type=int, default=50)
    parser.add_argument("--variants", default=None,
                        help="names of the fits to run, separated by ';' (default: all)")
    args = parser.parse_args()
    variants = VARIANTS
    if args.variants:
        wanted = [v.strip() for v in args.variants.split(";")]
        variants = [v for v in VARIANTS if v[0] in wanted]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        train, test = split_documents(corpus_of(args.data, seed), 0.2, seed=0)
        for name, settings in variants:
            r = run(train, test, seed, args.laps, settings)
            rows.append((seed, name, r))
            print(f"{args.data} seed {seed} {name:23s} K {r['K']:3d} (>1%: {r['topics']:3d})  bound/token "
                  f"{r['bound']:.4f}  held-out {r['heldout']:.4f}  {r['seconds']:6.1f} s ({r['laps']} laps)",
                  flush=True)
    print()
    for name, _ in variants:
        mine = [r for _, n, r in rows if n == name]
        print(f"{name:23s} mean held-out {sum(r['heldout'] for r in mine) / len(mine):.4f}, topics > 1% "
              f"{[r['topics'] for r in mine]}, mean {sum(r['seconds'] for r in mine) / len(mine):.1f} s")


if __name__ == "__main__":
    main()
