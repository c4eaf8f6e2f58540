"""``--model hdp``: the HDP topic model (Teh et al. 2006) over a bag-of-words corpus, fitted by
memoized inference (Hughes, Kim & Sudderth 2015) and compared with its baselines by
document completion."""

import os
import sys
import time

from ...checks import check_device
from ..common import (
    ALPHA_PRIOR_OPTION,
    BIRTH_TARGETS_OPTION,
    MEMORY_BOUNDED_LAPS,
    MEMORY_BOUNDED_OPTIONS,
    birth_options,
    check_resume_matches,
    compare_progress,
    dask_executor,
    given_prior_text,
    laps_text,
    load_resume,
    memo_resume_entries,
    parse_alpha_prior,
    parse_methods,
    parse_moves,
    parse_seeds,
    print_comparison,
    prior_text,
    report,
    say,
    stop_requested,
)
from ..names import FAMILY_NAMES, TOPIC_METHOD_NAMES
from ..registry import CliModel, Option, Use, register_model, register_option
from .hdp_bounded import check_groups_source


def _imports():
    """Import the heavy modules (torch, the topic model) when a command runs, not when the parser
    is built: ``--help`` and option errors return at once."""
    global np, torch, bars_corpus, fetch_wikipedia, from_counts, read_ldac, load_state, save_state
    global per_lap, write_atomically, write_trace_plot, HDPState, MemoizedHDP, split_documents, top_words
    global save_model, GammaConcentration, Learnt, CorpusShards
    import numpy as np
    import torch

    from ...allocation.concentration import GammaConcentration
    from ...data import CorpusShards, bars_corpus, fetch_wikipedia, from_counts, read_ldac
    from ...families.type2 import Learnt
    from ...memo import load_state, save_state
    from ...model_file import save_model
    from ...reporting import per_lap, write_atomically, write_trace_plot
    from ...topics import HDPState, MemoizedHDP, split_documents, top_words

#: corpora pyro-memo can load by name
BUNDLED_CORPORA = {
    "wiki": "the 7,961-document Wikipedia corpus of the bnpy 0.1.7 sdist (V = 6,130; fetched once from PyPI)",
    "bars": "500 synthetic 'bars' documents over a 5x5 pixel vocabulary (10 true topics)",
}
#: the error of a missing corpus (raised when the options are checked, before any heavy import)
NO_CORPUS = f"--model hdp needs a corpus DATA: an .ldac or .npz file, or {' / '.join(BUNDLED_CORPORA)}"
#: the topic moves the fit command offers
TOPIC_MOVES = ("birth", "merge", "delete")

for _command in ("fit", "compare"):
    register_option(_command, Option("--gamma", "top-level concentration of the HDP.", {"type": float}))
    register_option(_command, Option("--lam0", "symmetric Dirichlet prior on the topic-word distributions.",
                                     {"type": float}))
    register_option(_command, Option("--vocab", "vocabulary file of an LDA-C corpus, one word per line.",
                                     {"metavar": "PATH"}))

register_option("fit", ALPHA_PRIOR_OPTION)
register_option("fit", Option("--gamma-prior", "learn the HDP's top-level concentration: gamma ~ Gamma(S1, S2) "
                                                "(shape, rate) with its closed-form posterior q(gamma), in place "
                                                "of a fixed --gamma.", {"metavar": "S1,S2"}))
for _option in MEMORY_BOUNDED_OPTIONS:
    register_option("fit", _option)
register_option("fit", Option("--groups", "memory-bounded HDP: the most document groups kept after each epoch "
                                           "(groups tied to one q(pi), merged by Gomes et al.'s eq. 27); "
                                           "default: every group keeps its own.", {"type": int, "metavar": "G"}))
register_option("fit", BIRTH_TARGETS_OPTION)
register_option("fit", Option("--birth-new", "with --moves birth: topics that replace a birth's target (at least 2). "
                                              "On Wikipedia from --K 1, 5 reached 0.03 nats per token more held out "
                                              "than 3 in 20 laps; on short documents (bars) 5 did worse.",
                              {"type": int, "metavar": "N"}))
