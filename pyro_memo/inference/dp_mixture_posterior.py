"""The truncated variational posterior of a DP mixture and its closed-form updates."""

import torch

from ..allocation import DPSticks
from ..families import SparseResponsibilities, candidate_groups, family_from_state
from ..families._sparse import normalize_log_weights
from ..families.base import chunk_elements
from ..posterior import VariationalPosterior
from ..summaries import Summary, entropy_per_component


class DPMixturePosterior(VariationalPosterior):
    """Global variational factors :math:`q(v_k)\\,q(\\phi_k)`, ``k = 1..K``, of a DP mixture.

    Holds the family's posterior parameters (``component``, a dict of ``(K, ...)``
    tensors) and the stick parameters ``eta1``, ``eta0``. Local factors
    :math:`q(z_n)` are never stored: :meth:`local_step` computes them on demand.

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param sticks: a :class:`~pyro_memo.DPSticks`.
    :param dict component: posterior parameters of :math:`q(\\phi_k)`.
    :param torch.Tensor eta1: ``(K,)`` first Beta parameter of :math:`q(v_k)`.
    :param torch.Tensor eta0: ``(K,)`` second Beta parameter of :math:`q(v_k)`.
    :param torch.Tensor q_alpha: ``(2,)`` shape and rate ``(w1, w2)`` of :math:`q(\\alpha)` when the
        sticks learn the concentration (``sticks.alpha_prior`` set; ``None`` starts from the prior), else ``None``.
    """

    def __init__(self, family, sticks, component, eta1, eta0, q_alpha=None):
        self.family = family
        self.sticks = sticks
        self.component = component
        self.eta1 = eta1
        self.eta0 = eta0
        self.q_alpha = q_alpha

    @classmethod
    def from_summary(cls, family, sticks, summary, q_alpha=None):
        """The posterior that is optimal for ``summary`` (Hughes & Sudderth 2013, eq. 10); a learnt
        concentration's coordinate ascent starts from ``q_alpha`` (default its prior)."""
        post = cls(family, sticks, None, None, None, q_alpha)
        post.update(summary)
        return post

    @classmethod
    def prior(cls, family, sticks, K):
        """``K`` components all at the prior (the optimum for no data)."""
        return cls.from_summary(family, sticks, Summary.zeros(family, K))

    @property
    def K(self):
        return self.eta1.shape[0]

    @property
    def dtype(self):
        return self.family.dtype

    def optimal_for(self, summary):
        """A new posterior optimal for ``summary`` (Hughes & Sudderth 2013, eq. 10); this one is unchanged."""
        return DPMixturePosterior.from_summary(self.family, self.sticks, summary, self.q_alpha)

    # ---------------------------------------------------------------- updates
    def update_components(self, summary):
        """:math:`\\hat\\lambda_k = \\lambda_0 + s_k(x)` (Hughes & Sudderth 2013, eq. 10)."""
        self.component = self.family.posterior(summary.counts, summary.stats)

    def update_sticks(self, summary):
        """:math:`\\hat\\eta_{k1} = 1 + \\hat N_k`, :math:`\\hat\\eta_{k0} = \\alpha + \\sum_{\\ell>k}\\hat N_\\ell`;
        with a learnt concentration, coordinate ascent on :math:`q(v)` (with :math:`E[\\alpha]` for
        :math:`\\alpha`) and :math:`q(\\alpha)` (Blei & Jordan 2006, §5) from the current :math:`q(\\alpha)`."""
        if self.sticks.alpha_prior is None:
            self.eta1, self.eta0 = self.sticks.posterior(summary.counts)
        else:
            q = None if self.q_alpha is None else self.q_alpha.to(summary.counts)
            self.eta1, self.eta0, self.q_alpha = self.sticks.fit_posterior(summary.counts, q)

    def valid_components(self):
        """``(K,)``: components whose stick and family factors are valid distributions
        (:meth:`~pyro_memo.ConjugateFamily.valid`)."""
        return self.family.valid(self.component) & (self.eta1 > 0) & (self.eta0 > 0)

    def expected_alpha(self):
        """:math:`E_q[\\alpha]`: the fixed concentration, or the mean of the learnt :math:`q(\\alpha)`."""
        return float(self.sticks.expected_alpha(self.q_alpha))

    def update(self, summary):
        """Both global blocks; each is the exact coordinate-ascent optimum given ``summary``."""
        self.update_components(summary)
        self.update_sticks(summary)
        return self

    # ------------------------------------------------------------ local step
    def log_joint_function(self, dtype=None):
        """``x ->`` unnormalised :math:`\\log \\tilde r_{nk} = E[\\log w_k] + E[\\log p(x_n \\mid \\phi_k)]`
        (eq. 9), with the terms of the globals alone (:math:`E[\\log w_k]`, the family's
        :meth:`~pyro_memo.ConjugateFamily.log_lik_function`) computed once for all the
        chunks of a local step, and once for all the batches that read the same globals: the function
        is kept until the factors change (an over-relaxed step runs several batches under one
        proposal; the Cholesky factors and inverses cost 13% of a 1,000-item local step at K = D = 25).

        ``x`` of another float dtype (float32 data against a float64 fit) is cast to the family's, or to
        ``dtype`` (float32: the mixed-precision local step, its globals' terms computed in float64 and
        its products with the data in float32; see :meth:`local_step`).
        """
        family = self.family
        dtype = family.dtype if dtype is None else dtype

        def build():
            log_lik = family.log_lik_function(self.component, dtype)
            e_log_w = self.sticks.expected_log_weights(self.eta1, self.eta0).to(dtype)

            def log_joint(x, products=None):
                """``products``: the family's :meth:`~pyro_memo.ConjugateFamily.item_products` of
                ``x`` (used when the log-likelihood runs in the family's precision)."""
                x = torch.as_tensor(x).to(dtype=dtype, device=family.device)
                if products is None or dtype != family.dtype:
                    return log_lik(x) + e_log_w
                return log_lik(x, products) + e_log_w

            return log_joint

        return self._kept("_log_joint", dtype, build)

    def _kept(self, name, dtype, build):
        """``build()``, kept in attribute ``name`` with ``dtype`` until the factors change (they are
        replaced, never changed in place, by the updates; absent until first built, and in copies)."""
        factors = (self.component, self.eta1, self.eta0)
        kept = getattr(self, name, None)
        if kept is not None and kept[0] == dtype and all(a is b for a, b in zip(kept[1], factors, strict=True)):
            return kept[2]
        function = build()
        setattr(self, name, (dtype, factors, function))
        return function

    def __getstate__(self):
        """Pickled (for Dask workers) without the kept :meth:`log_joint_function`."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_log_joint", "_column_log_joint")}

    def log_joint_resp(self, x):
        """Unnormalised :math:`\\log \\tilde r_{nk}` of items ``x`` (eq. 9; see :meth:`log_joint_function`),
        chunk by chunk (:meth:`chunks`: the temporaries stay bounded however many items)."""
        log_joint = self.log_joint_function()
        x = torch.as_tensor(x)
        if x.dim() != 2 or x.shape[0] <= self.chunk_rows(x):
            return log_joint(x)
        return torch.cat([log_joint(chunk) for chunk in self.chunks(x)])

    def responsibilities(self, x):
        """:math:`\\hat r_{nk}` (Hughes & Sudderth 2013, eq. 9), normalised by log-sum-exp: ``(N, K)``.

        Entries below :math:`\\sqrt{\\text{tiny}}` (1.5e-154 in float64) are set to zero. They
        change the ELBO by less than ``N * 1e-150`` nats, and left alone they underflow into
        denormal numbers that slow the summary matrix products several-fold.
        """
        return normalize_log_weights(self.log_joint_resp(x))

    def sparse_responsibilities(self, x, L):
        """The optimal :math:`q(z_n)` supported on at most ``L`` components (Hughes & Sudderth
        2016): eq. 9's softmax over each item's ``L`` largest log-weights, as
        :class:`~pyro_memo.families.SparseResponsibilities` (underflow dropped as in :meth:`responsibilities`)."""
        return SparseResponsibilities.top(self.log_joint_resp(x), L)

    def chunk_rows(self, x):
        """Rows per chunk of the local step: bounds its temporaries, the family's
        :meth:`~pyro_memo.ConjugateFamily.local_step_numbers` per row, to
        ``chunk_elements()`` numbers (~16 MB in float64 on the CPU, where a
        batch of 1,000 25-dimensional items at K = 25 is one chunk and a long lap does not fragment
        the heap; 256 MB on a GPU, where each chunk costs kernel launches)."""
        return max(256, chunk_elements(self.family.device) // self.family.local_step_numbers(self.K))

    def chunks(self, x):
        """``x`` in consecutive chunks of :meth:`chunk_rows` rows (``x`` itself when it is one chunk, so
        the products kept for it are found: :data:`~pyro_memo.families.PRODUCT_CACHE`)."""
        step = self.chunk_rows(x)
        if x.shape[0] <= step:
            return [x]
        return [x[lo:lo + step] for lo in range(0, x.shape[0], step)]

    def local_step(self, x, sparse_L=None, local_dtype=None):
        """Optimal :math:`q(z_n)` for items ``x`` and their :class:`Summary`, computed in chunks
        of :meth:`chunk_rows` rows (summaries are additive, so the result is the same).

        :param int sparse_L: keep each item's ``L`` largest responsibilities, renormalised (the
            optimal :math:`q(z_n)` on at most ``L`` components, Hughes & Sudderth 2016; see
            :meth:`sparse_responsibilities`); the statistics then cost :math:`O(NLD^2)` instead of
            :math:`O(NKD^2)` for a full-covariance Gaussian. ``None`` (or ``L >= K``): dense.
        :param local_dtype: ``torch.float32`` for the mixed-precision local step of a float64
            posterior: the expected log-likelihoods' products with the data (the :math:`O(NKD^2)`
            part) and the responsibilities in float32; the globals' own terms (Cholesky factors of
            scale matrices, which float32 cannot factorise when a direction of the data has no
            variance, as for zero-mean patches) and the statistics accumulated from the data in
            float64 (second moments summed in float32 carry rounding larger than such a direction's
            prior variance, which could make a posterior scale matrix indefinite).
        :returns: ``(resp, summary)``, ``resp`` the ``(N, K)`` responsibilities (zero outside each
            item's support when sparse).
        """
        if sparse_L is not None and sparse_L < self.K:
            resp, summary = self.sparse_local_step(x, sparse_L, local_dtype)
            return resp.dense(), summary
        x = torch.as_tensor(x).to(dtype=self.family.dtype, device=self.family.device)
        return self._dense_local_step(x, self.log_joint_function(local_dtype))  # casts each chunk to local_dtype

    def sparse_local_step(self, x, L, local_dtype=None):
        """:meth:`local_step` with ``sparse_L = L``, the responsibilities as
        :class:`~pyro_memo.families.SparseResponsibilities` (each item's support, most probable first)."""
        dtype = self.family.dtype
        x = torch.as_tensor(x).to(dtype=dtype, device=self.family.device)
        log_joint = self.log_joint_function(local_dtype)
        resp = SparseResponsibilities.cat([SparseResponsibilities.top(log_joint(chunk), L)
                                           for chunk in self.chunks(x)]).to(dtype)
        return resp, Summary.from_sparse_responsibilities(self.family, x, resp)

    def column_log_joint_function(self, dtype=None):
        """``(x, columns, products=None) ->`` :meth:`log_joint_function`'s log-weights of items ``x``
        for the components ``columns`` only (the family's
        :meth:`~pyro_memo.ConjugateFamily.column_log_lik_function`), kept like it until the
        factors change."""
        family = self.family
        dtype = family.dtype if dtype is None else dtype

        def build():
            log_lik = family.column_log_lik_function(self.component, dtype)
            e_log_w = self.sticks.expected_log_weights(self.eta1, self.eta0).to(dtype)

            def column_log_joint(x, columns, products=None):
                x = torch.as_tensor(x).to(dtype=dtype, device=family.device)
                if products is None or dtype != family.dtype:
                    return log_lik(x, columns) + e_log_w[columns]
                return log_lik(x, columns, products) + e_log_w[columns]

            return column_log_joint

        return self._kept("_column_log_joint", dtype, build)

    def candidate_local_step(self, x, support, L, local_dtype=None, extra=0, generator=None):
        """:meth:`local_step` with sparse responsibilities searched among each item's candidates
        only (``candidate_groups()`` of its last ``support`` ``(N, L')``, plus
        ``extra`` random components per group): the best ``L`` candidates of each item, softmax-normalised.
        Each item's last support is among its candidates, so its :math:`q(z_n)` is at least as good as
        the one that support gave under these globals; the log-likelihoods cost the candidates'
        share of ``K`` (Hughes & Sudderth 2016's restricted family, searched as in Forster & Lücke 2018).

        :returns: ``(resp, summary)``, ``resp`` the :class:`~pyro_memo.families.SparseResponsibilities`
            (each item's support, most probable first).
        """
        family, dtype = self.family, self.family.dtype
        x = torch.as_tensor(x).to(dtype=dtype, device=family.device)
        log_joint = self.column_log_joint_function(local_dtype)
        values = x.new_zeros((x.shape[0], L))
        indices = torch.zeros((x.shape[0], L), dtype=torch.long, device=x.device)
        groups = candidate_groups(support.to(x.device), self.K, extra, generator)
        for block in _blocks(groups, self.chunk_rows(x)):  # a few groups' items at a time, their products made once
            rows = torch.cat([items for items, _ in block])
            chunk = x[rows]
            products = family.item_products(chunk)
            lo = 0
            for items, columns in block:
                hi = lo + len(items)
                part = SparseResponsibilities.top(
                    log_joint(chunk[lo:hi], columns, None if products is None else products[lo:hi]), L)
                values[items] = part.values.to(dtype)
                indices[items] = columns[part.indices]
                lo = hi
        resp = SparseResponsibilities(values, indices, self.K)
        return resp, Summary.from_sparse_responsibilities(family, x, resp)

    def _dense_local_step(self, x, log_joint):
        """:meth:`local_step` with every responsibility kept, summarised chunk by chunk: counts, entropy
        and the family's :meth:`~pyro_memo.ConjugateFamily.chunk_stats` summed over the chunks,
        the statistics finished once."""
        family = self.family
        resps, counts, entropy, total = [], 0, 0, None
        for chunk in self.chunks(x):
            # shared by the log-likelihood and the statistics; a batch of one chunk keeps them for its next
            # visits and its moves' (:data:`~pyro_memo.families.PRODUCT_CACHE`)
            products = family.item_products(chunk, keep=chunk is x)
            resp = normalize_log_weights(log_joint(chunk, products)).to(chunk.dtype)
            part = family.chunk_stats(chunk, resp, products)
            total = part if total is None else {name: total[name] + part[name] for name in part}
            counts = counts + resp.sum(0)
            entropy = entropy + entropy_per_component(resp)
            resps.append(resp)
        return torch.cat(resps), Summary(counts, family.finish_stats(total), entropy, x.shape[0])

    # ------------------------------------------------------------------ ELBO
    def elbo_terms(self, summary):
        """The exact ELBO of Hughes & Sudderth 2013, eq. 8, split into its terms (each a scalar tensor)."""
        fam = self.family
        data = fam.expected_log_lik_from_stats(summary.counts, summary.stats, self.component).sum()
        return {
            "data": data,
            "kl_components": fam.kl_to_prior(self.component).sum(),
            "allocation": self.sticks.elbo(summary.counts, self.eta1, self.eta0, self.q_alpha),
            "entropy": summary.entropy.sum(),
        }

    def elbo_gain(self, new, old):
        """``elbo(new) - elbo(old)`` for two summaries of the same items (a batch's new and cached ones),
        from the terms that depend on them: the data term and :math:`\\sum_k \\hat N_k E[\\log w_k]` are
        linear in the summary (eq. 8), so they are taken of the difference, and the entropies are
        subtracted; the globals' own terms (the KLs) cancel. A third of the cost of two :meth:`elbo`
        calls at K = 200, D = 64."""
        delta = new - old
        data = self.family.expected_log_lik_from_stats(delta.counts, delta.stats, self.component).sum()
        allocation = (delta.counts * self.sticks.expected_log_weights(self.eta1, self.eta0)).sum()
        return float(data + allocation + new.entropy.sum() - old.entropy.sum())

    def elbo(self, summary):
        """Exact full-data ELBO (Hughes & Sudderth 2013, eq. 8): linear in the summaries plus the entropy."""
        t = self.elbo_terms(summary)
        return t["data"] - t["kl_components"] + t["allocation"] + t["entropy"]

    def optimal_bound(self, summary):
        """``(bound, globals)``: :meth:`optimal_for` ``summary`` and the :meth:`elbo` of ``summary`` under
        them, the bound in closed form: with
        :math:`q(\\phi_k)` the conjugate posterior of the soft statistics, the data term less the KL is
        the log marginal likelihood of the component's statistics (``family.log_marginal``; a conjugate
        family's identity, checked against :meth:`elbo` in the tests), so one log-determinant per
        component replaces the expected log-likelihood and the KL; the sticks' terms collapse the same
        way (:meth:`~pyro_memo.DPSticks.optimal_elbo`). A learnt concentration has no
        closed form: :meth:`elbo` of :meth:`optimal_for`."""
        if self.sticks.alpha_prior is not None:
            return super().optimal_bound(summary)
        counts, best = summary.counts, self.optimal_for(summary)
        data = self.family.log_marginal(counts, summary.stats, best.component).sum()
        return float(data + self.sticks.optimal_elbo(counts) + summary.entropy.sum()), best

    # ------------------------------------------------------------- read-outs
    def expected_weights(self):
        """:math:`E_q[w_k] = E[v_k]\\prod_{\\ell<k} E[1 - v_\\ell]`: ``(K,)``."""
        e_v = self.eta1 / (self.eta1 + self.eta0)
        if self.sticks.truncation == "direct":
            e_v = torch.cat([e_v[:-1], torch.ones_like(e_v[-1:])])
        remaining = torch.cumprod(torch.cat([torch.ones_like(e_v[:1]), 1 - e_v[:-1]]), 0)
        return e_v * remaining

    def tensor_shapes(self, summaries):
        """:meth:`~pyro_memo.posterior.VariationalPosterior.tensor_shapes`: ``K`` from ``eta1``; each component
        parameter has its prior's shape after ``K`` (``D`` from the prior), each summary statistic the shape the
        family gives ``K`` components."""
        K, prior = self.K, self.family.prior
        zeros = Summary.zeros(self.family, K)
        expected = {"eta0": (K,), **{f"component {k!r}": (K, *prior[k].shape) for k in prior}}
        found = {"eta0": self.eta0.shape, **{f"component {k!r}": v.shape for k, v in self.component.items()}}
        for label, summary in summaries.items():
            if summary is None:
                continue
            expected.update({f"{label} counts": (K,), f"{label} entropy": (K,),
                             **{f"{label} stats {k!r}": tuple(v.shape) for k, v in zeros.stats.items()}})
            found.update({f"{label} counts": summary.counts.shape, f"{label} entropy": summary.entropy.shape,
                          **{f"{label} stats {k!r}": v.shape for k, v in summary.stats.items()}})
        if self.q_alpha is not None:
            expected["q_alpha"], found["q_alpha"] = (2,), self.q_alpha.shape
        return expected, found, f"K = {K} components from eta1, D = {self.family.dim} from the family's prior"

    def state_dict(self):
        """Family, prior, sticks and factors as plain tensors, numbers and strings (checkpoints)."""
        d = {**self.family.state_dict(), "alpha": self.sticks.alpha, "truncation": self.sticks.truncation,
             "component": {k: v.cpu() for k, v in self.component.items()}, "eta1": self.eta1.cpu(),
             "eta0": self.eta0.cpu()}
        if self.sticks.alpha_prior is not None:
            d["alpha_prior"] = list(self.sticks.alpha_prior)
            d["q_alpha"] = None if self.q_alpha is None else self.q_alpha.cpu()
        return d

    @classmethod
    def from_state_dict(cls, d, device=None):
        """The inverse of :meth:`state_dict`."""
        family = family_from_state(d, device)

        def move(t):
            return t.to(dtype=family.dtype, device=device)

        q_alpha = d.get("q_alpha")
        return cls(family, DPSticks(d["alpha"], d["truncation"], d.get("alpha_prior")),
                   {k: move(v) for k, v in d["component"].items()}, move(d["eta1"]), move(d["eta0"]),
                   None if q_alpha is None else move(q_alpha))

    def to(self, dtype=None, device=None):
        """A copy with every tensor (and the family) on ``dtype`` / ``device``."""
        family = self.family.to(dtype=dtype, device=device)

        def move(t):
            return t.to(dtype=family.dtype, device=family.device)

        return DPMixturePosterior(
            family,
            self.sticks,
            {k: move(v) for k, v in self.component.items()},
            move(self.eta1),
            move(self.eta0),
            None if self.q_alpha is None else move(self.q_alpha),
        )


def _blocks(groups, rows):
    """``groups`` (``(items, columns)`` pairs) gathered into consecutive blocks of at most ``rows`` items
    (a larger group split into pieces of ``rows``), so that a block's per-item products are formed in one
    call of bounded size rather than once per (often small) group."""
    block, size = [], 0
    for items, columns in groups:
        for lo in range(0, len(items), rows):
            piece = items[lo:lo + rows]
            if size + len(piece) > rows and block:
                yield block
                block, size = [], 0
            block.append((piece, columns))
            size += len(piece)
    if block:
        yield block
