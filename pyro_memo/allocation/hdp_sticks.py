"""Top-level HDP sticks: :math:`u_k \\sim \\mathrm{Beta}(1, \\gamma)`, global topic weights
:math:`\\beta_k = u_k \\prod_{\\ell<k}(1 - u_\\ell)`, ``q(u_k) = Beta(rho_k omega_k,
(1 - rho_k) omega_k)``.

The documents' Dirichlet priors :math:`\\pi_d \\sim \\mathrm{Dir}(\\alpha\\beta_1, \\dots,
\\alpha\\beta_K, \\alpha\\beta_{>K})` make the top level non-conjugate: the expected log
normaliser :math:`E_q[\\log\\Gamma(\\alpha) - \\sum_k \\log\\Gamma(\\alpha\\beta_k)]` has no
closed form. We bound it below by :math:`K\\log\\alpha + \\sum_{k=1}^{K+1} \\log\\beta_k`
(Hughes, Kim & Sudderth, AISTATS 2015, eq. 11). Proof: with :math:`g(x) = \\log\\Gamma(1+x)`,
the difference is :math:`g(\\alpha) - \\sum_k g(\\alpha\\beta_k)`, non-negative because ``g`` is
convex with ``g(0) = 0``, hence superadditive. The objective below is that bound, evaluated
exactly; sticks are optimised on it numerically (L-BFGS on ``logit rho``, ``log omega``).

Either concentration may be learnt (:class:`~pyro_memo.allocation.concentration.GammaConcentration`):
the bound's terms in :math:`\\alpha` are :math:`DK\\,E[\\log\\alpha] + E[\\alpha]\\sum_k E[\\beta_k]\\sum_d
E\\log\\pi_{dk}`, in :math:`\\gamma` they are :math:`K\\,E[\\log\\gamma] + (E[\\gamma] - 1)\\sum_k E\\log(1 - u_k)`,
both of the Gamma form, so :func:`concentration_terms` gives each factor's closed-form update.
"""

import math

import torch

from .concentration import GammaConcentration, expected_log


def _log_beta(a, b):
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


def expected_log_u(rho, omega):
    """:math:`(E[\\log u_k], E[\\log(1 - u_k)])` under ``Beta(rho omega, (1 - rho) omega)``."""
    dig = torch.digamma(omega)
    return torch.digamma(rho * omega) - dig, torch.digamma((1 - rho) * omega) - dig


def expected_log_beta(rho, omega):
    """:math:`E[\\log\\beta_k]` for ``k = 1..K`` and the tail ``K+1``: ``(K + 1,)``."""
    e_log_u, e_log_1mu = expected_log_u(rho, omega)
    before = torch.cumsum(e_log_1mu, 0)
    return torch.cat([e_log_u + before - e_log_1mu, before[-1:]])


def expected_beta(rho):
    """:math:`E[\\beta_k] = \\rho_k \\prod_{\\ell<k}(1 - \\rho_\\ell)` and the tail: ``(K + 1,)``."""
    remaining = torch.cumprod(1 - rho, 0)
    before = torch.cat([remaining.new_ones(1), remaining[:-1]])
    return torch.cat([rho * before, remaining[-1:]])


def rho_from_weights(weights):
    """Stick means whose expected weights :math:`E[\\beta_k] = \\rho_k\\prod_{l<k}(1-\\rho_l)`
    are ``weights[:-1]`` (``weights`` ``(K + 1,)``, the last entry the tail's)."""
    kept = weights[:-1]
    remaining = 1 - torch.cat([kept.new_zeros(1), torch.cumsum(kept[:-1], 0)])
    return (kept / remaining).clamp(1e-8, 1 - 1e-8)


def merged_sticks(rho, omega, a, b):
    """Sticks whose expected weights are the current ones with component ``b``'s added to ``a``'s
    and ``b`` removed (the start of a merged fit's stick optimisation)."""
    weights = expected_beta(rho)
    weights[a] = weights[a] + weights[b]
    keep = torch.cat([torch.arange(b), torch.arange(b + 1, len(weights))])
    return rho_from_weights(weights[keep]), omega[keep[:-1]]


