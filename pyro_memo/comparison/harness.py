"""Run methods x seeds on one dataset and one objective; write tables and plots."""

import csv
import math
import os
import time

import numpy as np
import torch

from ..families import get_family
from ..metrics import effective_k, hungarian_accuracy, nmi
from ..reporting import write_atomically
from .methods import METHODS, Budget, Settings

#: columns of the per-run table
COLUMNS = ("method", "seed", "passes", "seconds", "elbo_per_item", "heldout_per_item", "nmi", "accuracy",
           "effective_k")


def compare(x, methods, seeds=(0, 1, 2), family="gauss", labels=None, heldout=None, budget=None, settings=None,
            out_dir=None, progress=None):
    """Run every method with every seed on ``x`` and score them alike.

    :param x: ``(N, D)`` training data (tensor or array).
    :param methods: names from :data:`~pyro_memo.comparison.methods.METHODS`.
    :param seeds: seeds; each method runs once per seed.
    :param family: scoring family: a name (default priors from ``x``) or a
        :class:`~pyro_memo.families.ConjugateFamily`.
    :param labels: optional ``(N,)`` true labels for NMI and accuracy.
    :param heldout: optional ``(M, D)`` held-out items for the log predictive density.
    :param Budget budget: passes / seconds per run (default 20 passes).
    :param Settings settings: K, batches per pass, alpha shared by all methods.
    :param str out_dir: if given, write ``runs.csv``, ``runs.md``, ``summary.md``,
        ``traces.csv`` there after every run, and the plots at the end.
    :param progress: optional ``progress(message)`` called as runs finish.
    :returns: ``(rows, runs)``: one dict per run (:data:`COLUMNS`) and the
        :class:`~pyro_memo.comparison.methods.Run` objects keyed by ``(method, seed)``.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    budget = budget or Budget()
    settings = settings or Settings()
    if isinstance(family, str):
        family = get_family(family).from_data(x)
    x = family.check_data(x)
    heldout = family.check_data(heldout) if heldout is not None else None
    if labels is not None and len(labels) != x.shape[0]:
        raise ValueError(f"labels must have one entry per item ({x.shape[0]}); got {len(labels)}")
    n = x.shape[0]
    rows, runs = [], {}
    for method in methods:
        for seed in seeds:
            start = time.perf_counter()
            run = METHODS[method](x, family, budget, settings, int(seed))
            runs[(method, seed)] = run
            row = {"method": method, "seed": int(seed), "passes": run.passes[-1], "seconds": run.seconds[-1],
                   "elbo_per_item": run.elbo[-1] / n, "effective_k": effective_k(run.labels)}
            row["heldout_per_item"] = (float(run.log_predictive(heldout).mean()) if heldout is not None
                                       else float("nan"))
            row["nmi"] = nmi(labels, run.labels) if labels is not None else float("nan")
            row["accuracy"] = hungarian_accuracy(labels, run.labels) if labels is not None else float("nan")
            rows.append(row)
            if progress is not None:
                progress(f"{method} seed {seed}: ELBO/item {row['elbo_per_item']:.4f}, K {row['effective_k']}, "
                         f"{row['seconds']:.1f} s ({time.perf_counter() - start:.1f} s with scoring)")
            if out_dir is not None:  # after every run: a later failure loses nothing finished
                write_outputs(out_dir, rows, runs, n, plots=False)
    if out_dir is not None:
        write_outputs(out_dir, rows, runs, n)
    return rows, runs


def summarize(rows, columns=COLUMNS):
    """Mean and standard deviation over seeds per method: ``{method: {column: (mean, sd)}}``
    for ``columns`` after the first two (method, seed)."""
    out = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        out[method] = {c: (float(np.mean([r[c] for r in mine])), float(np.std([r[c] for r in mine])))
                       for c in columns[2:]}
        out[method]["runs"] = len(mine)
    return out


def _fmt(value, digits=4):
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def markdown_tables(rows, columns=COLUMNS):
    """``(per-run table, per-method summary table)`` in Markdown (integer and text cells as
    they are, floats to four decimals)."""
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join("| " + " | ".join(_fmt(r[c]) if isinstance(r[c], float) else str(r[c])
                                     for c in columns) + " |\n" for r in rows)
    stats = summarize(rows, columns)
    cols = columns[2:]
    summary = "| method | runs | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 2) + "\n"
    for method, s in stats.items():
        summary += f"| {method} | {s['runs']} | " + " | ".join(
            f"{_fmt(s[c][0])} ± {_fmt(s[c][1])}" for c in cols) + " |\n"
    return head + body, summary


def write_csv(path, header, lines):
    """A CSV file with ``header`` and ``lines``, written atomically."""
    def dump(tmp):
        with open(tmp, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(lines)

    write_atomically(path, dump)


def write_text(path, text):
    """A text file, written atomically."""
    def dump(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    write_atomically(path, dump)


def write_outputs(out_dir, rows, runs, n, plots=True):
    """Tables (CSV, Markdown), every trace as CSV, and (``plots=True``) the plots, each
    written atomically."""
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "runs.csv"), COLUMNS, [[r[c] for c in COLUMNS] for r in rows])
    trace_lines = [[m, s, p, t, e / n, k] for (m, s), run in runs.items()
                   for p, t, e, k in zip(run.passes, run.seconds, run.elbo, run.K, strict=True)]
    write_csv(os.path.join(out_dir, "traces.csv"), ("method", "seed", "passes", "seconds", "elbo_per_item", "K"),
              trace_lines)
    per_run, summary = markdown_tables(rows)
    write_text(os.path.join(out_dir, "runs.md"), per_run)
    write_text(os.path.join(out_dir, "summary.md"), summary)
    if plots:
        from .plots import write_plots

        write_plots(out_dir, rows, runs, n)


def read_outputs(out_dir):
    """``(rows, runs)`` read back from a comparison folder's ``runs.csv`` and ``traces.csv``
    (run ELBOs per item, i.e. ``n = 1`` for :func:`write_outputs`)."""
    from .methods import Run

    with open(os.path.join(out_dir, "runs.csv"), newline="") as f:
        rows = [{c: (v if c == "method" else int(v) if c in ("seed", "effective_k") else float(v))
                 for c, v in r.items()} for r in csv.DictReader(f)]
    runs = {}
    with open(os.path.join(out_dir, "traces.csv"), newline="") as f:
        for r in csv.DictReader(f):
            run = runs.setdefault((r["method"], int(r["seed"])), Run())
            run.passes.append(float(r["passes"]))
            run.seconds.append(float(r["seconds"]))
            run.elbo.append(float(r["elbo_per_item"]))
            run.K.append(int(r["K"]))
    return rows, runs


def merge_outputs(out_dir, in_dirs):
    """Combine comparison folders run separately (same data and settings) into ``out_dir``:
    one table, one set of traces and plots. Runs of a method and seed found twice keep the
    later folder's."""
    rows, runs = {}, {}
    for folder in in_dirs:
        part_rows, part_runs = read_outputs(folder)
        rows.update({(r["method"], r["seed"]): r for r in part_rows})
        runs.update(part_runs)
    write_outputs(out_dir, list(rows.values()), runs, 1)
    return list(rows.values()), runs


def load_array_split(x, labels=None, heldout_fraction=0.0, seed=0):
    """Split ``x`` (and ``labels``) into training and held-out parts by a seeded permutation."""
    x = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)
    n = x.shape[0]
    if not 0 <= heldout_fraction < 1:
        raise ValueError(f"the held-out fraction must lie in [0, 1); got {heldout_fraction}")
    perm = torch.as_tensor(np.random.default_rng(seed).permutation(n))
    cut = n - int(round(heldout_fraction * n))
    train, test = perm[:cut], perm[cut:]
    y = None if labels is None else np.asarray(labels)[train.numpy()]
    return x[train], y, (x[test] if len(test) else None)
