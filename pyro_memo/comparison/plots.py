"""The comparison's figures (Hughes & Sudderth 2013, fig. 3 style) for any task: its objective
against passes and against wall time, K against passes, and a strip plot of a final score per
method."""

import os

import numpy as np

from ..reporting import agg_figure, write_atomically


def _colors(methods):
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(methods) <= 10 else "tab20"]
    return {m: cmap(i % cmap.N) for i, m in enumerate(methods)}


def _subplots(figsize):
    """A figure and its axes, without pyplot (the host's matplotlib backend stays as it is)."""
    fig = agg_figure(figsize=figsize)
    return fig, fig.subplots()


def _save(fig, path):
    write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png"))


def _series(traces, column_index):
    """``{(method, seed): values}`` of one trace column (``traces``: :func:`trace_lines` rows)."""
    out = {}
    for line in traces:
        out.setdefault((line[0], line[1]), []).append(float(line[column_index]))
    return out


def _objective_limits(ax, values):
    finite = [v for v in values if np.isfinite(v)]
    if finite:
        spread = max(finite) - min(finite)
        ax.set_ylim(min(finite) - max(spread, 1e-3) * 1.5, max(finite) + max(spread, 1e-3) * 0.3)


def write_plots(out_dir, table, rows, traces):
    """Write ``{objective}_vs_{progress}.png``, ``{objective}_vs_seconds.png``,
    ``k_vs_{progress}.png`` and ``final_{final}.png`` into ``out_dir`` (for the mixture task:
    ``elbo_vs_passes.png``, ``elbo_vs_seconds.png``, ``k_vs_passes.png``, ``final_elbo.png``).

    :param Table table: the task's columns.
    :param rows: the per-run rows.
    :param traces: ``[method, seed, *trace point]`` lines, as written to ``traces.csv``.
    """
    column = {c: i + 2 for i, c in enumerate(table.trace_columns)}
    methods = list(dict.fromkeys(line[0] for line in traces))
    colors = _colors(methods)
    stem = table.objective.split("_per_")[0]
    labels = {table.progress: f"{table.progress} through the data", "seconds": "wall time (s)"}
    for name, xkey, ykey, ylabel in (
        (f"{stem}_vs_{table.progress}.png", table.progress, table.objective, table.objective_label),
        (f"{stem}_vs_seconds.png", "seconds", table.objective, table.objective_label),
        (f"k_vs_{table.progress}.png", table.progress, "K", table.k_label),
    ):
        fig, ax = _subplots((7, 4.5))
        labelled = set()
        xs, ys = _series(traces, column[xkey]), _series(traces, column[ykey])
        for (method, seed), y in ys.items():
            ax.plot(xs[(method, seed)], y, color=colors[method], alpha=0.8, lw=1.2,
                    label=None if method in labelled else method)
            labelled.add(method)
        if xkey == "seconds":
            ax.set_xscale("log")
        ax.set_xlabel(labels[xkey])
        ax.set_ylabel(ylabel)
        if ykey == table.objective:
            _objective_limits(ax, [r[table.objective] for r in rows])
        ax.legend(fontsize=7, ncol=2)
        _save(fig, os.path.join(out_dir, name))
    fig, ax = _subplots((7, 4))
    rng = np.random.default_rng(0)
    for i, method in enumerate(methods):
        values = [r[table.final] for r in rows if r["method"] == method]
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, color=colors[method], s=18)
    ax.set_xticks(range(len(methods)))
    ax.set_xticklabels(methods, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel(table.final_label)
    _save(fig, os.path.join(out_dir, f"final_{table.final.split('_per_')[0]}.png"))
