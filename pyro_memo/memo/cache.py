"""The memo: one cached summary per batch and their running total (Hughes & Sudderth 2013, §3, eq. 11)."""


class SummaryCache:
    """Per-batch summaries :math:`S^b` and the whole-data summary :math:`S = \\sum_b S^b`.

    Visiting batch ``b`` replaces its summary by subtract-old / add-new, so the total is
    always the exact summary of the most recent local step of every visited batch. The
    cache holds ``B`` summaries of size ``O(K D^2)`` each, never ``O(N K)``.

    Batches are identified by any hashable key (a batch number, or a digest of a Pyro
    data plate's subsample indices). ``batch_ids`` holds, where the caller knows them, each batch's
    item ids (key -> 1-D tensor): the Pyro bridge refuses a batch that shares items with one held.
    """

    def __init__(self):
        self.batches = {}
        self.total = None
        self.batch_ids = {}

    def __len__(self):
        return len(self.batches)

    @property
    def num_items(self):
        """Number of items summarised by the total (``N`` once every batch was visited)."""
        return 0 if self.total is None else self.total.num_items

    def replace(self, key, summary):
        """Swap batch ``key``'s summary for ``summary`` and update the total."""
        old = self.batches.get(key)
        if self.total is None or (old is not None and len(self.batches) == 1):
            self.total = summary
        elif old is None:
            self.total = self.total + summary
        else:
            self.total = self.total - old + summary
        self.batches[key] = summary

    def total_with(self, key, summary):
        """The total if batch ``key`` had ``summary``, without changing the cache."""
        old = self.batches.get(key)
        if self.total is None:
            return summary
        return self.total + summary if old is None else self.total - old + summary

    def total_with_all(self, summaries):
        """The total if the batches in ``summaries`` (key -> summary, all cached already) had those
        summaries, without changing the cache."""
        total = self.total
        for key, summary in summaries.items():
            total = total - self.batches[key] + summary
        return total

    def swap(self, summaries, total):
        """Give the batches in ``summaries`` (key -> summary) those summaries and the cache the
        ``total`` that :meth:`~pyro_memo.inference.SummaryCache.total_with_all` computed for them."""
        self.batches.update(summaries)
        self.total = total

    def recomputed_total(self):
        """The total summed afresh from the cached batches (a check on running-sum drift)."""
        parts = list(self.batches.values())
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total

    def state_dict(self):
        return {"batches": dict(self.batches), "total": self.total}

    def load_state_dict(self, state):
        self.batches = dict(state["batches"])
        self.total = state["total"]

    def to(self, dtype=None, device=None):
        """Move every cached summary to ``dtype`` / ``device`` (in place)."""
        self.batches = {k: v.to(dtype, device) for k, v in self.batches.items()}
        self.total = None if self.total is None else self.total.to(dtype, device)
        return self


__all__ = ["SummaryCache"]
