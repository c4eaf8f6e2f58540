"""Moved to :mod:`pyro_memo.memo.cache`; kept so old imports work."""

from ..memo.cache import SummaryCache

__all__ = ["SummaryCache"]
