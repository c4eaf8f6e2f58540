"""The pair terms of the assortative HDP relational bound, in O((E + N) K).

Model (Kim, Gopalan, Blei & Sudderth 2013; Gopalan et al. 2012, the assortative MMSB): node
memberships :math:`\\pi_i \\sim \\mathrm{Dir}(\\alpha\\beta)`, community link probabilities
:math:`w_k \\sim \\mathrm{Beta}(\\tau_a, \\tau_b)`, a fixed background probability :math:`\\epsilon`, and
for each unordered pair :math:`i < j`: roles :math:`s_{ij} \\sim \\mathrm{Cat}(\\pi_i)`,
:math:`r_{ij} \\sim \\mathrm{Cat}(\\pi_j)` and a link :math:`y_{ij} \\sim \\mathrm{Bern}(w_k)` if
:math:`s_{ij} = r_{ij} = k`, else :math:`\\mathrm{Bern}(\\epsilon)`. Roles take the ``K`` explicit
communities only (nested truncation).

Variational family of the roles (a restriction of the structured family of Kim et al.):

* a **linked** pair has the structured factor that couples its two roles only on the diagonal,
  at its optimum given the globals (eq. R1):
  :math:`q(s = k, r = l) = A_{ik} A_{jl} e^{g_{kl}} / Z_{ij}`, with
  :math:`A_{ik} = \\exp E\\log\\pi_{ik}`, :math:`g_{kk} = E\\log w_k`, :math:`g_{kl} = \\log\\epsilon`
  for :math:`k \\ne l`, so :math:`Z_{ij} = \\epsilon (S_i S_j - \\sum_k A_{ik} A_{jk}) + \\sum_k A_{ik}
  A_{jk} e^{E\\log w_k}` with :math:`S_i = \\sum_k A_{ik}`: O(K) per link;
* a **non-linked** pair of a batch with source nodes ``S`` (the pairs ``i < j`` with ``i`` in ``S``)
  has the product of two node factors of the batch (eq. R2): :math:`q(s = k, r = l) = m_{ik}
  \\bar m_{jl}`, one factor :math:`m_i` per source for its role as the smaller node and one
  :math:`\\bar m_j` per node for its role as the larger. Its terms are sums of node terms and of
  :math:`\\sum_k m_{ik} \\bar m_{jk}`, so over the batch's non-linked pairs they reduce to
  per-community sums over nodes minus the links' share (eq. R3):
  :math:`\\sum_{i \\in S, j > i, y_{ij}=0} m_{ik} \\bar m_{jk} = \\sum_{i \\in S} m_{ik} \\sum_{j>i}
  \\bar m_{jk} - \\sum_{(i,j) \\in E, i \\in S} m_{ik} \\bar m_{jk}`: no N x N loop. Both factors of a
  batch are local parameters of that batch, so the summaries stay additive over batches.
  Given the globals, the optimal sources' factors for fixed :math:`\\bar m` (and vice versa) are
  closed-form (eq. R5, :func:`nonlink_factors`): with :math:`c_k = E\\log(1 - w_k) - \\log(1 - \\epsilon)`,
  :math:`m_{ik} \\propto \\exp(E\\log\\pi_{ik} + c_k T_{ik} / n_i)` where :math:`T_{ik}` sums :math:`\\bar m_{jk}`
  over the :math:`n_i` non-linked partners :math:`j > i`, and
  :math:`\\bar m_{jk} \\propto \\exp(E\\log\\pi_{jk} + c_k U_{jk} / n'_j)` where :math:`U_{jk}` sums
  :math:`m_{ik}` over the :math:`n'_j` non-linked sources :math:`i < j`. Alternating them is block
  coordinate ascent on the batch's terms, so it never lowers them. With
  :math:`m = \\bar m = A / S` (no coupling) the non-linked terms are Jensen's bound on their optimal
  structured factor's :math:`\\log Z_{ij}`.

A set of pairs (those whose smaller node lies in a batch of source nodes) is summarised by
:class:`PairSummary`: every field adds over disjoint sets of pairs, and with the globals it gives the
pairs' exact terms of the bound (:func:`pair_terms`; eq. R4):
:math:`\\sum_{ik} N_{ik} E\\log\\pi_{ik} + \\sum_k [D^1_k E\\log w_k + D^0_k E\\log(1 - w_k)] +
(L - \\sum_k D^1_k)\\log\\epsilon + (U - \\sum_k D^0_k)\\log(1 - \\epsilon) + H`, with role counts
:math:`N`, diagonal masses of linked (:math:`D^1`) and non-linked (:math:`D^0`) pairs, ``L`` links,
``U`` non-links and the roles' entropy ``H``.
"""

