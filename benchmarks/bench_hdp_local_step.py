"""The HDP's document-level local step: items packed by document into blocks against the flat items.

``GroupedHDPPosterior.local_step`` runs its sweeps on :class:`~pyro_memo.posterior.group_blocks.GroupBlocks` (two
batched products a sweep). ``flat_local_step`` below is the same coordinate ascent as it was before (pyro-memo up
to 7811aa5): every sweep gathers the document weights to each token and scatters the counts back over the flat
``(T, K)`` tokens. The library's step runs plain sweeps here (``overrelax=False``; its over-relaxed default is
compared in ``bench_hdp_relaxed_sweeps.py``). Both run on one batch, the first ``--docs`` documents of the
Wikipedia corpus (the bnpy 0.1.7 sdist's), with K topics: a cold step (no cached counts) under the KL k-means start
of ``MemoizedHDP`` on the first 5 x ``--docs`` documents, and a warm one, as in a memoized lap's second visit, from
the cold step's counts under the globals after one memoized lap over those documents in 5 batches. The two
alternate ``--repeats`` times in one fresh process per condition, with 1 and with 2 threads, on a quiet machine and
beside a pure-Python CPU-bound process.

Printed per condition: the median seconds of each step for each, their ratio flat / blocks, the sweeps
each took, and the largest difference between their document-topic counts (the same up to rounding).

    python benchmarks/bench_hdp_local_step.py [--docs 400] [--K 100] [--L none] [--repeats 5]
        [--float32] [--threads 1,2] [--busy no,yes]
"""

import json
import statistics
import sys
import time

from _common import add_condition_arguments, conditions, make_parser, run_isolated


def flat_local_step(posterior, doc, word, count, num_docs, init_counts=None, max_iter=100, tol=1e-3, L=None):
    """The group-level local step on the flat tokens: ``(counts, summary, iterations)``."""
    import torch

    from pyro_memo.families import SparseResponsibilities

    K = posterior.K
    prior = posterior.alpha * posterior.expected_beta()
    phi = posterior.item_likelihoods(word)
    count = count.to(phi.dtype)
    tiny = torch.finfo(phi.dtype).tiny

    def group_counts(phi_, doc_, count_, weights, n):
        if L is not None:
            return SparseResponsibilities.top_weights(phi_ * weights[doc_], L).scaled(count_).table(doc_, n)
        z = (phi_ * weights[doc_]).sum(1).clamp_min(tiny)
        return weights * phi_.new_zeros(n, K).index_add_(0, doc_, phi_ * (count_ / z)[:, None])

    def group_weights(counts_):
        e = torch.digamma(counts_ + prior[:K])
        return torch.exp(e - e.max(1, keepdim=True).values)

    if init_counts is None:
        counts = group_counts(phi, doc, count, (prior[:K] / prior[:K].max()).expand(num_docs, K), num_docs)
    else:
        counts = init_counts.to(dtype=phi.dtype, copy=True)
    ids = torch.arange(num_docs)
    a_phi, a_doc, a_count = phi, doc, count
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        new = group_counts(a_phi, a_doc, a_count, group_weights(counts[ids]), len(ids))
        moving = (new - counts[ids]).abs().mean(1) > tol
        counts[ids] = new
        if not bool(moving.any()):
            break
        if int(moving.sum()) < 0.7 * len(ids):
            keep = moving[a_doc]
            remap = torch.cumsum(moving.long(), 0) - 1
            a_phi, a_doc, a_count = a_phi[keep], remap[a_doc[keep]], a_count[keep]
            ids = ids[moving]
    if L is not None:
        resp = SparseResponsibilities.top_weights(phi * group_weights(counts)[doc], L)
        counts = resp.scaled(count).table(doc, num_docs)
    else:
        z = (phi * group_weights(counts)[doc]).sum(1, keepdim=True).clamp_min(tiny)
        resp = phi * group_weights(counts)[doc] / z
        counts = phi.new_zeros(num_docs, K).index_add_(0, doc, resp * count[:, None])
    theta = torch.cat([counts + prior[:K], prior[K:].expand(num_docs, 1)], 1)
    e_log_pi = torch.digamma(theta) - torch.digamma(theta.sum(1, keepdim=True))
    summary = posterior.summarize(doc, word, count, resp, theta, e_log_pi, counts)
    return counts, summary, iterations