def split_sticks(rho, omega, target, shares, keep_target=False):
    """Sticks with new components appended last (before the tail) that take ``shares`` ``(J,)`` of
    component ``target``'s expected weight, each with ``target``'s concentration: a birth's start.
    With ``keep_target`` the target keeps the rest of its weight (``shares`` sum to at most one);
    without, it is removed and ``shares`` are normalised to share all of it."""
    weights = expected_beta(rho)
    split = weights[target] * (shares if keep_target else shares / shares.sum())
    K = len(rho)
    keep = torch.arange(K) if keep_target else torch.tensor([k for k in range(K) if k != target], dtype=torch.long)
    head = weights[keep].clone()
    if keep_target:
        head[target] = weights[target] - split.sum()
    new_rho = rho_from_weights(torch.cat([head, split, weights[-1:]]))
    return new_rho, torch.cat([omega[keep], omega[target].expand(len(shares))])


def top_level_objective(rho, omega, num_docs, sum_log_pi, alpha, gamma):
    """The terms of the HDP bound that depend on ``q(u)``.

    :math:`D(K\\log\\alpha + \\sum_{k\\le K+1} E\\log\\beta_k) + \\alpha\\sum_{k\\le K+1}
    E[\\beta_k] \\sum_d E\\log\\pi_{dk} + E\\log p(u) - E\\log q(u)`.

    :param rho: ``(K,)`` stick means in (0, 1).
    :param omega: ``(K,)`` stick concentrations > 0.
    :param num_docs: number of documents ``D`` summarised.
    :param sum_log_pi: ``(K + 1,)`` :math:`\\sum_d E_q[\\log \\pi_{dk}]` (the memoized summary).
    """
    K = rho.shape[0]
    e_log_u, e_log_1mu = expected_log_u(rho, omega)
    a, b = rho * omega, (1 - rho) * omega
    prior = expected_log(gamma) + (float(gamma) - 1) * e_log_1mu  # E log Beta(u | 1, gamma)
    entropy_part = _log_beta(a, b) - (a - 1) * e_log_u - (b - 1) * e_log_1mu
    docs = num_docs * (K * expected_log(alpha) + expected_log_beta(rho, omega).sum())
    return docs + float(alpha) * (expected_beta(rho) * sum_log_pi).sum() + (prior + entropy_part).sum()


def _stick_terms(rho, omega, num_docs, gamma):
    """Per stick, the first and second derivatives of :math:`G_k` (see :func:`top_level_gradient`) in
    :math:`(a, b)`: ``(d_a, d_b, h_aa, h_ab, h_bb)``, each ``(K,)``, with :math:`\\psi_2` the tetragamma function."""
    K = rho.shape[0]
    a, b = rho * omega, (1 - rho) * omega
    P = float(num_docs)
    Q = num_docs * torch.arange(K, 0, -1, dtype=rho.dtype, device=rho.device) + (float(gamma) - 1)
    c = P + Q - omega + 2
    tri_a, tri_b, tri_w = torch.polygamma(1, a), torch.polygamma(1, b), torch.polygamma(1, omega)
    d_a = (P - a + 1) * tri_a - c * tri_w
    d_b = (Q - b + 1) * tri_b - c * tri_w
    h_ab = tri_w - c * torch.polygamma(2, omega)
    h_aa = (P - a + 1) * torch.polygamma(2, a) - tri_a + h_ab
    h_bb = (Q - b + 1) * torch.polygamma(2, b) - tri_b + h_ab
    return d_a, d_b, h_aa, h_ab, h_bb


