"""One comparison loop for every model.

A *task* is data + scorer + columns: it runs the methods registered for it (by name, one
signature per task) and scores every run alike. :func:`run_comparison` runs methods x seeds
of any task under one :class:`Budget` and writes the same CSV, Markdown and plot files for
all of them. The tasks are :class:`~pyro_memo.comparison.mixture_task.MixtureTask` (DP
mixtures: exact ELBO, held-out log predictive, NMI, accuracy, effective K) and
:class:`~pyro_memo.comparison.topic_task.TopicTask` (HDP topic models: document completion,
bound per token, topics > 1%).
"""

import csv
import math
import numbers
import os
from dataclasses import dataclass

import numpy as np

from ..checks import as_positive_float, as_positive_int
from ..reporting import write_atomically
from . import clock


@dataclass
class Budget:
    """Stop a method after ``passes`` passes through the data (laps, sweeps) or ``seconds``
    of its own wall time, whichever comes first (``seconds=None``: no time limit)."""

    passes: float = 20
    seconds: float = None

    def __post_init__(self):
        as_positive_float(self.passes, "Budget passes")
        if self.seconds is not None:
            as_positive_float(self.seconds, "Budget seconds")

    def spent(self, passes, seconds):
        return passes >= self.passes - 1e-9 or (self.seconds is not None and seconds >= self.seconds)


@dataclass(frozen=True)
class Table:
    """The files a task writes: the per-run ``columns`` (``method``, ``seed``, then scores;
    ``integers`` among them read back as ints), the ``trace`` as ``(traces.csv column, run
    attribute)`` pairs, the run class ``run_type`` those attributes belong to, and what the
    plots show: the trace's ``progress`` column against which the ``objective`` trace
    column is drawn, and the row column ``final`` of the strip plot."""

    columns: tuple
    integers: tuple
    trace: tuple
    run_type: type
    progress: str
    objective: str
    objective_label: str
    final: str
    final_label: str
    k_label: str

    @property
    def trace_columns(self):
        return tuple(column for column, _ in self.trace)


class Task:
    """Data, a scorer and columns: what one comparison runs and how it scores a run.

    A subclass sets ``table`` (a :class:`Table`), ``methods`` (the registry of
    runners by name) and ``noun`` (how errors call the methods), and implements
    :meth:`run`, :meth:`score` and :meth:`describe`. ``trace_scale`` maps a run attribute to
    the factor its trace values are written with (e.g. ``1 / N`` for per-item ELBOs).
    """

    table: Table = None
    methods: dict = None
    noun = "methods"
    trace_scale = {}

    @classmethod
    def check_methods(cls, methods):
        """Raise a :class:`ValueError` naming the methods not registered for this task, or listed twice
        (their runs would overwrite each other), or a string given for the list."""
        if isinstance(methods, str):
            raise ValueError(f"{cls.noun} must be a list of names; got the string {methods!r} (e.g. [{methods!r}])")
        methods = as_list(methods, f"{cls.noun} must be a list of names")
        unknown = [m for m in methods if not isinstance(m, str) or m not in cls.methods]
        if unknown or not methods:
            raise ValueError(f"unknown {cls.noun} {unknown}; choose from {', '.join(cls.methods)}")
        if len(set(methods)) != len(methods):
            raise ValueError(f"a method is listed twice: {list(methods)} (its runs would overwrite each other)")

    def run(self, method, seed):
        """Run registered ``method`` with ``seed`` on the task's data; returns its run."""
        raise NotImplementedError

    def score(self, run):
        """The run's row: a dict of the table's columns after ``method`` and ``seed``."""
        raise NotImplementedError

    def describe(self, row):
        """A short progress line of a scored row."""
        raise NotImplementedError