register_option("fit", Option("--learn-lam0", "learn the topics' Dirichlet prior lam0 (starting from --lam0) by "
                                               "type-II maximum likelihood on the exact bound.",
                              {"action": "store_true"}))

_DATA = ("a corpus: an LDA-C file (.ldac, with --vocab or a vocab.txt beside it), a scipy sparse count matrix "
         f"(.npz), or a bundled corpus: {', '.join(BUNDLED_CORPORA)}; no default")
_WHY_NOT = {"family": "its topics are always multinomial over the vocabulary, with a Dirichlet(--lam0) prior"}
_COMMON = {"data": Use(_DATA), "alpha": Use("document-level concentration", default=0.5),
           "gamma": Use(default=10.0), "lam0": Use(default=0.1), "vocab": Use(), "quiet": Use(default=False)}
MEMO = (("algo", ("memo",)),)
BOUNDED = (("algo", ("memory-bounded",)),)
#: the moves of the memory-bounded HDP's model building
BOUNDED_MOVES = ("birth", "merge")


def load_corpus(source, vocab=None):
    """A corpus and its description from a name in :data:`BUNDLED_CORPORA`, an LDA-C file
    (vocabulary from ``vocab`` or a ``vocab.txt`` beside it), a ``.npz`` sparse count matrix
    (``scipy.sparse.save_npz``) or a directory of corpus shards (a :class:`~pyro_memo.data.CorpusShards`,
    read shard by shard when fitted)."""
    if source is None:
        raise ValueError(NO_CORPUS)
    _imports()
    if source == "wiki":
        return fetch_wikipedia(), BUNDLED_CORPORA["wiki"]
    if source == "bars":
        return bars_corpus()[0], BUNDLED_CORPORA["bars"]
    if not os.path.exists(source):
        raise ValueError(f"{source}: no such file, and not a bundled corpus ({', '.join(BUNDLED_CORPORA)})")
    if os.path.isdir(source):
        if vocab is not None:
            raise ValueError(f"--vocab applies to an LDA-C file; a sharded corpus keeps its vocab.txt ({source})")
        shards = CorpusShards(source)
        return shards, f"{source}: {shards.num_docs} documents in {shards.num_batches} shards, " \
            f"V = {shards.vocab_size}, {shards.num_tokens:.0f} tokens"
    if vocab is not None and not os.path.isfile(vocab):
        raise ValueError(vocab_missing(vocab))
    from ...data.files import DAMAGED_FILE_ERRORS  # here, not at the top: --help imports no torch

    try:
        if source.endswith(".npz"):
            import scipy.sparse as sp

            corpus = from_counts(sp.load_npz(source))
        elif source.endswith((".ldac", ".dat", ".txt")):
            beside = os.path.join(os.path.dirname(source), "vocab.txt")
            vocab = vocab or (beside if os.path.exists(beside) else None)
            corpus = read_ldac(source, vocab)
        else:
            raise ValueError(f"{source}: --model hdp reads an LDA-C file (.ldac) or a sparse count matrix (.npz)")
    except (ValueError, OSError, KeyError, *DAMAGED_FILE_ERRORS) as err:
        message = str(err) if isinstance(err, (ValueError, OSError)) else \
            f"cannot read the file, damaged or truncated? ({type(err).__name__}: {str(err)[:160]})"
        where = f"{source}" + (f" with vocabulary {vocab}" if vocab else "")
        named = message.startswith(source) or vocab is not None and message.startswith(str(vocab))
        raise ValueError(message if named else f"{where}: {message}") from None
    return corpus, f"{source}: {corpus}" + (f", words from {vocab}" if vocab else "")


