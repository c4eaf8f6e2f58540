"""The HDP topic model written as an ordinary Pyro program, and the guide of a fitted
:class:`~pyro_memo.topics.HDPPosterior`."""

import math

import pyro
import pyro.distributions as dist
import torch
from pyro.ops.indexing import Vindex

from ..allocation import stick_breaking_weights
from ..checks import as_index_tensor, as_positive_int, check_positive_finite


def _gamma_prior(name, prior):
    """``None``, or ``(s1, s2)`` as two positive finite floats (else ``ValueError``)."""
    if prior is None:
        return None
    try:
        s1, s2 = (float(a) for a in prior)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be None or a pair (shape, rate); got {prior!r}") from None
    if not (0 < s1 < math.inf and 0 < s2 < math.inf):
        raise ValueError(f"{name}: a Gamma prior's shape and rate must be positive and finite; got ({s1}, {s2})")
    return s1, s2


class HDPTopicModel:
    """A truncated HDP topic model over tokens (Sudderth's HDP talk, "Hierarchical DP Topic Model").

    ``K`` top-level sticks :math:`u_k \\sim \\mathrm{Beta}(1, \\gamma)` give global weights
    :math:`\\beta` over ``K + 1`` entries (the last one the tail beyond the truncation);
    ``K + 1`` topics :math:`\\phi_k \\sim \\mathrm{Dir}(\\lambda_0)`; each document
    :math:`\\pi_d \\sim \\mathrm{Dir}(\\alpha\\beta)`, the finite-dimensional marginal of
    :math:`\\mathrm{DP}(\\alpha\\beta)` on those ``K + 1`` cells; each token
    :math:`z \\sim \\mathrm{Cat}(\\pi_d)`, :math:`x \\sim \\mathrm{Cat}(\\phi_z)`.

    :param int V: vocabulary size.
    :param int K: truncation (number of explicit topics).
    :param float alpha: document-level concentration.
    :param float gamma: top-level concentration.
    :param float lam0: symmetric Dirichlet prior on topics.
    :param alpha_prior: ``(s1, s2)`` (shape, rate): make the document-level concentration latent,
        ``alpha = pyro.sample("alpha", dist.Gamma(s1, s2))`` outside any plate (``alpha`` unused).
    :param gamma_prior: ``(s1, s2)``: likewise ``gamma = pyro.sample("gamma", dist.Gamma(s1, s2))``.
    """

    def __init__(self, V, K, alpha=0.5, gamma=10.0, lam0=0.1, alpha_prior=None, gamma_prior=None):
        as_positive_int(V, "V"), as_positive_int(K, "K")  # 2.5 is not truncated, True is not 1
        for name, value in (("alpha", alpha), ("gamma", gamma), ("lam0", lam0)):
            check_positive_finite(value, name)
        self.V, self.K = int(V), int(K)
        self.alpha, self.gamma, self.lam0 = float(alpha), float(gamma), float(lam0)
        self.alpha_prior = _gamma_prior("alpha_prior", alpha_prior)
        self.gamma_prior = _gamma_prior("gamma_prior", gamma_prior)

    def _concentration(self, name, value, prior, one):
        if prior is None:
            return value * one
        return pyro.sample(name, dist.Gamma(prior[0] * one, prior[1] * one))

    def __call__(self, doc, word=None, num_docs=None):
        """Run the model on tokens: ``doc`` ``(N,)`` document index of each token, ``word``
        ``(N,)`` observed word ids (``None`` to generate); the model runs on ``doc``'s device."""
        num_docs = None if num_docs is None else as_positive_int(num_docs, "num_docs")
        doc = as_index_tensor(doc, num_docs, "doc")
        if doc.dim() != 1 or not len(doc):
            raise ValueError(f"doc must be a non-empty 1-D array, each token's document id; got shape "
                             f"{tuple(doc.shape)}")
        one = torch.ones((), dtype=torch.float64, device=doc.device)
        num_docs = int(doc.max()) + 1 if num_docs is None else num_docs
        if word is not None:
            word = as_index_tensor(word, self.V, "word")
        alpha = self._concentration("alpha", self.alpha, self.alpha_prior, one)
        gamma = self._concentration("gamma", self.gamma, self.gamma_prior, one)
        with pyro.plate("sticks", self.K):
            u = pyro.sample("u", dist.Beta(one, gamma))
        beta = stick_breaking_weights(u)  # (..., K + 1)
        lam0 = torch.full((self.V,), self.lam0, dtype=torch.float64, device=one.device)
        with pyro.plate("topics", self.K + 1):
            phi = pyro.sample("phi", dist.Dirichlet(lam0))
        with pyro.plate("documents", num_docs):
            pi = pyro.sample("pi", dist.Dirichlet(alpha.unsqueeze(-1) * beta.unsqueeze(-2)))
        with pyro.plate("tokens", len(doc)):
            z = pyro.sample("z", dist.Categorical(pi[..., doc, :]))
            return pyro.sample("x", dist.Categorical(Vindex(phi.unsqueeze(-3))[..., z, :]), obs=word)


class HDPTopicGuide:
    """The variational distribution of a memoized HDP fit as a Pyro guide for
    :class:`HDPTopicModel`: ``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``,
    ``q(phi_k) = Dir(lam_k)`` (the tail topic at its prior), ``q(pi_d) = Dir(theta_d)``,
    ``q(z_n) = Cat(r_n)`` with no mass on the tail.

    :param posterior: a :class:`~pyro_memo.topics.HDPPosterior`.
    :param theta: ``(D, K + 1)`` document Dirichlets.
    :param resp: ``(N, K)`` token responsibilities (one row per token of the model's input).
    """

    def __init__(self, posterior, theta, resp):
        self.posterior, self.theta, self.resp = posterior, theta, resp

    def __call__(self, doc, word=None, num_docs=None):
        post = self.posterior
        with pyro.plate("sticks", post.K):
            pyro.sample("u", dist.Beta(post.rho * post.omega, (1 - post.rho) * post.omega))
        lam = torch.cat([post.lam, torch.full_like(post.lam[:1], post.lam0)])
        with pyro.plate("topics", post.K + 1):
            pyro.sample("phi", dist.Dirichlet(lam))
        with pyro.plate("documents", self.theta.shape[0]):
            pyro.sample("pi", dist.Dirichlet(self.theta))
        probs = torch.cat([self.resp, self.resp.new_zeros(len(self.resp), 1)], 1)
        with pyro.plate("tokens", len(doc)):
            pyro.sample("z", dist.Categorical(probs))
