"""Topic-model methods behind one signature, scored alike: memoized HDP (with and without
moves), stochastic online HDP, gensim's / tomotopy's HDP when installed, and tomotopy's
LDA (``"tomotopy-lda"``: collapsed Gibbs with ``K`` topics and its own asymmetric
:math:`\\alpha` optimisation, scored as the point-estimate LDA it fits, see
:func:`run_tomotopy_lda`).

A runner takes the training :class:`~pyro_memo.topics.Corpus`, a
:class:`~pyro_memo.comparison.Budget` (laps or seconds), the shared :class:`TopicSettings`
and a seed, and returns a :class:`TopicRun`: its trace and an
:class:`~pyro_memo.topics.HDPPosterior` that the harness scores by document completion.
External libraries' topics enter as an :class:`~pyro_memo.topics.HDPPosterior` through
:func:`posterior_from_topics`, so every method's held-out score comes from the same local
step and the same point estimates.
"""

import importlib
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..allocation.hdp_sticks import rho_from_weights
from ..topics import HDPPosterior, HDPState, MemoizedHDP, StochasticHDP
from . import clock
from .harness import check_settings


@dataclass
class TopicSettings:
    """What every method shares: truncation ``K``, ``batches`` per lap, the model's
    ``alpha``, ``gamma``, ``lam0``, and the dtype of our variational methods."""

    K: int = 100
    batches: int = 20
    alpha: float = 0.5
    gamma: float = 10.0
    lam0: float = 0.1
    dtype: torch.dtype = torch.float64

    def __post_init__(self):
        check_settings(self)


@dataclass
class TopicRun:
    """One run: laps, own seconds (scoring excluded) and bound per token (NaN for methods
    without our bound) at each trace point; topics with expected weight > 1%; the final
    globals."""

    laps: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    bound: list = field(default_factory=list)
    K: list = field(default_factory=list)
    posterior: HDPPosterior = None


#: total concentration of the point-estimate topics' Dirichlets: with ``lam = phi * POINT``,
#: :math:`\psi(\lambda_v) - \psi(\sum\lambda) = \log\phi_v - 1 / (2\lambda_v) + O(\lambda_v^{-2})`,
#: within 5e-7 of :math:`\log\phi_v` for every :math:`\phi_v \ge 10^{-6}`
POINT = 1e12


def posterior_from_topics(topic_word, weights, settings, tokens, *, alpha=None, tail=0.01, point=False):
    """An :class:`~pyro_memo.topics.HDPPosterior` from external topics ``topic_word`` ``(K, V)`` (rows are
    normalised) with top-level weights ``weights`` ``(K,)`` (normalised; clamped at 1e-10).
    Topics are reordered by decreasing weight. The sticks are sharply concentrated
    (``omega = 1e4``) at expected weights :math:`E[\\beta_k] = (1 - \\text{tail})\\,w_k` and
    :math:`E[\\beta_{K+1}] = \\text{tail}`.

    :param tokens: with ``point=False``, the topics' Dirichlets are :math:`\\lambda_k =
        \\lambda_0 + \\phi_k\\, w_k\\, \\text{tokens}` (``lam0 = settings.lam0``): ``tokens``
        expected tokens in all, shared by the weights. Unused with ``point=True``.
    :param alpha: the documents' total concentration :math:`A` (the posterior's ``alpha``);
        ``None``: ``settings.alpha``. The documents' prior is :math:`\\mathrm{Dir}(A
        E[\\beta_1], \\dots, A E[\\beta_K], A E[\\beta_{K+1}])`; an LDA's
        :math:`\\mathrm{Dir}(\\alpha_1..\\alpha_K)` is ``weights = alpha_vector``,
        ``alpha = sum(alpha_vector)`` and a tiny ``tail``.
    :param float tail: the tail's expected weight :math:`E[\\beta_{K+1}]` (mass of the
        topics beyond ``K``, which predict uniformly over words), in (0, 1).
    :param bool point: ``False``: the Dirichlets above (their :math:`E[\\log\\phi]` lies below
        :math:`\\log\\phi` for rare words). ``True``: point-estimate topics,
        :math:`\\lambda_k = \\phi_k \\cdot` ``POINT`` and nothing else (no ``lam0``), so
        :math:`E[\\log\\phi_k] \\approx \\log\\phi_k` and the documents' local step folds in
        the given topics themselves.
    """
    if not 0 < tail < 1:
        raise ValueError(f"tail must be in (0, 1); got {tail}")
    topic_word = torch.as_tensor(np.asarray(topic_word), dtype=settings.dtype)
    weights = torch.as_tensor(np.asarray(weights), dtype=settings.dtype).clamp_min(1e-10)
    weights = weights / weights.sum()
    order = torch.argsort(weights, descending=True)
    topic_word, weights = topic_word[order], weights[order]
    means = topic_word / topic_word.sum(1, keepdim=True)
    if point:
        lam = means * POINT
    else:
        lam = settings.lam0 + means * (weights * float(tokens))[:, None]
    rho = rho_from_weights(torch.cat([(1 - tail) * weights, weights.new_full((1,), tail)]))
    omega = torch.full_like(weights, 1e4)
    return HDPPosterior(lam, rho, omega, settings.alpha if alpha is None else float(alpha), settings.gamma,
                        settings.lam0)


