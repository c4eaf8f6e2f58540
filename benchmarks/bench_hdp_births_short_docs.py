"""HDP topic births from K = 1 on short documents: topics found, bound per token, held-out document
completion and seconds, with the first birth's fresh topics (from K = 1) refined before the candidate
lap (the default, ``refine_steps=10``) and without (``refine_steps=0``, the births before that
refinement), and a fixed K = 20 fit for reference, interleaved in one session.

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


def corpus_of(data, seed):
    if data == "lda":
        return lda_corpus(3000, 20, vocab_size=1000, num_topics=20, seed=seed)[0]
    return bars_corpus(seed=seed)[0]


def run(train, test, seed, laps, refine):
    """One fit; ``refine`` ``None`` is the fixed K = 20 fit."""
    batches = 4 if train.num_docs > 1000 else 2
    start = time.perf_counter()
    if refine is None:
        fit = MemoizedHDP(K=20, laps=laps, seed=seed).fit(train, batches)
    else:
        moves = [TopicBirthMove(refine_steps=refine), "delete", "merge"]
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
    args = parser.parse_args()
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        train, test = split_documents(corpus_of(args.data, seed), 0.2, seed=0)
        for name, refine in (("births, refined", 10), ("births, k-means only", 0), ("fixed K = 20", None)):
            r = run(train, test, seed, args.laps, refine)
            rows.append((seed, name, r))
            print(f"{args.data} seed {seed} {name:22s} K {r['K']:3d} (>1%: {r['topics']:3d})  bound/token "
                  f"{r['bound']:.4f}  held-out {r['heldout']:.4f}  {r['seconds']:6.1f} s ({r['laps']} laps)",
                  flush=True)
    print()
    for name in ("births, refined", "births, k-means only", "fixed K = 20"):
        mine = [r for _, n, r in rows if n == name]
        print(f"{name:22s} mean held-out {sum(r['heldout'] for r in mine) / len(mine):.4f}, topics > 1% "
              f"{[r['topics'] for r in mine]}, mean {sum(r['seconds'] for r in mine) / len(mine):.1f} s")


if __name__ == "__main__":
    main()
