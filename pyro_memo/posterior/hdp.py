"""The HDP over groups of items, for any observation family (Hughes, Kim & Sudderth 2015;
Sudderth's HDP talk): top-level sticks ``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``
(``pyro_memo.allocation.hdp_sticks``), group-level Dirichlets ``q(pi_d) = Dir(theta_d)``,
item responsibilities, and one conjugate factor per component.

:class:`GroupedHDPPosterior` holds what every HDP shares (the group-level local step, the
sticks, the group terms of the bound); a subclass supplies the components: the topic model's
Dirichlet topics over word tokens (:class:`~pyro_memo.topics.HDPPosterior`) or any
:class:`~pyro_memo.ConjugateFamily` (:class:`HDPMixturePosterior`, e.g. images as
groups of Gaussian pixel features, the setting of Gomes, Welling & Perona 2008).
"""

import torch

from ..allocation.concentration import GammaConcentration, concentration_from_state, concentration_state
from ..allocation.hdp_sticks import expected_beta, fit_top_level, prior_sticks, top_level_objective
from ..families import SparseResponsibilities, family_from_state
from ..summaries import GroupSummary, entropy_per_component
from .base import VariationalPosterior
from .group_blocks import GroupBlocks, row_slices
from .relaxed_sweeps import RelaxedSweeps, group_weights


def log_dirichlet_norm(conc):
    """:math:`c(\\lambda) = \\log\\Gamma(\\sum_v\\lambda_v) - \\sum_v\\log\\Gamma(\\lambda_v)` over the last axis."""
    return torch.lgamma(conc.sum(-1)) - torch.lgamma(conc).sum(-1)


def expected_log_dirichlet(conc):
    """:math:`E[\\log\\phi_v] = \\psi(\\lambda_v) - \\psi(\\sum\\lambda)` over the last axis."""
    return torch.digamma(conc) - torch.digamma(conc.sum(-1, keepdim=True))


def group_terms(counts, theta, e_log_pi, sizes=None):
    """The group-level terms of the bound that do not depend on the globals:
    :math:`\\sum_d [\\sum_k (N_{dk} - \\theta_{dk}) E\\log\\pi_{dk} - c(\\theta_d)]` (the tail has no items).
    With ``sizes`` :math:`D_s`, each row is a document group of :math:`D_s` groups sharing one
    :math:`q(\\pi_s)` and :math:`N_s` items, and the terms are
    :math:`\\sum_s [\\sum_k (N_{sk} - D_s\\theta_{sk}) E\\log\\pi_{sk} - D_s c(\\theta_s)]`
    (Gomes, Welling & Perona 2008, §2.3)."""
    full_counts = torch.cat([counts, counts.new_zeros(counts.shape[0], 1)], 1)
    if sizes is None:
        return ((full_counts - theta) * e_log_pi).sum() - log_dirichlet_norm(theta).sum()
    return ((full_counts - sizes[:, None] * theta) * e_log_pi).sum() - (sizes * log_dirichlet_norm(theta)).sum()