def point_estimate(posterior):
    """The point-estimate form of a fitted :class:`~pyro_memo.topics.HDPPosterior`: its topic means
    :math:`E[\\phi_k]` times ``POINT`` as the topics' Dirichlets (so
    :math:`E[\\log\\phi_k] \\approx \\log E[\\phi_k]`), the same sticks, ``alpha``, ``gamma``
    and ``lam0``: the fold-in of :func:`posterior_from_topics` with ``point=True``."""
    return HDPPosterior(posterior.topic_means() * POINT, posterior.rho, posterior.omega, posterior.alpha,
                        posterior.gamma, posterior.lam0)


def _effective(post):
    return int((post.expected_beta()[:-1] > 0.01).sum())


def _run_ours(model, corpus, budget, settings):
    """Fit ``model`` until the budget is spent; its seconds are the initial topics' and the
    fit's own lap times (``state.lap_seconds``: for the stochastic method the extra pass that
    computes its bound is left out)."""
    run = TopicRun()
    state = HDPState(rng=np.random.default_rng(model.seed))
    start = clock.now()
    state.posterior = model.initial_posterior(corpus)
    setup = clock.now() - start

    def callback(lap, elbo, posterior):
        run.laps.append(lap + 1)
        run.seconds.append(setup + float(sum(state.lap_seconds)))
        run.bound.append(elbo / corpus.num_tokens)
        run.K.append(_effective(posterior))
        return budget.spent(lap + 1, run.seconds[-1])

    model.laps = int(np.ceil(budget.passes))
    run.posterior = model.fit(corpus, settings.batches, state=state, callback=callback).posterior
    return run


def run_memo(corpus, budget, settings, seed, moves=()):
    """:class:`~pyro_memo.topics.MemoizedHDP` (``tol=0``: runs its whole budget)."""
    model = MemoizedHDP(K=settings.K, alpha=settings.alpha, gamma=settings.gamma, lam0=settings.lam0, tol=0,
                        seed=seed, dtype=settings.dtype, moves=moves)
    return _run_ours(model, corpus, budget, settings)


def run_stochastic(corpus, budget, settings, seed, kappa=0.5, delay=10.0):
    """:class:`~pyro_memo.topics.StochasticHDP` (its bound per lap costs one extra pass,
    excluded from its seconds)."""
    model = StochasticHDP(K=settings.K, kappa=kappa, delay=delay, alpha=settings.alpha, gamma=settings.gamma,
                          lam0=settings.lam0, seed=seed, dtype=settings.dtype)
    return _run_ours(model, corpus, budget, settings)


#: the methods that need an optional library: ``method -> (module imported, what to install)``
OPTIONAL = {"gensim-hdp": ("gensim.models", "gensim (pip install gensim)"),
            "tomotopy-hdp": ("tomotopy", "tomotopy (pip install tomotopy)"),
            "tomotopy-lda": ("tomotopy", "tomotopy (pip install tomotopy)")}


