"""The shared Beta / Gamma special functions against 60-digit references, from 1e-3 to 1e15."""

import itertools

import mpmath
import pytest
import torch

from pyro_memo.families._special import digamma_increment, kl_beta, kl_gamma, lbeta

mpmath.mp.dps = 60
VALUES = (1e-3, 0.3, 1.0, 2.5, 9.99, 10.0, 15.5, 100.0, 1e4, 1e9, 1e15)
PRIORS = (1e-3, 0.3, 1.0, 9.99, 10.0, 100.0)


def _exact_kl_beta(a, b, a0, b0):
    a, b, a0, b0 = map(mpmath.mpf, (a, b, a0, b0))
    return (mpmath.log(mpmath.beta(a0, b0)) - mpmath.log(mpmath.beta(a, b)) + (a - a0) * mpmath.digamma(a)
            + (b - b0) * mpmath.digamma(b) + (a0 - a + b0 - b) * mpmath.digamma(a + b))


def _exact_kl_gamma(a, b, a0, b0):
    a, b, a0, b0 = map(mpmath.mpf, (a, b, a0, b0))
    return ((a - a0) * mpmath.digamma(a) - mpmath.loggamma(a) + mpmath.loggamma(a0)
            + a0 * (mpmath.log(b) - mpmath.log(b0)) + a * (b0 - b) / b)


def _grid(*axes):
    """Every combination as float64 tensors (one element per case), and the cases."""
    cases = list(itertools.product(*axes))
    return [torch.tensor(column, dtype=torch.float64) for column in zip(*cases, strict=True)], cases


def _relative_errors(got, exact):
    exact = torch.tensor([float(e) for e in exact], dtype=torch.float64)
    return (got - exact).abs() / exact.abs().clamp(min=1.0)


def test_lbeta_keeps_every_digit_up_to_1e15():
    # lgamma(1e15) is 3e16: lbeta(1e-3, 1e15) was 0.16 nats out
    (a, b), cases = _grid(VALUES, VALUES)
    exact = [mpmath.log(mpmath.beta(mpmath.mpf(x), mpmath.mpf(y))) for x, y in cases]
    assert float(_relative_errors(lbeta(a, b), exact).max()) < 1e-13


@pytest.mark.parametrize("kl, exact_kl", [(kl_beta, _exact_kl_beta), (kl_gamma, _exact_kl_gamma)])
def test_the_kls_keep_their_digits_up_to_1e15(kl, exact_kl):
    # kl_beta(1e15, 15.5 || 1e15, 9.99) was 3.9 nats out, kl_gamma(1e15, 1e15 || 0.3, 0.3) 0.14
    (a, b, a0, b0), cases = _grid(VALUES, VALUES, PRIORS, PRIORS)
    exact = [exact_kl(*case) for case in cases]
    assert float(_relative_errors(kl(a, b, a0, b0), exact).max()) < 1e-12


def test_digamma_increment_is_relative_exact_with_a_small_step_on_a_large_argument():
    (x, h), cases = _grid(VALUES, VALUES)
    exact = torch.tensor([float(mpmath.digamma(mpmath.mpf(u) + mpmath.mpf(v)) - mpmath.digamma(u)) for u, v in cases],
                         dtype=torch.float64)
    assert float(((digamma_increment(x, h) - exact).abs() / exact.abs()).max()) < 1e-11


def test_float32_follows_float64():
    (a, b), _ = _grid(VALUES[:8], VALUES[:8])
    for fn in (lbeta, lambda u, v: kl_beta(u, v, torch.ones_like(u), 2 * torch.ones_like(u)),
               lambda u, v: kl_gamma(u, v, torch.ones_like(u), 2 * torch.ones_like(u))):
        wide, narrow = fn(a, b), fn(a.float(), b.float())
        assert narrow.dtype == torch.float32
        assert torch.allclose(narrow.double(), wide, rtol=1e-5, atol=1e-4)
