"""Additive per-batch summaries: the one currency of pyro-memo (see :mod:`.base`)."""

from .base import AdditiveSummary
from .mixture import Summary, entropy_per_component
from .topic import TopicSummary

__all__ = ["AdditiveSummary", "Summary", "TopicSummary", "entropy_per_component"]