def optional_module(method):
    """The optional library ``method`` needs (a key of :data:`OPTIONAL`), imported.

    :raises ImportError: "method ... needs ..." saying what to install.
    """
    module, what = OPTIONAL[method]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"method {method} needs {what}") from err


def check_optional_methods(methods):
    """Raise :func:`optional_module`'s ImportError for the first of ``methods`` whose library is missing, before
    any method runs (a comparison ran every method before it, then stopped with a traceback)."""
    for method in methods:
        if method in OPTIONAL:
            optional_module(method)


def bag_of_words(corpus):
    """The documents as lists of ``(word id, integer count)`` pairs (gensim's format)."""
    return [list(zip(corpus.word_ids[lo:hi].tolist(), corpus.counts[lo:hi].astype(int).tolist(), strict=True))
            for lo, hi in zip(corpus.doc_ptr[:-1], corpus.doc_ptr[1:], strict=True)]


#: documents per online step of gensim's ``HdpModel`` (its default ``chunksize``)
GENSIM_CHUNK = 256


def gensim_limits(budget, num_docs, chunk=GENSIM_CHUNK):
    """gensim ``HdpModel``'s stopping arguments for ``budget`` on ``num_docs`` documents: ``max_chunks``, the
    budget's passes in chunks of ``chunk`` documents (a pass ends with a short chunk), and ``max_time``, its
    seconds when given; gensim stops at whichever comes first. Without ``max_chunks`` gensim ran one pass
    whatever the passes, and with ``max_time`` alone as many passes as the time allowed."""
    chunks = math.ceil(budget.passes * math.ceil(num_docs / chunk) - 1e-9)
    return {"chunksize": chunk, "max_chunks": max(1, chunks),
            **({"max_time": budget.seconds} if budget.seconds is not None else {})}


def run_gensim_hdp(corpus, budget, settings, seed):
    """gensim's online ``HdpModel`` (top-level truncation ``K``) for the budget's passes or seconds,
    whichever comes first (:func:`gensim_limits`)."""
    HdpModel = optional_module("gensim-hdp").HdpModel
    run = TopicRun()
    start = clock.now()
    vocab = _words(corpus)
    model = HdpModel(bag_of_words(corpus), dict(enumerate(vocab)), T=settings.K, gamma=settings.gamma,
                     alpha=settings.alpha, eta=settings.lam0, random_state=seed,
                     **gensim_limits(budget, corpus.num_docs))
    seconds = clock.now() - start
    alpha, beta = model.hdp_to_lda()
    run.posterior = posterior_from_topics(beta, alpha, settings, corpus.num_tokens)
    run.laps.append(float("nan"))
    run.seconds.append(seconds)
    run.bound.append(float("nan"))
    run.K.append(_effective(run.posterior))
    return run


def _words(corpus):
    return corpus.vocab or [str(v) for v in range(corpus.vocab_size)]


def add_tomotopy_documents(model, corpus):
    """Add ``corpus``'s documents to a tomotopy model, each as its list of word tokens."""
    vocab = _words(corpus)
    for lo, hi in zip(corpus.doc_ptr[:-1], corpus.doc_ptr[1:], strict=True):
        model.add_doc([vocab[w] for w, n in zip(corpus.word_ids[lo:hi], corpus.counts[lo:hi], strict=True)
                       for _ in range(int(n))])


def tomotopy_topics(model, corpus, topics):
    """``(len(topics), V)`` word distributions of a tomotopy model's ``topics`` in ``corpus``'s
    word ids (words it never saw get 1e-12)."""
    column = {w: i for i, w in enumerate(_words(corpus))}
    phi = np.full((len(topics), corpus.vocab_size), 1e-12)
    ids = [column[w] for w in model.used_vocabs]
    for row, k in enumerate(topics):
        phi[row, ids] = model.get_topic_word_dist(k)
    return phi


def train_tomotopy(model, budget, every, live_topics):
    """Train a tomotopy model ``every`` sweeps at a time (one thread) until ``budget`` is spent;
    the :class:`TopicRun` trace (sweeps, own seconds, ``live_topics()`` after each call)."""
    run = TopicRun()
    seconds = sweeps = 0
    while not budget.spent(sweeps, seconds):
        start = clock.now()
        model.train(every, workers=1)
        seconds += clock.now() - start
        sweeps += every
        run.laps.append(sweeps)
        run.seconds.append(seconds)
        run.bound.append(float("nan"))
        run.K.append(live_topics())
    return run


