"""Fit a recognised Pyro DP-mixture model with full-batch coordinate-ascent VB."""

from .guide import DPMixtureGuide


def fit_vb(model, *args, K=None, guide=None, max_iter=200, tol=1e-8, init="kmeans++", seed=0, **kwargs):
    """Recognise ``model``, run full-batch VB on its data and store the result in ``guide``.

    :param model: a DP-mixture Pyro model (see :mod:`pyro_memo.bridge.recognition`).
    :param args: the model's positional arguments (the data among them).
    :param int K: truncation level (default ``T - 1``).
    :param DPMixtureGuide guide: an existing guide to continue from, else a new one.
    :param int max_iter: iteration limit.
    :param float tol: relative ELBO tolerance.
    :param kwargs: the model's keyword arguments.
    :returns: a :class:`~pyro_memo.inference.FitResult` whose ``guide`` attribute holds
        the fitted guide (its parameters are in Pyro's param store).
    """
    guide = guide or DPMixtureGuide(model, K=K, init=init, seed=seed)
    guide.setup(*args, **kwargs)
    x = guide.spec.data(args, kwargs)
    result = guide.vb(max_iter=max_iter, tol=tol).fit(x, posterior=guide.posterior)
    guide.set_posterior(result.posterior)
    result.guide = guide
    return result
