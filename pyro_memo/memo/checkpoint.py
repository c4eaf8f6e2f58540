"""One checkpoint format for every model: save and load a :class:`~pyro_memo.MemoState`.

A checkpoint is a dict of tensors, numbers and strings (``torch.load(weights_only=True)``
reads it, after every record is checked against its checksum). The posterior and summary classes
are named by import path and rebuilt from their own ``state_dict`` / ``to_dict``, so a new model
needs no change here; only ``pyro_memo`` modules are imported for it (a model defined elsewhere is
found once its module is imported). Files are written to a
temporary file in the same folder and renamed over the target, so an interrupted save never
corrupts the last good file. Format 2 is current; the format-1 files of pyro-memo 0.1 (one
for DP mixtures, one for HDP topic models) are read and converted.
"""

import ast
import importlib
import os
import re
import sys
import zipfile

import numpy as np
import torch

from ..checks import check_device
from ..data.files import write_atomically
from ..posterior import VariationalPosterior
from ..summaries import AdditiveSummary
from .cache import SummaryCache
from .shapes import shape_problems
from .state import MemoState

FORMAT_VERSION = 2

_DP_POSTERIOR = "pyro_memo.inference.dp_mixture_posterior:DPMixturePosterior"
_HDP_POSTERIOR = "pyro_memo.topics.hdp_posterior:HDPPosterior"
_DP_SUMMARY = "pyro_memo.summaries.mixture:Summary"
_HDP_SUMMARY = "pyro_memo.summaries.topic:TopicSummary"


def class_path(obj):
    """``"module:QualName"`` of ``obj``'s class."""
    cls = type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