from dataclasses import dataclass, field

import torch

from ..summaries.base import AdditiveSummary

__all__ = ["PairSummary", "link_roles", "link_summary", "node_weights", "nonlink_factors", "pair_summary",
           "pair_terms"]


@dataclass
class PairSummary(AdditiveSummary):
    """The pairs' statistics (eq. R4 of the module docstring); all fields add over disjoint sets of pairs.

    :ivar role_counts: ``(K, N)`` expected roles of each node in the pairs (component axis first).
    :ivar link_diag: ``(K,)`` :math:`D^1_k`, linked pairs' mass on ``s = r = k``.
    :ivar nonlink_diag: ``(K,)`` :math:`D^0_k`, non-linked pairs' mass on ``s = r = k``.
    :ivar entropy: scalar, the roles' entropy.
    :ivar num_links: scalar tensor, linked pairs summarised.
    :ivar num_nonlinks: scalar tensor, non-linked pairs summarised.
    :ivar int num_sources: source nodes whose pairs are summarised (the memo's item count).
    """

    role_counts: torch.Tensor
    link_diag: torch.Tensor
    nonlink_diag: torch.Tensor
    entropy: torch.Tensor
    num_links: torch.Tensor
    num_nonlinks: torch.Tensor
    num_sources: int = 0
    extras: dict = field(default_factory=dict)

    component_fields = ("role_counts", "link_diag", "nonlink_diag")
    scalar_fields = ("entropy", "num_links", "num_nonlinks")
    count_field = "num_sources"

    @property
    def num_items(self):
        """Alias of ``num_sources``."""
        return self.num_sources

    @property
    def sizes(self):
        """``(K,)`` expected roles per community."""
        return self.role_counts.sum(1)


def node_weights(e_log_pi):
    """``(m, log S)``: :math:`m_i = A_i / S_i` over the ``K`` explicit communities and
    :math:`\\log S_i = \\mathrm{logsumexp}_k E\\log\\pi_{ik}` (``e_log_pi`` is ``(N, K)``)."""
    log_s = torch.logsumexp(e_log_pi, -1)
    return torch.exp(e_log_pi - log_s[:, None]), log_s


def link_roles(e_log_pi_src, e_log_pi_dst, e_log_w, log_eps):
    """The structured factor of linked pairs (eq. R1), from the rows of their two nodes.

    :param e_log_pi_src: ``(L, K)`` :math:`E\\log\\pi_{ik}` of each link's smaller node.
    :param e_log_pi_dst: ``(L, K)`` the same for its larger node.
    :param e_log_w: ``(K,)`` :math:`E\\log w_k`.
    :param float log_eps: :math:`\\log\\epsilon`.
    :returns: ``(q_src, q_dst, diag, entropy)``: role marginals ``(L, K)`` of each end, the diagonal
        :math:`q(s = r = k)` ``(L, K)`` and the factors' entropies ``(L,)``.
    """
    a, log_si = node_weights(e_log_pi_src)  # a = A_i / S_i
    b, log_sj = node_weights(e_log_pi_dst)
    # e^{E log w_k} / eps, over e^shift so that it cannot overflow (a small eps, float32)
    shift = (e_log_w - log_eps).max().clamp_min(0.0)
    bk, rest = torch.exp(e_log_w - log_eps - shift), torch.exp(-shift)
    ab = a * b
    # Z / (eps S_i S_j e^shift) = (1 - sum_k a_k b_k) e^-shift + sum_k a_k b_k B_k  (both parts non-negative)
    off = (1.0 - ab.sum(-1)).clamp_min(0.0) * rest
    z = off + (ab * bk).sum(-1)
    diag = ab * bk / z[:, None]
    q_src = a * ((1.0 - b) * rest + b * bk) / z[:, None]
    q_dst = b * ((1.0 - a) * rest + a * bk) / z[:, None]
    log_z = log_eps + shift + log_si + log_sj + torch.log(z)
    on = diag.sum(-1)
    entropy = (log_z - (q_src * e_log_pi_src).sum(-1) - (q_dst * e_log_pi_dst).sum(-1) - (diag * e_log_w).sum(-1)
               - (1.0 - on) * log_eps)
    return q_src, q_dst, diag, entropy