class GroupedHDPPosterior(VariationalPosterior):
    """Sticks and the group-level machinery of an HDP; subclasses add the components through
    :meth:`item_likelihoods`, :meth:`summarize`, :meth:`updated_components` and
    :meth:`component_terms`.

    :param rho: ``(K,)`` stick means.
    :param omega: ``(K,)`` stick concentrations.
    :param alpha: group-level concentration: a float, or a
        ``GammaConcentration`` to learn it.
    :param gamma: top-level concentration, likewise.
    """

    def __init__(self, rho, omega, alpha, gamma):
        self.rho, self.omega = rho, omega
        self.alpha, self.gamma = (c if isinstance(c, GammaConcentration) else float(c) for c in (alpha, gamma))

    @property
    def learnt_concentrations(self):
        """The names of the concentrations with a variational factor (``"alpha"``, ``"gamma"``)."""
        return [name for name in ("alpha", "gamma") if isinstance(getattr(self, name), GammaConcentration)]

    @property
    def K(self):
        return self.rho.shape[0]

    @property
    def dtype(self):
        return self.rho.dtype

    def expected_beta(self):
        """:math:`E[\\beta]` over the ``K`` components and the tail: ``(K + 1,)``."""
        return expected_beta(self.rho)

    # ------------------------------------------------------ the components
    def item_likelihoods(self, items):
        """``(T, K)`` :math:`\\exp(E\\log p(x_n\\mid\\phi_k) - m_n)`, each row shifted by a constant
        :math:`m_n` so nothing overflows."""
        raise NotImplementedError

    def item_table(self, items):
        """``(table, index)``: the rows of :meth:`item_likelihoods` as rows ``index`` ``(T,)`` of a table
        shared by items with the same value (the topic model's ``(V, K)`` word table, indexed by the
        word ids), or ``(item_likelihoods(items), None)`` where each item has its own row (the default)."""
        return self.item_likelihoods(items), None

    def summarize(self, doc, items, count, resp, theta, e_log_pi, counts):
        """The summary of local parameters ``resp`` (a dense ``(T, K)`` tensor or
        :class:`~pyro_memo.families.SparseResponsibilities`) and ``theta``."""
        raise NotImplementedError

    def updated_components(self, summary):
        """The components' factors optimal for ``summary`` (closed form), as keyword arguments of
        :meth:`with_globals`."""
        raise NotImplementedError

    def component_terms(self, summary):
        """The components' terms of the bound: ``{name: scalar tensor}``."""
        raise NotImplementedError

    def with_globals(self, rho, omega, **components):
        """A posterior of the same kind with these sticks and components."""
        raise NotImplementedError

    # ------------------------------------------------------------ global step
    def updated(self, summary, stick_iters=100, rounds=3):
        """The globals optimal for ``summary``: components in closed form, sticks by
        ``optimize_sticks()`` started from the current ones
        (never lowering the bound); learnt concentrations and sticks then alternate for up to
        ``rounds`` rounds, each concentration's factor its closed-form optimum given the sticks
        (``concentration_terms()``), so no step lowers the bound."""
        components = self.updated_components(summary)
        rho, omega = self.rho, self.omega
        if rho.shape[0] != summary.K:
            rho, omega = prior_sticks(summary.K, float(self.gamma), rho.dtype, rho.device)
        rho, omega, alpha, gamma = fit_top_level(rho, omega, summary.num_docs, summary.sum_log_pi, self.alpha,
                                                 self.gamma, stick_iters, rounds)
        new = self.with_globals(rho, omega, **components)
        new.alpha, new.gamma = alpha, gamma
        return new

    def update(self, summary):
        """The engine's global step: :meth:`updated` (a new posterior; this one is unchanged)."""
        return self.updated(summary)

    def optimal_for(self, summary):
        """Globals optimal for ``summary``, the sticks' optimisation started from these."""
        return self.updated(summary)

    # ------------------------------------------------------------- local step
    def local_step(self, doc, items, count, num_docs, init_counts=None, max_iter=100, tol=1e-3, sparse_L=None,
                   overrelax=True):
        """Group-level coordinate ascent: alternate item responsibilities
        :math:`r_{dnk} \\propto \\exp(E\\log\\pi_{dk} + E\\log p(x_{dn}\\mid\\phi_k))` and group
        Dirichlets :math:`\\theta_d = \\alpha E[\\beta] + N_d` until every group's component
        counts move by less than ``tol`` per component on average.

        Started from ``init_counts`` (``(num_docs, K)`` counts of the last visit), the first
        step re-fits ``theta`` to them, so the result's bound is at least that of the cached
        local parameters under the current globals (each step is an exact coordinate update).
        Without it, the first responsibilities are :math:`r_{dnk} \\propto E[\\beta_k]\\exp(E\\log
        p(x_{dn}\\mid\\phi_k))`.
        The sweeps run on the items packed by group (:class:`~pyro_memo.posterior.group_blocks.GroupBlocks`);
        where items share rows of a table (:meth:`item_table`: the topic model's words), the blocks are
        gathered from it and freed before the final sweep forms the ``(T, K)`` responsibilities, so the step
        holds one table of the items' size at a time (at 102,866 tokens and K = 400, a peak of 316 MB
        against 629 MB).

        :param doc: ``(T,)`` group of each item (``0 .. num_docs - 1``).
        :param items: the items, as :meth:`item_likelihoods` takes them (word ids, feature rows).
        :param count: ``(T,)`` multiplicity of each item (token counts; ones for feature rows).
        :param int sparse_L: keep each item's ``L`` largest responsibilities, renormalised over them,
            in every sweep (Hughes & Sudderth 2016, §3: the optimal :math:`q(z_{dn})` on at most ``L``
            components, :meth:`~pyro_memo.families.SparseResponsibilities.top_weights`). ``theta``
            stays the exact optimum given them, so every step is still an exact coordinate update
            of the restricted family; the group counts and the summary then cost :math:`O(TL)`
            after the top-``L`` selection. ``None`` (or ``L >= K``): dense.
        :param bool overrelax: over-relax the dense sweeps, each group's step safeguarded by its bound
            (:mod:`~pyro_memo.posterior.relaxed_sweeps`: no accepted step lowers it, so the guarantee
            above holds); ``False``: plain sweeps.
        :returns: ``(resp (T, K), counts (num_docs, K), summary, iterations)``; ``resp`` is zero
            outside each item's support when sparse.

        Floating-point inputs of another precision (a float64 batch, or warm start, against float32
        globals) are converted to the globals' dtype.
        """
        K = self.K
        L = None if sparse_L is None or sparse_L >= K else sparse_L
        items = items.to(self.dtype) if items.is_floating_point() else items
        count = count.to(self.dtype)
        prior = self.alpha * self.expected_beta()
        # Phi (T, K), r_dnk = Phi_nk P_dk / z_n with P = exp(E log pi) shifted: rows `index` of `table`
        table, index = self.item_table(items)
        blocks = GroupBlocks(table, doc, count, num_docs, index=index)  # N_dk = sum_n c_n r_dnk, batched
        ids = blocks.groups

        if init_counts is None:  # start from the global weights: r ∝ E[beta_k] exp(E log p)
            counts = table.new_empty(num_docs, K)
            counts[ids] = blocks.counts((prior[:K] / prior[:K].max()).expand(num_docs, K), L)
        else:
            counts = init_counts.to(dtype=table.dtype, copy=True)
        tokens = table.new_zeros(num_docs).index_add_(0, doc, count)
        sweeps = RelaxedSweeps(counts[ids], tokens[ids], prior, relax=L is None and overrelax)
        # iterate on the groups that have not converged, dropping them from the blocks as they finish
        iterations = 0
        while iterations < max_iter:
            iterations += 1
            weights = sweeps.weights()
            new, log_norm = blocks.counts(weights, L, log_norm=True) if sweeps.relax else \
                (blocks.counts(weights, L), None)
            moving = sweeps.update(new, log_norm, tol)
            counts[ids] = sweeps.counts
            if not bool(moving.any()):
                break
            if int(moving.sum()) < 0.7 * len(ids):
                blocks.keep(moving)
                sweeps.keep(moving)
                ids = blocks.groups
        # a final exact sweep over every group: responsibilities, then theta (the blocks freed first)
        del blocks
        phi = table if index is None else table.index_select(0, index)
        weights = group_weights(counts, prior)[0]
        resp, counts = self._final_responsibilities(phi, doc, count, weights, num_docs, L)
        summary = self.summary_of(doc, items, count, resp, counts)
        return (resp if L is None else resp.dense()), counts, summary, iterations

    def summary_of(self, doc, items, count, resp, counts):
        """The summary of responsibilities ``resp`` whose group counts are ``counts`` ``(num_docs, K)``, each
        group's Dirichlet :math:`\\theta_d = \\alpha E[\\beta] + N_d` (its optimum given them)."""
        prior = self.alpha * self.expected_beta()
        theta = torch.cat([counts + prior[:-1], prior[-1:].expand(len(counts), 1)], 1)
        return self.summarize(doc, items, count, resp, theta, expected_log_dirichlet(theta), counts)

    @staticmethod
    def _final_responsibilities(phi, doc, count, weights, num_docs, L):
        """The final sweep's responsibilities and group counts ``(num_docs, K)`` for group weights
        ``weights``: a dense ``(T, K)`` tensor, or the top-``L``
        :class:`~pyro_memo.families.SparseResponsibilities` (``L`` not ``None``). Formed in place of
        ``phi``, in cache-sized row chunks (:func:`~pyro_memo.posterior.group_blocks.row_slices`), so no
        temporary of the items' size is allocated."""
        counts = phi.new_zeros(num_docs, phi.shape[1])
        tiny = torch.finfo(phi.dtype).tiny
        for rows in row_slices(phi):
            block = phi[rows].mul_(weights[doc[rows]])
            if L is None:
                block.div_(block.sum(1, keepdim=True).clamp_min(tiny))
                counts.index_add_(0, doc[rows], block * count[rows, None])
        if L is None:
            return phi, counts
        resp = SparseResponsibilities.top_weights(phi, L)
        return resp, resp.scaled(count).table(doc, num_docs)

    # ------------------------------------------------------------------ bound
    def elbo_terms(self, summary):
        """The HDP bound's terms (scalar tensors) for the groups ``summary`` describes. The sticks' terms
        are evaluated in float64 whatever the posterior's dtype: with :math:`\\omega_k` in the thousands
        their log-gamma terms run to millions, which float32 rounds by whole nats."""
        sticks = top_level_objective(self.rho.double(), self.omega.double(), summary.num_docs,
                                     summary.sum_log_pi.double(), self.alpha, self.gamma)
        terms = {**self.component_terms(summary), "sticks": sticks, "documents": summary.doc_term,
                 "entropy": summary.entropy.sum()}
        if self.learnt_concentrations:
            terms["concentrations"] = -sticks.new_tensor(sum(getattr(self, c).kl() for c in self.learnt_concentrations))
        return terms

    def elbo(self, summary):
        """The bound :math:`\\mathcal{L}` of the groups ``summary`` summarises (exact, with the
        surrogate of ``pyro_memo.allocation.hdp_sticks`` for the groups' normalisers)."""
        return sum(self.elbo_terms(summary).values())