def top_level_gradient(rho, omega, num_docs, sum_log_pi, alpha, gamma):
    """The gradient of :func:`top_level_objective` in ``(rho, omega)``: two ``(K,)`` tensors.

    Per stick, with :math:`a = \\rho\\omega`, :math:`b = (1 - \\rho)\\omega`, the terms in :math:`q(u_k)` other than
    the weights' are :math:`G_k = (P - a + 1) E\\log u + (Q_k - b + 1) E\\log(1 - u) + \\log B(a, b)` with
    :math:`P = D` and :math:`Q_k = D(K + 1 - k) + E[\\gamma] - 1` (:math:`E\\log(1 - u_k)` enters the
    :math:`K + 1 - k` weights after stick ``k``), so, writing :math:`\\psi_1` for the trigamma function,
    :math:`\\partial_a G = (P - a + 1)\\psi_1(a) - (P + Q - \\omega + 2)\\psi_1(\\omega)` and likewise in
    :math:`b`. The weights' term :math:`E[\\alpha]\\sum_k E[\\beta_k] S_k` (:math:`S = \\sum_d E\\log\\pi_d`)
    has :math:`\\partial_{\\rho_j} = E[\\alpha](S_j \\prod_{\\ell<j}(1 - \\rho_\\ell)
    - \\sum_{k>j} E[\\beta_k] S_k / (1 - \\rho_j))`. Then :math:`\\partial_\\rho = \\omega(\\partial_a - \\partial_b)`
    plus the weights' part, and :math:`\\partial_\\omega = \\rho\\partial_a + (1 - \\rho)\\partial_b`.
    """
    d_a, d_b, *_ = _stick_terms(rho, omega, num_docs, gamma)
    return _gradient(rho, omega, d_a, d_b, _weights_gradient(rho, sum_log_pi, alpha))


def _gradient(rho, omega, d_a, d_b, weights_gradient):
    return omega * (d_a - d_b) + weights_gradient, rho * d_a + (1 - rho) * d_b


def _weights_gradient(rho, sum_log_pi, alpha):
    """The gradient in ``rho`` of the weights' term :math:`E[\\alpha]\\sum_{k \\le K+1} E[\\beta_k] S_k`
    (:func:`top_level_gradient`'s last formula): ``(K,)``."""
    K = rho.shape[0]
    weighted = expected_beta(rho) * sum_log_pi
    later = weighted.flip(0).cumsum(0).flip(0)[1:]  # sum over k > j, the tail included
    before = torch.cat([rho.new_ones(1), torch.cumprod(1 - rho, 0)[:-1]])
    return float(alpha) * (sum_log_pi[:K] * before - later / (1 - rho))


def top_level_hessian(rho, omega, num_docs, sum_log_pi, alpha, gamma):
    """The Hessian of :func:`top_level_objective` as ``(H_rr, h_rw, h_ww)``: the ``(K, K)`` block in
    ``rho``, and the diagonals ``(K,)`` of the cross and ``omega`` blocks (sticks interact only through
    ``rho``).

    Each stick's :math:`G_k` maps through :math:`(a, b) = (\\rho\\omega, (1 - \\rho)\\omega)`:
    :math:`\\partial^2_\\rho = \\omega^2(h_{aa} - 2h_{ab} + h_{bb})`, :math:`\\partial^2_\\omega = \\rho^2 h_{aa}
    + 2\\rho(1 - \\rho)h_{ab} + (1 - \\rho)^2 h_{bb}` and :math:`\\partial_\\rho\\partial_\\omega = \\omega(\\rho h_{aa}
    + (1 - 2\\rho)h_{ab} - (1 - \\rho)h_{bb}) + \\partial_a G - \\partial_b G`. The weights' term is linear in
    each :math:`\\rho_j`, and for :math:`i < j` its cross derivative is :math:`-g_j / (1 - \\rho_i)`, with
    :math:`g_j` its gradient in :math:`\\rho_j` (:func:`top_level_gradient`).
    """
    return _derivatives(rho, omega, num_docs, sum_log_pi, alpha, gamma)[2:]


