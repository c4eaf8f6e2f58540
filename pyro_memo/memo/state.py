"""The state of a memoized fit: everything needed to resume it, for every model."""

from dataclasses import dataclass, field

import numpy as np

from .cache import SummaryCache


@dataclass
class MemoState:
    """Globals, memo, random generator and traces of a fit driven by
    :class:`~pyro_memo.engine.MemoizedDriver` (or the stochastic driver), whatever the model.

    :ivar posterior: the current variational posterior (``None`` before initialisation).
    :ivar cache: the :class:`~pyro_memo.inference.SummaryCache`, one summary per batch.
    :ivar rng: numpy generator of the batch order.
    :ivar int laps_done: completed laps.
    :ivar list elbo_trace: exact objective after each lap.
    :ivar list lap_seconds: wall time of each lap.
    :ivar list move_log: per lap, ``{move: {"proposed": n, "accepted": n}}``.
    :ivar list move_gains: exact objective before / after every accepted move.
    :ivar dict move_states: resumable state of each move (e.g. a created, not yet adopted birth).
    :ivar dict warm_starts: batch key -> local parameters of its last visit, the warm start of
        the next one (the HDP's document-topic counts; empty for mixtures).
    :ivar dict tried: per move, the components it tried without success since the components
        were last renumbered (``{"K": K, "components": [...]}``).
    :ivar list local_iterations: local-step iterations per batch visit (models with an
        iterative local step).
    :ivar int steps: stochastic steps taken (the stochastic driver's learning-rate clock).
    :ivar running: the stochastic driver's running summary, for models that step on one (DP mixtures).
    :ivar int num_items: items in the data being fitted.
    :ivar dict lap_moves: this lap's ``{move: {"proposed": n, "accepted": n}}``.
    :ivar list emptied: per lap, the components its batch steps emptied (collapse; see
        :meth:`~pyro_memo.engine.MemoizedDriver.count_emptied`).
    :ivar dict traces: per-lap traces a caller keeps with the fit (the command line's K per lap),
        saved with it so that a resumed fit's traces cover the whole run.
    :ivar float relax: the over-relaxation factor of the next batch step
        (:mod:`~pyro_memo.engine.overrelax`; 1: an exact step).
    :ivar relax_step: the last step's change of the memo's whole-data summary, the direction the next
        over-relaxed step extrapolates along (``None``: none yet).
    :ivar dict digests: batch key -> digest of the batch's contents when the fit began (data held in
        memory; see :meth:`~pyro_memo.engine.MemoizedDriver.data_digests`), checked when it resumes.
    :ivar dict read_digests: batch key -> digest of the batch as its first visit of the fit read it (data
        read from files or a cluster, not hashed at the start; see
        :meth:`~pyro_memo.engine.MemoizedDriver.check_visit`), checked at its first visit when it resumes.
    """

    posterior: object = None
    cache: SummaryCache = field(default_factory=SummaryCache)
    rng: np.random.Generator = None
    laps_done: int = 0
    elbo_trace: list = field(default_factory=list)
    lap_seconds: list = field(default_factory=list)
    move_log: list = field(default_factory=list)
    move_gains: list = field(default_factory=list)
    move_states: dict = field(default_factory=dict)
    warm_starts: dict = field(default_factory=dict)
    tried: dict = field(default_factory=dict)
    local_iterations: list = field(default_factory=list)
    steps: int = 0
    running: object = None
    num_items: int = 0
    lap_moves: dict = field(default_factory=dict)
    emptied: list = field(default_factory=list)
    traces: dict = field(default_factory=dict)
    relax: float = 1.0
    relax_step: object = None
    digests: dict = field(default_factory=dict)
    read_digests: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.rng is None:
            self.rng = np.random.default_rng(0)
        self.cache = self.cache if self.cache is not None else SummaryCache()

    @property
    def doc_topic_counts(self):
        """The HDP's name for ``warm_starts`` (batch -> ``(D_b, K)`` topic counts)."""
        return self.warm_starts

    @doc_topic_counts.setter
    def doc_topic_counts(self, value):
        self.warm_starts = value

    @property
    def tried_topics(self):
        """The HDP's name for ``tried``."""
        return self.tried

    def tried_components(self, name, K, reset=False):
        """The components move ``name`` tried without success since the components were last
        renumbered (a list to append to); emptied when ``K`` changed or ``reset``."""
        memory = self.tried.get(name)
        if reset or memory is None or memory["K"] != K:
            memory = self.tried[name] = {"K": int(K), "components": []}
        return memory["components"]
