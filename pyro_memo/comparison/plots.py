"""The comparison's figures (paper 000 fig. 3 style): ELBO against passes and against wall
time, K against passes, and a strip plot of final ELBOs per method."""

import os

import numpy as np

from ..reporting import write_atomically


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(methods, plt):
    cmap = plt.get_cmap("tab10" if len(methods) <= 10 else "tab20")
    return {m: cmap(i % cmap.N) for i, m in enumerate(methods)}


def _save(fig, path, plt):
    write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))
    plt.close(fig)


def write_plots(out_dir, rows, runs, n):
    """Write ``elbo_vs_passes.png``, ``elbo_vs_seconds.png``, ``k_vs_passes.png`` and
    ``final_elbo.png`` into ``out_dir``."""
    plt = _figure()
    methods = list(dict.fromkeys(m for m, _ in runs))
    colors = _colors(methods, plt)
    for name, xkey, ykey, ylabel, xlog in (
        ("elbo_vs_passes.png", "passes", "elbo", "exact ELBO per item", False),
        ("elbo_vs_seconds.png", "seconds", "elbo", "exact ELBO per item", True),
        ("k_vs_passes.png", "passes", "K", "components > 1% of items", False),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        labelled = set()
        for (method, _), run in runs.items():
            xs = np.asarray(getattr(run, xkey), dtype=float)
            ys = np.asarray(getattr(run, ykey), dtype=float) / (n if ykey == "elbo" else 1)
            ax.plot(xs, ys, color=colors[method], alpha=0.8, lw=1.2,
                    label=None if method in labelled else method)
            labelled.add(method)
        if xlog:
            ax.set_xscale("log")
        ax.set_xlabel({"passes": "passes through the data", "seconds": "wall time (s)"}[xkey])
        ax.set_ylabel(ylabel)
        if ykey == "elbo":
            finals = [r["elbo_per_item"] for r in rows]
            spread = max(finals) - min(finals)
            ax.set_ylim(min(finals) - max(spread, 1e-3) * 1.5, max(finals) + max(spread, 1e-3) * 0.3)
        ax.legend(fontsize=7, ncol=2)
        _save(fig, os.path.join(out_dir, name), plt)
    fig, ax = plt.subplots(figsize=(7, 4))
    rng = np.random.default_rng(0)
    for i, method in enumerate(methods):
        values = [r["elbo_per_item"] for r in rows if r["method"] == method]
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, color=colors[method], s=18)
    ax.set_xticks(range(len(methods)))
    ax.set_xticklabels(methods, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("final exact ELBO per item")
    _save(fig, os.path.join(out_dir, "final_elbo.png"), plt)