def _derivatives(rho, omega, num_docs, sum_log_pi, alpha, gamma):
    """``(d_rho, d_omega, H_rr, h_rw, h_ww)``: :func:`top_level_gradient` and :func:`top_level_hessian` from
    one evaluation of the stick terms (what each Newton step needs)."""
    d_a, d_b, h_aa, h_ab, h_bb = _stick_terms(rho, omega, num_docs, gamma)
    g = _weights_gradient(rho, sum_log_pi, alpha)
    upper = torch.triu(-g.unsqueeze(0) / (1 - rho).unsqueeze(1), diagonal=1)
    H_rr = upper + upper.T + torch.diag(omega ** 2 * (h_aa - 2 * h_ab + h_bb))
    h_rw = omega * (rho * h_aa + (1 - 2 * rho) * h_ab - (1 - rho) * h_bb) + d_a - d_b
    h_ww = rho ** 2 * h_aa + 2 * rho * (1 - rho) * h_ab + (1 - rho) ** 2 * h_bb
    return (*_gradient(rho, omega, d_a, d_b, g), H_rr, h_rw, h_ww)


def concentration_terms(rho, omega, num_docs, sum_log_pi):
    """The statistics ``(n, t)`` of the bound's terms :math:`n E[\\log c] - t E[c]` in each
    concentration: ``{"alpha": (D K, -sum_k E[beta_k] sum_d E log pi_dk), "gamma": (K, -sum_k E log(1 - u_k))}``
    (:meth:`~pyro_memo.allocation.concentration.GammaConcentration.updated` takes them)."""
    K = rho.shape[0]
    _, e_log_1mu = expected_log_u(rho, omega)
    return {"alpha": (num_docs * K, -float((expected_beta(rho) * sum_log_pi).sum())),
            "gamma": (K, -float(e_log_1mu.sum()))}


def prior_sticks(K, gamma, dtype=torch.float64, device=None):
    """``(rho, omega)`` of the prior ``Beta(1, gamma)``."""
    rho = torch.full((K,), 1.0 / (1.0 + gamma), dtype=dtype, device=device)
    return rho, torch.full((K,), 1.0 + gamma, dtype=dtype, device=device)


def sticks_from_sizes(sizes, gamma, draws):
    """``(rho, omega)``: the top level's posterior sticks given ``draws`` draws from it shared out in
    proportion to ``sizes`` ``(K,)`` (the initial clusters' sizes, largest first): with
    :math:`n_k = \\text{draws}\\, s_k / \\sum_l s_l`, :math:`q(u_k) = \\mathrm{Beta}(1 + n_k, \\gamma +
    \\sum_{l>k} n_l)`, a DP's stick-breaking coordinate update (Blei & Jordan 2006, §3). Its expected
    weights follow the sizes, so every initial cluster starts with the weight its data gives it rather
    than the prior's geometric decay. Sizes that are all zero give the prior's sticks."""
    if not float(sizes.sum()) > 0:
        return prior_sticks(sizes.shape[0], float(gamma), sizes.dtype, sizes.device)
    n = draws * sizes / sizes.sum()
    a, b = 1 + n, float(gamma) + (n.sum() - torch.cumsum(n, 0))
    return a / (a + b), a + b


def omega_limit(num_docs, gamma):
    """The largest stick concentration :func:`optimize_sticks` returns: :math:`10^4 (D + 1 + \\gamma)`,
    far above the optimum :math:`2A_k` of any stick that keeps a weight above :math:`10^{-4}` (the
    optimum grows like :math:`D/\\rho_k`), and small enough that float64 evaluates the Beta
    entropy's terms (:math:`\\log\\Gamma(\\omega) \\approx \\omega\\log\\omega`) to well under a nat."""
    return 1e4 * (float(num_docs) + 1.0 + float(gamma))


