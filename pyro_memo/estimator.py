"""A scikit-learn estimator for Dirichlet-process mixtures, fitted by memoized VB
(Hughes & Sudderth 2013) or full-batch coordinate ascent (Blei & Jordan 2006)."""

import copy
import numbers
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClusterMixin, DensityMixin
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6: the same checks were an estimator method

    def validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)


from .engine.driver import ConvergenceWarning
from .engine.moves import make_moves
from .engine.threads import check_threads
from .families import FAMILIES, ConjugateFamily, check_sparse_candidates, get_family
from .inference import FullBatchVB, MemoizedVB, vb_log_predictive
from .inference.moves import MOVES

ALGORITHMS = ("memo", "vb")
INITS = ("kmeans++", "random")
DTYPES = ("float32", "float64")


#: what ``validate_data(..., reset=True)`` records about the training input
INPUT_ATTRIBUTES = ("n_features_in_", "feature_names_in_")
#: fitted attributes that do not end in an underscore
PRIVATE_FITTED = ("_label_of_component", "_n_features_out")


def _is_fitted_attribute(name):
    """Whether ``name`` is state a fit sets (scikit-learn's rule: it ends in ``_`` and does not start with
    ``__``) rather than a parameter or other state."""
    return (name.endswith("_") and not name.startswith("__")) or name in PRIVATE_FITTED


def input_attributes(trial):
    """The input attributes ``validate_data`` set on ``trial`` (a copy of the estimator being fitted)."""
    return {name: getattr(trial, name) for name in INPUT_ATTRIBUTES if hasattr(trial, name)}


def commit_fit(estimator, fitted):
    """Replace ``estimator``'s fitted attributes by ``fitted`` in one step (one assignment of its
    ``__dict__``): a fit that fails or is interrupted (:class:`KeyboardInterrupt`) before this point
    leaves the previous fit whole, or the estimator unfitted; none of an earlier fit's attributes
    outlives this one."""
    state = {k: v for k, v in vars(estimator).items() if not _is_fitted_attribute(k)}
    state.update(fitted)
    estimator.__dict__ = state


class EstimatorConvergenceWarning(ConvergenceWarning, SklearnConvergenceWarning):
    """The estimators' warning that a fit stopped at ``max_iter`` before converging: both
    :class:`pyro_memo.ConvergenceWarning` and scikit-learn's ``ConvergenceWarning``, so either's
    warning filters catch it."""


#: the largest seed scikit-learn's ``check_random_state`` (numpy's ``RandomState``) takes
MAX_RANDOM_STATE = 2**32 - 1


def fit_seed(random_state):
    """The seed a fit hands its driver, drawn from ``random_state`` as scikit-learn's ``check_random_state``
    does (so an int gives the fit it always gave): ``None`` (numpy's global generator), an int in
    ``[0, 2**32 - 1]``, a numpy ``RandomState``, or a numpy ``Generator`` (a seed drawn from it, advancing it).

    :raises ValueError: naming ``random_state`` for anything else (a negative int, a bool, a float), not
        numpy's "Seed must be between 0 and 2**32 - 1".
    """
    bound = np.iinfo(np.int32).max
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(bound))
    ok = random_state is None or isinstance(random_state, np.random.RandomState) or (
        isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_))
        and 0 <= random_state <= MAX_RANDOM_STATE)
    if not ok:
        raise ValueError(f"random_state must be None, an int in [0, 2**32 - 1], a numpy RandomState or a numpy "
                         f"Generator; got {random_state!r}")
    return int(check_random_state(random_state).randint(bound))


def warn_unconverged(estimator):
    """Warn (:class:`~pyro_memo.estimator.EstimatorConvergenceWarning`) when ``estimator.converged_`` is false, as
    scikit-learn's mixtures do."""
    if not estimator.converged_:
        warnings.warn(f"{type(estimator).__name__} stopped at max_iter={estimator.max_iter} laps before its "
                      f"objective's relative change fell below tol={estimator.tol}; raise max_iter or tol",
                      EstimatorConvergenceWarning, stacklevel=3)


