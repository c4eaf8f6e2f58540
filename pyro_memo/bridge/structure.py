"""What model recognition and its numerical wiring check share: the error they raise and the
unwrapping of Pyro distributions."""

import pyro.distributions as dist


class ModelStructureError(ValueError):
    """A Pyro model does not follow the conventions pyro-memo recognises."""


def _base(fn):
    """Strip Independent / Expanded / masked wrappers off a distribution."""
    while True:
        if isinstance(fn, dist.Independent):
            fn = fn.base_dist
        elif isinstance(fn, (dist.ExpandedDistribution, dist.MaskedDistribution)):
            fn = fn.base_dist
        else:
            return fn