def _gradient_size(rho, omega, d_r, d_w, free_r, free_w):
    """The gradient's largest entry in ``(logit rho, log omega)`` over the free coordinates (the scale of
    L-BFGS-B's projected-gradient test)."""
    scaled = torch.cat([(d_r * rho * (1 - rho))[free_r], (d_w * omega)[free_w]])
    return float(scaled.abs().max()) if scaled.numel() else 0.0


def newton_steps(rho, omega, num_docs, sum_log_pi, alpha, gamma, limit, steps=8):
    """Newton steps on :func:`top_level_objective` from a point near its optimum, kept while each shrinks
    the gradient; returns the last such point and its gradient's largest entry in ``(logit rho, log omega)``.

    L-BFGS-B stops once a step lowers the objective by less than a relative :math:`10^{-15}` (its ``ftol``, at
    float64's rounding of the objective), where the gradient can still be :math:`10^{-7}`: two runs from inputs a
    rounding apart then stopped :math:`10^{-7}` apart (relative, in ``omega``). The gradient and Hessian
    (:func:`top_level_gradient`, :func:`top_level_hessian`) are exact to rounding in themselves, so Newton's
    steps reach the stationary point to within that. The ``omega`` block is diagonal and is eliminated (its
    Schur complement), leaving one ``K x K`` Cholesky solve per step; a step is taken only where the Hessian is
    negative definite. Sticks within ``1e-10`` of 0 or 1, and concentrations at ``limit``, stay where they are.
    """
    free_r = (rho > 1e-10) & (rho < 1 - 1e-10)
    free_w = omega < limit * (1 - 1e-9)
    d_r, d_w, H_rr, h_rw, h_ww = _derivatives(rho, omega, num_docs, sum_log_pi, alpha, gamma)
    size = _gradient_size(rho, omega, d_r, d_w, free_r, free_w)
    for _ in range(steps):
        if size == 0.0:
            break
        if not bool((h_ww[free_w] < 0).all()):
            break
        cross = torch.where(free_w & free_r, h_rw / h_ww, torch.zeros_like(h_ww))
        schur = (H_rr - torch.diag(cross * h_rw))[free_r][:, free_r]
        chol, info = torch.linalg.cholesky_ex(-schur)
        if int(info) != 0:
            break
        step_r = torch.zeros_like(rho)
        step_r[free_r] = torch.cholesky_solve((d_r - cross * d_w)[free_r].unsqueeze(1), chol).squeeze(1)
        step_w = torch.where(free_w, -(d_w + h_rw * step_r) / h_ww, torch.zeros_like(omega))
        r, w = rho + step_r, omega + step_w
        if not bool(((r > 0) & (r < 1) & (w > 0) & (w <= limit)).all()):
            break
        at_new = _derivatives(r, w, num_docs, sum_log_pi, alpha, gamma)
        new_size = _gradient_size(r, w, *at_new[:2], free_r, free_w)
        if not new_size < size:
            break
        rho, omega, size = r, w, new_size
        d_r, d_w, H_rr, h_rw, h_ww = at_new
    return rho, omega, size


#: a stationary point for :func:`optimize_sticks`: the gradient's largest entry in ``(logit rho, log omega)`` at most
#: this times the objective's magnitude (after :func:`newton_steps` at most 1.5e-16 of it on 30 random problems)
WARM_TOL = 1e-11


