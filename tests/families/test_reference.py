"""Reference tests of the conjugate families against independent implementations.

Every closed form in :mod:`pyro_memo.families` is checked against something that does
not share its code: Monte Carlo over samplers from numpy / scipy.stats with densities
from scipy.stats (and ``torch.distributions.MultivariateNormal`` for Gaussians whose
covariance changes with every sample, itself anchored to ``scipy.stats.multivariate_normal``),
chain rules of posterior predictive distributions written with scipy.stats, and textbook
conjugate updates written out in numpy.

Monte Carlo checks use ``N_MC`` samples per mixture component and a fixed seed, and
require the closed form to lie within ``Z_MC`` Monte Carlo standard errors of the
Monte Carlo mean.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from pyro_memo.families import FAMILIES

#: Monte Carlo sample size per component
N_MC = 20_000
#: tolerance of Monte Carlo checks, in Monte Carlo standard errors
Z_MC = 3.0
#: number of mixture components of the random posteriors
K = 3
SEED = 20240601


def _np(t):
    return t.detach().cpu().numpy()


def _t(a, dtype=torch.float64):
    return torch.as_tensor(np.asarray(a), dtype=dtype)


def _spd(rng, d):
    a = rng.normal(size=(d, d))
    return a @ a.T / d + np.eye(d)


def _post_k(post, k):
    """Component ``k`` of a posterior dict, as numpy (0-d entries as Python floats)."""
    out = {key: _np(v[k]) for key, v in post.items()}
    return {key: float(v) if v.ndim == 0 else v for key, v in out.items()}


def _mvn_logpdf_prec(x, mu, prec):
    """:math:`\\log N(x \\mid \\mu, \\mathrm{prec}^{-1})` batched over broadcast leading dims.

    Evaluated with ``torch.distributions.MultivariateNormal`` (vectorised, independent of
    pyro_memo); the first few batch entries are cross-checked against
    ``scipy.stats.multivariate_normal.logpdf`` so the reference is anchored to scipy.
    """
    d = x.shape[-1]
    batch = np.broadcast_shapes(x.shape[:-1], mu.shape[:-1], prec.shape[:-2])
    xb = np.array(np.broadcast_to(x, batch + (d,)).reshape(-1, d))
    mb = np.array(np.broadcast_to(mu, batch + (d,)).reshape(-1, d))
    pb = np.array(np.broadcast_to(prec, batch + (d, d)).reshape(-1, d, d))
    out = _np(torch.distributions.MultivariateNormal(_t(mb), precision_matrix=_t(pb)).log_prob(_t(xb)))
    for i in range(min(8, len(out))):
        ref = stats.multivariate_normal.logpdf(xb[i], mean=mb[i], cov=np.linalg.inv(pb[i]))
        assert abs(out[i] - ref) <= 1e-9 * max(1.0, abs(ref)), "torch MVN reference disagrees with scipy"
    return out.reshape(batch)


def _wishart_logpdf(lam, nu, B):
    """scipy.stats.wishart log-density of ``(S, D, D)`` samples; ``B`` is the inverse scale."""
    return np.atleast_1d(stats.wishart.logpdf(np.moveaxis(lam, 0, -1), df=nu, scale=np.linalg.inv(B)))


def _wishart_rvs(nu, B, size, rng):
    lam = stats.wishart.rvs(df=nu, scale=np.linalg.inv(B), size=size, random_state=rng)
    d = B.shape[-1]
    return np.reshape(lam, (size, d, d))


# ---------------------------------------------------------------------------------------
# Per-family specifications: data, a non-default prior, samplers and scipy references.
# ---------------------------------------------------------------------------------------


class GaussSpec:
    name = "gauss"
    dim = 3

    def data(self, rng, n, d=None):
        d = d or self.dim
        mix = rng.normal(size=(d, d))
        return rng.normal(size=(n, d)) @ mix.T + rng.normal(size=d)

    def const_value(self):
        return 1e3

    def prior(self, rng, d=None):
        d = d or self.dim
        return {"m": rng.normal(size=d), "kappa": 0.7, "nu": d + 1.5, "B": _spd(rng, d)}

    def sample(self, p, rng, s):
        lam = _wishart_rvs(p["nu"], p["B"], s, rng)
        chol = np.linalg.cholesky(p["kappa"] * lam)  # kappa Lam = L L^T
        z = rng.normal(size=(s, self.dim, 1))
        mu = p["m"] + np.linalg.solve(np.swapaxes(chol, -1, -2), z)[..., 0]  # cov (kappa Lam)^-1
        return {"mu": mu, "Lambda": lam}

    def loglik(self, x, smp):
        """(S, N) log-likelihoods of the rows of ``x`` at each sample."""
        return _mvn_logpdf_prec(x[None], smp["mu"][:, None], smp["Lambda"][:, None])

    def logq(self, p, smp):
        """(S,) log-density of the samples under the prior-form distribution ``p``."""
        return _wishart_logpdf(smp["Lambda"], p["nu"], p["B"]) + _mvn_logpdf_prec(
            smp["mu"], p["m"], p["kappa"] * smp["Lambda"]
        )

    def loglik_scipy(self, x, params):
        return np.array(
            [
                stats.multivariate_normal.logpdf(xi, mean=mi, cov=np.linalg.inv(li))
                for xi, mi, li in zip(x, params["mu"], params["Lambda"], strict=True)
            ]
        )

    def logprior_scipy(self, p, params):
        out = []
        for mi, li in zip(params["mu"], params["Lambda"], strict=True):
            lw = stats.wishart.logpdf(li, df=p["nu"], scale=np.linalg.inv(p["B"]))
            ln = stats.multivariate_normal.logpdf(mi, mean=p["m"], cov=np.linalg.inv(p["kappa"] * li))
            out.append(lw + ln)
        return np.array(out)

    def textbook_posterior(self, p, xk, w):
        """Weighted Normal-Wishart update; ``w`` are the (hard or soft) weights of ``xk``."""
        n = w.sum()
        if n == 0:
            return dict(p)
        xbar = w @ xk / n
        kappa = p["kappa"] + n
        centred = xk - xbar
        delta = xbar - p["m"]
        B = p["B"] + (w[:, None] * centred).T @ centred + p["kappa"] * n / kappa * np.outer(delta, delta)
        return {"m": (p["kappa"] * p["m"] + n * xbar) / kappa, "kappa": kappa, "nu": p["nu"] + n, "B": B}

    def log_marginal_chain(self, p, xk):
        """Chain rule of multivariate-t posterior predictives, sequential rank-one updates."""
        m, kappa, nu, B = p["m"].copy(), p["kappa"], p["nu"], p["B"].copy()
        d = len(m)
        total = 0.0
        for x in xk:
            df = nu - d + 1
            shape = B * (kappa + 1) / (kappa * df)
            total += stats.multivariate_t.logpdf(x, loc=m, shape=shape, df=df)
            B = B + kappa / (kappa + 1) * np.outer(x - m, x - m)
            m = (kappa * m + x) / (kappa + 1)
            kappa, nu = kappa + 1, nu + 1
        return total

    def random_params(self, rng, n):
        lam = _wishart_rvs(self.dim + 2.0, np.eye(self.dim), n, rng)
        return {"mu": rng.normal(size=(n, self.dim)), "Lambda": lam}


class ZeroMeanGaussSpec(GaussSpec):
    name = "zm-gauss"

    def prior(self, rng, d=None):
        d = d or self.dim
        return {"nu": d + 1.5, "B": _spd(rng, d)}

    def sample(self, p, rng, s):
        return {"Lambda": _wishart_rvs(p["nu"], p["B"], s, rng)}

    def loglik(self, x, smp):
        return _mvn_logpdf_prec(x[None], np.zeros(x.shape[-1]), smp["Lambda"][:, None])

    def logq(self, p, smp):
        return _wishart_logpdf(smp["Lambda"], p["nu"], p["B"])

    def loglik_scipy(self, x, params):
        return np.array(
            [
                stats.multivariate_normal.logpdf(xi, mean=np.zeros(len(xi)), cov=np.linalg.inv(li))
                for xi, li in zip(x, params["Lambda"], strict=True)
            ]
        )

    def logprior_scipy(self, p, params):
        return np.array(
            [stats.wishart.logpdf(li, df=p["nu"], scale=np.linalg.inv(p["B"])) for li in params["Lambda"]]
        )

    def textbook_posterior(self, p, xk, w):
        return {"nu": p["nu"] + w.sum(), "B": p["B"] + (w[:, None] * xk).T @ xk}

    def log_marginal_chain(self, p, xk):
        nu, B = p["nu"], p["B"].copy()
        d = B.shape[0]
        total = 0.0
        for x in xk:
            df = nu - d + 1
            total += stats.multivariate_t.logpdf(x, loc=np.zeros(d), shape=B / df, df=df)
            B = B + np.outer(x, x)
            nu = nu + 1
        return total

    def random_params(self, rng, n):
        return {"Lambda": _wishart_rvs(self.dim + 2.0, np.eye(self.dim), n, rng)}


class DiagGaussSpec(GaussSpec):
    name = "diag-gauss"

    def prior(self, rng, d=None):
        d = d or self.dim
        return {
            "m": rng.normal(size=d),
            "kappa": rng.uniform(0.5, 2.0, size=d),
            "a": rng.uniform(1.0, 3.0, size=d),
            "b": rng.uniform(0.5, 2.0, size=d),
        }

    def sample(self, p, rng, s):
        lam = rng.gamma(shape=p["a"], scale=1.0 / p["b"], size=(s, len(p["a"])))
        mu = p["m"] + rng.normal(size=lam.shape) / np.sqrt(p["kappa"] * lam)
        return {"mu": mu, "lambda": lam}

    def loglik(self, x, smp):
        scale = 1.0 / np.sqrt(smp["lambda"][:, None, :])
        return stats.norm.logpdf(x[None], loc=smp["mu"][:, None, :], scale=scale).sum(-1)

    def logq(self, p, smp):
        lam = smp["lambda"]
        lg = stats.gamma.logpdf(lam, p["a"], scale=1.0 / p["b"])
        ln = stats.norm.logpdf(smp["mu"], loc=p["m"], scale=1.0 / np.sqrt(p["kappa"] * lam))
        return (lg + ln).sum(-1)

    def loglik_scipy(self, x, params):
        return stats.norm.logpdf(x, loc=params["mu"], scale=1.0 / np.sqrt(params["lambda"])).sum(-1)

    def logprior_scipy(self, p, params):
        return self.logq(p, params)

    def textbook_posterior(self, p, xk, w):
        n = w.sum()
        if n == 0:
            return dict(p)
        xbar = w @ xk / n
        kappa = p["kappa"] + n
        b = p["b"] + 0.5 * w @ (xk - xbar) ** 2 + p["kappa"] * n * (xbar - p["m"]) ** 2 / (2 * kappa)
        return {"m": (p["kappa"] * p["m"] + n * xbar) / kappa, "kappa": kappa, "a": p["a"] + 0.5 * n, "b": b}

    def log_marginal_chain(self, p, xk):
        """Chain rule of per-dimension Student-t predictives t_{2a}(m, b (kappa+1) / (a kappa))."""
        m, kappa, a, b = (p[k].astype(float).copy() for k in ("m", "kappa", "a", "b"))
        total = 0.0
        for x in xk:
            scale = np.sqrt(b * (kappa + 1) / (a * kappa))
            total += stats.t.logpdf(x, df=2 * a, loc=m, scale=scale).sum()
            b = b + 0.5 * kappa / (kappa + 1) * (x - m) ** 2
            m = (kappa * m + x) / (kappa + 1)
            kappa, a = kappa + 1, a + 0.5
        return total

    def random_params(self, rng, n):
        return {"mu": rng.normal(size=(n, self.dim)), "lambda": rng.uniform(0.3, 3.0, size=(n, self.dim))}


class KnownGaussSpec(GaussSpec):
    """Normal-Normal with a known noise covariance ``R``: ``mu ~ N(m, S)``, ``x ~ N(mu, R)``. The
    references know ``R`` from the last prior drawn (``_setup`` draws the prior first)."""

    name = "known-gauss"

    def _cov(self, rng, d):
        return _spd(rng, d)

    def prior(self, rng, d=None):
        d = d or self.dim
        self.noise = self._cov(rng, d)
        return {"m": rng.normal(size=d), "S": self._cov(rng, d), "noise": self.noise}

    def sample(self, p, rng, s):
        return {"mu": rng.multivariate_normal(p["m"], p["S"], size=s), "noise": p["noise"]}

    def loglik(self, x, smp):
        return _mvn_logpdf_prec(x[None], smp["mu"][:, None], np.linalg.inv(smp["noise"]))

    def logq(self, p, smp):
        return np.atleast_1d(stats.multivariate_normal.logpdf(smp["mu"], mean=p["m"], cov=p["S"]))

    def loglik_scipy(self, x, params):
        return np.array([stats.multivariate_normal.logpdf(xi, mean=mi, cov=self.noise)
                         for xi, mi in zip(x, params["mu"], strict=True)])

    def logprior_scipy(self, p, params):
        return np.array([stats.multivariate_normal.logpdf(mi, mean=p["m"], cov=p["S"]) for mi in params["mu"]])

    def textbook_posterior(self, p, xk, w):
        """Gaussian mean with known covariance, written with explicit inverses."""
        r_inv, s0_inv = np.linalg.inv(p["noise"]), np.linalg.inv(p["S"])
        cov = np.linalg.inv(s0_inv + w.sum() * r_inv)
        return {"m": cov @ (s0_inv @ p["m"] + r_inv @ (w @ xk)), "S": cov, "noise": p["noise"]}

    def log_marginal_chain(self, p, xk):
        """Chain rule of Gaussian predictives N(m, S + R), one rank-one update per point."""
        m, cov, noise = p["m"].copy(), p["S"].copy(), p["noise"]
        total = 0.0
        for x in xk:
            total += stats.multivariate_normal.logpdf(x, mean=m, cov=cov + noise)
            gain = cov @ np.linalg.inv(cov + noise)
            m, cov = m + gain @ (x - m), cov - gain @ cov
        return total

    def random_params(self, rng, n):
        return {"mu": rng.normal(size=(n, self.dim))}


class KnownDiagGaussSpec(KnownGaussSpec):
    name = "known-diag-gauss"

    def _cov(self, rng, d):
        return np.diag(rng.uniform(0.5, 2.0, size=d))


class MultSpec:
    name = "mult"
    dim = 4

    def data(self, rng, n, d=None):
        d = d or self.dim
        p = rng.dirichlet(np.full(d, 2.0))
        totals = rng.integers(1, 9, size=n)
        return np.stack([rng.multinomial(t, p) for t in totals]).astype(float)

    def const_value(self):
        return 0.0

    def prior(self, rng, d=None):
        return {"lam": rng.uniform(0.5, 2.0, size=d or self.dim)}

    def sample(self, p, rng, s):
        return {"phi": rng.dirichlet(p["lam"], size=s)}

    def loglik(self, x, smp):
        return np.stack([stats.multinomial.logpmf(xi, n=xi.sum(), p=smp["phi"]) for xi in x], axis=1)

    def logq(self, p, smp):
        return stats.dirichlet.logpdf(smp["phi"].T, p["lam"])

    def loglik_scipy(self, x, params):
        return np.array(
            [stats.multinomial.logpmf(xi, n=xi.sum(), p=pi) for xi, pi in zip(x, params["phi"], strict=True)]
        )

    def logprior_scipy(self, p, params):
        return np.array([stats.dirichlet.logpdf(pi, p["lam"]) for pi in params["phi"]])

    def textbook_posterior(self, p, xk, w):
        return {"lam": p["lam"] + w @ xk}

    def log_marginal_chain(self, p, xk):
        alpha = p["lam"].copy()
        total = 0.0
        for x in xk:
            total += stats.dirichlet_multinomial.logpmf(x, alpha, int(x.sum()))
            alpha = alpha + x
        return total

    def random_params(self, rng, n):
        return {"phi": rng.dirichlet(np.ones(self.dim), size=n)}


class BernSpec:
    name = "bern"
    dim = 5

    def data(self, rng, n, d=None):
        d = d or self.dim
        return (rng.uniform(size=(n, d)) < rng.uniform(0.2, 0.8, size=d)).astype(float)

    def const_value(self):
        return 1.0

    def prior(self, rng, d=None):
        d = d or self.dim
        return {"a": rng.uniform(0.5, 2.0, size=d), "b": rng.uniform(0.5, 2.0, size=d)}

    def sample(self, p, rng, s):
        return {"phi": rng.beta(p["a"], p["b"], size=(s, len(p["a"])))}

    def loglik(self, x, smp):
        return stats.bernoulli.logpmf(x[None], smp["phi"][:, None, :]).sum(-1)

    def logq(self, p, smp):
        return stats.beta.logpdf(smp["phi"], p["a"], p["b"]).sum(-1)

    def loglik_scipy(self, x, params):
        return stats.bernoulli.logpmf(x, params["phi"]).sum(-1)

    def logprior_scipy(self, p, params):
        return self.logq(p, params)

    def textbook_posterior(self, p, xk, w):
        s = w @ xk
        return {"a": p["a"] + s, "b": p["b"] + w.sum() - s}

    def log_marginal_chain(self, p, xk):
        a, b = p["a"].copy(), p["b"].copy()
        total = 0.0
        for x in xk:
            total += stats.bernoulli.logpmf(x, a / (a + b)).sum()
            a, b = a + x, b + 1 - x
        return total

    def random_params(self, rng, n):
        return {"phi": rng.uniform(0.05, 0.95, size=(n, self.dim))}


class PoissonSpec:
    name = "poisson"
    dim = 3

    def data(self, rng, n, d=None):
        d = d or self.dim
        return rng.poisson(rng.uniform(1.0, 5.0, size=d), size=(n, d)).astype(float)

    def const_value(self):
        return 0.0

    def prior(self, rng, d=None):
        d = d or self.dim
        return {"a": rng.uniform(1.0, 3.0, size=d), "b": rng.uniform(0.5, 2.0, size=d)}

    def sample(self, p, rng, s):
        return {"lambda": rng.gamma(shape=p["a"], scale=1.0 / p["b"], size=(s, len(p["a"])))}

    def loglik(self, x, smp):
        return stats.poisson.logpmf(x[None], smp["lambda"][:, None, :]).sum(-1)

    def logq(self, p, smp):
        return stats.gamma.logpdf(smp["lambda"], p["a"], scale=1.0 / p["b"]).sum(-1)

    def loglik_scipy(self, x, params):
        return stats.poisson.logpmf(x, params["lambda"]).sum(-1)

    def logprior_scipy(self, p, params):
        return self.logq(p, params)

    def textbook_posterior(self, p, xk, w):
        return {"a": p["a"] + w @ xk, "b": p["b"] + w.sum()}

    def log_marginal_chain(self, p, xk):
        """Chain rule of negative-binomial predictives NB(a, b / (b + 1))."""
        a, b = p["a"].copy(), p["b"].copy()
        total = 0.0
        for x in xk:
            total += stats.nbinom.logpmf(x, a, b / (b + 1)).sum()
            a, b = a + x, b + 1
        return total

    def random_params(self, rng, n):
        return {"lambda": rng.uniform(0.2, 6.0, size=(n, self.dim))}


SPECS = {
    s.name: s
    for s in (GaussSpec(), ZeroMeanGaussSpec(), DiagGaussSpec(), KnownGaussSpec(), KnownDiagGaussSpec(),
              MultSpec(), BernSpec(), PoissonSpec())
}
NAMES = list(SPECS)


def test_every_registered_family_is_covered():
    assert set(SPECS) == set(FAMILIES)


def _setup(name, n=40, seed_offset=0):
    """A family with a random non-default prior, random data, soft responsibilities and the
    resulting posterior."""
    spec = SPECS[name]
    rng = np.random.default_rng([SEED, NAMES.index(name), seed_offset])
    prior = spec.prior(rng)
    fam = FAMILIES[name](prior)
    x_np = spec.data(rng, n)
    x = fam.check_data(x_np)
    resp_np = rng.dirichlet(np.ones(K), size=n)
    resp = _t(resp_np)
    counts = resp.sum(0)
    st = fam.stats(x, resp)
    post = fam.posterior(counts, st)
    return spec, rng, prior, fam, x_np, x, resp, counts, st, post


def _hard(z, k):
    return _t(np.eye(k)[z])


def _assert_within_mc(closed, samples, what):
    """``closed`` (M,) within ``Z_MC`` standard errors of the column means of ``samples`` (S, M)."""
    closed = np.asarray(closed, dtype=float)
    s = samples.shape[0]
    assert s == N_MC
    assert np.isfinite(samples).all(), f"{what}: non-finite Monte Carlo values"
    mean = samples.mean(0)
    se = samples.std(0, ddof=1) / math.sqrt(s)
    assert (se > 0).all()
    z = (closed - mean) / se
    assert np.all(np.abs(z) <= Z_MC), (
        f"{what}: closed form {closed} vs Monte Carlo {mean} +- {se} (S={s}); z = {z}"
    )


# ------------------------------------------------------------------- 1. E_q[log p(x|phi)]


@pytest.mark.parametrize("name", NAMES)
def test_expected_log_lik_matches_monte_carlo(name):
    spec, rng, _, fam, x_np, x, *_, post = _setup(name)
    x_eval = x_np[:4]
    ell = _np(fam.expected_log_lik(x[:4], post))
    assert ell.shape == (4, K)
    for k in range(K):
        smp = spec.sample(_post_k(post, k), rng, N_MC)
        _assert_within_mc(ell[:, k], spec.loglik(x_eval, smp), f"{name} E_q[log p(x|phi_{k})]")


# ------------------------------------------------------------------------ 2. KL(q || p0)


@pytest.mark.parametrize("name", NAMES)
def test_kl_to_prior_matches_monte_carlo(name):
    spec, rng, prior, fam, *_, post = _setup(name)
    kl = _np(fam.kl_to_prior(post))
    assert kl.shape == (K,)
    for k in range(K):
        qk = _post_k(post, k)
        smp = spec.sample(qk, rng, N_MC)
        log_ratio = spec.logq(qk, smp) - spec.logq(prior, smp)
        _assert_within_mc(kl[k : k + 1], log_ratio[:, None], f"{name} KL(q_{k} || prior)")


@pytest.mark.parametrize("name", NAMES)
def test_kl_of_prior_to_itself_is_zero(name):
    _, _, _, fam, *_ = _setup(name)
    kl = fam.kl_to_prior(fam.prior_posterior(K))
    torch.testing.assert_close(kl, torch.zeros(K, dtype=torch.float64), rtol=0, atol=1e-10)


# ------------------------------------------- 3. summaries reproduce the per-point ELBO term


@pytest.mark.parametrize("name", NAMES)
def test_expected_log_lik_from_stats_matches_pointwise(name):
    _, _, _, fam, _, x, resp, counts, st, post = _setup(name)
    from_stats = fam.expected_log_lik_from_stats(counts, st, post)
    pointwise = (resp * fam.expected_log_lik(x, post)).sum(0)
    assert from_stats.shape == (K,)
    scale = float(pointwise.abs().max())
    torch.testing.assert_close(from_stats, pointwise, rtol=1e-10, atol=1e-10 * scale)


# -------------------------------------------------------- 4. exact marginal likelihood


#: hard assignments of 6 points to 4 components; component 3 is empty
HARD_Z = np.array([0, 1, 0, 2, 0, 1])
HARD_K = 4


@pytest.mark.parametrize("name", NAMES)
def test_log_marginal_matches_predictive_chain_rule(name):
    spec, rng, prior, fam, *_ = _setup(name)
    x_np = spec.data(rng, len(HARD_Z))
    x = fam.check_data(x_np)
    resp = _hard(HARD_Z, HARD_K)
    lm = _np(fam.log_marginal(resp.sum(0), fam.stats(x, resp)))
    ref = np.array([spec.log_marginal_chain(prior, x_np[HARD_Z == k]) for k in range(HARD_K)])
    assert ref[-1] == 0.0
    np.testing.assert_allclose(lm, ref, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_log_marginal_chain_rule_is_order_invariant(name):
    """Sanity check of the reference itself: the chain rule must not depend on data order."""
    spec, rng, prior, *_ = _setup(name)
    xk = spec.data(rng, 4)
    a = spec.log_marginal_chain(prior, xk)
    b = spec.log_marginal_chain(prior, xk[::-1])
    assert abs(a - b) <= 1e-9 * abs(a)


@pytest.mark.parametrize("name", NAMES)
def test_elbo_at_exact_posterior_equals_log_marginal(name):
    """For hard assignments q is the exact posterior, so E_q[log p(x|phi)] - KL = log p(x)."""
    spec, rng, _, fam, *_ = _setup(name)
    x = fam.check_data(spec.data(rng, len(HARD_Z)))
    resp = _hard(HARD_Z, HARD_K)
    counts, st = resp.sum(0), fam.stats(x, resp)
    post = fam.posterior(counts, st)
    elbo = fam.expected_log_lik_from_stats(counts, st, post) - fam.kl_to_prior(post)
    torch.testing.assert_close(elbo, fam.log_marginal(counts, st), rtol=1e-8, atol=1e-8)


# ------------------------------------------------------- 5. densities at explicit values


@pytest.mark.parametrize("name", NAMES)
def test_log_density_matches_scipy(name):
    spec, rng, _, fam, x_np, x, *_ = _setup(name)
    params = spec.random_params(rng, len(x_np))
    got = _np(fam.log_density(x, {k: _t(v) for k, v in params.items()}))
    np.testing.assert_allclose(got, spec.loglik_scipy(x_np, params), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_log_prior_density_matches_scipy(name):
    spec, rng, prior, fam, *_ = _setup(name)
    params = spec.random_params(rng, 5)
    got = _np(fam.log_prior_density({k: _t(v) for k, v in params.items()}))
    assert got.shape == (5,)
    np.testing.assert_allclose(got, spec.logprior_scipy(prior, params), rtol=1e-8, atol=1e-8)


# ------------------------------------------------------------ 6. textbook conjugate update


def _assert_posterior_equal(name, fam, post, ref, k):
    for key in fam.prior_names:
        np.testing.assert_allclose(
            _np(post[key][k]),
            np.broadcast_to(ref[key], post[key][k].shape),
            rtol=1e-10,
            atol=1e-12,
            err_msg=f"{name} posterior '{key}' of component {k}",
        )


@pytest.mark.parametrize("name", NAMES)
def test_posterior_matches_textbook_update(name):
    spec, rng, prior, fam, *_ = _setup(name)
    x_np = spec.data(rng, len(HARD_Z))
    x = fam.check_data(x_np)
    resp = _hard(HARD_Z, HARD_K)
    post = fam.posterior(resp.sum(0), fam.stats(x, resp))
    assert set(post) == set(fam.prior_names)
    for k in range(HARD_K):
        xk = x_np[HARD_Z == k]
        ref = spec.textbook_posterior(prior, xk, np.ones(len(xk)))
        _assert_posterior_equal(name, fam, post, ref, k)


@pytest.mark.parametrize("name", NAMES)
def test_posterior_matches_weighted_textbook_update(name):
    """Soft responsibilities: the update with fractional weights r_nk."""
    spec, _, prior, fam, x_np, _, resp, _, _, post = _setup(name)
    for k in range(K):
        ref = spec.textbook_posterior(prior, x_np, _np(resp[:, k]))
        _assert_posterior_equal(name, fam, post, ref, k)


# ------------------------------------------------------------------------- 7. bad data


def _bad_cases(name):
    spec = SPECS[name]
    rng = np.random.default_rng([SEED, 7])
    x = spec.data(rng, 5)
    nan, inf = x.copy(), x.copy()
    nan[1, 0] = np.nan
    inf[0, 1] = -np.inf if name in ("gauss", "zm-gauss", "diag-gauss") else np.inf
    cases = [
        ("nan", nan, r"NaN or inf"),
        ("inf", inf, r"NaN or inf"),
        ("1d", x[0], r"2-D"),
        ("3d", x[None], r"2-D"),
        ("too-few-columns", x[:, :-1], rf"{x.shape[1] - 1} columns.*dimension {x.shape[1]}"),
        ("too-many-columns", np.hstack([x, x[:, :1]]), rf"{x.shape[1] + 1} columns.*dimension {x.shape[1]}"),
        ("empty", x[:0], r"empty"),
    ]
    if name in ("mult", "poisson"):
        neg, frac = x.copy(), x.copy()
        neg[2, 1] = -1.0
        frac[3, 0] = 1.5
        cases += [("negative", neg, r"non-negative"), ("non-integer", frac, r"integer")]
    if name == "bern":
        half, two, minus = x.copy(), x.copy(), x.copy()
        half[0, 0], two[1, 1], minus[2, 2] = 0.5, 2.0, -1.0
        cases += [("half", half, r"binary"), ("two", two, r"binary"), ("minus-one", minus, r"binary")]
    return [pytest.param(name, x_bad, match, id=f"{name}-{case}") for case, x_bad, match in cases]


@pytest.mark.parametrize("name, x_bad, match", [c for n in NAMES for c in _bad_cases(n)])
def test_check_data_rejects_bad_input(name, x_bad, match):
    spec = SPECS[name]
    fam = FAMILIES[name](spec.prior(np.random.default_rng(SEED)))
    # the message names the family and the problem
    with pytest.raises(ValueError, match=rf"^{name} .*{match}"):
        fam.check_data(x_bad)
    with pytest.raises(ValueError, match=rf"^{name} .*{match}"):
        fam.check_data(torch.as_tensor(x_bad))


@pytest.mark.parametrize("name", NAMES)
def test_check_data_accepts_good_input(name):
    spec, rng, _, fam, *_ = _setup(name)
    x_np = spec.data(rng, 5)
    x = fam.check_data(x_np)
    assert x.dtype == torch.float64 and x.shape == x_np.shape
    np.testing.assert_array_equal(_np(x), x_np)
    if name in ("mult", "poisson", "bern"):  # integer arrays are valid count / binary data
        np.testing.assert_array_equal(_np(fam.check_data(x_np.astype(np.int64))), x_np)


# ---------------------------------------------------------------------- 8. degenerate data


def _degenerate(name, case):
    spec = SPECS[name]
    rng = np.random.default_rng([SEED, 8, NAMES.index(name)])
    if case == "d1":
        return spec.data(rng, 12, d=1)
    if case == "n1":
        return spec.data(rng, 1)
    if case == "duplicates":
        return np.repeat(spec.data(rng, 1), 6, axis=0)
    if case == "const-column":
        x = spec.data(rng, 12)
        x[:, 0] = spec.const_value()
        return x
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["d1", "n1", "duplicates", "const-column"])
@pytest.mark.parametrize("name", NAMES)
def test_degenerate_data_gives_finite_values(name, case):
    x_np = _degenerate(name, case)
    fam = FAMILIES[name].from_data(x_np)
    x = fam.check_data(x_np)
    n = x.shape[0]
    rng = np.random.default_rng([SEED, 9])
    soft = _t(rng.dirichlet(np.ones(K), size=n))
    hard = _hard(np.arange(n) % 2, K)  # component 2 (and 1 when N = 1) empty
    for resp in (soft, hard):
        counts, st = resp.sum(0), fam.stats(x, resp)
        post = fam.posterior(counts, st)
        ell = fam.expected_log_lik(x, post)
        assert ell.shape == (n, K)
        assert bool(torch.isfinite(ell).all()), f"{name}/{case}: non-finite expected_log_lik {ell}"
        for what, val in (
            ("expected_log_lik_from_stats", fam.expected_log_lik_from_stats(counts, st, post)),
            ("kl_to_prior", fam.kl_to_prior(post)),
            ("log_marginal", fam.log_marginal(counts, st)),
        ):
            assert val.shape == (K,)
            assert bool(torch.isfinite(val).all()), f"{name}/{case}: non-finite {what} {val}"
        # loose: the raw-moment form loses digits on a constant column at 1e3 (~1e-5 relative)
        torch.testing.assert_close(
            fam.expected_log_lik_from_stats(counts, st, post), (resp * ell).sum(0), rtol=1e-4, atol=1e-6
        )
        assert bool((fam.kl_to_prior(post) >= -1e-8).all())


# -------------------------------------------------------------------------- 9. float32


@pytest.mark.parametrize("name", NAMES)
def test_float32_matches_float64(name):
    spec, rng, prior, fam64, x_np, x64, resp64, counts64, st64, post64 = _setup(name)
    fam32 = FAMILIES[name](prior, dtype=torch.float32)
    assert fam32.dtype == torch.float32
    x32 = fam32.check_data(x_np)
    assert x32.dtype == torch.float32
    resp32 = resp64.float()
    post32 = fam32.posterior(resp32.sum(0), fam32.stats(x32, resp32))
    assert all(v.dtype == torch.float32 for v in post32.values())
    ell32 = fam32.expected_log_lik(x32, post32)
    ell64 = fam64.expected_log_lik(x64, post64)
    assert ell32.dtype == torch.float32
    torch.testing.assert_close(ell32.double(), ell64, rtol=1e-4, atol=1e-5)
    for method in ("kl_to_prior",):
        v32 = getattr(fam32, method)(post32)
        assert v32.dtype == torch.float32
        torch.testing.assert_close(v32.double(), getattr(fam64, method)(post64), rtol=1e-4, atol=1e-4)
    # the data-scaled constructor honours the dtype too
    fam32d = FAMILIES[name].from_data(x_np, dtype=torch.float32)
    assert all(v.dtype == torch.float32 for v in fam32d.prior.values())
    fam64d = FAMILIES[name].from_data(x_np)
    ell32d = fam32d.expected_log_lik(x32, fam32d.posterior(resp32.sum(0), fam32d.stats(x32, resp32)))
    ell64d = fam64d.expected_log_lik(x64, fam64d.posterior(counts64, fam64d.stats(x64, resp64)))
    assert ell32d.dtype == torch.float32
    torch.testing.assert_close(ell32d.double(), ell64d, rtol=1e-4, atol=1e-5)
