"""A scikit-learn estimator for the assortative HDP relational model (mixed-membership communities;
Kim, Gopalan, Blei & Sudderth 2013) on a graph, fitted by memoized inference, used the way
scikit-learn's ``SpectralClustering(affinity="precomputed")`` is."""

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.validation import check_is_fitted

from .checks import as_bool
from .data.graphs import Graph, from_adjacency, from_networkx
from .engine.threads import check_threads
from .estimator import (
    DTYPES,
    _check_choice,
    _check_int,
    _check_moves,
    _check_real,
    commit_fit,
    fit_seed,
    warn_unconverged,
)
from .relational import MemoizedRelational
from .relational.moves import RELATIONAL_MOVES

INITS = ("spectral", "random")
NONLINKS = ("tied", "free")


def as_graph(X):
    """``X`` as a :class:`~pyro_memo.data.Graph`: a ``Graph`` as given, a networkx graph by
    :func:`~pyro_memo.data.from_networkx`, anything else as an ``(N, N)`` adjacency matrix by
    :func:`~pyro_memo.data.from_adjacency` (whose checks raise the errors)."""
    if isinstance(X, Graph):
        return X
    if hasattr(X, "nodes") and hasattr(X, "edges") and hasattr(X, "is_directed"):  # networkx, not imported
        return from_networkx(X)
    return from_adjacency(X)


