"""Moved to :mod:`pyro_memo.engine.moves` (one move base for every model); kept so old imports work."""

from ...engine.moves import Move, optimal_elbo, rewrite_memo, sort_components

__all__ = ["Move", "optimal_elbo", "rewrite_memo", "sort_components"]
