"""Fit a recognised Pyro model (DP mixture or HDP topic model) with memoized or full-batch VB."""

import inspect
import warnings
from dataclasses import dataclass, field

import torch

from ..checks import as_positive_int, as_seed
from ..engine.driver import ConvergenceWarning
from .guide import DPMixtureGuide
from .recognition import recognize_model
from .structure import ModelStructureError


def _warn_unconverged(converged, limit, what):
    if not converged:
        warnings.warn(f"the fit stopped at its limit of {limit} {what} before the ELBO converged; raise the "
                      f"limit or loosen tol", ConvergenceWarning, stacklevel=3)


def _exact_elbo(result, x):
    """Make ``result.elbo`` the exact ELBO of the returned posterior: the local step (responsibilities,
    what the guide computes) redone under the final globals."""
    _, summary = result.posterior.local_step(x)
    result.summary = summary
    result.final_elbo = float(result.posterior.elbo(summary))
    return result


@dataclass
class TopicFitResult:
    """Outcome of fitting a recognised Pyro HDP topic model.

    :ivar posterior: the fitted :class:`~pyro_memo.topics.HDPPosterior` (as stored in the param store).
    :ivar float elbo: the exact HDP bound of ``guide``: the final globals with every
        document's local parameters re-optimised under them (at least as high as the memo's
        bound, ``elbo_trace[-1]``, up to the document-level local optima).
    :ivar list elbo_trace: the memoized driver's bound after every lap.
    :ivar guide: the fitted :class:`~pyro_memo.HDPGuide`.
    :ivar float normaliser_gap: the model's ELBO minus ``elbo``, in closed form
        (:func:`~pyro_memo.bridge.normaliser_gap`): ``elbo + normaliser_gap`` is what
        Pyro's ``Trace_ELBO`` of ``guide`` estimates.
    """

    posterior: object
    elbo: float
    elbo_trace: list
    guide: object
    normaliser_gap: float
    lap_seconds: list = field(default_factory=list)
    converged: bool = False
    fit: object = None


def _fit_hdp(spec, model, args, kwargs, num_batches, laps, tol, seed, guide, callback):
    """Fit a recognised HDP topic model with :class:`~pyro_memo.topics.MemoizedHDP` over groups of documents."""
    import scipy.sparse as sp

    from ..inference import SummaryCache
    from ..topics import MemoizedHDP, from_counts
    from .hdp_gap import expected_normaliser_gap
    from .hdp_guide import HDPGuide

    guide = guide or HDPGuide(model, seed=seed)
    if not isinstance(guide, HDPGuide):
        raise TypeError(f"an HDP topic model needs a pyro_memo.HDPGuide; got {type(guide).__name__}")
    guide.adopt(spec, *args, **kwargs)
    doc, word = spec.tokens(args, kwargs)
    ones = torch.ones(len(doc)).numpy()
    matrix = sp.coo_matrix((ones, (doc.cpu().numpy(), word.cpu().numpy())), shape=(spec.num_docs, spec.V))
    driver = MemoizedHDP(K=spec.K, alpha=spec.alpha, gamma=spec.gamma, lam0=spec.lam0, laps=laps, tol=tol, seed=seed,
                         alpha_prior=spec.alpha_prior, gamma_prior=spec.gamma_prior, device=doc.device)
    fit = driver.fit(from_counts(matrix), num_batches, callback=callback)
    guide.set_posterior(fit.posterior)
    guide.record_data(*args, **kwargs)
    posterior = guide.posterior  # as the guide reads it back from the param store
    every = spec.batch(args, kwargs, docs=torch.arange(spec.num_docs))
    guide.doc_topic_counts, guide.memo = None, SummaryCache()
    guide.local_step(posterior, every)
    _, _, summary = guide.local_params(posterior, every)
    return TopicFitResult(posterior, float(posterior.elbo(summary)), list(fit.elbo_trace), guide,
                          expected_normaliser_gap(posterior.rho, posterior.omega, posterior.alpha, spec.num_docs),
                          list(fit.lap_seconds), bool(fit.converged), fit)