class CheckpointError(ValueError):
    """A file refused with a message that already names it (a class :func:`resolve_class` will not
    load, a record that fails its checksum): passed on as it is, not wrapped again."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def resolve_class(path, base, source=None):
    """The class named ``"module:QualName"``; it must subclass ``base``.

    Only a ``pyro_memo.`` module is imported; a class of another module (a model defined outside
    pyro-memo) is found only if that module is already imported: a name read from a file never
    runs a module's code. ``source`` (the file) starts every error message.

    :raises ValueError: naming ``source`` and ``path`` for a class of a module not imported, one
        that cannot be found, or one that is not a ``base``.
    """
    where = f"{source}: " if source is not None else ""
    module, _, name = str(path).partition(":")
    if not (_NAME.fullmatch(module) and _NAME.fullmatch(name)):
        raise CheckpointError(f"{where}the checkpoint names the class {str(path)[:160]!r}, which is not a "
                              "class path (module:Class)")
    importable = module.startswith("pyro_memo.") and "__main__" not in module.split(".")
    if module not in sys.modules and not importable:
        raise CheckpointError(f"{where}the checkpoint names the class {path!r}, of a module that is not imported; "
                              f"a checkpoint imports pyro_memo modules only (import {module} yourself before "
                              "loading, if you trust it)")
    try:
        cls = sys.modules.get(module) or importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
    except (ImportError, AttributeError) as err:
        raise CheckpointError(f"{where}the checkpoint names the class {path!r}, which cannot be imported "
                              f"({err})") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise CheckpointError(f"{where}the checkpoint names {path!r}, which is not a {base.__name__}")
    return cls


def _key(k):
    return int(k) if str(k).lstrip("-").isdigit() else k


def state_to_dict(state):
    """A serialisable dict of a :class:`MemoState` (format 2)."""
    cache = state.cache
    parts = list(cache.batches.values()) + ([cache.total] if cache.total is not None else [])
    step = state.relax_step
    return {
        "format_version": FORMAT_VERSION,
        "posterior_class": class_path(state.posterior),
        "posterior": state.posterior.state_dict(),
        "summary_class": class_path(parts[0]) if parts else None,
        "cache": {str(k): v.to(device="cpu").to_dict() for k, v in cache.batches.items()},
        "cache_total": None if cache.total is None else cache.total.to(device="cpu").to_dict(),
        "rng": str(state.rng.bit_generator.state),
        "laps_done": int(state.laps_done),
        "elbo_trace": list(state.elbo_trace),
        "lap_seconds": list(state.lap_seconds),
        "move_log": list(state.move_log),
        "move_gains": list(state.move_gains),
        "move_states": dict(state.move_states),
        "warm_starts": {str(k): v.cpu() for k, v in state.warm_starts.items()},
        "tried": {k: dict(v) for k, v in state.tried.items()},
        "steps": int(state.steps),
        "emptied": list(state.emptied),
        "traces": {k: list(v) for k, v in state.traces.items()},
        "relax": float(state.relax),
        "relax_step": None if step is None else step.to(device="cpu").to_dict(),
        "digests": {str(k): str(v) for k, v in state.digests.items()},
        "read_digests": {str(k): str(v) for k, v in state.read_digests.items()},
        "running_class": None if state.running is None else class_path(state.running),
        "running": None if state.running is None else state.running.to(device="cpu").to_dict(),
    }


def _upgrade(d):
    """A format-1 checkpoint (pyro-memo 0.1) in format 2."""
    if d.get("kind") == "hdp":
        posterior = {k: d[k] for k in ("lam", "rho", "omega", "alpha", "gamma", "lam0")}
        tried = {name: {"K": v["K"], "components": list(v["topics"])} for name, v in d.get("tried_topics", {}).items()}
        return {**d, "posterior_class": _HDP_POSTERIOR, "posterior": posterior, "summary_class": _HDP_SUMMARY,
                "cache_total": None, "warm_starts": d.get("doc_topic_counts", {}), "tried": tried}
    posterior = {k: d[k] for k in ("family", "prior", "dtype", "alpha", "truncation", "component", "eta1", "eta0")}
    return {**d, "posterior_class": _DP_POSTERIOR, "posterior": posterior, "summary_class": _DP_SUMMARY,
            "rng": str(d["rng"]), "warm_starts": {}, "tried": {}}


def state_from_dict(d, device=None, source=None):
    """Rebuild a :class:`MemoState` from :func:`state_to_dict` output (or a format-1 dict).

    :param source: the file ``d`` was read from, which starts every error message.
    :raises ValueError: for a bad ``device``, a model file, an unknown format, or a damaged dict.
    """
    check_device(device)
    where = f"{source}: " if source is not None else ""
    if not isinstance(d, dict):
        raise ValueError(f"{where}not a pyro-memo checkpoint (a {type(d).__name__}, not a dict)")
    if d.get("format") == "pyro-memo-model":
        raise ValueError(f"{where}this is a pyro-memo model file (save_model), not a checkpoint (save_state): read it "
                         "with pyro_memo.load_model")
    version = d.get("format_version")
    if type(version) is not int:
        raise ValueError(f"{where}a damaged checkpoint (format_version {str(version)[:40]!r} is not a number)")
    if version not in (1, FORMAT_VERSION):
        newer = " (a newer pyro-memo wrote it?)" if version > FORMAT_VERSION else ""
        raise ValueError(f"{where}checkpoint format {version}; this version of pyro-memo reads formats 1 and "
                         f"{FORMAT_VERSION}{newer}")
    try:
        state = _build_state(_upgrade(d) if version == 1 else d, device, source)
        wrong = _shape_mismatches(state)
    except CheckpointError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, RuntimeError, ValueError, SyntaxError,
            OverflowError) as err:  # RecursionError is a RuntimeError
        raise ValueError(f"{where}a damaged checkpoint ({type(err).__name__}: {str(err)[:160]})") from None
    if wrong:
        sizes, lines = wrong
        raise ValueError(f"{where}a checkpoint with inconsistent shapes ({sizes}): {'; '.join(lines)}")
    return state


def _shape_mismatches(state):
    """``(sizes, lines)`` naming each tensor of ``state``'s posterior and memo (every batch's summary, the
    total, the over-relaxation step, a stochastic fit's running summary) whose shape disagrees with the
    posterior's components (:func:`~pyro_memo.memo.shapes.shape_problems`), or ``None``: an edited
    checkpoint otherwise loaded and failed at resume with torch's "The size of tensor a (3) must match the
    size of tensor b (2)"."""
    cache = state.cache
    summaries = {**{f"batch {k} summary": v for k, v in cache.batches.items()}, "memo total": cache.total,
                 "over-relaxation step": state.relax_step, "running summary": state.running}
    return shape_problems(state.posterior, summaries)


def _build_state(d, device, source):
    post = resolve_class(d["posterior_class"], VariationalPosterior, source).from_state_dict(d["posterior"], device)
    dtype = post.dtype
    cache, step = SummaryCache(), None
    if d["cache"]:
        summary = resolve_class(d["summary_class"], AdditiveSummary, source)
        if d.get("relax_step") is not None:
            step = summary.from_dict(d["relax_step"]).to(dtype, device)
        cache.batches = {_key(k): summary.from_dict(v).to(dtype, device) for k, v in d["cache"].items()}
        total = d.get("cache_total")
        cache.total = summary.from_dict(total).to(dtype, device) if total is not None else cache.recomputed_total()
    running = None
    if d.get("running") is not None:  # the stochastic driver's running summary
        running = resolve_class(d["running_class"], AdditiveSummary, source).from_dict(d["running"]).to(dtype, device)
    rng = np.random.default_rng()
    rng.bit_generator.state = ast.literal_eval(d["rng"])
    return MemoState(post, cache, rng, int(d["laps_done"]), list(d["elbo_trace"]), list(d["lap_seconds"]),
                     list(d.get("move_log", [])), list(d.get("move_gains", [])), dict(d.get("move_states", {})),
                     warm_starts={_key(k): v.to(device=device) for k, v in d["warm_starts"].items()},
                     tried={k: dict(v) for k, v in d.get("tried", {}).items()}, steps=int(d.get("steps", 0)),
                     emptied=list(d.get("emptied", [])),
                     traces={k: list(v) for k, v in d.get("traces", {}).items()},
                     relax=float(d.get("relax", 1.0)), relax_step=step,
                     digests={_key(k): str(v) for k, v in d.get("digests", {}).items()}, running=running,
                     read_digests={_key(k): str(v) for k, v in d.get("read_digests", {}).items()})


