"""Sparse top-L responsibilities (Hughes & Sudderth 2016) in the HDP topic model against dense ones.

The Wikipedia corpus of the bnpy 0.1.7 sdist (7,961 documents, V = 6,130) is fitted by memoized VB at
fixed K twice from one initialisation and one batch order: with dense token responsibilities and with
each token's L largest kept in every sweep of the document-level local step (``sparse_L``). The two
fits run interleaved, lap by lap, so a change in the machine's load hits both alike.

Printed: seconds of every lap of each with its document-level iterations per batch visit, the mean
lap seconds from lap 2 on (lap 1 included when there is only one), their ratio dense / sparse, and
the final exact bound of each (the sparse one is the exact bound of its sparse posterior) with their
relative difference.

    python benchmarks/bench_hdp_sparse.py [--docs 7961] [--K 100] [--L 8] [--batches 10] [--laps 4]
"""

import time

import numpy as np
import torch
from _common import make_parser, report_dense_sparse

from pyro_memo.topics import MemoizedHDP, fetch_wikipedia


def interleaved(fits, corpus, batches, initial, laps):
    """Run each ``(driver, state)`` of ``fits`` from the globals ``initial``, one lap at a time, in turn,
    for ``laps`` laps."""
    for lap in range(1, laps + 1):
        for driver, state in fits:
            driver.laps = lap
            driver.fit(corpus, batches, posterior=initial, state=state)
            print(f"  lap {lap} {'dense ' if driver.sparse_L is None else 'sparse'}: "
                  f"{state.lap_seconds[-1]:7.2f} s  bound {state.elbo_trace[-1]:.8e}  "
                  f"document iterations per visit {np.mean(state.local_iterations[-batches:]):.1f}", flush=True)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--docs", type=int, default=None, help="the first DOCS documents (default: all)")
    parser.add_argument("--K", type=int, default=100, help="truncation level")
    parser.add_argument("--L", type=int, default=8, help="responsibilities kept per token")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--laps", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    corpus = fetch_wikipedia()
    if args.docs is not None:
        corpus = corpus.subset(np.arange(min(args.docs, corpus.num_docs)))
    print(f"Wikipedia: {corpus.num_docs:,} documents, {corpus.num_tokens:,} tokens, V = {corpus.vocab_size:,}; "
          f"K = {args.K}, L = {args.L}, {args.batches} batches, {args.laps} laps, float64, "
          f"torch threads {torch.get_num_threads()}", flush=True)
    dense = MemoizedHDP(K=args.K, laps=1, tol=0, seed=args.seed)
    sparse = MemoizedHDP(K=args.K, laps=1, tol=0, seed=args.seed, sparse_L=args.L)
    start = time.perf_counter()
    initial = dense.initial_posterior(corpus)
    print(f"initial topics (KL k-means of the documents): {time.perf_counter() - start:.1f} s", flush=True)
    fits = [(dense, dense.new_state()), (sparse, sparse.new_state())]
    interleaved(fits, corpus, args.batches, initial, args.laps)

    (_, dense_state), (_, sparse_state) = fits
    report_dense_sparse(dense_state, sparse_state, args.L, "bound")

if __name__ == "__main__":
    main()
