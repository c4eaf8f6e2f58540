"""How items choose components: DP sticks (HDP allocations come later)."""

from .dp_sticks import TRUNCATIONS, DPSticks, stick_breaking_weights

__all__ = ["TRUNCATIONS", "DPSticks", "stick_breaking_weights"]
