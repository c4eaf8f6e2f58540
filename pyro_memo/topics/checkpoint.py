"""Save and load memoized HDP state (tensors, numbers and strings only; atomic writes)."""

import numpy as np
import torch

from ..data.files import write_atomically
from ..inference.summary_cache import SummaryCache
from .hdp_posterior import HDPPosterior
from .memoized_hdp import HDPState
from .topic_summary import TopicSummary

FORMAT_VERSION = 1
FIELDS = ("word_counts", "sum_log_pi", "doc_term", "entropy")


def _summary_dict(s):
    s = s.to(device="cpu")
    return {**{f: getattr(s, f) for f in FIELDS}, "num_docs": s.num_docs}


def _summary(d, device):
    return TopicSummary(*(d[f].to(device) for f in FIELDS), int(d["num_docs"]))


def save_hdp_state(path, state):
    """Write ``state`` to ``path`` through a temporary file renamed over it."""
    post = state.posterior
    payload = {
        "format_version": FORMAT_VERSION, "kind": "hdp",
        "lam": post.lam.cpu(), "rho": post.rho.cpu(), "omega": post.omega.cpu(),
        "alpha": post.alpha, "gamma": post.gamma, "lam0": post.lam0,
        "cache": {str(k): _summary_dict(v) for k, v in state.cache.batches.items()},
        "doc_topic_counts": {str(k): v.cpu() for k, v in state.doc_topic_counts.items()},
        "rng": str(state.rng.bit_generator.state), "laps_done": state.laps_done,
        "elbo_trace": list(state.elbo_trace), "lap_seconds": list(state.lap_seconds),
        "move_log": list(state.move_log), "move_gains": list(state.move_gains),
        "tried_topics": {k: dict(v) for k, v in state.tried_topics.items()}, "steps": int(state.steps),
    }
    write_atomically(str(path), lambda tmp: torch.save(payload, tmp))


def load_hdp_state(path, device=None):
    """Read a state written by :func:`save_hdp_state`.

    :raises ValueError: if the file is not a pyro-memo HDP checkpoint.
    """
    import ast

    d = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(d, dict) or d.get("kind") != "hdp" or d.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path} is not a pyro-memo HDP checkpoint (format {FORMAT_VERSION})")
    post = HDPPosterior(d["lam"].to(device), d["rho"].to(device), d["omega"].to(device), d["alpha"], d["gamma"],
                        d["lam0"])
    cache = SummaryCache()
    for key, value in d["cache"].items():
        cache.replace(int(key), _summary(value, device))
    if cache.batches:
        cache.total = cache.recomputed_total()
    rng = np.random.default_rng()
    rng.bit_generator.state = ast.literal_eval(d["rng"])
    return HDPState(post, cache, {int(k): v.to(device) for k, v in d["doc_topic_counts"].items()}, rng,
                    int(d["laps_done"]), list(d["elbo_trace"]), list(d["lap_seconds"]),
                    move_log=list(d.get("move_log", [])), move_gains=list(d.get("move_gains", [])),
                    tried_topics=dict(d.get("tried_topics", {})), steps=int(d.get("steps", 0)))
