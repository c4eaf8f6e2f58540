"""Moved to :mod:`pyro_memo.summaries.topic`; kept so old imports work."""

from ..summaries.topic import TopicSummary

__all__ = ["TopicSummary"]
