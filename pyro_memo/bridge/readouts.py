"""AutoGuide-style read-outs of a guide's global sites (Pyro's ``AutoGuide.quantiles`` / ``median``),
shared by :class:`~pyro_memo.DPMixtureGuide` and :class:`~pyro_memo.HDPGuide`: each guide
draws its global sites in ``sample_posterior(num_samples)``; the quantiles are estimated from those draws."""

import torch


class GlobalSiteReadouts:
    """Mixin: :meth:`quantiles` and :meth:`median` from the guide's ``sample_posterior``."""

    def sample_posterior(self, num_samples):
        """``num_samples`` draws of the global sites: dict site -> tensor ``(num_samples, *site shape)``."""
        raise NotImplementedError

    def quantiles(self, quantiles, num_samples=2000, seed=0):
        """Elementwise quantiles of the global sites under the guide: dict site -> tensor
        ``(len(quantiles), *site shape)``, estimated from ``num_samples`` draws of a generator seeded
        with ``seed`` (deterministic; the global RNG is left as it was)."""
        qs = torch.as_tensor(quantiles, dtype=torch.float64)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            draws = self.sample_posterior(num_samples)
        return {k: torch.quantile(v.double(), qs.to(v.device), dim=0).to(v.dtype) for k, v in draws.items()}

    def median(self, num_samples=2000, seed=0):
        """Posterior medians of the global sites (elementwise; as :meth:`quantiles` at 0.5): dict site -> tensor."""
        return {k: v[0] for k, v in self.quantiles([0.5], num_samples=num_samples, seed=seed).items()}
