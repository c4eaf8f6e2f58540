"""Save and load memoized inference state, so a fit can resume where it stopped.

A checkpoint is a dict of tensors, numbers and strings (loadable with
``torch.load(weights_only=True)``). It is written to a temporary file in the same folder
and renamed over the target, so an interrupted save never corrupts the last good file.
"""

import os
import pickle

import numpy as np
import torch

from ..allocation import DPSticks
from ..families import get_family
from .dp_mixture_posterior import DPMixturePosterior
from .memoized_vb import MemoState
from .summary_cache import SummaryCache
from .summary_io import summary_from_dict, summary_to_dict

FORMAT_VERSION = 1


#: old private names, kept for callers that imported them from here
_summary_to_dict, _summary_from_dict = summary_to_dict, summary_from_dict


def state_to_dict(state):
    """A serialisable dict of a :class:`MemoState` (family and sticks included)."""
    post = state.posterior
    cache = state.cache
    return {
        "format_version": FORMAT_VERSION,
        "family": post.family.name,
        "prior": {k: v.cpu() for k, v in post.family.prior.items()},
        "dtype": str(post.family.dtype).replace("torch.", ""),
        "alpha": post.sticks.alpha,
        "truncation": post.sticks.truncation,
        "component": {k: v.cpu() for k, v in post.component.items()},
        "eta1": post.eta1.cpu(),
        "eta0": post.eta0.cpu(),
        "cache": {str(k): _summary_to_dict(v.to(device="cpu")) for k, v in cache.batches.items()},
        "cache_total": None if cache.total is None else _summary_to_dict(cache.total.to(device="cpu")),
        "rng": state.rng.bit_generator.state,
        "laps_done": state.laps_done,
        "elbo_trace": list(state.elbo_trace),
        "lap_seconds": list(state.lap_seconds),
        "move_log": list(state.move_log),
        "move_gains": list(state.move_gains),
        "move_states": dict(state.move_states),
    }


def state_from_dict(d, device=None):
    """Rebuild a :class:`MemoState` from :func:`state_to_dict` output."""
    if d.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"unsupported checkpoint format {d.get('format_version')}; expected {FORMAT_VERSION}")
    dtype = getattr(torch, d["dtype"])
    family = get_family(d["family"])(d["prior"], dtype=dtype, device=device)
    sticks = DPSticks(d["alpha"], d["truncation"])

    def move(t):
        return t.to(dtype=dtype, device=device)

    post = DPMixturePosterior(family, sticks, {k: move(v) for k, v in d["component"].items()},
                              move(d["eta1"]), move(d["eta0"]))
    cache = SummaryCache()
    cache.batches = {int(k): _summary_from_dict(v).to(dtype, device) for k, v in d["cache"].items()}
    cache.total = None if d["cache_total"] is None else _summary_from_dict(d["cache_total"]).to(dtype, device)
    rng = np.random.default_rng()
    rng.bit_generator.state = d["rng"]
    return MemoState(post, cache, rng, int(d["laps_done"]), d["elbo_trace"], d["lap_seconds"],
                     d.get("move_log"), d.get("move_gains"), d.get("move_states"))


def save_state(path, state):
    """Write ``state`` to ``path`` atomically (temporary file + rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        torch.save(state_to_dict(state), tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state(path, device=None):
    """Read a :class:`MemoState` saved by :func:`save_state`.

    :raises ValueError: if the file is not a pyro-memo checkpoint.
    """
    try:
        d = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path}: cannot read checkpoint ({err})") from err
    if not isinstance(d, dict) or "format_version" not in d:
        raise ValueError(f"{path}: not a pyro-memo checkpoint")
    return state_from_dict(d, device)