def _refuse_relational(spec, name):
    """Raise :class:`ModelStructureError` for a relational model: ``fit_vb`` and ``fit_memoized`` fit DP mixtures and
    HDP topic models; a relational model is fitted through SVI with its own guide (the error named the
    ``DPMixtureGuide`` the caller never chose)."""
    if spec is not None and spec.kind == "relational":
        raise ModelStructureError(f"{name} fits DP mixtures and HDP topic models; this model is an HDP relational "
                                  "model: fit it with SVI(model, pyro_memo.RelationalGuide(model), "
                                  "pyro_memo.ClosedFormOptimizer(), pyro_memo.MemoizedELBO()), one step per batch of "
                                  "nodes (pyro_memo.batch_pairs), or with pyro_memo.relational.MemoizedRelational")


def _model_name(model):
    return getattr(model, "__qualname__", None) or type(model).__name__


def _check_guide(model, guide, name):
    """Raise :class:`ValueError` unless ``guide`` (given to ``name``) is a guide of ``model``: a fit with a guide
    recognises and fits the guide's own model, so a guide of another model silently fitted that one, not
    ``model`` (another prior, another likelihood), and returned its ELBO."""
    if guide is None:
        return
    own = getattr(guide, "model", None)
    if own is None:
        raise TypeError(f"{name}'s guide must be a pyro_memo guide (DPMixtureGuide or HDPGuide); got "
                        f"{type(guide).__name__}")
    if own is not model and own != model:
        raise ValueError(f"{name}: the guide was built for another model ({_model_name(own)!r}, object "
                         f"{id(own):#x}) than the one passed ({_model_name(model)!r}, object {id(model):#x}); a fit "
                         f"with a guide fits the guide's model. Pass the guide's own model ({name}(guide.model, ...)) "
                         f"or leave guide out to start from {name}(model, ...)")


def _check_guide_K(guide, K, name):
    """Raise :class:`ValueError` if ``K`` is given with a :class:`DPMixtureGuide` of another truncation: the guide
    keeps its own ``K`` (its parameters have that many components), so ``K`` was silently ignored. A guide built
    without ``K`` that has not read its model yet takes this ``K``."""
    if K is None or not isinstance(guide, DPMixtureGuide):
        return
    K = as_positive_int(K, "K")
    if guide.K is None and guide.spec is None:
        guide.K = K
    elif guide.K != K:
        raise ValueError(f"{name}: K = {K}, but the guide was built with K = {guide.K}, and a guide keeps its "
                         f"truncation; build the guide with it, pyro_memo.DPMixtureGuide(model, K={K}), or leave K out")


#: each fit's own options (its other keyword arguments go to the model)
_FIT_OPTIONS = {"fit_vb": ("K", "guide", "max_iter", "tol", "init", "seed"),
                "fit_memoized": ("batches", "num_batches", "K", "guide", "laps", "tol", "seed", "shuffle", "callback",
                                 "overrelax")}


def _check_options(model, kwargs, name):
    """Raise :class:`ValueError` for a keyword argument that is the other fit's option (``laps`` given to
    ``fit_vb``, ``max_iter`` to ``fit_memoized``) and that the model does not take: it went to the model, and the
    error blamed the model ("tracing the model ... raised TypeError: model() got an unexpected keyword argument
    'laps'")."""
    other = "fit_memoized" if name == "fit_vb" else "fit_vb"
    try:
        params = inspect.signature(model).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    for key in kwargs:
        if key not in params and key in _FIT_OPTIONS[other]:
            raise ValueError(f"{name} has no option {key!r} (it is {other}'s), and the model takes no argument "
                             f"{key!r}; {name}'s options are {', '.join(_FIT_OPTIONS[name])} (its other keyword "
                             f"arguments go to the model)")


def _hdp_options(spec, K, batches, shuffle=True, init=None):
    """Refuse options an HDP fit cannot honour (none is silently ignored)."""
    if K is not None and as_positive_int(K, "K") != spec.K:
        raise ValueError(f"an HDP topic model's truncation is its own: K = {spec.K} (its stick plate); got K = {K}")
    if batches is not None:
        raise ValueError("an HDP fit takes num_batches (a seeded partition of the documents), not batches")
    if not shuffle:
        raise ValueError("an HDP fit visits its batches in a fresh random order every lap; shuffle=False is "
                         "not available")
    if init is not None and init != "kmeans++":
        raise ValueError("an HDP fit starts from a k-means of the documents; init is not available")