def vocab_missing(vocab):
    """Why ``--vocab`` names no file it can read: a folder (it said "no such file" for one) or nothing."""
    what = "a folder, not a vocabulary file" if os.path.isdir(vocab) else "no such file"
    return f"--vocab {vocab}: {what}"


def files_read_beside(source, vocab=None):
    """The files a fit of the corpus ``source`` reads besides DATA and ``--vocab``, as ``(name, path)`` pairs
    that no output may overwrite: the ``vocab.txt`` beside an LDA-C file without ``--vocab``, and every file of
    a sharded corpus's folder (``load_corpus()``)."""
    if source is None or source in BUNDLED_CORPORA:
        return []
    if os.path.isdir(source):
        return [(f"DATA's {name}", os.path.join(source, name)) for name in sorted(os.listdir(source))]
    if vocab is None and str(source).endswith((".ldac", ".dat", ".txt")):
        return [("vocab.txt beside DATA", os.path.join(os.path.dirname(source), "vocab.txt"))]
    return []


def vocab_size_hint(corpus, source):
    """What to say when a fit of ``corpus`` (read from ``source``) runs out of memory, where its ``V`` was
    inferred from an LDA-C file's largest word id (no vocabulary) and exceeds its tokens, so that most ids
    appear nowhere: every topic holds ``V`` numbers, and an id like 100000000000 asks for terabytes. ``None``
    otherwise (the usual advice stands)."""
    if getattr(corpus, "vocab", True) is not None or not str(source).endswith((".ldac", ".dat", ".txt")) \
            or corpus.vocab_size <= corpus.num_tokens:
        return None
    return (f"V = {corpus.vocab_size} words, the largest word id in {source} + 1 (no --vocab), for "
            f"{corpus.num_tokens:.0f} tokens: each topic holds V numbers; renumber the word ids from 0 without "
            f"gaps or give --vocab, else lower --K")


def _effective_topics(posterior):
    return int((posterior.expected_beta()[:-1] > 0.01).sum())


