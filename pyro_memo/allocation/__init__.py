"""How items choose components: DP sticks (HDP allocations come later)."""

from .dp_sticks import TRUNCATIONS, DPSticks, log_stick_weights, stick_breaking_weights

__all__ = ["TRUNCATIONS", "DPSticks", "log_stick_weights", "stick_breaking_weights"]