class DPMixture(ClusterMixin, DensityMixin, BaseEstimator):
    """Truncated Dirichlet-process mixture with a conjugate observation family, as a
    scikit-learn clusterer and density estimator.

    The variational posterior is the truncated stick-breaking one of Blei & Jordan 2006 (§3);
    ``algorithm="memo"`` fits it by memoized online VB over fixed batches (Hughes & Sudderth
    2013, Alg. 1, with optional birth / merge / delete moves), ``algorithm="vb"`` by full-batch
    coordinate ascent. Both maximise the same exact ELBO (Hughes & Sudderth 2013, eq. 8).

    Cluster labels number the fitted components by decreasing number of training items they
    own (argmax of the responsibilities), so the training labels are ``0 .. m-1`` with no gaps;
    column ``j`` of :meth:`predict_proba` and ``weights_[j]`` belong to the component labelled
    ``j``, which is component ``component_of_label_[j]`` of ``posterior_``.

    Any real-valued input (float32, float64, integers) is converted to the working ``dtype``
    before it reaches the posterior, so float32 and float64 copies of the same data give the
    same labels and (to rounding) the same densities. ``check_estimator`` passes with no
    expected failures.

    :param int n_components: truncation level ``K``: an upper bound on the number of clusters, except that
        ``moves`` (births) may grow the fit beyond it (``n_components_`` is the fitted number).
    :param family: a family name (one of :data:`~pyro_memo.families.FAMILIES`, whose default
        prior is scaled to the training data by ``from_data``) or a
        :class:`~pyro_memo.ConjugateFamily` with its own prior.
    :param float alpha: DP concentration.
    :param str algorithm: ``"memo"`` (:class:`~pyro_memo.MemoizedVB`) or ``"vb"``
        (:class:`~pyro_memo.FullBatchVB`).
    :param int n_batches: batches of memoized VB; default ``min(10, n_samples)``, and never more
        than ``n_samples``. Ignored by ``"vb"``.
    :param str moves: memoized VB only: comma-separated moves, e.g. ``"birth,merge,delete"``
        (these change the number of components); ``None`` for none.
    :param dict move_options: keyword arguments per move of ``moves``, e.g. ``{"birth": {"targets": 4}}``
        (see :class:`~pyro_memo.BirthMove`, :class:`~pyro_memo.MergeMove`, :class:`~pyro_memo.DeleteMove`);
        ``None``: their defaults.
    :param int max_iter: maximum laps (iterations).
    :param float tol: stop when the ELBO's relative change over a lap is below this.
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param random_state: seeds the initialisation and the batch order: an int in ``[0, 2**32 - 1]``, a
        numpy ``RandomState`` or ``Generator`` (a seed is drawn from it), or ``None``; anything else
        (a negative int) is a :class:`ValueError` naming ``random_state``.
    :param str dtype: ``"float64"`` or ``"float32"``, the dtype of the variational math.
    :param str local_dtype: ``"float32"``: mixed precision, the local step (responsibilities and
        batch summaries) in float32 while the globals, the memo and the ELBO stay in ``dtype``
        (see :class:`~pyro_memo.engine.MemoizedDriver`); ``None`` (default): ``dtype`` throughout.
    :param dict prior: prior hyperparameters replacing the family's defaults, e.g.
        ``{"kappa": 0.1, "nu": 30.0}`` (see :meth:`~pyro_memo.ConjugateFamily.with_prior`:
        a number fills a vector; ``None`` keeps the defaults).
    :param float prior_scale: multiplies the family's prior covariance scale (its ``spread_key``;
        bnpy's ``sF``; 1 keeps it). See the user guide's "Choosing K, alpha and the priors".
    :param int threads: the most intra-op threads torch may use; each fit times one thread against this
        many and keeps the faster, and restores torch's setting afterwards (``None``: torch's setting).
    :param int sparse_L: keep only each item's ``sparse_L`` largest responsibilities while fitting,
        renormalised over them (Hughes & Sudderth 2016): faster local steps for large
        ``n_components``, and ``elbo_`` is the exact ELBO of that sparse posterior. ``None`` (the
        default) or ``sparse_L >= n_components`` keeps them all. :meth:`predict_proba` stays dense.
    :param int sparse_candidates: with ``sparse_L``, search each item's components among its carried
        candidates plus this many random ones per group instead of all ``n_components`` (see
        :class:`~pyro_memo.MemoizedVB`); ``None`` (the default): among all.

    A fitted estimator pickles (``pickle`` / ``joblib``) and the copy predicts exactly as the
    original; :func:`~pyro_memo.save_model` ``(path, est)`` writes the versioned model file
    ``pyro-memo predict`` reads.

    :ivar posterior_: the fitted :class:`~pyro_memo.DPMixturePosterior`.
    :ivar summary_: the whole-data :class:`~pyro_memo.Summary` (for the predictive).
    :ivar int n_components_: number of fitted components, the columns of :meth:`predict_proba`
        (``n_components`` unless moves changed it).
    :ivar weights_: expected mixture weights :math:`E_q[w_k]`, in label order.
    :ivar means_: for the Gaussian families, ``(n_components_, n_features)`` posterior means of the
        component means, in label order; the other families give their own point estimates instead
        of ``means_`` and ``covariances_`` (``rates_`` for Poisson, ``probabilities_`` for Bernoulli and
        multinomial): the family's :meth:`~pyro_memo.ConjugateFamily.point_estimates`, each as ``<name>_``.
    :ivar covariances_: for the Gaussian families, ``(n_components_, n_features, n_features)``
        covariances :math:`E_q[\\Lambda_k]^{-1}` (the known covariance for the known-covariance
        families), in label order.
    :ivar labels_: training labels.
    :ivar component_of_label_: posterior component index of each label.
    :ivar float elbo_: exact ELBO of the fit (total nats); ``lower_bound_`` is the same number,
        under scikit-learn's mixtures' name.
    :ivar int n_iter_: laps run.
    :ivar bool converged_: whether the ELBO's relative change fell below ``tol``; when it did not,
        :meth:`fit` warns with :class:`~pyro_memo.estimator.EstimatorConvergenceWarning` (both
        :class:`~pyro_memo.ConvergenceWarning` and scikit-learn's ``ConvergenceWarning``).
    :ivar int n_features_in_: number of features seen in :meth:`fit`.

    The read-outs work in the ``dtype`` of the fit: changing ``dtype`` with ``set_params`` affects
    the next :meth:`fit`, not a fitted estimator.
    """

    def __init__(self, n_components=20, family="gauss", alpha=1.0, algorithm="memo", n_batches=None,
                 moves=None, max_iter=100, tol=1e-6, init="kmeans++", random_state=None, dtype="float64",
                 prior=None, prior_scale=1.0, local_dtype=None, threads=None,
                 sparse_L=None, sparse_candidates=None, move_options=None):
        self.n_components = n_components
        self.family = family
        self.alpha = alpha
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.moves = moves
        self.move_options = move_options
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.random_state = random_state
        self.dtype = dtype
        self.prior = prior
        self.prior_scale = prior_scale
        self.local_dtype = local_dtype
        self.threads = threads
        self.sparse_L = sparse_L
        self.sparse_candidates = sparse_candidates

    # ------------------------------------------------------------ parameters
    def _check_params(self):
        """Raise :class:`ValueError` naming the first bad parameter."""
        _check_int("n_components", self.n_components)
        _check_int("max_iter", self.max_iter)
        if self.n_batches is not None:
            _check_int("n_batches", self.n_batches)
        if self.sparse_L is not None:
            _check_int("sparse_L", self.sparse_L)
        check_sparse_candidates(self.sparse_candidates, self.sparse_L)
        _check_real("alpha", self.alpha, positive=True)
        _check_real("tol", self.tol, positive=False)
        _check_choice("algorithm", self.algorithm, ALGORITHMS)
        _check_choice("init", self.init, INITS)
        _check_choice("dtype", self.dtype, DTYPES)
        if not isinstance(self.family, ConjugateFamily):
            _check_choice("family", self.family, sorted(FAMILIES))
        _check_real("prior_scale", self.prior_scale, positive=True)
        check_threads(self.threads)
        if self.prior is not None and not isinstance(self.prior, dict):
            raise ValueError(f"prior must be a dict of hyperparameters or None; got {self.prior!r}")
        if self.moves is not None and not isinstance(self.moves, str):
            raise ValueError(f"moves must be a comma-separated string or None; got {self.moves!r}")
        if self.moves and self.algorithm != "memo":
            raise ValueError(f"moves need algorithm='memo'; got algorithm={self.algorithm!r}")
        _check_move_options(self.move_options, self.moves, MOVES)

    def _np_dtype(self):
        return np.dtype(self.dtype)

    def _read_dtype(self):
        """The dtype of the fit's variational math, read off its posterior, whatever ``dtype`` says now."""
        return torch.empty(0, dtype=self.posterior_.dtype).numpy().dtype

    def _make_family(self, x):
        """The family at the working dtype: the given object, or the named one's default prior for ``x``."""
        dtype = getattr(torch, self.dtype)
        if isinstance(self.family, ConjugateFamily):
            family = self.family.to(dtype=dtype)
        else:
            family = get_family(self.family).from_data(x, dtype=dtype)
        if float(self.prior_scale) != 1.0 and family.spread_key is None:
            raise ValueError(f"prior_scale={self.prior_scale!r}: the {family.name} family has no spread "
                             f"hyperparameter to scale; leave prior_scale=1 and set its priors "
                             f"({', '.join(family.prior_names)}) with prior={{...}}")
        try:
            return family.with_prior(float(self.prior_scale), scale_name="prior_scale=", **(self.prior or {}))
        except ValueError as err:
            given = ", ".join(f"{key!r}: ..." for key in self.prior or {})
            raise ValueError(f"prior={{{given}}}: {err}") from None

    def _make_algorithm(self, family, n_samples):
        """``(driver, num_batches)`` for the chosen algorithm, seeded from ``random_state``."""
        seed = fit_seed(self.random_state)
        common = dict(alpha=float(self.alpha), tol=float(self.tol), init=self.init, seed=seed,
                      local_dtype=self.local_dtype, threads=self.threads,
                      sparse_L=self.sparse_L, sparse_candidates=self.sparse_candidates)
        if self.algorithm == "vb":
            return FullBatchVB(family, self.n_components, max_iter=self.max_iter, **common), None
        batches = min(10, n_samples) if self.n_batches is None else min(self.n_batches, n_samples)
        driver = MemoizedVB(family, self.n_components, laps=self.max_iter, moves=self.moves or (),
                            move_options=self.move_options, **common)
        return driver, batches

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None):
        """Fit the variational posterior to ``X`` (``(n_samples, n_features)``); ``y`` is ignored.

        :returns: ``self``.
        """
        self._check_params()
        trial = copy.copy(self)  # validate_data sets n_features_in_ there: self changes only on success
        X = validate_data(trial, X, dtype=self._np_dtype())
        x = torch.tensor(np.ascontiguousarray(X))  # a reversed view (X[::-1]) as a copy: torch cannot wrap it
        family = self._make_family(x)
        driver, batches = self._make_algorithm(family, X.shape[0])
        result = driver.fit(x) if batches is None else driver.fit(x, batches)
        fitted = input_attributes(trial)
        fitted.update(posterior_=result.posterior, summary_=result.summary, elbo_=float(result.elbo),
                      lower_bound_=float(result.elbo), n_iter_=len(result.elbo_trace),
                      converged_=bool(result.converged))
        fitted.update(self._labels(result.posterior, x))
        commit_fit(self, fitted)
        warn_unconverged(self)
        return self

    @staticmethod
    def _labels(posterior, x):
        """Order the components by the training items they own: ``labels_``, ``weights_`` and the
        family's point estimates (``means_``, ``covariances_``, ...) in that order, as a dict."""
        winners = posterior.responsibilities(x).argmax(-1).numpy()
        owned = np.bincount(winners, minlength=posterior.K)
        order = np.argsort(-owned, kind="stable")
        label_of_component = np.argsort(order)
        out = {"n_components_": int(posterior.K), "component_of_label_": order,
               "_label_of_component": label_of_component,
               "weights_": posterior.expected_weights().numpy()[order]}
        for name, value in posterior.family.point_estimates(posterior.component).items():
            out[f"{name}_"] = value.numpy()[order]
        out["labels_"] = label_of_component[winners]
        return out

    # ------------------------------------------------------------- read-outs
    def _validated(self, X):
        """``X`` checked as the training data were: scikit-learn's checks, then the family's (its
        support, e.g. counts for Poisson, and a magnitude whose statistics cannot overflow)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=self._read_dtype(), reset=False)
        return self.posterior_.family.check_data(torch.tensor(np.ascontiguousarray(X)))

    def predict_proba(self, X):
        """Responsibilities :math:`\\hat r_{nk}` (Hughes & Sudderth 2013, eq. 9) in label order:
        ``(n_samples, n_labels)``, rows summing to 1."""
        x = self._validated(X)
        return self.posterior_.responsibilities(x).numpy()[:, self.component_of_label_]

    def predict(self, X):
        """The label of the most responsible component for each row of ``X``."""
        x = self._validated(X)
        return self._label_of_component[self.posterior_.responsibilities(x).argmax(-1).numpy()]

    def score_samples(self, X):
        """Log posterior predictive density of each row of ``X`` (Blei & Jordan 2006, §4; see
        :func:`~pyro_memo.vb_log_predictive`)."""
        x = self._validated(X)
        return vb_log_predictive(self.posterior_, self.summary_, x).numpy()

    def score(self, X, y=None):
        """Mean log predictive density of the rows of ``X``."""
        return float(np.mean(self.score_samples(X)))


def _check_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")


def _check_real(name, value, positive):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
            or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{name} must be a finite {kind} number; got {value!r}")


def _check_move_options(move_options, moves, registry):
    """``move_options`` must be ``None`` or ``{move name: {keyword: value}}`` for moves ``moves`` names, each
    keyword one its move in ``registry`` takes (the moves are made once to check; errors name
    ``move_options``)."""
    if move_options is None:
        return
    if not isinstance(move_options, dict) or not all(isinstance(v, dict) for v in move_options.values()):
        raise ValueError(f"move_options must be a dict of keyword dicts per move name (e.g. "
                         f"{{'birth': {{...}}}}) or None; got {move_options!r}")
    if move_options and not moves:
        raise ValueError(f"move_options configure the moves given by name; moves is {moves!r} (e.g. "
                         f"moves='birth,merge,delete')")
    try:
        make_moves(moves, registry, **move_options)
    except (TypeError, ValueError) as error:
        raise ValueError(f"move_options: {error}") from None


def _check_moves(moves, move_options, registry):
    """The move names of ``moves`` (``None``: no moves, ``()``; else a comma-separated string of names in
    ``registry``) with ``move_options`` checked against them (:func:`_check_move_options`); errors name
    ``moves`` or ``move_options``."""
    if moves is None:
        _check_move_options(move_options, moves, registry)
        return ()
    if not isinstance(moves, str):
        raise ValueError(f"moves must be a comma-separated string or None; got {moves!r}")
    names = [m.strip() for m in moves.split(",") if m.strip()]
    unknown = [m for m in names if m not in registry]
    if unknown:
        raise ValueError(f"moves must name moves among {list(registry)}; got {moves!r}")
    _check_move_options(move_options, names, registry)
    return names


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {value!r}")
