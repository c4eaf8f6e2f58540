"""``pyro-memo fit CORPUS --model hdp``: memoized HDP topic modelling from the command line."""

import os
import time

import numpy as np
import torch

from ..data import bars_corpus, fetch_wikipedia, from_counts, read_ldac
from ..reporting import write_atomically, write_json, write_trace_plot
from .checkpoint import load_hdp_state, save_hdp_state
from .heldout import top_words
from .memoized_hdp import HDPState, MemoizedHDP

#: corpora pyro-memo can load by name
BUNDLED_CORPORA = {
    "wiki": "the 7,961-document Wikipedia corpus of the bnpy 0.1.7 sdist (V = 6,130; fetched once from PyPI)",
    "bars": "500 synthetic 'bars' documents over a 5x5 pixel vocabulary (10 true topics)",
}


def load_corpus(source, vocab=None):
    """A corpus from a name in :data:`BUNDLED_CORPORA`, an LDA-C file (vocabulary from
    ``vocab`` or a ``vocab.txt`` beside it) or a ``.npz`` sparse count matrix
    (``scipy.sparse.save_npz``). ``wiki`` is fetched with :func:`~pyro_memo.data.fetch_wikipedia`
    (downloaded on first use into the data folder, read from there afterwards)."""
    if source == "wiki":
        return fetch_wikipedia(), BUNDLED_CORPORA["wiki"]
    if source == "bars":
        return bars_corpus()[0], BUNDLED_CORPORA["bars"]
    if not os.path.exists(source):
        raise ValueError(f"{source}: no such file, and not a bundled corpus ({', '.join(BUNDLED_CORPORA)})")
    if source.endswith(".npz"):
        import scipy.sparse as sp

        corpus = from_counts(sp.load_npz(source))
    elif source.endswith((".ldac", ".dat", ".txt")):
        beside = os.path.join(os.path.dirname(source), "vocab.txt")
        vocab = vocab or (beside if os.path.exists(beside) else None)
        corpus = read_ldac(source, vocab)
    else:
        raise ValueError(f"{source}: --model hdp reads an LDA-C file (.ldac) or a sparse count matrix (.npz)")
    return corpus, f"{source}: {corpus}"


def run_fit_hdp(args):
    """Fit the HDP topic model as the ``fit`` command's options say; prints a summary."""
    corpus, description = load_corpus(args.data, args.vocab)
    if args.batches > corpus.num_docs:
        raise ValueError(f"--batches {args.batches} exceeds the number of documents ({corpus.num_docs})")
    batches = 1 if args.algo == "vb" else args.batches
    dtype = getattr(torch, args.dtype)
    model = MemoizedHDP(K=args.K, alpha=args.alpha, gamma=args.gamma, lam0=args.lam0, laps=args.laps, tol=args.tol,
                        seed=args.seed, dtype=dtype, device=args.device, moves=args.moves,
                        init="kmeans" if args.init == "kmeans++" else "documents")
    state = load_hdp_state(os.path.join(args.resume, "state.pt"), args.device) if args.resume else \
        HDPState(rng=np.random.default_rng(args.seed))
    k_trace = []

    def callback(lap, elbo, posterior):
        k_trace.append(int((posterior.expected_beta()[:-1] > 0.01).sum()))
        if not args.quiet:
            print(f"lap {lap + 1}: bound {elbo / corpus.num_tokens:.4f} per token, {k_trace[-1]} topics > 1%",
                  flush=True)
        if args.save:
            save_hdp_state(os.path.join(args.save, "state.pt"), state)

    start = time.perf_counter()
    fit = model.fit(corpus, batches, state=state, callback=callback)
    post = fit.posterior
    weights = post.expected_beta()[:-1].cpu().numpy()
    topics = top_words(post, corpus.vocab, 10)
    out = {
        "data": args.data, "model": "hdp", "algo": args.algo, "documents": corpus.num_docs,
        "tokens": corpus.num_tokens, "V": corpus.vocab_size, "truncation": args.K, "batches": batches,
        "init": model.init, "elbo": fit.elbo, "elbo_trace": fit.elbo_trace, "K": int((weights > 0.01).sum()),
        "k_trace": k_trace,
        "weights": weights.tolist(), "laps": len(fit.elbo_trace), "converged": fit.converged,
        "lap_seconds": fit.lap_seconds, "seconds": time.perf_counter() - start,
        "top_words": [{"topic": k, "weight": w, "words": words} for k, w, words in topics],
        "moves": fit.state.move_log,
    }
    if args.save:
        def write_topics(tmp):
            with open(tmp, "w", encoding="utf-8") as fh:
                for k, w, words in topics:
                    fh.write(f"{k}\t{w:.4f}\t{' '.join(words)}\n")

        write_atomically(os.path.join(args.save, "topics.txt"), write_topics)
        def write_npz(tmp):
            with open(tmp, "wb") as fh:  # a handle: np.savez would append ".npz" to the temporary name
                np.savez(fh, topic_word=post.topic_means().cpu().numpy(), weights=weights)

        write_atomically(os.path.join(args.save, "topics.npz"), write_npz)
        write_trace_plot(os.path.join(args.save, "trace.png"), fit.elbo_trace, k_trace or [out["K"]], description)
        out["saved"] = args.save
    lines = [f"data      {description}",
             f"model     HDP topic model, truncation K = {args.K}, alpha {args.alpha}, gamma {args.gamma}, "
             f"lam0 {args.lam0}",
             f"inference memoized, {batches} batches: {out['laps']} laps in {out['seconds']:.1f} s"
             + ("" if fit.converged else " (not converged: raise --laps)"),
             f"bound     {fit.elbo:.6g} nats ({fit.elbo / corpus.num_tokens:.4f} per token)",
             f"K         {out['K']} topics with weight > 0.01"]
    if fit.state.move_log and fit.state.move_log[0]:
        totals = {name: [sum(lap[name][key] for lap in fit.state.move_log) for key in ("accepted", "proposed")]
                  for name in fit.state.move_log[0]}
        lines.append("moves     " + ", ".join(f"{n} {a} accepted / {p} proposed" for n, (a, p) in totals.items()))
    lines += [f"topic {k:<4d}{w:.3f}  {' '.join(words)}" for k, w, words in topics[:10]]
    if args.save:
        lines.append(f"saved     {args.save}")
    print("\n".join(lines))
    if args.json:
        write_json(args.json, out)
    return 0
