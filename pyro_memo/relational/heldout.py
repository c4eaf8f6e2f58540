"""Held-out link prediction for the assortative HDP relational model: score the pairs
:func:`~pyro_memo.data.split_pairs` held out of a fit by their predictive link probabilities."""

from ..metrics import link_auc, link_log_likelihood

__all__ = ["link_prediction"]


def link_prediction(posterior, pairs, labels):
    """Score held-out ``pairs`` ``(M, 2)`` with ``labels`` ``(M,)`` (1: link, 0: non-link) under
    ``posterior`` (a :class:`~pyro_memo.posterior.relational.RelationalPosterior` fitted without
    them), by :meth:`~pyro_memo.relational.RelationalPosterior.link_probability`.

    :returns: ``{"auc": ..., "log_lik": ...}``: the area under the ROC curve
        (:func:`~pyro_memo.metrics.link_auc`) and the mean Bernoulli log-likelihood per held-out
        pair (:func:`~pyro_memo.metrics.link_log_likelihood`).
    :raises ValueError: on pairs and labels of different lengths, or without both links and non-links.
    """
    probs = posterior.link_probability(pairs)
    return {"auc": link_auc(probs, labels), "log_lik": link_log_likelihood(probs, labels)}
