"""Moved to :mod:`pyro_memo.allocation.hdp_sticks`; kept so old imports work."""

from ..allocation.hdp_sticks import (  # noqa: F401
    expected_beta,
    expected_log_beta,
    expected_log_u,
    optimize_sticks,
    prior_sticks,
    rho_from_weights,
    top_level_objective,
)
