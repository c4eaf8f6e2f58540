"""A :class:`~pyro_memo.Summary` as a plain dict of tensors and numbers, for checkpoints
(the memo's cache in :mod:`~pyro_memo.inference.checkpoint`, a birth move's pending candidate)."""

from ..summaries import Summary


def summary_to_dict(s):
    """The fields of summary ``s`` as a dict (tensors stay tensors; move them to the CPU first if needed)."""
    return {"counts": s.counts, "stats": dict(s.stats), "entropy": s.entropy, "num_items": s.num_items}


def summary_from_dict(d):
    """The :class:`~pyro_memo.Summary` that :func:`summary_to_dict` wrote as ``d``."""
    return Summary(d["counts"], dict(d["stats"]), d["entropy"], int(d["num_items"]))