def run_tomotopy_hdp(corpus, budget, settings, seed, every=10):
    """tomotopy's collapsed Gibbs ``HDPModel`` (one thread), ``every`` sweeps per trace point,
    until the budget's seconds (or ``passes`` sweeps)."""
    tomotopy = optional_module("tomotopy-hdp")
    model = tomotopy.HDPModel(initial_k=min(settings.K, 10), alpha=settings.alpha, eta=settings.lam0,
                              gamma=settings.gamma, seed=seed)
    add_tomotopy_documents(model, corpus)
    run = train_tomotopy(model, budget, every, lambda: int(model.live_k))
    topics = [k for k in range(model.k) if model.is_live_topic(k)]
    phi = tomotopy_topics(model, corpus, topics)
    sizes = np.asarray(model.get_count_by_topics(), dtype=float)[topics]
    run.posterior = posterior_from_topics(phi, sizes, settings, corpus.num_tokens)
    run.K[-1] = _effective(run.posterior)
    return run


def run_tomotopy_lda(corpus, budget, settings, seed, every=10):
    """tomotopy's collapsed Gibbs ``LDAModel`` with ``K`` topics (one thread), ``alpha``
    starting at ``settings.alpha / K`` per topic and optimised by tomotopy itself (its default
    ``optim_interval=10``), ``eta=0.01``, ``every`` sweeps per trace point until the budget's
    seconds (or ``passes`` sweeps).

    Scored as the LDA it is: the documents' prior is tomotopy's learnt
    :math:`\\mathrm{Dir}(\\alpha_1..\\alpha_K)` (tail mass 1e-9) and the fold-in uses its point
    topics ``get_topic_word_dist`` (``posterior_from_topics(..., point=True)``)."""
    model = tomotopy_lda_model(corpus, settings, seed)
    run = train_tomotopy(model, budget, every, lambda: settings.K)
    run.posterior = tomotopy_lda_posterior(model, corpus, settings)
    if run.K:
        run.K[-1] = _effective(run.posterior)
    return run


def tomotopy_lda_model(corpus, settings, seed):
    """An untrained tomotopy ``LDAModel(k=K, alpha=settings.alpha / K, eta=0.01, seed=seed)``
    (tomotopy's default ``optim_interval=10``: it re-fits its asymmetric ``alpha`` every 10
    sweeps) holding ``corpus``'s documents."""
    tomotopy = optional_module("tomotopy-lda")
    model = tomotopy.LDAModel(k=settings.K, alpha=settings.alpha / settings.K, eta=0.01, seed=seed)
    add_tomotopy_documents(model, corpus)
    return model


def tomotopy_lda_posterior(model, corpus, settings):
    """A tomotopy ``LDAModel`` as the point-estimate :class:`~pyro_memo.topics.HDPPosterior` it is: topics
    ``get_topic_word_dist`` in ``corpus``'s word ids, documents' prior its learnt
    ``model.alpha`` (``alpha = sum``, weights ``alpha / sum``, tail 1e-9)."""
    phi = tomotopy_topics(model, corpus, range(model.k))
    alpha = np.asarray(model.alpha, dtype=float)
    return posterior_from_topics(phi, alpha, settings, corpus.num_tokens, alpha=alpha.sum(), tail=1e-9,
                                 point=True)


#: topic-model methods by name
TOPIC_METHODS = {
    "memo": run_memo,
    "memo-moves": lambda c, b, s, seed: run_memo(c, b, s, seed, moves="birth,merge"),
    "svi-k0.5-d10": lambda c, b, s, seed: run_stochastic(c, b, s, seed, 0.5, 10.0),
    "svi-k0.9-d10": lambda c, b, s, seed: run_stochastic(c, b, s, seed, 0.9, 10.0),
    "gensim-hdp": run_gensim_hdp,
    "tomotopy-hdp": run_tomotopy_hdp,
    "tomotopy-lda": run_tomotopy_lda,
}