def damped_newton(rho, omega, num_docs, sum_log_pi, alpha, gamma, limit, max_iter=50):
    """Damped Newton ascent (Levenberg 1944; Marquardt 1963) on :func:`top_level_objective` in the
    unconstrained parameters :math:`x = (\\operatorname{logit}\\rho, \\log\\omega)`, for starts where
    :func:`newton_steps` cannot begin: far from the optimum the Hessian is not negative definite (a candidate's
    split or merged sticks, the prior's sticks). Each step solves :math:`(-H_x + \\mu I)s = g_x` and is taken
    only if the objective rises; otherwise :math:`\\mu` grows fourfold, and after a taken step it shrinks
    fourfold (to plain Newton steps near the optimum).

    :math:`g_x` and :math:`H_x` are the gradient and Hessian of :func:`top_level_gradient` and
    :func:`top_level_hessian` through the chain rule: with :math:`s = (\\rho(1 - \\rho), \\omega)`,
    :math:`g_x = s\\,g` and :math:`H_x = \\operatorname{diag}(s) H \\operatorname{diag}(s) +
    \\operatorname{diag}(g_\\rho \\rho(1 - \\rho)(1 - 2\\rho), g_\\omega\\omega)`. Its ``log omega``
    block stays diagonal, so each solve is one ``K x K`` Cholesky of the Schur complement. Concentrations at
    ``limit`` stay there while the gradient pushes them up.

    On the 153 starts where the warm Newton steps could not begin in two 20-topic LDA fits with births,
    merges and deletes, it reached a stationary point (:data:`WARM_TOL`) from every one, in at most 9 steps
    (1.0 s in all, against L-BFGS-B's 5.6 s); from 60 random starts and 6 Wikipedia-sized ones (K = 50-300)
    it reached one from all, up to 39 nats above where L-BFGS-B stopped and never below it by more than
    rounding.

    :returns: ``(rho, omega, size)``, ``size`` the gradient's largest entry in ``x`` at the point returned;
        the point's objective is at least the start's. Stops when ``size`` is at most :data:`WARM_TOL` times the
        objective's magnitude, after ``max_iter`` steps, or when :math:`\\mu` exceeds :math:`10^8` times the
        Hessian's scale with no rising step.
    """
    K = rho.shape[0]
    x_r, x_w, log_limit = torch.logit(rho), torch.log(omega), math.log(limit)
    f = float(top_level_objective(rho, omega, num_docs, sum_log_pi, alpha, gamma))
    mu, size = 0.0, None
    eye = torch.eye(K, dtype=rho.dtype, device=rho.device)
    for _ in range(max_iter):
        r, w = torch.sigmoid(x_r), torch.exp(x_w)
        d_r, d_w, H_rr, h_rw, h_ww = _derivatives(r, w, num_docs, sum_log_pi, alpha, gamma)
        s_r, at_limit = r * (1 - r), x_w >= log_limit - 1e-12
        g_r, g_w = d_r * s_r, torch.where(at_limit & (d_w > 0), torch.zeros_like(d_w), d_w * w)
        size = float(torch.cat([g_r, g_w]).abs().max())
        if size <= WARM_TOL * max(1.0, abs(f)):
            break
        # -H_x in blocks: A (rho), diagonal c (cross) and b (omega); a held concentration has b = 1, c = 0
        A = -(s_r[:, None] * H_rr * s_r[None, :]) - torch.diag(d_r * s_r * (1 - 2 * r))
        c = torch.where(at_limit, torch.zeros_like(h_rw), -s_r * h_rw * w)
        b = torch.where(at_limit, torch.ones_like(h_ww), -(w ** 2) * h_ww - d_w * w)
        scale = float(torch.cat([A.diagonal().abs(), b.abs()]).max())
        if not math.isfinite(scale):
            break
        scale = max(scale, torch.finfo(torch.float64).tiny)  # so that the damping grows from zero
        while True:
            step = _damped_step(A, b, c, g_r, g_w, mu, eye)
            if step is not None:
                n_r, n_w = x_r + step[0], torch.clamp(x_w + step[1], max=log_limit)
                new = float(top_level_objective(torch.sigmoid(n_r), torch.exp(n_w), num_docs, sum_log_pi, alpha,
                                                gamma))
                if new > f or (new == f and mu == 0.0):
                    x_r, x_w, f = n_r, n_w, new
                    mu = 0.0 if mu < 1e-6 * scale else mu / 4
                    break
            mu = max(4 * mu, 1e-8 * scale)
            if mu > 1e8 * scale:
                return torch.sigmoid(x_r), torch.exp(x_w), size
    return torch.sigmoid(x_r), torch.exp(x_w), size