def run_comparison(task, methods, seeds=(0,), out_dir=None, progress=None):
    """Run every method with every seed on ``task`` and score them alike.

    :param Task task: the data, method registry and scorer.
    :param methods: names registered for the task.
    :param seeds: seeds; each method runs once per seed.
    :param str out_dir: if given, ``runs.csv``, ``runs.md``, ``summary.md`` and
        ``traces.csv`` are (re)written there after every run (a later failure loses nothing
        finished), and the plots at the end.
    :param progress: optional ``progress(message)`` called as runs finish; returning ``True`` ends the
        comparison after that run (the tables and plots cover the runs done).
    :returns: ``(rows, runs)``: one dict per run (the table's columns) and the runs keyed
        by ``(method, seed)``.
    """
    task.check_methods(methods)
    seeds = check_seeds(seeds)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable progress(message) or None; got {type(progress).__name__}")
    rows, runs = [], {}
    for method, seed in [(method, seed) for method in methods for seed in seeds]:
        start = clock.now()
        run = task.run(method, seed)
        runs[(method, seed)] = run
        rows.append({"method": method, "seed": seed, **task.score(run)})
        if out_dir is not None:
            write_outputs(out_dir, task.table, rows, runs, task.trace_scale, plots=False)
        if progress is not None and progress(f"{method} seed {seed}: {task.describe(rows[-1])}, "
                                             f"{rows[-1]['seconds']:.1f} s ({clock.now() - start:.1f} s with scoring)"):
            break
    if out_dir is not None:
        write_outputs(out_dir, task.table, rows, runs, task.trace_scale)
    return rows, runs


def check_instance(value, cls, name):
    """Raise :class:`TypeError` naming ``name`` unless ``value`` is a ``cls`` (a task's budget and settings:
    anything else failed with an AttributeError inside the first run)."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__name__}; got {type(value).__name__}")


def as_list(values, what):
    """``values`` (any iterable) as a list, else :class:`ValueError` "``what``; got ..." (``None`` or one number
    failed in ``list()`` with "object is not iterable")."""
    try:
        return list(values)
    except TypeError:
        raise ValueError(f"{what}; got {values!r} (e.g. [{values!r}])") from None


def check_seeds(seeds):
    """``seeds`` as distinct ints in ``[0, 2**32)`` (every method's generator takes them), at least one.

    :raises ValueError: naming the first bad seed, a repeated one, or an empty list.
    """
    seeds = as_list(seeds, "seeds must be a list of whole numbers")
    if not seeds:
        raise ValueError("give at least one seed")
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, numbers.Integral) or not 0 <= s < 2**32]
    if bad:
        raise ValueError(f"seeds must be whole numbers in [0, 2**32); got {bad[0]!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a seed is listed twice: {seeds} (its runs would overwrite each other)")
    return [int(s) for s in seeds]


def check_settings(settings):
    """Raise :class:`ValueError` unless a comparison's shared ``K`` and ``batches`` are positive whole numbers
    and its ``alpha`` a positive finite number (the settings classes of every task call it)."""
    as_positive_int(settings.K, "K")
    as_positive_int(settings.batches, "batches")
    as_positive_float(settings.alpha, "alpha")


def check_batches(settings, count, what):
    """Raise :class:`ValueError` unless the comparison's ``settings.batches`` is at most ``count``, the number of
    ``what`` (items, documents, nodes) its online methods split into batches: each batch needs one, and a method
    that splits failed only at its start, after the methods listed before it had run."""
    if settings.batches > count:
        raise ValueError(f"settings.batches = {settings.batches} exceeds the number of {what} ({count}); give at "
                         f"most {count} batches")


def summarize(rows, columns=None):
    """Mean and standard deviation over seeds per method: ``{method: {column: (mean, sd)}}``
    for ``columns`` after the first two (method, seed); default: every column of the rows."""
    if columns is None:
        columns = tuple(rows[0]) if rows else ()
    out = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        out[method] = {c: (float(np.mean([r[c] for r in mine])), float(np.std([r[c] for r in mine])))
                       for c in columns[2:]}
        out[method]["runs"] = len(mine)
    return out


def _fmt(value, digits=4):
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def markdown_tables(rows, columns=None):
    """``(per-run table, per-method summary table)`` in Markdown (integer and text cells as
    they are, floats to four decimals); ``columns`` default to the rows' own."""
    if columns is None:
        columns = tuple(rows[0]) if rows else ("method", "seed")
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


def trace_lines(table, runs, scale=None):
    """``[method, seed, *trace point]`` per trace point of every run, each value of run
    attribute ``a`` multiplied by ``scale[a]`` (default 1)."""
    scale = scale or {}
    lines = []
    for (method, seed), run in runs.items():
        series = [[v * scale[a] for v in getattr(run, a)] if a in scale else getattr(run, a) for _, a in table.trace]
        lines += [[method, seed, *point] for point in zip(*series, strict=True)]
    return lines


def write_outputs(out_dir, table, rows, runs, scale=None, plots=True):
    """Per-run tables (``runs.csv``, ``runs.md``), ``summary.md``, every trace point
    (``traces.csv``) and, with ``plots=True``, the plots; each file written atomically."""
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "runs.csv"), table.columns, [[r[c] for c in table.columns] for r in rows])
    traces = trace_lines(table, runs, scale)
    write_csv(os.path.join(out_dir, "traces.csv"), ("method", "seed", *table.trace_columns), traces)
    per_run, summary = markdown_tables(rows, table.columns)
    write_text(os.path.join(out_dir, "runs.md"), per_run)
    write_text(os.path.join(out_dir, "summary.md"), summary)
    if plots:
        from .plots import write_plots

        write_plots(out_dir, table, rows, traces)


