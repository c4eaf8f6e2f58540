"""Issue #13's diagnosis: why memoized VB at fixed K ended below full-batch VB, by first-lap
schedule, initialisation and stopping tolerance.

For each dataset, seed and initialisation, full-batch VB and memoized VB with the incremental
first lap (bnpy's schedule: the globals are refit to the partial memo after every batch), with
the held first lap (the default: lap 1 is full VB's first iteration) and with two first laps
tried and rejected (``--variants``: "filled", the globals optimal for the partial memo plus the
initial summary scaled to the items not yet visited; "stochastic", lap 1 as stochastic VI with
rho_t = (t + 10)^-0.5 on a running summary, the memo filled alongside) all start from the same
globals (``initial_posterior``: k-means++ or random responsibilities of at most 10,000 items
chosen by the seed, whatever the batching). Each run goes the full number of passes (tol = 0);
the lap at which a relative tolerance of 1e-9 would have stopped it is read off its trace.

Printed per (init, run): the final exact ELBO per item (Hughes & Sudderth 2013, eq. 8; mean,
sd, per seed), effective K (components holding > 1% of the items), the components lap 1 and
the later laps emptied (whole-data size from >= 1 item to < 1), and the stopping lap. Then,
for the first seed, the exact ELBO per item and effective K after every batch of lap 1 (every
``B / 20``-th batch when there are more than 20) and after every lap.

Datasets: ``toy3k`` (N = 3,000 of the paper's §4.1 toy data, K = 10, 6 batches, 20 passes),
``toy100k`` (N = 100,000, K = 25, 100 batches, 10 passes), ``fashion`` (Fashion-MNIST from
Debian's dataset-fashion-mnist, PCA to 50 dimensions, 56,000 training items, K = 25, 20
batches, 10 passes). ``--save-data FILE.npz`` writes the dataset (training part) for
``pyro-memo compare --data FILE.npz``.

    python benchmarks/bench_memo_schedule.py --data toy3k [--seeds 5] [--inits kmeans++,random]
    python benchmarks/bench_memo_schedule.py --data fashion --save-data /tmp/fashion50.npz
    python benchmarks/bench_memo_schedule.py --paired OUT1 [OUT2 ...] [--at-pass 10]

``--paired`` reads ``pyro-memo compare`` output folders of one dataset (seeds may be split over
folders) and prints, for every other method, memoized VB's paired difference per seed (mean,
standard error, seeds where memo is ahead), at the final pass or at ``--at-pass`` from the traces.
"""

import numpy as np
import torch
from _common import make_parser

import pyro_memo as pm
from pyro_memo.comparison import read_outputs
from pyro_memo.data import load_fashion_mnist, toy_patches

DATASETS = {  # name: (K, batches, passes)
    "toy3k": (10, 6, 20),
    "toy100k": (25, 100, 10),
    "fashion": (25, 20, 10),
}
TOL = 1e-9


def load(name, seed):
    """``(x, labels, family name)``; toy data are drawn afresh for every seed."""
    if name.startswith("toy"):
        x, y, _ = toy_patches(3000 if name == "toy3k" else 100_000, seed=seed)
        return x, y, "zm-gauss"
    from sklearn.decomposition import PCA

    from pyro_memo.comparison import load_array_split

    images, labels = load_fashion_mnist()
    x, y, _ = load_array_split(PCA(50, random_state=0).fit_transform(images), labels, 0.2, seed=0)
    return x.numpy(), y, "gauss"


def score(posterior, x, family):
    """``(exact ELBO per item, effective K, empty components)`` of ``posterior``'s globals."""
    elbo, summary = pm.full_data_elbo(posterior, pm.make_batches(x, 10), family)
    sizes = summary.sizes
    return elbo / len(x), int((sizes > 0.01 * len(x)).sum()), int((sizes < 1.0).sum())