def _check_positive_pair(name, value, what):
    """Raise :class:`ValueError` naming ``name`` unless ``value`` is a tuple or list of two positive numbers
    (``what`` says what the pair is)."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name} must be a pair {what}; got {value!r}")
    for number in value:
        _check_real(name, number, positive=True)


class HDPCommunities(ClusterMixin, BaseEstimator):
    """The assortative HDP relational model (mixed-membership communities; Kim, Gopalan, Blei &
    Sudderth 2013) with a truncation of ``n_components`` communities, fitted by memoized inference
    (:class:`~pyro_memo.relational.MemoizedRelational`), as a scikit-learn clusterer of the nodes
    of a graph, used like ``SpectralClustering(affinity="precomputed")``.

    ``X`` is the graph: an ``(N, N)`` adjacency matrix (a numpy array or any scipy.sparse matrix;
    every nonzero entry ``(i, j)`` or ``(j, i)`` is a link, so a directed matrix is symmetrised,
    weights are ignored and the diagonal is dropped, as :func:`~pyro_memo.data.from_adjacency`
    reads it), a :class:`~pyro_memo.data.Graph` (its unobserved pairs, e.g. those
    :func:`~pyro_memo.data.split_pairs` held out, stay out of the fit; its labels are ignored) or a
    networkx graph (nodes numbered ``0 .. N-1`` in ``graph.nodes`` order,
    :func:`~pyro_memo.data.from_networkx`). A non-square matrix, negative, NaN or infinite entries and
    a graph without links raise a :class:`ValueError`.

    :param int n_components: truncation level ``K`` (an upper bound on the communities; moves may
        change it, see ``n_components_``).
    :param float alpha: membership concentration.
    :param float gamma: top-level concentration.
    :param tau: ``(tau_a, tau_b)``, the Beta prior of each community's link probability.
    :param float eps: background link probability between nodes in different communities, in
        ``(0, 1)`` (fixed, as Kim et al. 2013; with ``learn_eps`` its start).
    :param bool learn_eps: learn ``eps`` by maximising the exact bound after every global step
        (empirical Bayes).
    :param alpha_prior: ``(s1, s2)``: learn ``alpha`` with a Gamma(s1, s2) prior (shape, rate) in
        place of the fixed ``alpha``; ``None``: fixed.
    :param str nonlinks: the non-linked pairs' roles: ``"tied"`` to the memberships (default) or
        ``"free"`` (Kim et al. 2013); see :class:`~pyro_memo.relational.MemoizedRelational`.
    :param str init: initial memberships: ``"spectral"`` (the graph's spectral embedding) or ``"random"``.
    :param int n_batches: fixed batches of source nodes of memoized inference; never more than ``N``.
    :param str moves: comma-separated community moves from ``"birth"``, ``"delete"``, ``"merge"``
        (these change the number of communities; with ``n_components=1`` births grow them); ``None``
        for none.
    :param dict move_options: keyword arguments per move of ``moves``, e.g. ``{"birth": {"min_nodes": 10}}``
        (see :mod:`pyro_memo.relational.moves`); ``None``: their defaults.
    :param int max_iter: maximum laps.
    :param float tol: stop when the bound's relative change over a lap is below this.
    :param random_state: seeds the batches, the initial memberships, the batch order and the moves: an
        int in ``[0, 2**32 - 1]``, a numpy ``RandomState`` or ``Generator`` (a seed is drawn from it), or
        ``None``; anything else (a negative int) is a :class:`ValueError` naming ``random_state``.
    :param str dtype: ``"float64"`` or ``"float32"``, the dtype of the variational math.
    :param str local_dtype: ``"float32"``: mixed precision, the batches' pairs (local step) in float32
        against globals, memo and bound in ``dtype`` (see :class:`~pyro_memo.engine.MemoizedDriver`);
        ``None`` (default): ``dtype`` throughout.
    :param int threads: the most intra-op threads torch may use; each fit times one thread against this
        many and keeps the faster, and restores torch's setting afterwards (``None``: torch's setting).

    The relational model has no sparse responsibilities (no ``sparse_L``): a linked pair's roles
    are already one number per community.

    :ivar posterior_: the fitted posterior (:class:`~pyro_memo.relational.TiedRelationalPosterior`,
        or :class:`~pyro_memo.relational.RelationalPosterior` with ``nonlinks="free"``).
    :ivar memberships_: ``(N, n_components_)`` posterior-mean membership proportions :math:`E[\\pi_{ik}]`
        over the explicit communities, renormalised to sum to 1 (the tail's mass spread in proportion,
        as :meth:`~pyro_memo.relational.RelationalPosterior.link_probability` does).
    :ivar labels_: ``(N,)`` each node's dominant community, the argmax of its row of ``memberships_``.
    :ivar link_probabilities_: ``(n_components_,)`` each community's expected link probability :math:`E[w_k]`.
    :ivar community_weights_: ``(n_components_,)`` top-level expected weights :math:`E[\\beta_k]`.
    :ivar float eps_: the background link probability of the fit (``eps``, or its learnt value).
    :ivar int n_components_: number of fitted communities, the columns of ``memberships_``
        (``n_components`` unless moves changed it; a community may hold little mass, see
        ``community_weights_``).
    :ivar float bound_: the fit's objective, the exact variational bound (total nats).
    :ivar int n_iter_: laps run.
    :ivar bool converged_: whether the bound's relative change fell below ``tol``; when it did not,
        :meth:`fit` warns with :class:`~pyro_memo.estimator.EstimatorConvergenceWarning` (both
        :class:`~pyro_memo.ConvergenceWarning` and scikit-learn's ``ConvergenceWarning``).
    :ivar int n_features_in_: ``N``, the number of nodes of the graph seen in :meth:`fit`.

    A fitted estimator pickles (``pickle`` / ``joblib``) and the copy predicts exactly as the original.
    """

    def __init__(self, n_components=10, alpha=1.0, gamma=5.0, tau=(1.0, 1.0), eps=1e-4, learn_eps=False,
                 alpha_prior=None, nonlinks="tied", init="spectral", n_batches=1, moves=None, move_options=None,
                 max_iter=50, tol=1e-7, random_state=None, dtype="float64", local_dtype=None, threads=None):
        self.n_components = n_components
        self.alpha = alpha
        self.gamma = gamma
        self.tau = tau
        self.eps = eps
        self.learn_eps = learn_eps
        self.alpha_prior = alpha_prior
        self.nonlinks = nonlinks
        self.init = init
        self.n_batches = n_batches
        self.moves = moves
        self.move_options = move_options
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.dtype = dtype
        self.local_dtype = local_dtype
        self.threads = threads

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = True  # X is (N, N), as SpectralClustering(affinity="precomputed")
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------ parameters
    def _check_params(self):
        """Raise :class:`ValueError` naming the first bad parameter; return the move names."""
        _check_int("n_components", self.n_components)
        _check_int("max_iter", self.max_iter)
        _check_int("n_batches", self.n_batches)
        for name in ("alpha", "gamma"):
            _check_real(name, getattr(self, name), positive=True)
        _check_positive_pair("tau", self.tau, "(tau_a, tau_b) of the link probabilities' Beta prior")
        _check_real("eps", self.eps, positive=True)
        if self.eps >= 1:
            raise ValueError(f"eps must lie in (0, 1) (the background link probability); got {self.eps!r}")
        as_bool(self.learn_eps, "learn_eps")
        if self.alpha_prior is not None:
            _check_positive_pair("alpha_prior", self.alpha_prior, "(s1, s2) of a Gamma prior or None")
        _check_real("tol", self.tol, positive=False)
        _check_choice("nonlinks", self.nonlinks, NONLINKS)
        _check_choice("init", self.init, INITS)
        _check_choice("dtype", self.dtype, DTYPES)
        if self.local_dtype is not None:
            _check_choice("local_dtype", self.local_dtype, DTYPES)
        check_threads(self.threads)
        return _check_moves(self.moves, self.move_options, RELATIONAL_MOVES)

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None):
        """Fit the model to the graph ``X`` (an ``(N, N)`` adjacency matrix, a
        :class:`~pyro_memo.data.Graph` or a networkx graph); ``y`` is ignored.

        :returns: ``self``.
        """
        moves = self._check_params()
        graph = as_graph(X)
        if graph.num_edges == 0:
            raise ValueError(f"{type(self).__name__}.fit: the graph has no links ({graph.num_nodes} nodes); "
                             f"the model needs at least one")
        seed = fit_seed(self.random_state)
        driver = MemoizedRelational(K=self.n_components, alpha=float(self.alpha), gamma=float(self.gamma),
                                    tau=tuple(float(t) for t in self.tau), eps=float(self.eps),
                                    learn_eps=bool(self.learn_eps), alpha_prior=self.alpha_prior,
                                    nonlinks=self.nonlinks, init=self.init, laps=self.max_iter, tol=float(self.tol),
                                    seed=seed, dtype=getattr(torch, self.dtype), local_dtype=self.local_dtype,
                                    threads=self.threads, moves=moves, move_options=self.move_options)
        result = driver.fit(graph, min(self.n_batches, graph.num_nodes))
        post = result.posterior
        memberships = post.memberships()
        memberships = (memberships / memberships.sum(1, keepdim=True)).cpu().numpy()
        fitted = dict(posterior_=post, memberships_=memberships, labels_=memberships.argmax(1),
                      link_probabilities_=post.link_probabilities().cpu().numpy(),
                      community_weights_=post.expected_beta()[:-1].cpu().numpy(), eps_=float(post.eps),
                      n_components_=int(post.K), bound_=float(result.elbo), n_iter_=len(result.elbo_trace),
                      converged_=bool(result.converged), n_features_in_=int(graph.num_nodes))
        commit_fit(self, fitted)  # all at once: an interrupted fit leaves the previous one whole
        warn_unconverged(self)
        return self

    # ------------------------------------------------------------- read-outs
    def predict_link_proba(self, pairs):
        """Predictive probability of a link for each node pair of the fitted graph: ``(M,)`` for
        ``pairs`` ``(M, 2)`` of node ids in ``[0, n_features_in_)``, two distinct nodes a pair, under
        the posterior means (:meth:`~pyro_memo.relational.RelationalPosterior.link_probability`, the
        quantity :func:`~pyro_memo.relational.link_prediction` scores).

        :raises ValueError: on ids out of range, a pair of one node twice, or a shape other than ``(M, 2)``.
        """
        check_is_fitted(self)
        pairs = np.asarray(pairs)
        if pairs.dtype == object:
            raise ValueError("pairs must be an (M, 2) array of integer node ids")
        return self.posterior_.link_probability(pairs).cpu().numpy()