def _damped_step(A, b, c, g_r, g_w, mu, eye):
    """The step ``(s_r, s_w)`` solving :math:`(-H_x + \\mu I)s = g_x` for :func:`damped_newton`, ``-H_x`` given as
    its ``rho`` block ``A``, its diagonal cross block ``c`` and its diagonal ``omega`` block ``b``; ``None`` unless
    :math:`-H_x + \\mu I` is positive definite."""
    bb = b + mu
    if not bool((bb > 0).all()):
        return None
    chol, info = torch.linalg.cholesky_ex(A + mu * eye - torch.diag(c * c / bb))
    if int(info) != 0:
        return None
    s_r = torch.cholesky_solve((g_r - c * g_w / bb).unsqueeze(1), chol).squeeze(1)
    return s_r, (g_w - c * s_r) / bb


def optimize_sticks(rho, omega, num_docs, sum_log_pi, alpha, gamma, max_iter=100):
    """Maximise :func:`top_level_objective` over ``(rho, omega)`` from the given start.

    First tries :func:`newton_steps` from the start: from the last global step's sticks under summaries that
    moved a little, they usually reach a stationary point (:data:`WARM_TOL`) in a few steps, which is returned
    if it is no lower than the start. Otherwise :func:`damped_newton` from the start, finished likewise by
    :func:`newton_steps`, returned on the same test. Only if that fails too runs
    L-BFGS-B (SciPy's, at most ``max_iter`` iterations and
    ``2 max_iter`` evaluations, gradients from :func:`top_level_gradient`) on ``(logit rho, log omega)``,
    finishes with :func:`newton_steps` (so that inputs a rounding apart give sticks a rounding apart) and
    returns the optimum, or the start itself if the optimiser did not improve on it, so an update never lowers
    the objective. The ``2K`` parameters are optimised in float64 whatever the inputs' dtype (float32 cannot
    hold sticks within 1e-8 of 1) and returned in it.
    (``torch.optim.LBFGS`` reached the same optimum to 1e-9 nats on small problems but stopped 30-60 nats
    short of it on Wikipedia-sized ones at K = 100, and its first use imports ``torch._dynamo``: 2.3 s.)

    The concentrations are held at most :func:`omega_limit` (a bound on ``log omega``). For large
    :math:`\\omega` the objective is :math:`-A_k/\\omega_k - \\frac12\\log\\omega_k` plus terms free of it, so
    its optimum :math:`2A_k` is of the order of the number of documents, and beyond it the objective falls
    by only half a nat per factor e: a line search that overshoots lands where float64 rounding of the Beta
    entropy's huge terms swamps that slope, and the sticks ran off to :math:`\\omega \\approx 10^{15}`
    (measured on Wikipedia from sticks started at the k-means sizes: 177 nats below the optimum found under
    the limit, and a float32 bound off by thousands of nats per token).

    SciPy's BLAS is held to one thread while it runs: its vectors have ``2K`` entries, and a second
    OpenBLAS thread only spins against torch's pool (with two, the two-thread HDP lap on Wikipedia took
    1.07x one thread's instead of 0.76x; ``benchmarks/results/bench_hdp_wiki_sticks.txt``).
    """
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    dtype, device = rho.dtype, rho.device
    rho, omega, sum_log_pi = rho.double(), omega.double(), sum_log_pi.double()

    def value(r, w):
        return top_level_objective(r, w, num_docs, sum_log_pi, alpha, gamma)

    K = rho.shape[0]
    if K == 0:
        return rho.to(dtype), omega.to(dtype)
    rho = rho.clamp(1e-8, 1 - 1e-8)
    limit = omega_limit(num_docs, gamma)
    eps = torch.finfo(dtype).eps
    with torch.no_grad():
        start = float(value(rho, omega))
        # warm start: from the last global step's sticks the optimum is often a few Newton steps away
        r, w, size = newton_steps(rho, omega.clamp(max=limit), num_docs, sum_log_pi, alpha, gamma, limit)
        if size <= WARM_TOL * max(1.0, abs(start)) and float(value(r, w)) >= start:
            return r.to(dtype).clamp(eps, 1 - eps), w.to(dtype)
        # far from it (a move's candidate sticks): damped Newton steps, then Newton's to the same test
        r, w, _ = damped_newton(rho, omega.clamp(max=limit), num_docs, sum_log_pi, alpha, gamma, limit)
        r, w, size = newton_steps(r, w, num_docs, sum_log_pi, alpha, gamma, limit)
        found = float(value(r, w))
        if size <= WARM_TOL * max(1.0, abs(found)) and found >= start:
            return r.to(dtype).clamp(eps, 1 - eps), w.to(dtype)

    def sticks(p):
        return torch.sigmoid(p[:K]).clamp(1e-12, 1 - 1e-12), torch.exp(p[K:]).clamp(max=limit)

    def loss_and_grad(x):
        p = torch.as_tensor(x, device=device)
        r, w = sticks(p)
        d_rho, d_omega = top_level_gradient(r, w, num_docs, sum_log_pi, alpha, gamma)
        # chain rule through sticks(): d rho / d logit = rho (1 - rho), d omega / d log omega = omega,
        # zero where a clamp holds (as autograd would give)
        sig = torch.sigmoid(p[:K])
        d_logit = torch.where((sig >= 1e-12) & (sig <= 1 - 1e-12), d_rho * r * (1 - r), torch.zeros_like(r))
        d_log = torch.where(torch.exp(p[K:]) <= limit, d_omega * w, torch.zeros_like(w))
        return -float(value(r, w)), -torch.cat([d_logit, d_log]).cpu().numpy()

    x0 = torch.cat([torch.logit(rho), torch.log(omega).clamp(max=math.log(limit))]).cpu().numpy()
    with threadpool_limits(limits=1, user_api="blas"):
        found = minimize(loss_and_grad, x0, jac=True, method="L-BFGS-B",
                         bounds=[(None, None)] * K + [(None, math.log(limit))] * K,
                         options={"maxiter": max_iter, "maxfun": 2 * max_iter, "maxcor": 20, "ftol": 1e-15,
                                  "gtol": 1e-10})
    with torch.no_grad():
        r, w = sticks(torch.as_tensor(found.x, device=device))
        r, w, _ = newton_steps(r, w, num_docs, sum_log_pi, alpha, gamma, limit)
        if torch.isfinite(r).all() and torch.isfinite(w).all() and float(value(r, w)) >= start:
            rho, omega = r, w
    return rho.to(dtype).clamp(eps, 1 - eps), omega.to(dtype)


def fit_top_level(rho, omega, num_docs, sum_log_pi, alpha, gamma, stick_iters=100, rounds=3):
    """Sticks (:func:`optimize_sticks`) and learnt concentrations
    (:class:`~pyro_memo.allocation.concentration.GammaConcentration`, closed form given the sticks:
    :func:`concentration_terms`) alternated for up to ``rounds`` rounds, each step exact, so none
    lowers the bound. Returns ``(rho, omega, alpha, gamma)``."""
    learnt = any(isinstance(c, GammaConcentration) for c in (alpha, gamma))
    for _ in range(rounds if learnt else 1):
        rho, omega = optimize_sticks(rho, omega, num_docs, sum_log_pi, alpha, gamma, max_iter=stick_iters)
        if not learnt:
            break
        terms = concentration_terms(rho, omega, num_docs, sum_log_pi)
        new = [c.updated(*terms[name]) if isinstance(c, GammaConcentration) else c
               for name, c in (("alpha", alpha), ("gamma", gamma))]
        moved = max(abs(float(a) - float(b)) / float(b) for a, b in zip(new, (alpha, gamma), strict=True))
        alpha, gamma = new
        if moved < 1e-6:
            break
    return rho, omega, alpha, gamma