def fit_vb(model, *args, K=None, guide=None, max_iter=200, tol=1e-8, init="kmeans++", seed=0, **kwargs):
    """Recognise ``model``, run full-batch VB on its data and store the result in ``guide``.

    :param model: a DP-mixture Pyro model (see ``pyro_memo.bridge.recognition``).
    :param args: the model's positional arguments (the data among them). Full-batch VB fits every item the
        model's data hold: a subsample argument (a batch of ids, as an SVI loop passes) is ignored; for a fit
        in batches use :func:`~pyro_memo.fit_memoized`.
    :param int K: truncation level (default ``T - 1``); with ``guide``, the guide's own (another raises
        :class:`ValueError`).
    :param DPMixtureGuide guide: an existing guide of ``model`` to continue from (an :class:`~pyro_memo.HDPGuide`
        for an HDP topic model), else a new one (a guide built for another model raises :class:`ValueError`).
    :param int max_iter: iteration limit.
    :param float tol: relative ELBO tolerance.
    :param str init: ``"kmeans++"`` (default) or ``"random"`` initial responsibilities of a new guide
        (unused with ``guide``); an HDP topic model starts from a k-means of the documents and takes only
        ``"kmeans++"``.
    :param int seed: seed of a new guide's initialisation (unused with ``guide``); for an HDP topic model, of
        its initial topics and batch order.
    :param kwargs: the model's keyword arguments.
    :returns: a :class:`~pyro_memo.FitResult` whose ``guide`` attribute holds
        the fitted guide (its parameters are in Pyro's param store) and whose ``elbo`` is the exact
        ELBO of that guide (responsibilities re-optimised under the final globals); for an HDP topic
        model a :class:`~pyro_memo.bridge.TopicFitResult` (one batch of all documents, ``max_iter``
        laps). A model with a latent concentration ``alpha ~ Gamma(s1, s2)`` learns :math:`q(\\alpha)`: read
        ``result.posterior.expected_alpha()``.
    :warns ConvergenceWarning: when the fit stops at ``max_iter`` before the ELBO converged.
    """
    seed = as_seed(seed)
    _check_options(model, kwargs, "fit_vb")
    _check_guide(model, guide, "fit_vb")
    _check_guide_K(guide, K, "fit_vb")
    from .hdp_guide import HDPGuide

    spec = recognize_model(model, *args, **kwargs) if guide is None else None
    if guide is not None and not isinstance(guide, DPMixtureGuide):  # an HDP guide continues its topic model
        spec = guide.spec if getattr(guide, "spec", None) is not None else recognize_model(model, *args, **kwargs)
    _refuse_relational(spec, "fit_vb")
    if spec is not None and spec.kind == "hdp":
        _hdp_options(spec, K, None, init=init)
        result = _fit_hdp(spec, model, args, kwargs, 1, max_iter, tol, seed,
                          guide if isinstance(guide, HDPGuide) else None, None)
        _warn_unconverged(result.converged, max_iter, "laps (max_iter)")
        return result
    if guide is None:
        guide = DPMixtureGuide(model, K=K, init=init, seed=seed).adopt(spec)
    guide.setup(*args, **kwargs)
    guide.check_data(*args, **kwargs)
    x = guide.spec.data(args, kwargs)
    result = guide.vb(max_iter=max_iter, tol=tol).fit(x, posterior=guide.posterior)
    guide.set_posterior(result.posterior)
    result.guide = guide
    _exact_elbo(result, x)
    _warn_unconverged(result.converged, max_iter, "iterations (max_iter)")
    return result


