"""How items choose components: DP stick-breaking, and the HDP's top-level sticks."""

from . import hdp_sticks
from .dp_sticks import (
    TRUNCATIONS,
    DPSticks,
    alpha_posterior_mean,
    log_stick_weights,
    ordered_alpha_posterior_mean,
    stick_breaking_weights,
)

__all__ = ["TRUNCATIONS", "DPSticks", "alpha_posterior_mean", "hdp_sticks", "log_stick_weights",
           "ordered_alpha_posterior_mean", "stick_breaking_weights"]
