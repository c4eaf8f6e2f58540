"""Birth and merge moves for the tied bound of memory-bounded VB (Gomes, Welling & Perona 2008, §3.1 model
building; the proposals and exact acceptance of Hughes & Sudderth 2013, §3.1-3.2).

In memory-bounded VB the batch is the memory (:class:`~pyro_memo.memo.clumps.Clumps`) and its local factors
are ``(clump_resp, point_resp)``: one :math:`q(z_c)` per clump, shared by its :math:`N_c` items, and one per
singlet. The moves need only their batch side adapted; the driver side (proposals, the exact objective of
the candidate memo, acceptance on a rise, rewriting the memo) is the moves' own:

- a **birth** collects its targeted subsample from the singlets (the epoch's new items are singlets, and
  where the model needs new components it is their arrival that shows it); adoption and its exact check
  run on the tied local steps of the memory;
- a **merge** needs the merged assignment's entropy, whose clump part is weighted by the clump sizes,
  :math:`-\\sum_c N_c (q_{ca} + q_{cb}) \\log (q_{ca} + q_{cb})` (the tied entropy of
  :func:`~pyro_memo.memo.clumps.tied_summary`); a merged tied :math:`q` is still a tied :math:`q`, so the
  candidate's bound is the exact tied bound.

Where this differs from Gomes et al.: they propose Ueda-style splits and merges of components; here the
project's birth and merge proposals do that work, each accepted only when the exact tied bound rises.
"""

from ...summaries import entropy_per_component
from .birth import BirthMove
from .merge import MergeMove, pair_entropies


def tied_pair_entropies(clumps, local, pairs):
    """``(P,)`` merged-assignment entropy of each pair under tied local factors ``local`` =
    ``(clump_resp, point_resp)`` of ``clumps``: clumps weighted by their sizes, singlets as items."""
    clump_resp, point_resp = local
    entropy = pair_entropies(point_resp, pairs)
    if clumps.num_clumps:
        merged = clump_resp[:, pairs[:, 0]] + clump_resp[:, pairs[:, 1]]
        entropy = entropy + entropy_per_component(merged, clumps.counts)
    return entropy


class TiedBirthMove(BirthMove):
    """:class:`~pyro_memo.BirthMove` on the memory: the subsample is drawn from the
    singlets (module docstring)."""

    def batch_visit(self, posterior, key, batch, local):
        if not batch.num_singlets:
            return None
        return super().batch_visit(posterior, key, batch.points, local[1])

    def remnant_summary(self, posterior, key, x, resp):
        """``None``: a memory's summary weighs its clumps by their sizes, which the singlets alone do not
        give, so an adoption here is judged without the remnants' delete (expanded, or with their merges)."""
        return None

    def batch_pair_entropy(self, batch, local, pairs):
        return tied_pair_entropies(batch, local, pairs)


class TiedMergeMove(MergeMove):
    """:class:`~pyro_memo.MergeMove` on the memory: clump-weighted pair entropies
    (module docstring)."""

    def batch_pair_entropy(self, batch, local, pairs):
        return tied_pair_entropies(batch, local, pairs)


#: the moves memory-bounded model building takes, by name, in the order they run
TIED_MOVES = {"birth": TiedBirthMove, "merge": TiedMergeMove}
