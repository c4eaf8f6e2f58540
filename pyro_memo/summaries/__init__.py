"""Additive per-batch summaries: the one currency of pyro-memo (see :mod:`.base`)."""

from .base import AdditiveSummary
from .group import GroupSummary
from .mixture import Summary, entropy_per_component
from .topic import TopicSummary

__all__ = ["AdditiveSummary", "GroupSummary", "Summary", "TopicSummary", "entropy_per_component"]