def read_task_outputs(out_dir, table):
    """``(rows, runs)`` read back from a comparison folder's ``runs.csv`` and ``traces.csv``
    (trace values as written: per item or per token), for a task with ``table``."""
    rows = [{c: (v if c == "method" else int(v) if c in table.integers else float(v)) for c, v in r.items()}
            for r in _read_csv(os.path.join(out_dir, "runs.csv"), table.columns, table.integers)]
    runs = {}
    for r in _read_csv(os.path.join(out_dir, "traces.csv"), ("method", "seed", *table.trace_columns),
                       ("seed", "K")):
        run = runs.setdefault((r["method"], int(r["seed"])), table.run_type())
        for column, attribute in table.trace:
            getattr(run, attribute).append(int(r[column]) if column == "K" else float(r[column]))
    return rows, runs


def _read_csv(path, columns, integers):
    """The rows of the CSV file ``path`` (dicts of strings), which must have the header ``columns``
    and in every row a number in each column but ``method`` (a whole number in ``integers``).

    :raises ValueError: naming ``path`` (and the line) for a missing or unreadable file, another
        header (another task's folder), or a short or malformed row (a truncated file).
    """
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None or tuple(header) != tuple(columns):
                raise ValueError(f"{path}: expected the columns {', '.join(columns)}; found "
                                 f"{', '.join(header) if header else 'none'} (a folder of another comparison?)")
            rows = []
            for values in reader:
                if len(values) != len(columns):
                    raise ValueError(f"{path}, line {reader.line_num}: {len(values)} values for {len(columns)} "
                                     "columns (a truncated file?)")
                row = dict(zip(columns, values, strict=True))
                for column in columns[1:]:
                    try:
                        number = int(row[column]) if column in integers else float(row[column])
                    except ValueError:
                        number = None
                    if number is None:
                        raise ValueError(f"{path}, line {reader.line_num}: {column} is {row[column]!r}, not a "
                                         f"{'whole number' if column in integers else 'number'}")
                rows.append(row)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file (not a comparison folder?)") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path}: cannot read it ({type(err).__name__}: {str(err)[:160]})") from None
    return rows


def merge_task_outputs(out_dir, in_dirs, table):
    """Combine comparison folders of one task run separately (same data and settings) into
    ``out_dir``: one table, one set of traces and plots. Runs of a method and seed found
    twice keep the later folder's.

    :raises ValueError: for ``in_dirs`` that is one path (a string, whose characters were read as folders) or
        no folder at all (an empty comparison was written).
    """
    if isinstance(in_dirs, (str, bytes, os.PathLike)):
        raise ValueError(f"in_dirs must be a list of comparison folders; got the single path {in_dirs!r} "
                         f"(e.g. [{str(in_dirs)!r}])")
    in_dirs = as_list(in_dirs, "in_dirs must be a list of comparison folders")
    if not in_dirs:
        raise ValueError("in_dirs is empty: give at least one comparison folder to merge")
    rows, runs = {}, {}
    for folder in in_dirs:
        part_rows, part_runs = read_task_outputs(folder, table)
        rows.update({(r["method"], r["seed"]): r for r in part_rows})
        runs.update(part_runs)
    write_outputs(out_dir, table, list(rows.values()), runs)
    return list(rows.values()), runs