def _batch_pairs(edges, sources, missing=None):
    """The batch's links ``(src, dst)`` and the pairs its non-linked terms leave out (its links and
    its ``missing`` unobserved pairs) ``(out_src, out_dst)``."""
    mine = sources[edges[:, 0]]
    src, dst = edges[mine, 0], edges[mine, 1]
    if missing is None or missing.shape[0] == 0:
        return src, dst, src, dst
    gone = sources[missing[:, 0]]
    return src, dst, torch.cat([src, missing[gone, 0]]), torch.cat([dst, missing[gone, 1]])


def _nonlink_counts(N, sources, out_src, out_dst, dtype):
    """``(later, earlier)``: each source's non-linked partners ``j > i`` and each node's non-linked
    sources ``i < j`` (``(N,)`` each), ``out_*`` the pairs that are not non-links."""
    index = torch.arange(N, device=sources.device)
    src_f = sources.to(dtype)
    ones = torch.ones(out_src.shape[0], dtype=dtype, device=src_f.device)
    later = (N - 1 - index).to(dtype) * src_f - src_f.new_zeros(N).index_add_(0, out_src, ones)
    earlier = torch.cumsum(src_f, 0) - src_f - src_f.new_zeros(N).index_add_(0, out_dst, ones)
    return later, earlier


def _partner_sums(m_src, m_dst, sources, out_src, out_dst):
    """``(T, U)``: :math:`T_i = \\sum_{j>i, y=0} \\bar m_j` for sources and :math:`U_j = \\sum_{i \\in S,
    i<j, y=0} m_i` (eq. R5), each ``(N, K)``; ``out_*`` the pairs that are not non-links."""
    after = m_dst.sum(0) - torch.cumsum(m_dst, 0)
    t = after - torch.zeros_like(after).index_add_(0, out_src, m_dst[out_dst])
    masked = m_src * sources.to(m_src.dtype)[:, None]
    before = torch.cumsum(masked, 0) - masked
    u = before - torch.zeros_like(before).index_add_(0, out_dst, m_src[out_src])
    return t, u


def nonlink_factors(e_log_pi, edges, sources, e_log_w, e_log_1mw, log_1meps, iters=10, start=None, missing=None):
    """The batch's non-linked factors ``(m, m_bar)`` (each ``(N, K)``; eq. R5): ``iters`` rounds of
    block coordinate ascent from ``start`` (default :math:`A / S` for both), sources first; no round
    lowers the batch's terms. ``missing``: ``(M, 2)`` unobserved pairs ``i < j``, left out."""
    N = e_log_pi.shape[0]
    _, _, out_src, out_dst = _batch_pairs(edges, sources, missing)
    later, earlier = _nonlink_counts(N, sources, out_src, out_dst, e_log_pi.dtype)
    c = e_log_1mw - log_1meps
    m, m_bar = start if start is not None else (node_weights(e_log_pi)[0],) * 2
    for _ in range(int(iters)):
        t, _ = _partner_sums(m, m_bar, sources, out_src, out_dst)
        m = torch.softmax(e_log_pi + c * t / later.clamp_min(1.0)[:, None], -1)
        _, u = _partner_sums(m, m_bar, sources, out_src, out_dst)
        m_bar = torch.softmax(e_log_pi + c * u / earlier.clamp_min(1.0)[:, None], -1)
    return m, m_bar