def _write_topics(folder, topics, post, weights):
    """``topics.txt`` (topic, weight, top words) and ``topics.npz`` in ``folder``, atomically."""
    def write_text(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            for k, w, words in topics:
                fh.write(f"{k}\t{w:.4f}\t{' '.join(words)}\n")

    def write_npz(tmp):
        with open(tmp, "wb") as fh:  # a handle: np.savez would append ".npz" to the temporary name
            np.savez(fh, topic_word=post.topic_means().cpu().numpy(), weights=weights)

    write_atomically(os.path.join(folder, "topics.txt"), write_text)
    write_atomically(os.path.join(folder, "topics.npz"), write_npz)


def _move_totals(move_log):
    """Move name -> ``[accepted, proposed]`` over every lap of ``move_log`` that ran it (a resumed fit's laps
    may run other moves than those before the resume)."""
    totals = {}
    for lap in move_log:
        for name, counts in lap.items():
            total = totals.setdefault(name, [0, 0])
            total[0], total[1] = total[0] + counts["accepted"], total[1] + counts["proposed"]
    return totals


def _summary(args, out, description, fit, topics, num_tokens):
    """The printed summary of a fit."""
    from ...reporting import truncation_text

    lines = [f"data      {description}",
             f"model     HDP topic model, {truncation_text(out)}, {_hyper_text(args, out)}",
             f"inference memoized, {args.batches} batches{_sparse_text(args)}: {laps_text(out)}"
             + ("" if fit.converged else " (not converged: raise --laps)"),
             f"bound     {fit.elbo:.6g} nats ({fit.elbo / num_tokens:.4f} per token)",
             f"K         {out['K']} topics with weight > 0.01"]
    totals = _move_totals(fit.state.move_log)
    if totals:
        lines.append("moves     " + ", ".join(f"{n} {a} accepted / {p} proposed" for n, (a, p) in totals.items()))
    lines += [f"topic {k:<4d}{w:.3f}  {' '.join(words)}" for k, w, words in topics[:10]]
    if args.save:
        lines.append(f"saved     {args.save}")
    return "\n".join(lines)


def _sparse_text(args):
    """``, top-L sparse responsibilities`` when ``--sparse-L`` keeps fewer than ``--K`` topics."""
    return f", top-{args.sparse_L} sparse responsibilities" if args.sparse_L and args.sparse_L < args.K else ""


def _hyper_text(args, out):
    """``alpha 0.5, gamma 10, lam0 0.1``, a learnt one as its final value and how it was learnt."""
    learnt = {"alpha": args.alpha_prior and f"E[alpha] {out['alpha']:.4g} (Gamma({args.alpha_prior}) prior)",
              "gamma": args.gamma_prior and f"E[gamma] {out['gamma']:.4g} (Gamma({args.gamma_prior}) prior)",
              "lam0": args.learn_lam0 and f"lam0 {out['lam0']:.4g} (type-II ML)"}
    return ", ".join(learnt[name] or f"{name} {getattr(args, name):g}" for name in learnt)


def _check_resume(args, state, corpus):
    """Refuse a checkpoint fitted with other options or corpus than this run's."""
    post, total = state.posterior, state.cache.total

    def saved_prior(c):
        return prior_text(c.prior if isinstance(c, GammaConcentration) else None)

    saved = {"--dtype": (args.dtype, str(post.lam.dtype).split(".")[-1]),
             "--alpha-prior": (given_prior_text(args.alpha_prior), saved_prior(post.alpha)),
             "--gamma-prior": (given_prior_text(args.gamma_prior, "--gamma-prior"), saved_prior(post.gamma)),
             "--learn-lam0": (bool(args.learn_lam0), isinstance(post.lam0, Learnt)),
             "words in the vocabulary": (corpus.vocab_size, post.lam.shape[1]),
             **memo_resume_entries(args, state, post.lam.shape[0])}
    for name, value, learnt in (("alpha", post.alpha, args.alpha_prior), ("gamma", post.gamma, args.gamma_prior),
                                ("lam0", post.lam0, args.learn_lam0)):
        if not learnt and not isinstance(value, (GammaConcentration, Learnt)):
            saved[f"--{name}"] = (float(getattr(args, name)), float(value))
    if total is not None:
        saved["documents in DATA"] = (corpus.num_docs, int(total.num_docs))
    check_resume_matches(args, saved)


class HDPTopics(CliModel):
    """``--model hdp``."""

    name = "hdp"
    summary = ("the HDP topic model over a corpus DATA (an .ldac or .npz file, or a bundled corpus: "
               f"{', '.join(BUNDLED_CORPORA)})")
    why_not = _WHY_NOT
    uses = {
        "fit": {
            **_COMMON,
            "data": Use(_DATA + "; with --algo memory-bounded: a .npz file with x (N, D) and groups (N,), or "
                        "tiles (30 colour tiles as groups of pixel features)"),
            "lam0": Use(default=0.1, needs=MEMO), "vocab": Use(needs=MEMO),
            "algo": Use("memo: memoized inference over --batches fixed batches of documents; memory-bounded: an "
                        "HDP mixture of --family components over groups of items, seen once in epochs of --epoch "
                        "groups and kept as clumps within --memory numbers (Gomes et al. 2008; K fixed unless --moves "
                        "birth,merge)",
                        default="memo", choices=("memo", "memory-bounded"),
                        hints={"vb": "--algo memo --batches 1 is full-batch coordinate ascent"}),
            "family": Use("memory-bounded: the items' observation family (default gauss; priors scaled to the data)",
                          choices=FAMILY_NAMES, needs=BOUNDED),
            "memory": Use("memory-bounded: the most numbers kept between epochs (eq. 26: a clump its count, "
                          "statistics and one count per document group; a singlet its D values)", needs=BOUNDED),
            "epoch": Use("memory-bounded: groups per epoch; each group is seen once", needs=BOUNDED),
            "lifetime": Use("memory-bounded: the items expected over the stream's lifetime (compression's data "
                            "magnification; default: the data's items)", needs=BOUNDED),
            "groups": Use(needs=BOUNDED),
            "K": Use(default=20), "tol": Use(default=1e-7),
            "laps": Use(MEMORY_BOUNDED_LAPS, default=100),
            "batches": Use("fixed batches of documents: default 10; a sharded corpus (a directory written by "
                           "pyro_memo.data.write_corpus_shards) is fitted one batch per shard", needs=MEMO),
            "init": Use("initial topics: kmeans (a KL k-means of the documents) or documents (random documents)",
                        default="kmeans", choices=("kmeans", "documents"), needs=MEMO),
            "seed": Use(default=0), "device": Use(default="cpu", needs=MEMO),
            "dtype": Use(default="float64", choices=("float64", "float32")),
            "local_dtype": Use(default=None, choices=("float32", "float64"), needs=MEMO),
            "workers": Use(needs=MEMO), "scheduler": Use(needs=MEMO), "round_size": Use(needs=MEMO),
            "moves": Use("birth, merge, delete; with --algo memory-bounded: birth, merge (exact tied-bound "
                         "acceptance in each epoch's model building; e.g. --K 1 --moves birth,merge grows the model)",
                         default="", needs=(("algo", ("memo", "memory-bounded")),)),
            "birth_targets": Use("the largest untried topics one birth candidate splits, kept or rejected as a "
                                 "whole", default=1, needs=MEMO),
            "birth_new": Use(default=3, needs=MEMO),
            "json": Use("keys: elbo, elbo_trace, K (topics > 1%), weights, top_words, lap_seconds, seconds, moves, "
                        "emptied (per lap, topics whose expected tokens fell below one: collapse), documents, "
                        "tokens, V, ..."),
            "save": Use("DIR/model.pt (the fitted model, for pyro-memo predict), "
                        "DIR/topics.txt (top words per topic), DIR/topics.npz (topic_word, weights), DIR/trace.png "
                        "and DIR/state.pt (after every lap; resumable); with --algo memory-bounded: "
                        "DIR/posterior.npz (weights, labels, component estimates) and DIR/trace.png"),
            "resume": Use(needs=MEMO),
            "alpha_prior": Use("learn the document-level concentration: alpha ~ Gamma(S1, S2) (shape, rate) with "
                               "its closed-form posterior q(alpha), in place of a fixed --alpha", default="",
                               needs=MEMO),
            "gamma_prior": Use(default="", needs=MEMO),
            "learn_lam0": Use(default=False, needs=MEMO),
            "sparse_L": Use("keep only each token's L largest topic responsibilities, renormalised over them, in "
                            "every sweep of the document-level local step (Hughes & Sudderth 2016); the bound stays "
                            "exact for that sparse posterior; L >= --K is dense", needs=MEMO),
        },
        "compare": {
            **_COMMON,
            "methods": Use("topic-model methods: memo, memo-moves, svi-k0.5-d10, svi-k0.9-d10, gensim-hdp, "
                           "tomotopy-hdp, tomotopy-lda",
                           default="memo,memo-moves,svi-k0.5-d10"),
            "seeds": Use(default="0"),
            "passes": Use(default=20.0),
            "seconds": Use(),
            "K": Use(default=100),
            "batches": Use(default=20),
            "heldout": Use("fraction of documents held out and scored by document completion (in (0, 1))",
                           default=0.2),
            "out": Use(default="compare-out"),
        },
    }

    def check(self, command, args):
        if command == "fit" and args.algo == "memory-bounded":
            check_groups_source(args.data)
        elif args.data is None:
            raise ValueError(NO_CORPUS)
        else:
            args.read_beside = files_read_beside(args.data, args.vocab)  # kept from the outputs (check_outputs)
        if args.vocab is not None:
            if not os.path.isfile(args.vocab):
                raise ValueError(vocab_missing(args.vocab))
            if args.data is None or not str(args.data).endswith((".ldac", ".dat", ".txt")):
                raise ValueError(f"--vocab applies only to an LDA-C corpus file (.ldac); DATA is {args.data}")
        if command == "fit" and args.algo == "memory-bounded":
            if args.memory is None or args.epoch is None:
                raise ValueError("--algo memory-bounded needs --memory M (stored numbers) and --epoch E (groups)")
            for flag, value in (("--memory", args.memory), ("--epoch", args.epoch), ("--lifetime", args.lifetime),
                                ("--groups", args.groups)):
                if value is not None and value < 1:
                    raise ValueError(f"{flag} must be a positive integer; got {value}")
            parse_moves(args.moves, BOUNDED_MOVES, f"{self.name} --algo memory-bounded")
        elif command == "fit":
            moves = parse_moves(args.moves, TOPIC_MOVES, self.name)
            if args.birth_new < 2:
                raise ValueError(f"--birth-new must be at least 2 (a birth splits its target); got {args.birth_new}")
            changed = [f"--{dest.replace('_', '-')}" for dest in ("birth_targets", "birth_new")
                       if getattr(args, dest) != self.uses["fit"][dest].default]
            if changed and "birth" not in moves:
                raise ValueError(f"{' and '.join(changed)} set{'s' if len(changed) == 1 else ''} the birth move; add "
                                 f"birth to --moves (e.g. --moves birth,merge,delete)")
            check_device(args.device, "--device")
            parse_alpha_prior(args.alpha_prior)
            parse_alpha_prior(args.gamma_prior, "--gamma-prior")
        elif not 0 < args.heldout < 1:
            raise ValueError(f"--heldout must lie in (0, 1) for --model hdp; got {args.heldout}")
        else:  # names known at parse time: a bad list fails before torch is imported
            parse_methods(args.methods, TOPIC_METHOD_NAMES, self.name)
            parse_seeds(args.seeds)

    def fit(self, args):
        if args.algo == "memory-bounded":
            from .hdp_bounded import fit_memory_bounded_hdp

            return fit_memory_bounded_hdp(args)
        _imports()
        corpus, description = load_corpus(args.data, args.vocab)
        args.memory_hint = vocab_size_hint(corpus, args.data)
        if corpus.num_docs == 0:
            raise ValueError(f"{args.data}: the corpus has no documents")
        if isinstance(corpus, CorpusShards):
            if args.batches not in (None, corpus.num_batches):
                raise ValueError(f"--batches {args.batches}: {args.data} is fitted one batch per shard "
                                 f"({corpus.num_batches} shards); leave --batches out or reshard it")
            args.batches = corpus.num_batches
        args.batches = 10 if args.batches is None else args.batches
        if args.batches > corpus.num_docs:
            raise ValueError(f"--batches {args.batches} exceeds the number of documents ({corpus.num_docs})")
        model = MemoizedHDP(K=args.K, alpha=args.alpha, gamma=args.gamma, lam0=args.lam0, laps=args.laps,
                            tol=args.tol, seed=args.seed, dtype=getattr(torch, args.dtype), device=args.device,
                            local_dtype=args.local_dtype,
                            moves=args.moves, init=args.init, alpha_prior=parse_alpha_prior(args.alpha_prior),
                            gamma_prior=parse_alpha_prior(args.gamma_prior, "--gamma-prior"),
                            learn_lam0=args.learn_lam0, sparse_L=args.sparse_L, round_size=args.round_size,
                            move_options=birth_options(args.moves, num_targets=args.birth_targets,
                                                       num_new=args.birth_new))
        state = HDPState(rng=np.random.default_rng(args.seed))
        if args.resume:
            state = load_resume(args, self.name)
            _check_resume(args, state, corpus)
        resumed_laps = state.laps_done
        k_trace = state.traces.setdefault("k", [])  # kept in the state: a resumed run's trace covers all laps

        def callback(lap, elbo, posterior):
            k_trace.append(_effective_topics(posterior))
            if not args.quiet:
                say(f"lap {lap + 1}: bound {elbo / corpus.num_tokens:.4f} per token, {k_trace[-1]} topics > 1%, "
                    f"{state.emptied[-1]} emptied")
            if args.save:
                save_state(os.path.join(args.save, "state.pt"), state)
            return stop_requested(args)

        start = time.perf_counter()
        with dask_executor(args) as executor:
            fit = model.fit(corpus, args.batches, state=state, callback=callback, executor=executor)
        post = fit.posterior
        weights = post.expected_beta()[:-1].cpu().numpy()
        topics = top_words(post, corpus.vocab, 10)
        out = {
            "data": args.data, "model": self.name, "algo": args.algo, "documents": corpus.num_docs,
            "tokens": corpus.num_tokens, "V": corpus.vocab_size, "truncation": len(weights),
            "initial_truncation": args.K, "batches": args.batches, "init": args.init, "elbo": fit.elbo,
            "elbo_trace": fit.elbo_trace, "K": int((weights > 0.01).sum()),
            "k_trace": per_lap(k_trace, len(fit.elbo_trace)), "weights": weights.tolist(), "laps": len(fit.elbo_trace),
            "converged": fit.converged, "lap_seconds": fit.lap_seconds, "seconds": time.perf_counter() - start,
            "emptied": fit.emptied, "resumed_laps": resumed_laps,
            "top_words": [{"topic": k, "weight": w, "words": words} for k, w, words in topics],
            "moves": fit.state.move_log,
            "alpha": float(post.alpha), "gamma": float(post.gamma), "lam0": float(post.lam0),
            "sparse_L": args.sparse_L, "birth_targets": args.birth_targets, "birth_new": args.birth_new,
        }
        if args.save:
            save_model(os.path.join(args.save, "model.pt"), fit, vocab=corpus.vocab)
            _write_topics(args.save, topics, post, weights)
            write_trace_plot(os.path.join(args.save, "trace.png"), fit.elbo_trace, k_trace or [out["K"]],
                             description)
            out["saved"] = args.save
        return report(_summary(args, out, description, fit, topics, corpus.num_tokens), out, args.json)

    def compare(self, args):
        _imports()
        from ...comparison import TOPIC_COLUMNS, TOPIC_METHODS, Budget, TopicSettings, compare_topics
        from ...comparison.topic_methods import check_optional_methods

        methods = parse_methods(args.methods, TOPIC_METHODS, self.name)
        try:  # a missing optional library: one error line before any method runs
            check_optional_methods(methods)
        except ImportError as err:
            raise ValueError(str(err)) from None
        seeds = parse_seeds(args.seeds)
        corpus, description = load_corpus(args.data, args.vocab)
        args.memory_hint = vocab_size_hint(corpus, args.data)
        if isinstance(corpus, CorpusShards):
            raise ValueError(f"{args.data}: pyro-memo compare splits a corpus held in memory into training and "
                             f"held-out documents; give it an .ldac or .npz corpus (pyro-memo fit takes shards)")
        train, test = split_documents(corpus, args.heldout, seed=0)
        if args.batches > train.num_docs:
            raise ValueError(f"--batches {args.batches} exceeds the number of training documents ({train.num_docs})")
        if not args.quiet:
            print(f"{description}; {train.num_docs} training documents, {test.num_docs} held out", file=sys.stderr)
        settings = TopicSettings(K=args.K, batches=args.batches, alpha=args.alpha, gamma=args.gamma, lam0=args.lam0)
        rows, _ = compare_topics(train, test, methods, seeds, budget=Budget(args.passes, args.seconds),
                                 settings=settings, out_dir=args.out, progress=compare_progress(args))
        print_comparison(rows, TOPIC_COLUMNS, args.out)
        return 0


register_model(HDPTopics())