class HDPMixturePosterior(GroupedHDPPosterior):
    """An HDP mixture over groups of items with any conjugate family: one factor
    :math:`q(\\phi_k)` of the prior's form per component.

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param dict component: the factors' parameters, each ``(K, ...)``.
    """

    def __init__(self, family, component, rho, omega, alpha, gamma):
        super().__init__(rho, omega, alpha, gamma)
        self.family, self.component = family, component

    @classmethod
    def from_summary(cls, family, alpha, gamma, summary):
        """Components optimal for ``summary`` (counts and statistics), sticks at the prior."""
        rho, omega = prior_sticks(summary.K, gamma, family.dtype, family.device)
        return cls(family, family.posterior(summary.counts, summary.stats), rho, omega, alpha, gamma)

    def item_likelihoods(self, x):
        log_lik = self.family.expected_log_lik(x, self.component)
        return torch.exp(log_lik - log_lik.max(1, keepdim=True).values)

    def summarize(self, doc, x, count, resp, theta, e_log_pi, counts):
        """The :class:`~pyro_memo.summaries.GroupSummary` of ``resp`` (dense, or
        :class:`~pyro_memo.families.SparseResponsibilities`: the statistics of each component's kept
        items, :meth:`~pyro_memo.ConjugateFamily.sparse_stats`) and ``theta``."""
        if isinstance(resp, SparseResponsibilities):
            weighted = resp.scaled(count)
            counts_k, stats, entropy = weighted.counts(), self.family.sparse_stats(x, weighted), resp.entropy(count)
        else:
            weighted = resp * count[:, None]
            counts_k, stats = weighted.sum(0), self.family.stats(x, weighted)
            entropy = entropy_per_component(resp, count)
        return GroupSummary(counts_k, stats, e_log_pi.sum(0), group_terms(counts, theta, e_log_pi), entropy,
                            int(counts.shape[0]))

    def updated_components(self, summary):
        return {"component": self.family.posterior(summary.counts, summary.stats)}

    def component_terms(self, summary):
        data = self.family.expected_log_lik_from_stats(summary.counts, summary.stats, self.component).sum()
        return {"data": data, "kl_components": -self.family.kl_to_prior(self.component).sum()}

    def with_globals(self, rho, omega, component):
        return HDPMixturePosterior(self.family, component, rho, omega, self.alpha, self.gamma)

    def state_dict(self):
        return {**self.family.state_dict(), "component": {k: v.cpu() for k, v in self.component.items()},
                "rho": self.rho.cpu(), "omega": self.omega.cpu(), "alpha": concentration_state(self.alpha),
                "gamma": concentration_state(self.gamma)}

    @classmethod
    def from_state_dict(cls, d, device=None):
        family = family_from_state(d, device)

        def move(t):
            return t.to(dtype=family.dtype, device=device)

        return cls(family, {k: move(v) for k, v in d["component"].items()}, move(d["rho"]), move(d["omega"]),
                   concentration_from_state(d["alpha"]), concentration_from_state(d["gamma"]))

    def to(self, dtype=None, device=None):
        """A copy with every tensor (and the family) on ``dtype`` / ``device``."""
        family = self.family.to(dtype=dtype, device=device)

        def move(t):
            return t.to(dtype=family.dtype, device=family.device)

        return HDPMixturePosterior(family, {k: move(v) for k, v in self.component.items()}, move(self.rho),
                                   move(self.omega), self.alpha, self.gamma)
