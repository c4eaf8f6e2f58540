"""The HDP topic-model comparison task: every method's globals scored by the same document
completion on held-out documents, with its bound per token and its topics holding > 1% of
the top-level weight."""

from ..topics import Corpus, document_completion
from .harness import Budget, Table, Task, check_batches, check_instance, run_comparison
from .topic_methods import TOPIC_METHODS, TopicRun, TopicSettings, check_optional_methods

#: columns of the per-run table
TOPIC_COLUMNS = ("method", "seed", "laps", "seconds", "bound_per_token", "heldout_per_token", "effective_topics")

#: what the topic task writes
TOPIC_TABLE = Table(columns=TOPIC_COLUMNS, integers=("seed", "effective_topics"),
                    trace=(("laps", "laps"), ("seconds", "seconds"), ("bound_per_token", "bound"), ("K", "K")),
                    run_type=TopicRun, progress="laps", objective="bound_per_token",
                    objective_label="bound per token (nats)", final="heldout_per_token",
                    final_label="held-out nats per token (document completion)", k_label="topics > 1% of the weight")
#: the held-out splits of :func:`~pyro_memo.topics.document_completion`
HELDOUT_SPLITS = ("tokens", "types")


class TopicTask(Task):
    """Training and held-out corpora; methods from
    :data:`~pyro_memo.comparison.TOPIC_METHODS`, runners
    ``(corpus, budget, settings, seed) -> TopicRun``.

    :param Corpus train: training documents.
    :param Corpus test: held-out documents, scored by
        :func:`~pyro_memo.topics.document_completion` (half of each document's tokens
        estimate its topic weights, the rest are scored; ``heldout_split="types"`` for
        bnpy's word-type split).
    :param Budget budget: laps (``passes``) and/or ``seconds`` per run.
    :param TopicSettings settings: truncation, batches, hyperparameters shared by all methods.
    """

    table = TOPIC_TABLE
    methods = TOPIC_METHODS
    noun = "topic methods"

    def __init__(self, train, test, budget, settings, heldout_split="tokens"):
        for name, corpus in (("train", train), ("test", test)):
            if not isinstance(corpus, Corpus):
                raise TypeError(f"{name} must be a pyro_memo.topics.Corpus; got {type(corpus).__name__}")
        if train.vocab_size != test.vocab_size:
            raise ValueError(f"train and test vocabularies differ: V = {train.vocab_size} and {test.vocab_size}")
        check_instance(budget, Budget, "budget")
        check_instance(settings, TopicSettings, "settings")
        check_batches(settings, train.num_docs, "training documents")
        if not isinstance(heldout_split, str) or heldout_split not in HELDOUT_SPLITS:
            raise ValueError(f"heldout_split must be 'tokens' or 'types'; got {heldout_split!r}")
        self.train, self.test, self.budget, self.settings = train, test, budget, settings
        self.heldout_split = heldout_split

    @classmethod
    def check_methods(cls, methods):
        """:meth:`Task.check_methods`, and an ImportError naming what to install for a method whose
        optional library is missing (gensim, tomotopy), before any method runs."""
        super().check_methods(methods)
        check_optional_methods(methods)

    def run(self, method, seed):
        return self.methods[method](self.train, self.budget, self.settings, seed)

    def score(self, run):
        return {"laps": run.laps[-1], "seconds": run.seconds[-1], "bound_per_token": run.bound[-1],
                "heldout_per_token": document_completion(run.posterior, self.test, split=self.heldout_split),
                "effective_topics": run.K[-1]}

    def describe(self, row):
        return f"held-out {row['heldout_per_token']:.4f} nats/token, {row['effective_topics']} topics"


def compare_topics(train, test, methods, seeds=(0,), budget=None, settings=None, out_dir=None, progress=None,
                   heldout_split="tokens"):
    """Run every topic-model method with every seed on ``train``; score each on ``test``
    (:class:`TopicTask` through :func:`~pyro_memo.comparison.run_comparison`).

    :param Corpus train: training documents.
    :param Corpus test: held-out documents (see :class:`TopicTask`).
    :param methods: names from :data:`~pyro_memo.comparison.TOPIC_METHODS`.
    :param seeds: seeds; each method runs once per seed.
    :param Budget budget: laps (``passes``) and/or ``seconds`` per run (default 20 laps).
    :param TopicSettings settings: truncation, batches, hyperparameters shared by all methods.
    :param str out_dir: if given, ``runs.csv``, ``runs.md``, ``summary.md`` and
        ``traces.csv`` are (re)written there after every run, and the plots at the end.
    :param progress: optional ``progress(message)`` called as runs finish; returning ``True`` ends the
        comparison after that run.
    :param str heldout_split: ``"tokens"`` (default) or ``"types"``.
    :returns: ``(rows, runs)``: one dict per run (:data:`TOPIC_COLUMNS`) and the
        :class:`~pyro_memo.comparison.topic_methods.TopicRun` objects keyed by ``(method, seed)``.
    """
    TopicTask.check_methods(methods)
    task = TopicTask(train, test, Budget() if budget is None else budget,
                     TopicSettings() if settings is None else settings, heldout_split)
    return run_comparison(task, methods, seeds, out_dir, progress)