def write_payload(path, payload, what="checkpoint"):
    """``torch.save`` ``payload`` (plain tensors, dicts, numbers, strings) to ``path`` atomically
    (temporary file + rename: a failed write leaves an existing file as it was).

    :raises TypeError: for a ``path`` that is no file name (``None``, a number, an open file), which ``str``
        would turn into a file of that name in the working directory.
    """
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise TypeError(f"the {what} path must be a file name (a str or pathlib.Path); got a {type(path).__name__}")
    try:
        write_atomically(str(path), lambda tmp: torch.save(payload, tmp))
    except RuntimeError as err:  # torch's writer reports I/O failures as RuntimeError
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), "write failed")
        raise OSError(f"{path}: cannot write the {what} ({first[:160]})") from err


def _reason(err):
    """The useful line of what ``torch.load`` raised: the unpickler's own complaint, without torch's
    advice to load with ``weights_only=False`` (which would run code from the file)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
        text = text.split(" Please use ", 1)[0]
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)
    return first[:160]


def _check_zip(path, what):
    """Raise :class:`ValueError` naming ``path`` if a zip member's bytes do not match their CRC
    (``torch.load`` does not check them: a flipped bit would load as a silently different number)."""
    try:
        if hasattr(path, "seek"):
            path.seek(0)
        if not zipfile.is_zipfile(path):
            return  # not a zip archive at all: torch.load says what it is
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as err:
        raise CheckpointError(f"{path}: cannot read {what}: the file is damaged (truncated or overwritten) "
                              f"({type(err).__name__}: {str(err)[:160]})") from None
    if bad is not None:
        raise CheckpointError(f"{path}: cannot read {what}: the file is damaged (its record {bad} fails its checksum)")


def read_payload(path, what="checkpoint"):
    """The dict :func:`write_payload` wrote to ``path`` (``torch.load(weights_only=True)``), after
    checking every record of the file against its checksum.

    ``path`` may also be an open binary file (as :func:`torch.load` takes), read from its start.

    :raises ValueError: naming ``path`` if it is missing, a directory, unreadable, damaged, or not a
        dict with a ``format_version``.
    """
    if isinstance(path, (str, bytes, os.PathLike)):
        if not os.path.exists(path):
            raise ValueError(f"{path}: no such {what}")
        if os.path.isdir(path):
            raise ValueError(f"{path}: is a directory, not a {what}")
    try:
        _check_zip(path, what)
        if hasattr(path, "seek"):
            path.seek(0)
        d = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such {what}") from None
    except PermissionError as err:
        raise ValueError(f"{path}: cannot read {what} ({err.strerror or err})") from None
    except CheckpointError:
        raise
    except Exception as err:  # anything the unpickler raises on damaged bytes (KeyError, UnpicklingError, ...)
        raise ValueError(f"{path}: cannot read {what}: the file is damaged (truncated or overwritten) or "
                         f"not a pyro-memo {what} ({_reason(err)})") from err
    if not isinstance(d, dict) or "format_version" not in d:
        raise ValueError(f"{path}: not a pyro-memo {what}")
    return d


def save_state(path, state):
    """Write ``state`` to ``path`` atomically (temporary file + rename).

    :raises TypeError: if ``state`` is no :class:`MemoState` (a fit result: save its ``state``).
    """
    if not isinstance(state, MemoState):
        raise TypeError(f"save_state needs a MemoState (a fit's result.state); got a {type(state).__name__}")
    write_payload(path, state_to_dict(state))


def load_state(path, device=None):
    """Read a :class:`MemoState` saved by :func:`save_state` (any model).

    :raises ValueError: naming ``path`` if the file is not a pyro-memo checkpoint, is damaged or of an unknown
        format, holds tensors of inconsistent shapes (naming them), or if ``device`` is not one the fits run on.
    """
    check_device(device)
    return state_from_dict(read_payload(path), device, path)
