"""Global variational parameters of the HDP topic model, its document-level local step and
its bound (Hughes, Kim & Sudderth, AISTATS 2015; Sudderth's talk, paper 001, slides
"Variational Learning of HDP Topics")."""

import torch

from ..families import Multinomial
from ..posterior import VariationalPosterior
from ..summaries import TopicSummary
from .hdp_sticks import expected_beta, optimize_sticks, prior_sticks, top_level_objective


def log_dirichlet_norm(conc):
    """:math:`c(\\lambda) = \\log\\Gamma(\\sum_v\\lambda_v) - \\sum_v\\log\\Gamma(\\lambda_v)` over the last axis."""
    return torch.lgamma(conc.sum(-1)) - torch.lgamma(conc).sum(-1)


def expected_log_dirichlet(conc):
    """:math:`E[\\log\\phi_v] = \\psi(\\lambda_v) - \\psi(\\sum\\lambda)` over the last axis."""
    return torch.digamma(conc) - torch.digamma(conc.sum(-1, keepdim=True))


def topic_family(lam0, V, dtype=torch.float64, device=None):
    """The topics' observation family: :class:`~pyro_memo.families.Multinomial` with a symmetric
    ``Dir(lam0)`` prior over ``V`` words, each token one Categorical draw."""
    return Multinomial({"lam": torch.full((V,), float(lam0))}, dtype=dtype, device=device)


