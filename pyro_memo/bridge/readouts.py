"""AutoGuide-style read-outs of a guide's global sites (Pyro's ``AutoGuide.quantiles`` / ``median``),
shared by :class:`~pyro_memo.DPMixtureGuide` and :class:`~pyro_memo.HDPGuide`: each guide
draws its global sites in ``sample_posterior(num_samples)``; the quantiles are estimated from those draws."""

import torch

from ..checks import as_positive_int, as_seed


class GlobalSiteReadouts:
    """Mixin: :meth:`quantiles` and :meth:`median` from the guide's ``sample_posterior``."""

    def sample_posterior(self, num_samples):
        """``num_samples`` draws of the global sites: dict site -> tensor ``(num_samples, *site shape)``."""
        raise NotImplementedError

    def quantiles(self, quantiles, num_samples=2000, seed=0):
        """Elementwise quantiles of the global sites under the guide: dict site -> tensor
        ``(len(quantiles), *site shape)``, estimated from ``num_samples`` draws of a generator seeded
        with ``seed`` (deterministic; the global RNG is left as it was)."""
        qs = _as_quantiles(quantiles)
        num_samples, seed = as_num_samples(num_samples), as_seed(seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            draws = self.sample_posterior(num_samples)
        return {k: torch.quantile(v.double(), qs.to(v.device), dim=0).to(v.dtype) for k, v in draws.items()}

    def median(self, num_samples=2000, seed=0):
        """Posterior medians of the global sites (elementwise; as :meth:`quantiles` at 0.5): dict site -> tensor."""
        return {k: v[0] for k, v in self.quantiles([0.5], num_samples=num_samples, seed=seed).items()}


def as_num_samples(value):
    """``value`` as the number of draws a read-out takes, else a :class:`ValueError` naming ``num_samples``
    (``0`` or ``-1`` gave no draws or torch's "expanded size" error, ``2.5`` was truncated)."""
    return as_positive_int(value, "num_samples")


def _as_quantiles(quantiles):
    """``quantiles`` (one number or a list) as a float64 tensor, else a :class:`ValueError`: each in ``[0, 1]``."""
    try:
        qs = torch.as_tensor(quantiles, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        qs = None
    if qs is None or qs.dim() > 1 or not bool(((qs >= 0) & (qs <= 1)).all()):
        raise ValueError(f"quantiles must be numbers in [0, 1] (one, or a list); got {quantiles!r}")
    return qs
