"""Variational posteriors: the interface the engine drives (see :mod:`.base`)."""

from .base import VariationalPosterior

__all__ = ["VariationalPosterior"]