def child(args):
    """One condition in this process: the JSON line of median seconds and the counts' difference."""
    import numpy as np
    import torch

    from pyro_memo.topics import MemoizedHDP, fetch_wikipedia

    wiki = fetch_wikipedia()
    corpus, lap_corpus = (wiki.subset(np.arange(n)) for n in (args.docs, 5 * args.docs))
    dtype = torch.float32 if args.float32 else torch.float64
    hdp = MemoizedHDP(K=args.K, laps=1, seed=0, sparse_L=args.L, dtype=dtype)
    cold_posterior = hdp.initial_posterior(lap_corpus)
    warm_posterior = hdp.fit(lap_corpus, 5, posterior=cold_posterior).posterior
    doc, word, count = corpus.tokens(dtype=dtype)
    n, L = corpus.num_docs, args.L
    _, start, _, _ = cold_posterior.local_step(doc, word, count, n, sparse_L=L)

    def blocks(posterior, init):
        _, counts, summary, iters = posterior.local_step(doc, word, count, n, init_counts=init, sparse_L=L,
                                                         overrelax=False)  # the plain sweeps of the reference
        return counts, summary, iters

    def flat(posterior, init):
        return flat_local_step(posterior, doc, word, count, n, init_counts=init, L=L)

    seconds = {f"{name}_{step}": [] for name in ("flat", "blocks") for step in ("cold", "warm")}
    out = {}
    for _ in range(args.repeats):
        for name, run in (("flat", flat), ("blocks", blocks)):
            for step, posterior, init in (("cold", cold_posterior, None), ("warm", warm_posterior, start)):
                begin = time.perf_counter()
                counts, summary, iters = run(posterior, init)
                seconds[f"{name}_{step}"].append(time.perf_counter() - begin)
                out[f"{name}_{step}_sweeps"] = iters
                out[f"{name}_{step}_counts"] = counts
    result = {key: statistics.median(values) for key, values in seconds.items()}
    result.update({key: value for key, value in out.items() if key.endswith("sweeps")})
    result["max_count_difference"] = max(float((out[f"flat_{s}_counts"] - out[f"blocks_{s}_counts"]).abs().max())
                                         for s in ("cold", "warm"))
    result["tokens"] = int(len(word))
    result["threads"] = torch.get_num_threads()
    print(json.dumps(result))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--docs", type=int, default=400, help="documents in the batch (the first DOCS)")
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--L", default="none", help="sparse_L of both steps, or none (dense)")
    parser.add_argument("--float32", action="store_true", help="globals and local step in float32")
    parser.add_argument("--repeats", type=int, default=5)
    add_condition_arguments(parser)
    args = parser.parse_args()
    args.L = None if args.L == "none" else int(args.L)
    if args.child:
        return child(args)
    print(f"Wikipedia, the first {args.docs} documents, K = {args.K}, sparse_L = {args.L}, "
          f"{'float32' if args.float32 else 'float64'}; median of "
          f"{args.repeats} alternating runs per condition, each condition in a fresh process", flush=True)
    print("| threads | beside a CPU-bound process | step | flat s | blocks s | flat / blocks | sweeps | "
          "max count difference |")
    print("|---|---|---|---|---|---|---|---|")
    for threads, busy in conditions(args):
        command = [sys.executable, __file__, "--child", "--docs", str(args.docs), "--K", str(args.K),
                   "--L", str(args.L).lower(), "--repeats", str(args.repeats)] + ["--float32"] * args.float32
        r = run_isolated(command, threads, busy)
        for step in ("cold", "warm"):
            flat_s, blocks_s = r[f"flat_{step}"], r[f"blocks_{step}"]
            print(f"| {threads} | {'yes' if busy else 'no'} | {step} | {flat_s:.3f} | {blocks_s:.3f} | "
                  f"{flat_s / blocks_s:.2f}x | {r[f'flat_{step}_sweeps']} / {r[f'blocks_{step}_sweeps']} | "
                  f"{r['max_count_difference']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
