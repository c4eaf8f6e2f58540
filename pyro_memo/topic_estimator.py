"""A scikit-learn estimator for the HDP topic model on document-term count matrices, fitted by
memoized VB (Hughes, Kim & Sudderth, AISTATS 2015), used the way scikit-learn's
``LatentDirichletAllocation`` is."""

import copy

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_non_negative

from .data.corpus import check_has_tokens, check_tokens_fit, from_counts
from .engine.threads import check_threads
from .estimator import (
    _check_int,
    _check_moves,
    _check_real,
    commit_fit,
    fit_seed,
    input_attributes,
    validate_data,
    warn_unconverged,
)
from .model_file import SavedTopics
from .topics.heldout import PREDICT_ITERS, PREDICT_TOL
from .topics.memoized_hdp import TOPIC_MOVES, MemoizedHDP

#: document-level iterations and tolerance of :meth:`HDPTopics.transform`: those of
#: :meth:`SavedTopics.predict_proba <pyro_memo.model_file.SavedTopics.predict_proba>` (one pair, defined in
#: :mod:`pyro_memo.topics.heldout`)
TRANSFORM_ITERS, TRANSFORM_TOL = PREDICT_ITERS, PREDICT_TOL


class HDPTopics(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """The HDP topic model (Teh et al. 2006) with a truncation of ``n_components`` topics, fitted
    by memoized VB (:class:`~pyro_memo.topics.MemoizedHDP`), as a scikit-learn transformer of
    document-term count matrices, like ``LatentDirichletAllocation``.

    ``X`` is an ``(n_documents, n_words)`` matrix of word counts, a numpy array or any
    scipy.sparse matrix of any numeric dtype (converted to float64, so float32 and float64 copies
    give the same topics and proportions). Negative entries raise scikit-learn's ``ValueError``
    ("Negative values in data passed to ..."); NaN or inf raise its usual error. Counts need not
    be whole numbers: every quantity of the fit and of :meth:`transform` is weighted by the
    counts (topic-word sums :math:`\\sum_n c_n r_{nk}`, document-topic sums, the entropy term), so
    non-negative real weights such as tf-idf values are accepted as LDA accepts them, each
    weight standing for that many (fractional) tokens. Documents with no words are allowed:
    :meth:`fit` ignores them (at least one document must have words) and :meth:`transform` gives
    them the prior proportions :math:`E[\\beta_k]`, renormalised over the ``K`` topics.

    :meth:`transform` runs the document-level local step with the topics fixed
    (:func:`~pyro_memo.topics.doc_topic_weights`) and returns the posterior-mean proportions
    :math:`E[\\pi_{dk}]` of the ``K`` topics, renormalised to sum to 1 (the small mass of the
    tail beyond the truncation is spread over them in proportion). Columns are the topics of
    ``posterior_`` in its order, as the rows of ``components_``. ``check_estimator`` passes with
    no expected failures.

    :param int n_components: truncation level ``K``: an upper bound on the topics, except that ``moves``
        (births) may grow the fit beyond it (``n_components_`` is the fitted number).
    :param float alpha: document-level concentration.
    :param float gamma: top-level concentration.
    :param float lam0: symmetric Dirichlet prior on each topic's word distribution.
    :param int n_batches: batches of memoized VB; default ``min(10, n_documents)``, and never
        more than ``n_documents``.
    :param str moves: comma-separated topic moves from ``"birth"``, ``"merge"``, ``"delete"``
        (these change the number of topics); ``None`` for none.
    :param dict move_options: keyword arguments per move of ``moves``, e.g. ``{"birth": {"num_new": 5}}``
        (see :class:`~pyro_memo.topics.TopicBirthMove`); ``None``: their defaults.
    :param int max_iter: maximum laps.
    :param float tol: stop when the bound's relative change over a lap is below this.
    :param random_state: seeds the initial topics and the batch order: an int in ``[0, 2**32 - 1]``, a
        numpy ``RandomState`` or ``Generator`` (a seed is drawn from it), or ``None``; anything else
        (a negative int) is a :class:`ValueError` naming ``random_state``.
    :param int threads: the most intra-op threads torch may use; each fit times one thread against this
        many and keeps the faster, and restores torch's setting afterwards (``None``: torch's setting).
    :param str local_dtype: ``"float32"``: mixed precision, the document-level local step in float32
        while the topics, the memo and the bound stay in float64 (see
        :class:`~pyro_memo.engine.MemoizedDriver`); ``None`` (default): float64 throughout.
    :param int sparse_L: keep only each token's ``sparse_L`` largest topic responsibilities while
        fitting, renormalised over them (Hughes & Sudderth 2016; see
        :class:`~pyro_memo.topics.MemoizedHDP`), and ``bound_`` is the exact bound of that sparse
        posterior. ``None`` (the default) or ``sparse_L >= n_components`` keeps them all.
        :meth:`transform` stays dense.

    The initial topics are a k-means of the documents (bnpy's Bregman k-means,
    ``kmeans_topics()``); with fewer non-empty documents than
    ``n_components`` they are random documents instead.

    :ivar posterior_: the fitted :class:`~pyro_memo.topics.HDPPosterior`.
    :ivar components_: ``(n_components_, n_features_in_)`` expected topic-word distributions
        :math:`E_q[\\phi_k]` (rows sum to 1; LDA's ``components_`` normalised).
    :ivar topic_weights_: ``(n_components_,)`` top-level expected weights :math:`E_q[\\beta_k]`.
    :ivar int n_components_: number of fitted topics (``n_components`` unless moves changed it).
    :ivar float bound_: the fit's objective, the exact variational bound (total nats).
    :ivar int n_iter_: laps run.
    :ivar bool converged_: whether the bound's relative change fell below ``tol``; when it did not,
        :meth:`fit` warns with :class:`~pyro_memo.estimator.EstimatorConvergenceWarning` (both
        :class:`~pyro_memo.ConvergenceWarning` and scikit-learn's ``ConvergenceWarning``).
    :ivar int n_features_in_: vocabulary size seen in :meth:`fit`.

    ``get_feature_names_out()`` names the output columns ``hdptopics0`` ... as
    ``LatentDirichletAllocation`` does, so ``set_output`` and ``ColumnTransformer`` work.
    """

    def __init__(self, n_components=50, alpha=0.5, gamma=10.0, lam0=0.1, n_batches=None, moves=None,
                 max_iter=50, tol=1e-6, random_state=None, local_dtype=None, threads=None, sparse_L=None,
                 move_options=None):
        self.n_components = n_components
        self.alpha = alpha
        self.gamma = gamma
        self.lam0 = lam0
        self.n_batches = n_batches
        self.moves = moves
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.local_dtype = local_dtype
        self.threads = threads
        self.sparse_L = sparse_L
        self.move_options = move_options

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------ parameters
    def _check_params(self):
        """Raise :class:`ValueError` naming the first bad parameter."""
        _check_int("n_components", self.n_components)
        _check_int("max_iter", self.max_iter)
        if self.n_batches is not None:
            _check_int("n_batches", self.n_batches)
        if self.sparse_L is not None:
            _check_int("sparse_L", self.sparse_L)
        for name in ("alpha", "gamma", "lam0"):
            _check_real(name, getattr(self, name), positive=True)
        _check_real("tol", self.tol, positive=False)
        check_threads(self.threads)
        return _check_moves(self.moves, self.move_options, TOPIC_MOVES)

    def _corpus(self, X, site, on=None):
        """``X`` validated (scikit-learn's errors; at ``site`` ``"fit"``, its width recorded on ``on``, by default
        this estimator; else checked against the fitted width) and non-negative, as a
        :class:`~pyro_memo.topics.Corpus`; errors name the method ``site`` the caller called."""
        reset = site == "fit"
        X = validate_data(self if on is None else on, X, accept_sparse=("csr", "csc", "coo"), dtype=np.float64,
                          reset=reset)
        check_non_negative(X, f"{type(self).__name__}.{site}")
        return from_counts(X)

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None):
        """Fit the HDP topic model to the count matrix ``X`` (``(n_documents, n_words)``); ``y`` is ignored.

        :returns: ``self``.
        """
        moves = self._check_params()
        trial = copy.copy(self)  # validate_data sets n_features_in_ there: self changes only on success
        corpus = self._corpus(X, "fit", on=trial)
        check_has_tokens(corpus, f"{type(self).__name__}.fit")
        check_tokens_fit(corpus, torch.float64, f"{type(self).__name__}.fit")  # named as the estimator
        nonempty = int(np.count_nonzero(np.diff(corpus.doc_ptr)))
        seed = fit_seed(self.random_state)
        n_docs = corpus.num_docs
        batches = min(10, n_docs) if self.n_batches is None else min(self.n_batches, n_docs)
        init = "kmeans" if self.n_components <= nonempty else "documents"
        driver = MemoizedHDP(K=self.n_components, alpha=float(self.alpha), gamma=float(self.gamma),
                             lam0=float(self.lam0), laps=self.max_iter, tol=float(self.tol), seed=seed,
                             moves=moves, move_options=self.move_options, init=init, local_dtype=self.local_dtype,
                             threads=self.threads, sparse_L=self.sparse_L)
        result = driver.fit(corpus, batches)
        posterior = result.posterior
        fitted = input_attributes(trial)
        fitted.update(posterior_=posterior, n_components_=int(posterior.K), _n_features_out=int(posterior.K),
                      components_=posterior.topic_means().numpy(),
                      topic_weights_=posterior.expected_beta()[:-1].numpy(), bound_=float(result.elbo_trace[-1]),
                      n_iter_=len(result.elbo_trace), converged_=bool(result.converged))
        commit_fit(self, fitted)  # all at once: an interrupted fit leaves the previous one whole
        warn_unconverged(self)
        return self

    # ------------------------------------------------------------- read-outs
    def _proportions(self, X):
        """``(corpus, (n_documents, K + 1) tensor)``: proportions with the tail column last."""
        check_is_fitted(self)
        corpus = self._corpus(X, "transform")
        saved = SavedTopics(self.posterior_)
        return corpus, saved, saved.predict_proba(corpus)

    def transform(self, X):
        """``(n_documents, n_components_)`` topic proportions of each document, the topics held
        fixed (rows sum to 1)."""
        _, _, pi = self._proportions(X)
        pi = pi[:, :-1]
        return (pi / pi.sum(1, keepdim=True)).numpy()

    def fit_transform(self, X, y=None):
        """``fit(X).transform(X)``."""
        return self.fit(X).transform(X)

    def score_samples(self, X):
        """``(n_documents,)`` plug-in log-likelihood of each document's words,
        :math:`\\sum_n c_n \\log \\sum_k \\hat\\pi_{dk}\\hat\\phi_{k x_n}` with :math:`\\hat\\pi_d`
        estimated from the same document (topics fixed) and :math:`\\hat\\phi_k = E_q[\\phi_k]`
        (:meth:`~pyro_memo.model_file.SavedTopics.score_samples`)."""
        return self._scores(X, "score_samples")[1]

    def _scores(self, X, site):
        """``(corpus, score_samples)`` of ``X``, its errors naming the method ``site``."""
        check_is_fitted(self)
        corpus = self._corpus(X, site)
        saved = SavedTopics(self.posterior_)
        return corpus, saved.score_samples(corpus).numpy()

    def score(self, X, y=None):
        """Total plug-in log-likelihood (nats) of the words of ``X`` under the fitted topics
        (the sum of :meth:`score_samples`; higher is better). It estimates each document's
        proportions from the words it then scores, so it is not a held-out score: for that, split
        each document's words (:func:`~pyro_memo.topics.document_completion`)."""
        return float(np.sum(self._scores(X, "score")[1]))

    def perplexity(self, X):
        """``exp(-score(X) / number of words in X)``, as ``LatentDirichletAllocation.perplexity``
        (lower is better)."""
        corpus, scores = self._scores(X, "perplexity")
        score, tokens = float(np.sum(scores)), float(corpus.counts.sum())
        if tokens <= 0:
            raise ValueError("perplexity: X has no words")
        return float(np.exp(-score / tokens))
