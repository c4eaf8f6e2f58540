"""Memoized online variational inference for DP mixtures (Hughes & Sudderth 2013 §3, Alg. 1):
the engine's :class:`~pyro_memo.engine.MemoizedDriver` with the DP mixture's steps filled in."""

from ..checks import as_seed
from ..engine import FitResult, MemoizedDriver  # noqa: F401  (FitResult re-exported)
from ..engine.moves import listed_moves
from ..memo import MemoState  # noqa: F401  (re-exported: the one state of every model)
from .dp_steps import DPMixtureSteps
from .moves import make_moves


class MemoizedVB(DPMixtureSteps, MemoizedDriver):
    """Memoized coordinate ascent over fixed data batches.

    For each batch ``b`` in a random order each lap: the exact local step on ``b``
    (Hughes & Sudderth 2013, eq. 9), the memo update :math:`S \\leftarrow S - S^b_{old} + S^b_{new}`
    (eq. 11) and the closed-form global update from the whole-data summary (eq. 10).
    From the end of the first lap the total is the summary of the whole data, the ELBO
    (eq. 8) is exact and no batch step can lower it. With one batch this is
    :class:`~pyro_memo.FullBatchVB`.

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param int K: truncation level.
    :param float alpha: DP concentration.
    :param str truncation: ``"nested"`` or ``"direct"``.
    :param int laps: maximum number of passes through the data.
    :param float tol: stop when the exact ELBO's relative change over a lap is below this.
    :param str init: ``"kmeans++"`` or ``"random"`` responsibilities for the initial globals.
    :param int init_items: initialise from at most this many items, chosen by ``seed`` whatever
        the batching (``initial_items()``), so
        :class:`~pyro_memo.FullBatchVB` with the same seed starts from the same globals.
    :param int seed: seeds the initialisation and the batch order.
    :param bool shuffle: visit batches in a new random order every lap (else in order).
    :param bool record_batch_elbos: compute the exact ELBO after every batch step once the
        memo is complete (for checks; costs one ELBO evaluation per batch).
    :param moves: birth / merge / delete moves: names (``"birth,merge,delete"``, see
        :data:`~pyro_memo.inference.moves.MOVES`) or :class:`~pyro_memo.Move`
        objects. With moves, components are also reordered by size when that raises the ELBO,
        and a fit converges only after a lap with no accepted move.
    :param dict move_options: keyword arguments per move name, for moves given by name (e.g.
        ``{"birth": {"targets": 4}}``: four birth targets a lap; see
        :class:`~pyro_memo.BirthMove`).
    :param bool incremental_first_lap: update the globals after every batch of the first lap
        from the partial memo (bnpy's schedule). Default ``False``: the first lap runs every
        batch's local step against the initial globals and updates them once, when the memo is
        complete, so it is exactly full-batch VB's first iteration and the initial components
        are not refit to the first batch alone (which empties some of them; see
        ``benchmarks/bench_memo_schedule.py``).
    :param alpha_prior: ``(s1, s2)``: learn the concentration with the prior
        :math:`\\alpha \\sim Gamma(s_1, s_2)` (shape, rate) and its closed-form factor :math:`q(\\alpha)`
        (Blei & Jordan 2006, §5; see :class:`~pyro_memo.DPSticks`); ``alpha`` is then unused.
        Read the result with ``posterior.expected_alpha()``.
    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    :param local_dtype: ``"float32"``: mixed precision, the local step (responsibilities and the
        batch summaries) in float32 against float64 globals, memo and ELBO (see
        :class:`~pyro_memo.engine.MemoizedDriver`); ``None`` (default): the family's dtype throughout.
    :param int sparse_L: keep only each item's ``sparse_L`` largest responsibilities, renormalised
        over them (Hughes & Sudderth 2016): the optimal :math:`q(z_n)` on at most ``L`` components,
        so the objective stays an exact ELBO that no batch step lowers, while the summaries cost
        :math:`O(NLD^2)` instead of :math:`O(NKD^2)` (full-covariance Gaussians). ``None`` (the
        default) or ``sparse_L >= K`` keeps them all. Moves see the responsibilities as an
        ``(N, K)`` matrix, zero outside each item's support.
    :param int sparse_candidates: with ``sparse_L``, search each item's ``L`` components among its
        candidates instead of all ``K``: the components in the last supports of the items of its batch
        that shared its most probable component, plus this many drawn at random for each such group
        (Forster & Lücke 2018's truncated search, carried from lap to lap in the memo). The items' last
        supports are among their candidates, so no batch step lowers the exact ELBO, and the
        log-likelihoods cost the candidates' share of ``K`` (a fifth at ``K = 200``, ``L = 8`` on image
        patches). A batch's first visit, and any visit after a move renumbered the components, searches
        all ``K``. ``None`` (the default): always all ``K``.
    :param str schedule: ``"sequential"`` or ``"parallel"`` laps, and
    :param int round_size: batches per parallel round; see :class:`~pyro_memo.engine.MemoizedDriver`
        (``fit(..., executor=client)`` runs the local steps on a Dask cluster).
    :param overrelax: over-relaxed batch steps (on by default for the DP mixture; ``False``: the exact
        steps of Hughes & Sudderth 2013, Alg. 1); see :class:`~pyro_memo.engine.MemoizedDriver` and
        :mod:`~pyro_memo.engine.overrelax`. Every step still never lowers the exact ELBO.
    """

    overrelax_default = True

    def __init__(self, family, K, alpha=1.0, truncation="nested", laps=50, tol=1e-8, init="kmeans++",
                 init_items=10_000, seed=0, shuffle=True, record_batch_elbos=False, moves=(),
                 incremental_first_lap=False, alpha_prior=None, local_dtype=None, threads=None,
                 sparse_L=None, schedule=None, round_size=None, overrelax=None, sparse_candidates=None,
                 move_options=None):
        seed = as_seed(seed)  # one seed for the moves and the driver, drawn once from a Generator
        self.set_model(family, K, alpha, truncation, init, init_items, alpha_prior)
        self.set_sparse_L(sparse_L, sparse_candidates)
        moves = moves if isinstance(moves, str) else listed_moves(moves)
        if isinstance(moves, str) or any(isinstance(m, str) for m in moves):
            moves = make_moves(moves, seed=seed, **(move_options or {}))
        elif move_options:
            raise ValueError("move_options apply to moves given by name (moves='birth,merge,delete'); "
                             "configure move objects directly")
        super().__init__(laps=laps, tol=tol, seed=seed, shuffle=shuffle, record_batch_elbos=record_batch_elbos,
                         moves=moves, sort_after_moves=True, hold_first_lap=not incremental_first_lap,
                         local_dtype=local_dtype, threads=threads, schedule=schedule, round_size=round_size,
                         overrelax=overrelax)
        self.incremental_first_lap = bool(incremental_first_lap)
        if self.moves and truncation != "nested":
            raise ValueError("birth / merge / delete moves need the nested truncation")