class Traced(pm.MemoizedVB):
    """Memoized VB that scores its globals before every ``every``-th batch step of lap 1."""

    def __init__(self, *args, x=None, every=1, **kwargs):
        super().__init__(*args, **kwargs)
        self.x, self.every, self.lap1, self.visits = x, every, [], 0

    def local_step(self, state, key, batch):
        if state.laps_done == 0:
            if self.x is not None and self.visits % self.every == 0:
                self.lap1.append((self.visits, *score(state.posterior, self.x, self.family)))
            self.visits += 1
        return super().local_step(state, key, batch)


class FirstLapVariant(Traced):
    """Memoized VB whose first lap updates the globals from a stand-in for the unvisited data
    (``mode="filled"``) or from a stochastic running summary (``mode="stochastic"``); from the
    end of lap 1 it is the engine's memoized VB."""

    def __init__(self, *args, mode="filled", **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode

    def lap(self, source, state, batch_elbos=None):
        if state.laps_done > 0:
            return super().lap(source, state, batch_elbos)
        initial, items = self.initial_summary(source)
        running = initial.scaled(source.num_items / items)
        state.num_items = source.num_items
        for t, b in enumerate(self.order(state.rng, source.num_batches), start=1):
            local, summary = self.local_step(state, int(b), self.read_batch(source, int(b)))
            self.memoize(state, int(b), local, summary)
            if self.mode == "stochastic":
                rho = (t + 10.0) ** -0.5
                running = running.scaled(1 - rho) + summary.scaled(rho * source.num_items / summary.num_items)
            else:
                unseen = source.num_items - state.cache.num_items
                running = state.cache.total + initial.scaled(unseen / items) if unseen else state.cache.total
            state.posterior = state.posterior.update(running)
        state.posterior = state.posterior.update(state.cache.total)
        state.emptied.append(self.count_emptied(None, state.cache.total.sizes))
        state.move_log.append({})
        state.laps_done += 1


def stopping_lap(trace):
    """The lap a relative tolerance of :data:`TOL` would have stopped at (else the last)."""
    for lap in range(1, len(trace)):
        if abs(trace[lap] - trace[lap - 1]) <= TOL * abs(trace[lap - 1]):
            return lap + 1
    return len(trace)


def run(name, x, family, K, batches, passes, seed, init, trace_lap1, variants=()):
    """Every run of one seed and initialisation from one start: ``{run: record}``."""
    start = pm.MemoizedVB(family, K, init=init, seed=seed).initial_posterior(x)
    every = max(1, batches // 20)
    records = {}
    vb = pm.FullBatchVB(family, K, max_iter=passes, tol=0, init=init, seed=seed).fit(x, posterior=start)
    records["full-batch VB"] = (vb, None)
    for incremental, overrelax in ((True, False), (False, False), (False, True)):
        label = ("memoized, incremental first lap" if incremental else "memoized, held first lap") + \
            (", over-relaxed steps (default)" if overrelax else ", exact steps")
        model = Traced(family, K, laps=passes, tol=0, init=init, seed=seed, incremental_first_lap=incremental,
                       x=x if trace_lap1 else None, every=every, overrelax=overrelax)
        records[label] = (model.fit(x, num_batches=batches, posterior=start), model.lap1)
    for mode in variants:
        model = FirstLapVariant(family, K, laps=passes, tol=0, init=init, seed=seed, mode=mode,
                                x=x if trace_lap1 else None, every=every, overrelax=False)
        records[f"memoized, {mode} first lap (rejected)"] = (model.fit(x, num_batches=batches, posterior=start),
                                                             model.lap1)
    return {label: {"elbo": fit.elbo / len(x), "K": score(fit.posterior, x, family)[1],
                    "emptied_lap1": fit.emptied[0], "emptied_later": sum(fit.emptied[1:]),
                    "stop": stopping_lap(fit.elbo_trace), "trace": [e / len(x) for e in fit.elbo_trace],
                    "lap1": lap1}
            for label, (fit, lap1) in records.items()}


def paired(folders, at_pass=None, reference="memo"):
    """Print ``reference``'s paired difference in exact ELBO per item against every other method."""
    values = {}
    for folder in folders:
        rows, runs = read_outputs(folder)
        for row in rows:
            run = runs[(row["method"], row["seed"])]
            elbo = row["elbo_per_item"]
            if at_pass is not None:
                position = [i for i, p in enumerate(run.passes) if p <= at_pass][-1]
                elbo = run.elbo[position] * (row["elbo_per_item"] / run.elbo[-1])  # total -> per item
            values.setdefault(row["method"], {})[row["seed"]] = elbo
    ref = values[reference]
    where = f"at pass {at_pass}" if at_pass is not None else "at the final pass"
    print(f"{', '.join(folders)}: {len(ref)} seeds, exact ELBO per item {where}")
    for method, by_seed in values.items():
        print(f"  {method:16s} mean {np.mean(list(by_seed.values())):8.4f}")
    for method, by_seed in values.items():
        if method == reference:
            continue
        d = np.array([ref[s] - by_seed[s] for s in sorted(ref) if s in by_seed])
        print(f"  {reference} - {method:16s} mean {d.mean():+.4f}  se {d.std(ddof=1) / np.sqrt(len(d)):.4f}  "
              f"{reference} ahead on {int((d > 0).sum())}/{len(d)} seeds")


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--data", choices=sorted(DATASETS), default="toy3k")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--inits", default="kmeans++", help="comma-separated: kmeans++, random")
    parser.add_argument("--variants", default="filled,stochastic",
                        help="comma-separated rejected first laps to run too: filled, stochastic (or empty)")
    parser.add_argument("--save-data", default=None, help="write the (seed 0) training data to this .npz and stop")
    parser.add_argument("--paired", nargs="+", metavar="DIR", help="pyro-memo compare output folders to pair up")
    parser.add_argument("--at-pass", type=float, default=None, help="with --paired: compare at this pass")
    args = parser.parse_args()
    if args.paired:
        paired(args.paired, args.at_pass)
        return
    torch.set_num_threads(1)
    K, batches, passes = DATASETS[args.data]
    if args.save_data:
        x, y, _ = load(args.data, 0)
        np.savez(args.save_data, x=x, labels=y)
        print(f"wrote {args.save_data}: {x.shape[0]} x {x.shape[1]}")
        return
    results = {}
    for seed in range(args.seeds):
        x, _, family_name = load(args.data, seed)
        x = torch.as_tensor(x, dtype=torch.float64)
        family = pm.get_family(family_name).from_data(x)
        for init in args.inits.split(","):
            variants = [v for v in args.variants.split(",") if v]
            for label, record in run(args.data, x, family, K, batches, passes, seed, init, seed == 0,
                                     variants).items():
                results.setdefault((init, label), []).append(record)
    print(f"{args.data}: N = {len(x)}, K = {K}, {batches} batches, {passes} passes, {args.seeds} seeds; "
          f"one thread; exact ELBO per item; every run from the same start as full VB")
    print(f"{'init':9s} {'run':44s} {'mean':>8s} {'sd':>6s}  {'K':>5s} {'emptied lap 1':>13s} "
          f"{'later':>6s} {'stops at':>8s}  per seed")
    for (init, label), records in results.items():
        values = [r["elbo"] for r in records]
        print(f"{init:9s} {label:56s} {np.mean(values):8.3f} {np.std(values):6.3f}  "
              f"{np.mean([r['K'] for r in records]):5.1f} {np.mean([r['emptied_lap1'] for r in records]):13.1f} "
              f"{np.mean([r['emptied_later'] for r in records]):6.1f} {np.mean([r['stop'] for r in records]):8.1f}  "
              f"{np.round(values, 3).tolist()}")
    for (init, label), records in results.items():
        first = records[0]
        if first["lap1"]:
            steps = ", ".join(f"{b}: {e:.3f}/K{k}" for b, e, k, _ in first["lap1"])
            print(f"seed 0, {init}, {label}, lap 1 before batch step (ELBO/item / effective K): {steps}")
        print(f"seed 0, {init}, {label}, after each lap: {np.round(first['trace'], 3).tolist()}")


if __name__ == "__main__":
    main()