class HDPPosterior(VariationalPosterior):
    """``q(phi_k) = Dir(lam_k)`` for ``K`` topics and ``q(u_k) = Beta(rho_k omega_k,
    (1 - rho_k) omega_k)`` for the top-level sticks.

    :param lam: ``(K, V)`` topic-word Dirichlet parameters.
    :param rho: ``(K,)`` stick means.
    :param omega: ``(K,)`` stick concentrations.
    :param float alpha: document-level concentration.
    :param float gamma: top-level concentration.
    :param float lam0: symmetric topic-word Dirichlet prior.
    """

    def __init__(self, lam, rho, omega, alpha, gamma, lam0):
        self.lam, self.rho, self.omega = lam, rho, omega
        self.alpha, self.gamma, self.lam0 = float(alpha), float(gamma), float(lam0)
        self._e_log_phi = None

    @classmethod
    def prior(cls, K, V, alpha=0.5, gamma=10.0, lam0=0.1, dtype=torch.float64, device=None):
        rho, omega = prior_sticks(K, gamma, dtype, device)
        return cls(torch.full((K, V), lam0, dtype=dtype, device=device), rho, omega, alpha, gamma, lam0)

    @property
    def K(self):
        return self.lam.shape[0]

    @property
    def V(self):
        return self.lam.shape[1]

    @property
    def dtype(self):
        return self.lam.dtype

    @property
    def e_log_phi(self):
        if self._e_log_phi is None:
            self._e_log_phi = expected_log_dirichlet(self.lam)
        return self._e_log_phi

    def expected_beta(self):
        """:math:`E[\\beta]` over the ``K`` topics and the tail: ``(K + 1,)``."""
        return expected_beta(self.rho)

    def topic_means(self):
        """``(K, V)`` :math:`E[\\phi_k]`."""
        return self.lam / self.lam.sum(1, keepdim=True)

    # ------------------------------------------------------------- global step
    def updated(self, summary, stick_iters=100):
        """The globals optimal for ``summary``: topics in closed form
        (:math:`\\lambda_k = \\lambda_0 + S_k`), sticks by :func:`optimize_sticks` started
        from the current ones (never lowering the bound)."""
        lam = self.lam0 + summary.word_counts
        rho, omega = self.rho, self.omega
        if rho.shape[0] != summary.K:
            rho, omega = prior_sticks(summary.K, self.gamma, lam.dtype, lam.device)
        rho, omega = optimize_sticks(rho, omega, summary.num_docs, summary.sum_log_pi, self.alpha, self.gamma,
                                     max_iter=stick_iters)
        return HDPPosterior(lam, rho, omega, self.alpha, self.gamma, self.lam0)

    def update(self, summary):
        """The engine's global step: :meth:`updated` (a new posterior; this one is unchanged)."""
        return self.updated(summary)

    def optimal_for(self, summary):
        """Globals optimal for ``summary``, the sticks' optimisation started from these."""
        return self.updated(summary)

    # -------------------------------------------------------------- local step
    def local_step(self, doc, word, count, num_docs, init_counts=None, max_iter=100, tol=1e-3):
        """Document-level coordinate ascent: alternate token responsibilities
        :math:`r_{dnk} \\propto \\exp(E\\log\\pi_{dk} + E\\log\\phi_{k x_{dn}})` and document
        Dirichlets :math:`\\theta_d = \\alpha E[\\beta] + N_d` until every document's topic
        counts move by less than ``tol`` per topic on average.

        Started from ``init_counts`` (``(num_docs, K)`` topic counts of the last visit),
        the first step re-fits ``theta`` to them, so the result's bound is at least that of
        the cached local parameters under the current globals (each step is an exact
        coordinate update). Without it, the first responsibilities are
        :math:`r_{dnk} \\propto E[\\beta_k]\\exp(E\\log\\phi_{k x_{dn}})`.

        :returns: ``(resp (T, K), doc_topic_counts (num_docs, K), summary, iterations)``.
        """
        K = self.K
        prior = self.alpha * self.expected_beta()
        # r_dnk = Phi_nk P_dk / z_n with Phi = exp(E log phi) and P = exp(E log pi), each
        # shifted by its maximum (per word, per document) so nothing overflows
        e_log_phi = self.e_log_phi
        phi = torch.exp(e_log_phi - e_log_phi.max(0, keepdim=True).values).T[word]  # (T, K)
        tiny = torch.finfo(phi.dtype).tiny

        def topic_sums(phi_, doc_, count_, weights, n):
            """sum_n count_n Phi_nk / z_n per document, z_n = sum_k Phi_nk weights_{d(n) k}."""
            z = (phi_ * weights[doc_]).sum(1).clamp_min(tiny)
            return phi_.new_zeros(n, K).index_add_(0, doc_, phi_ * (count_ / z)[:, None])

        def doc_weights(counts_):
            e = torch.digamma(counts_ + prior[:K])
            return torch.exp(e - e.max(1, keepdim=True).values)

        if init_counts is None:  # start from the global weights: r ∝ E[beta_k] exp(E log phi)
            start = (prior[:K] / prior[:K].max()).expand(num_docs, K)
            counts = start * topic_sums(phi, doc, count, start, num_docs)
        else:
            counts = init_counts.clone()
        # iterate on the documents that have not converged, compacting them as they finish
        ids = torch.arange(num_docs, device=phi.device)
        a_phi, a_doc, a_count = phi, doc, count
        iterations = 0
        while iterations < max_iter:
            iterations += 1
            weights = doc_weights(counts[ids])
            new = weights * topic_sums(a_phi, a_doc, a_count, weights, len(ids))
            moving = (new - counts[ids]).abs().mean(1) > tol
            counts[ids] = new
            if not bool(moving.any()):
                break
            if int(moving.sum()) < 0.7 * len(ids):
                keep = moving[a_doc]
                remap = torch.cumsum(moving.long(), 0) - 1
                a_phi, a_doc, a_count = a_phi[keep], remap[a_doc[keep]], a_count[keep]
                ids = ids[moving]
        # a final exact sweep over every document: responsibilities, then theta
        weights = doc_weights(counts)
        z = (phi * weights[doc]).sum(1, keepdim=True).clamp_min(tiny)
        resp = phi * weights[doc] / z
        counts = phi.new_zeros(num_docs, K).index_add_(0, doc, resp * count[:, None])
        theta = torch.cat([counts + prior[:K], prior[K:].expand(num_docs, 1)], 1)
        e_log_pi = expected_log_dirichlet(theta)
        summary = self.summarize(doc, word, count, resp, theta, e_log_pi, counts)
        return resp, counts, summary, iterations

    def summarize(self, doc, word, count, resp, theta, e_log_pi, counts):
        """The :class:`TopicSummary` of local parameters ``resp`` and ``theta``."""
        K, V = self.K, self.V
        weighted = resp * count[:, None]
        word_counts = resp.new_zeros(V, K).index_add_(0, word, weighted).T.contiguous()
        full_counts = torch.cat([counts, counts.new_zeros(counts.shape[0], 1)], 1)
        doc_term = ((full_counts - theta) * e_log_pi).sum() - log_dirichlet_norm(theta).sum()
        entropy = -(count[:, None] * torch.special.xlogy(resp, resp)).sum(0)
        return TopicSummary(word_counts, e_log_pi.sum(0), doc_term, entropy, int(counts.shape[0]))

    # ------------------------------------------------------------------ bound
    def elbo_terms(self, summary):
        """The HDP bound's terms (scalar tensors) for the documents ``summary`` describes."""
        lam0 = torch.full_like(self.lam[:1], self.lam0)
        topics = (log_dirichlet_norm(lam0) - log_dirichlet_norm(self.lam)).sum() + \
            ((self.lam0 + summary.word_counts - self.lam) * self.e_log_phi).sum()
        sticks = top_level_objective(self.rho, self.omega, summary.num_docs, summary.sum_log_pi, self.alpha,
                                     self.gamma)
        return {"topics": topics, "sticks": sticks, "documents": summary.doc_term,
                "entropy": summary.entropy.sum()}

    def elbo(self, summary):
        """The bound :math:`\\mathcal{L}` of the whole corpus ``summary`` summarises (exact, with
        the surrogate of :mod:`pyro_memo.topics.hdp_sticks` for the documents' normalisers)."""
        return sum(self.elbo_terms(summary).values())

    def state_dict(self):
        """Topics, sticks and hyperparameters as plain tensors and numbers (checkpoints)."""
        return {"lam": self.lam.cpu(), "rho": self.rho.cpu(), "omega": self.omega.cpu(), "alpha": self.alpha,
                "gamma": self.gamma, "lam0": self.lam0}

    @classmethod
    def from_state_dict(cls, d, device=None):
        """The inverse of :meth:`state_dict`."""
        return cls(d["lam"].to(device), d["rho"].to(device), d["omega"].to(device), d["alpha"], d["gamma"], d["lam0"])

    def to(self, dtype=None, device=None):
        def move(t):
            return t.to(dtype=dtype, device=device)
        return HDPPosterior(move(self.lam), move(self.rho), move(self.omega), self.alpha, self.gamma, self.lam0)