def link_summary(e_log_pi, edges, sources, e_log_w, log_eps, missing=None):
    """The :class:`PairSummary` of the linked pairs ``i < j`` whose node ``i`` is a source (eq. R1),
    with no non-linked pair in it (their fields zero).

    :param e_log_pi: ``(N, K)`` :math:`E\\log\\pi_{ik}` of every node (explicit communities).
    :param edges: ``(E, 2)`` long tensor of the graph's links ``i < j`` (all of them).
    :param sources: ``(N,)`` bool mask of the batch's source nodes.
    :param e_log_w: ``(K,)`` :math:`E\\log w_k`; ``log_eps``: :math:`\\log\\epsilon`.
    :param missing: unused here (unobserved pairs are never links); kept for a common signature.
    """
    N, K = e_log_pi.shape
    src, dst, _, _ = _batch_pairs(edges, sources)
    q_src, q_dst, diag, h_link = link_roles(e_log_pi[src], e_log_pi[dst], e_log_w, log_eps)
    counts = e_log_pi.new_zeros(N, K).index_add_(0, src, q_src).index_add_(0, dst, q_dst)
    zero = h_link.new_zeros(())
    return PairSummary(counts.T.contiguous(), diag.sum(0), diag.new_zeros(K), h_link.sum(),
                       zero + float(src.shape[0]), zero, int(sources.sum()))


def pair_summary(e_log_pi, edges, sources, e_log_w, log_eps, factors=None, missing=None):
    """The :class:`PairSummary` of the pairs ``i < j`` whose node ``i`` is a source: the linked
    pairs' (:func:`link_summary`) plus the non-linked pairs' under their factors (eqs. R2, R3).

    :param factors: ``(m, m_bar)`` non-linked factors (eq. R2; :func:`nonlink_factors`); default
        :math:`A / S` for both.
    :param missing: ``(M, 2)`` long tensor of unobserved pairs ``i < j`` (held out): in no term.

    Other parameters as :func:`link_summary`.
    """
    links = link_summary(e_log_pi, edges, sources, e_log_w, log_eps)
    N = e_log_pi.shape[0]
    _, _, out_src, out_dst = _batch_pairs(edges, sources, missing)
    later, earlier = _nonlink_counts(N, sources, out_src, out_dst, e_log_pi.dtype)
    m, m_bar = factors if factors is not None else (node_weights(e_log_pi)[0],) * 2
    t, _ = _partner_sums(m, m_bar, sources, out_src, out_dst)
    counts = later[:, None] * m + earlier[:, None] * m_bar
    nonlink_diag = (sources.to(m.dtype)[:, None] * m * t).sum(0)

    def entropy(p):
        return -torch.special.xlogy(p, p).sum(-1)

    h = (later * entropy(m)).sum() + (earlier * entropy(m_bar)).sum()
    return links + PairSummary(counts.T.contiguous(), links.link_diag.new_zeros(links.K), nonlink_diag, h,
                               h.new_zeros(()), later.sum(), 0)


def pair_terms(summary, e_log_pi, e_log_w, e_log_1mw, log_eps, log_1meps):
    """The pairs' exact terms of the bound (eq. R4) under the globals ``e_log_pi`` ``(N, K)``,
    :math:`E\\log w`, :math:`E\\log(1 - w)` ``(K,)``, :math:`\\log\\epsilon`, :math:`\\log(1 - \\epsilon)`."""
    s = summary
    return ((s.role_counts.T * e_log_pi).sum() + (s.link_diag * e_log_w).sum() + (s.nonlink_diag * e_log_1mw).sum()
            + (s.num_links - s.link_diag.sum()) * log_eps + (s.num_nonlinks - s.nonlink_diag.sum()) * log_1meps
            + s.entropy)
