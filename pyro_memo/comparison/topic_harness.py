"""Run HDP topic-model methods x seeds on one corpus; score every run by the same document
completion; write tables after every run."""

import os
import time

from ..topics import Corpus, document_completion
from .harness import markdown_tables, write_csv, write_text
from .methods import Budget
from .topic_methods import TOPIC_METHODS, TopicSettings

#: columns of the per-run table
TOPIC_COLUMNS = ("method", "seed", "laps", "seconds", "bound_per_token", "heldout_per_token", "effective_topics")


def compare_topics(train, test, methods, seeds=(0,), budget=None, settings=None, out_dir=None, progress=None,
                   heldout_split="tokens"):
    """Run every topic-model method with every seed on ``train``; score each on ``test``.

    :param Corpus train: training documents.
    :param Corpus test: held-out documents, scored by
        :func:`~pyro_memo.topics.document_completion` (half of each document's tokens
        estimate its topic weights, the rest are scored; ``heldout_split="types"`` for
        bnpy's word-type split).
    :param methods: names from :data:`~pyro_memo.comparison.topic_methods.TOPIC_METHODS`.
    :param Budget budget: laps (``passes``) and/or ``seconds`` per run (default 20 laps).
    :param TopicSettings settings: truncation, batches, hyperparameters shared by all methods.
    :param str out_dir: if given, ``runs.csv``, ``runs.md``, ``summary.md`` and
        ``traces.csv`` are (re)written there after every run.
    :param progress: optional ``progress(message)`` called as runs finish.
    :returns: ``(rows, runs)``: one dict per run (:data:`TOPIC_COLUMNS`) and the
        :class:`~pyro_memo.comparison.topic_methods.TopicRun` objects keyed by ``(method, seed)``.
    """
    unknown = [m for m in methods if m not in TOPIC_METHODS]
    if unknown or not methods:
        raise ValueError(f"unknown topic methods {unknown}; choose from {', '.join(TOPIC_METHODS)}")
    for name, corpus in (("train", train), ("test", test)):
        if not isinstance(corpus, Corpus):
            raise TypeError(f"{name} must be a pyro_memo.topics.Corpus; got {type(corpus).__name__}")
    if train.vocab_size != test.vocab_size:
        raise ValueError(f"train and test vocabularies differ: V = {train.vocab_size} and {test.vocab_size}")
    budget = budget or Budget()
    settings = settings or TopicSettings()
    rows, runs = [], {}
    for method in methods:
        for seed in seeds:
            start = time.perf_counter()
            run = TOPIC_METHODS[method](train, budget, settings, int(seed))
            runs[(method, seed)] = run
            rows.append({"method": method, "seed": int(seed), "laps": run.laps[-1], "seconds": run.seconds[-1],
                         "bound_per_token": run.bound[-1],
                         "heldout_per_token": document_completion(run.posterior, test, split=heldout_split),
                         "effective_topics": run.K[-1]})
            if progress is not None:
                row = rows[-1]
                progress(f"{method} seed {seed}: held-out {row['heldout_per_token']:.4f} nats/token, "
                         f"{row['effective_topics']} topics, {row['seconds']:.0f} s "
                         f"({time.perf_counter() - start:.0f} s with scoring)")
            if out_dir is not None:
                write_topic_outputs(out_dir, rows, runs)
    return rows, runs


def write_topic_outputs(out_dir, rows, runs):
    """``runs.csv``, ``runs.md``, ``summary.md`` and ``traces.csv``, each written atomically."""
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "runs.csv"), TOPIC_COLUMNS, [[r[c] for c in TOPIC_COLUMNS] for r in rows])
    write_csv(os.path.join(out_dir, "traces.csv"), ("method", "seed", "laps", "seconds", "bound_per_token", "K"),
              [[m, s, *point] for (m, s), run in runs.items()
               for point in zip(run.laps, run.seconds, run.bound, run.K, strict=True)])
    per_run, summary = markdown_tables(rows, TOPIC_COLUMNS)
    write_text(os.path.join(out_dir, "runs.md"), per_run)
    write_text(os.path.join(out_dir, "summary.md"), summary)
