"""Ablation of the memoized HDP's start on a 1,500-document Wikipedia subset (K = 50,
10 batches): initial topics (random documents or the KL k-means), first-lap schedule
(globals refit after every batch, or held until the memo is complete) and local-step restarts.
Held-out log-likelihood per token by document completion on 400 test documents; tomotopy's
collapsed Gibbs LDA with the same K, alpha and lam0, scored by the same document completion,
as a reference when tomotopy is installed.

    python benchmarks/bench_hdp_init.py [--laps 12]
"""

import time

import numpy as np
from _common import document_split, make_parser

from pyro_memo.comparison import TopicSettings, add_tomotopy_documents, posterior_from_topics, tomotopy_topics
from pyro_memo.topics import MemoizedHDP, document_completion

VARIANTS = {
    "documents, incremental first lap": dict(init="documents", incremental_first_lap=True),
    "kmeans, incremental first lap": dict(init="kmeans", incremental_first_lap=True),
    "kmeans, held first lap (default)": dict(),
    "kmeans, held first lap, no restarts": dict(local_restart=False),
}


def tomotopy_lda(train, test, K, sweeps, seed=0):
    import tomotopy

    model = tomotopy.LDAModel(k=K, alpha=0.5 / K, eta=0.1, seed=seed)
    add_tomotopy_documents(model, train)
    start = time.perf_counter()
    model.train(sweeps, workers=1)
    seconds = time.perf_counter() - start
    phi = tomotopy_topics(model, train, range(K))
    post = posterior_from_topics(phi, np.asarray(model.get_count_by_topics(), float), TopicSettings(K=K),
                                 train.num_tokens)
    return document_completion(post, test), seconds


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--laps", type=int, default=12)
    parser.add_argument("--K", type=int, default=50)
    args = parser.parse_args()
    _, train, test = document_split()
    rng = np.random.default_rng(1)
    train = train.subset(np.sort(rng.choice(train.num_docs, 1500, replace=False)))
    test = test.subset(np.arange(400))
    print(f"Wikipedia subset: {train.num_docs} training documents ({train.num_tokens:.0f} tokens), "
          f"{test.num_docs} test documents; K = {args.K}, 10 batches, {args.laps} laps")
    print("| start | lap 1 held-out | final bound/token | final held-out | topics > 1% | seconds |")
    print("|---|---|---|---|---|---|")
    for name, options in VARIANTS.items():
        trace = []
        start = time.perf_counter()

        def callback(lap, elbo, posterior, trace=trace):
            if lap == 0:
                trace.append(document_completion(posterior, test))

        fit = MemoizedHDP(K=args.K, laps=args.laps, tol=0, seed=0, **options).fit(train, 10, callback=callback)
        seconds = time.perf_counter() - start
        heldout = document_completion(fit.posterior, test)
        topics = int((fit.posterior.expected_beta()[:-1] > 0.01).sum())
        print(f"| {name} | {trace[0]:.4f} | {fit.elbo / train.num_tokens:.4f} | {heldout:.4f} | {topics} | "
              f"{seconds:.0f} |", flush=True)
    try:
        score, seconds = tomotopy_lda(train, test, args.K, 200)
        print(f"| tomotopy collapsed Gibbs LDA, 200 sweeps (reference) | — | — | {score:.4f} | {args.K} | "
              f"{seconds:.0f} |")
    except ImportError:
        print("tomotopy not installed: no Gibbs reference")


if __name__ == "__main__":
    main()
