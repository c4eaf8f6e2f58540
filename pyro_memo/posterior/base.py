"""The variational-posterior interface every model implements (allocation model x family).

The engine's drivers and moves see a model only through this interface and its summaries
(:class:`~pyro_memo.summaries.AdditiveSummary`): a local step turns a batch into a summary, a
global update turns the whole-data summary into the optimal global factors, and the bound is
a function of the globals and a summary (Hughes & Sudderth 2013, eqs. 8-11; the same
structure for the HDP, Hughes, Kim & Sudderth 2015).
"""


class VariationalPosterior:
    """Global variational factors of a model with ``K`` components.

    Subclasses implement:

    - :meth:`local_step` ``(batch) -> (local, summary)``: the batch's optimal local factors
      (``local``, handed to moves; e.g. responsibilities) and their summary;
    - :meth:`update` ``(summary) -> posterior``: the globals that are optimal for ``summary``
      given the current ones (may update in place and return ``self``; callers use the
      returned object);
    - :meth:`optimal_for` ``(summary) -> posterior``: a new posterior optimal for
      ``summary`` (a move's candidate), leaving this one unchanged;
    - :meth:`elbo_terms` ``(summary) -> dict`` and :meth:`elbo`: the exact objective;
    - :meth:`state_dict` / :meth:`from_state_dict`: plain tensors, numbers and strings for
      checkpoints; :meth:`to` for dtype / device moves.
    """

    @property
    def K(self):
        raise NotImplementedError

    def tensor_shapes(self, summaries):
        """``(expected, found, sizes)``: the shape each of this posterior's saved tensors, and of each summary
        in ``summaries`` (label -> summary; ``None`` entries skipped), must have and has, by name, and where
        ``sizes`` came from (``"K = 3 components from eta1, ..."``); ``None`` where the model declares none.
        A saved file is checked against it when read (``pyro_memo.memo.shapes.shape_problems``)."""
        return None

    def local_step(self, batch):
        raise NotImplementedError

    def update(self, summary):
        raise NotImplementedError

    def optimal_for(self, summary):
        raise NotImplementedError

    def elbo_terms(self, summary):
        raise NotImplementedError

    def optimal_bound(self, summary):
        """``(bound, globals)``: the globals optimal for ``summary`` (:meth:`optimal_for`) and the exact
        objective of ``summary`` under them, as a float. Models with a cheaper closed form override it."""
        best = self.optimal_for(summary)
        return float(best.elbo(summary)), best

    def valid_components(self):
        """``(K,)`` booleans: which components' factors are valid distributions (globals made
        from an extrapolated summary may not be; :mod:`~pyro_memo.engine.overrelax`), or ``None``
        when the model does not check (every component is taken as valid)."""
        return None

    def elbo(self, summary):
        """The exact objective for the data ``summary`` summarises: the sum of :meth:`elbo_terms`."""
        return sum(self.elbo_terms(summary).values())

    def state_dict(self):
        raise NotImplementedError

    @classmethod
    def from_state_dict(cls, d, device=None):
        raise NotImplementedError

    def to(self, dtype=None, device=None):
        raise NotImplementedError
