"""The gap between the memoized relational bound and the true ELBO of its guide, in closed form.

The relational bound (:mod:`pyro_memo.posterior.relational`) is exact in every term but one: each
node's membership prior :math:`\\pi_i \\sim \\mathrm{Dir}(\\alpha\\beta)` has its expected log
normaliser replaced by the HDP surrogate :math:`K\\log\\alpha + \\sum_{k \\le K+1} E_q\\log\\beta_k`,
with the nodes playing the HDP's documents. So the gap is the HDP topic model's
(:func:`pyro_memo.bridge.normaliser_gap`) with ``N`` documents, unchanged: Pyro's
``Trace_ELBO`` of :class:`~pyro_memo.models.HDPRelationalGuide` estimates the bound plus this gap,
provided the bound's pair terms are those of the guide's factors under the same globals.
"""

from .hdp_gap import expected_normaliser_gap

__all__ = ["relational_normaliser_gap"]


def relational_normaliser_gap(posterior):
    """``ELBO_true - bound`` of a :class:`~pyro_memo.posterior.relational.RelationalPosterior`: the
    HDP normaliser gap of its ``N`` nodes (a latent ``alpha`` is averaged over ``q(alpha)``)."""
    return expected_normaliser_gap(posterior.rho, posterior.omega, posterior.alpha, posterior.N)