def fit_memoized(model, *args, batches=None, num_batches=None, K=None, guide=None, laps=50, tol=1e-8,
                 seed=0, shuffle=True, callback=None, overrelax=None, **kwargs):
    """Recognise ``model`` and run memoized online VB on its data (Hughes & Sudderth 2013, §3).

    :param model: a DP-mixture Pyro model (see ``pyro_memo.bridge.recognition``).
    :param args: the model's positional arguments (the data among them).
    :param batches: optional list of index tensors, the fixed batches; by default the data
        are permuted once (``seed``) and cut into ``num_batches`` slices.
    :param int num_batches: ``B`` when ``batches`` is not given (default 10; with ``batches``, a
        :class:`ValueError`: the batches fix their number).
    :param int K: truncation level (default ``T - 1``); with ``guide``, the guide's own (another raises
        :class:`ValueError`).
    :param DPMixtureGuide guide: an existing guide of ``model`` to continue from, else a new one (a guide built
        for another model raises :class:`ValueError`).
    :param int laps: maximum passes through the data.
    :param float tol: relative ELBO tolerance per lap.
    :param int seed: seed of the batch order (and of the permutation).
    :param bool shuffle: a new random batch order every lap.
    :param callback: ``callback(lap, elbo, posterior)`` after every lap.
    :param overrelax: the DP mixture's over-relaxed batch steps (default on; ``False``: the exact steps
        :class:`MemoizedELBO` takes under ``SVI``); see :mod:`~pyro_memo.engine.overrelax`.
    :param kwargs: the model's keyword arguments.
    :returns: a :class:`~pyro_memo.FitResult`; ``result.guide`` holds the fitted
        guide, whose memo holds the per-batch summaries; ``result.elbo`` is the exact full-data
        ELBO of the returned posterior (``result.elbo_trace[-1]`` is the memo's bound).
    :warns ConvergenceWarning: when the fit stops at ``laps`` before the ELBO converged (not when a
        callback stops it).

    An HDP topic model (see ``pyro_memo.bridge.hdp_recognition``) is fitted by
    :class:`~pyro_memo.topics.MemoizedHDP` over ``num_batches`` groups of documents; ``K`` is
    the model's own truncation, ``batches`` and ``shuffle=False`` are refused, and the result is
    a :class:`~pyro_memo.bridge.TopicFitResult` whose guide is an :class:`~pyro_memo.HDPGuide`.
    """
    from .hdp_guide import HDPGuide

    seed = as_seed(seed)
    if batches is not None and num_batches is not None:
        raise ValueError(f"fit_memoized: give batches or num_batches, not both (the batches given fix their number; "
                         f"num_batches = {num_batches!r} would be ignored)")
    num_batches = 10 if num_batches is None else num_batches
    _check_options(model, kwargs, "fit_memoized")
    _check_guide(model, guide, "fit_memoized")
    _check_guide_K(guide, K, "fit_memoized")
    spec = guide.spec if guide is not None and guide.spec is not None else recognize_model(model, *args, **kwargs)
    _refuse_relational(spec, "fit_memoized")
    if spec.kind == "hdp" or isinstance(guide, HDPGuide):
        _hdp_options(spec, K, batches, shuffle)
        result = _fit_hdp(spec, model, args, kwargs, num_batches, laps, tol, seed, guide, callback)
        if callback is None:
            _warn_unconverged(result.converged, laps, "laps")
        return result
    if guide is None:
        guide = DPMixtureGuide(model, K=K, seed=seed).adopt(spec)
    from ..data_sources import ArrayBatches, IndexBatches
    from ..inference import MemoizedVB, SummaryCache
    from .structure import batch_key

    guide = guide or DPMixtureGuide(model, K=K, seed=seed)
    guide.setup(*args, **kwargs)
    guide.check_data(*args, **kwargs)
    x = guide.spec.data(args, kwargs)
    if batches is not None:
        source = IndexBatches(x, batches)
        index_sets = source.index_sets
    else:
        source = ArrayBatches(x, num_batches, shuffle_seed=seed)
        index_sets = [source.indices(b) for b in range(source.num_batches)]
    driver = MemoizedVB(guide.spec.family, guide.K, guide.spec.alpha, guide.sticks.truncation, laps=laps,
                        tol=tol, seed=seed, shuffle=shuffle, alpha_prior=guide.spec.alpha_prior,
                        overrelax=overrelax)
    result = driver.fit(source, posterior=guide.posterior, callback=callback)
    guide.set_posterior(result.posterior)
    guide.memo = SummaryCache()
    for b, summary in result.state.cache.batches.items():
        guide.memo.replace(batch_key(index_sets[b]), summary)
    result.guide = guide
    _exact_elbo(result, x)
    if callback is None or len(result.elbo_trace) >= laps:  # a callback's stop is the caller's budget
        _warn_unconverged(result.converged, laps, "laps")
    return result
