"""What a fit leaves behind: a summary text, JSON, posterior arrays and a trace plot."""

import json
import math

import numpy as np

from .data.files import write_atomically

#: a component counts towards K when its expected weight exceeds this
ACTIVE_WEIGHT = 1e-3


def effective_k(weights):
    """Number of components whose expected weight exceeds :data:`ACTIVE_WEIGHT`."""
    return int((np.asarray(weights) > ACTIVE_WEIGHT).sum())


def finite_json(value):
    """``value`` (dicts, lists and tuples of JSON values, NumPy scalars and arrays) with every NaN or
    infinite float replaced by ``None``: standard JSON has no NaN or Infinity (``json.dump`` writes them
    as bare words other readers refuse), so they are written as ``null``."""
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    if isinstance(value, np.ndarray):
        return finite_json(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path, payload):
    """Write ``payload`` to ``path`` as standard JSON, atomically; NaN and infinite numbers become ``null``
    (:func:`finite_json`)."""
    payload = finite_json(payload)

    def dump(tmp):
        with open(tmp, "w") as fh:
            json.dump(payload, fh, indent=1, allow_nan=False)

    write_atomically(path, dump)


def write_posterior_npz(path, weights, labels, estimates):
    """``posterior.npz``: ``weights`` (K), ``labels`` (N) and the family's point estimates."""
    arrays = {"weights": np.asarray(weights), "labels": np.asarray(labels)}
    arrays.update({k: v.detach().cpu().numpy() for k, v in estimates.items()})

    def dump(tmp):
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    write_atomically(path, dump)


def per_lap(trace, laps):
    """``trace`` as one entry per lap of ``laps`` laps: ``None`` for laps before a resume from an older
    checkpoint that did not keep it."""
    return [None] * (laps - len(trace)) + list(trace)[len(trace) - laps:] if laps else []


def agg_figure(**kwargs):
    """A matplotlib :class:`~matplotlib.figure.Figure` drawn by the Agg canvas, made without pyplot: the
    host process's matplotlib backend and pyplot's figures are left as they were."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def write_trace_plot(path, elbo_trace, k_trace, title=""):
    """A two-panel PNG: exact ELBO and K against laps."""
    laps = np.arange(1, len(elbo_trace) + 1)
    k_trace = np.asarray(per_lap(k_trace, len(elbo_trace)), dtype=float)  # unknown laps: NaN
    fig = agg_figure(figsize=(9, 3.5))
    axes = fig.subplots(1, 2)
    axes[0].plot(laps, elbo_trace, marker="o", ms=3)
    axes[0].set_xlabel("lap")
    axes[0].set_ylabel("exact ELBO (nats)")
    axes[1].step(laps, k_trace, where="mid")
    axes[1].set_xlabel("lap")
    axes[1].set_ylabel(f"K (weight > {ACTIVE_WEIGHT:g})")
    fig.suptitle(title)
    fig.tight_layout()
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))


def truncation_text(out):
    """The summary's truncation: the fit's final ``K`` (``out["truncation"]``), and the ``--K`` it started from
    (``out["initial_truncation"]``) where moves changed it (the summary said ``truncation K = 1`` of a fit that
    births had grown to 5)."""
    end, start = out["truncation"], out.get("initial_truncation", out["truncation"])
    return f"truncation K = {end}" + ("" if start == end else f" (--K {start} at the start)")


def _k_hint(out):
    """What to try when every one of the truncation's components is in use and no move could add one."""
    if out["K"] < out["truncation"] or out.get("moves_on"):
        return ""
    return (f": all {out['K']} in use, so the data may want more; let birth / merge / delete choose K "
            f"(--algo memo --moves birth,merge,delete) or raise --K")


def summary_text(out, description):
    weights = np.asarray(out["weights"])
    order = np.argsort(-weights)
    top = ", ".join(f"{weights[k]:.3f}" for k in order[:10] if weights[k] > ACTIVE_WEIGHT)
    tied = out["algo"] == "memory-bounded"
    if tied:
        last = out["epochs"][-1]
        inference = (f"inference memory-bounded VB: {len(out['epochs'])} epochs of {out['epoch']} items in "
                     f"{out['seconds']:.2f} s; memory {last['memory_used']} of {out['memory']} numbers "
                     f"({last['clumps']} clumps, {last['singlets']} singlets)")
    else:
        algo = {"vb": "full-batch VB", "memo": f"memoized VB, {out.get('batches', 1)} batches"}[out["algo"]]
        if out.get("sparse_L") and out["sparse_L"] < out["truncation"]:
            algo += f", top-{out['sparse_L']} sparse responsibilities"
        inference = (f"inference {algo}: {out['laps']} laps"
                     + (f" ({out['resumed_laps']} before --resume, {out['laps'] - out['resumed_laps']} in "
                        f"{out['seconds']:.2f} s) " if out.get("resumed_laps") else f" in {out['seconds']:.2f} s ")
                     + f"({np.mean(out['lap_seconds']):.3f} s per lap)"
                     + ("" if out["converged"] else " (not converged: raise --laps)"))
    lines = [
        f"data      {description}",
        f"model     DP mixture, family {out['family']}, {truncation_text(out)}",
        inference,
        f"{'bound' if tied else 'ELBO':<10}{out['elbo']:.6g} nats ({out['elbo'] / out['N']:.4f} per item"
        f"{', tied' if tied else ''})",
        f"K         {out['K']} components with weight > {ACTIVE_WEIGHT:g}" + _k_hint(out),
        f"weights   {top}" + (" ..." if out["K"] > 10 else ""),
    ]
    if out.get("alpha_prior"):
        s1, s2 = out["alpha_prior"]
        lines.append(f"alpha     E[alpha] = {out['alpha']:.4g} learnt (prior Gamma({s1:g}, {s2:g}), "
                     f"mean {s1 / s2:.4g})")
    if out.get("moves"):
        totals = {}
        for lap in out["moves"]:
            for name, c in lap.items():
                t = totals.setdefault(name, [0, 0])
                t[0], t[1] = t[0] + c["accepted"], t[1] + c["proposed"]
        if totals:
            lines.append("moves     " + ", ".join(f"{n} {a} accepted / {p} proposed" for n, (a, p) in totals.items()))
    if "nmi" in out:
        lines.append(f"NMI       {out['nmi']:.3f} against the dataset's labels")
    if "saved" in out:
        lines.append(f"saved     {out['saved']}")
    return "\n".join(lines)
