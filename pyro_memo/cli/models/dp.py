"""``--model dp``: the DP mixture of conjugate components over an ``(N, D)`` array
(Hughes & Sudderth 2013), fitted by full-batch or memoized VB and compared with its
baselines."""

import os
import sys
import time
from contextlib import contextmanager

from ...checks import check_device
from ..common import (
    ALPHA_PRIOR_OPTION,
    BIRTH_TARGETS_OPTION,
    MEMORY_BOUNDED_LAPS,
    MEMORY_BOUNDED_OPTIONS,
    birth_options,
    check_resume_matches,
    compare_progress,
    dask_executor,
    load_resume,
    memo_resume_entries,
    parse_alpha_prior,
    parse_methods,
    parse_moves,
    parse_prior,
    parse_seeds,
    print_comparison,
    prior_text,
    report,
    stop_requested,
)
from ..names import DATASET_NAMES, DP_METHOD_NAMES, DP_MOVE_NAMES, FAMILY_NAMES, PRIOR_NAMES, SPREAD_KEYS
from ..registry import CliModel, Option, Use, register_model, register_option


def _imports():
    """Import the heavy modules (torch, the inference code) when a command runs, not when the
    parser is built: ``--help`` and option errors return at once."""
    global np, torch, ArrayBatches, make_batches, BUNDLED, load_dataset, FAMILIES, get_family, check_finite
    global FullBatchVB, MemoizedVB, MemoState, load_state, save_state, make_moves, save_model
    global effective_k, nmi, per_lap, summary_text, write_posterior_npz, write_trace_plot
    import numpy as np
    import torch

    from ...data_sources import ArrayBatches, make_batches
    from ...datasets import BUNDLED, load_dataset
    from ...families import FAMILIES, get_family
    from ...families.base import check_finite
    from ...inference import FullBatchVB, MemoizedVB, MemoState, load_state, save_state
    from ...inference.moves import make_moves
    from ...metrics import nmi
    from ...model_file import save_model
    from ...reporting import effective_k, per_lap, summary_text, write_posterior_npz, write_trace_plot


#: default priors of out-of-core data come from at most this many leading items
PRIOR_SAMPLE = 100_000
MEMO = (("algo", ("memo",)),)
BOUNDED = (("algo", ("memory-bounded",)),)
NOT_BOUNDED = (("algo", ("vb", "memo")),)
for _option in MEMORY_BOUNDED_OPTIONS:
    register_option("fit", _option)
register_option("compare", Option("--family", "scoring family (default priors from the training data)."))
PRIOR_HELP = ("prior hyperparameters replacing the data-scaled defaults, e.g. kappa=0.1,nu=30 (gauss: m kappa nu; "
              "diag-gauss: m kappa a b; known-gauss, known-diag-gauss: m; zm-gauss: nu; mult: lam; "
              "bern, poisson: a b); a number fills a vector.")
SCALE_HELP = ("multiplies the default prior covariance scale (B of gauss and zm-gauss, b of diag-gauss, the known "
              "covariance noise of known-gauss and known-diag-gauss; bnpy's "
              "sF): it changes how many components the data support (docs: choosing K, alpha and priors).")
for _command in ("fit", "compare"):
    register_option(_command, Option("--prior", PRIOR_HELP, {"metavar": "KEY=NUMBER,..."}))
    register_option(_command, Option("--prior-scale", SCALE_HELP, {"type": float, "metavar": "S"}))

register_option("fit", ALPHA_PRIOR_OPTION)
register_option("fit", Option("--overrelax", "over-relaxed batch steps of memoized VB (Salakhutdinov & Roweis 2003): "
                                              "each batch's local step runs under globals extrapolated along the "
                                              "last step's change and is kept only when the exact ELBO rises, else "
                                              "redone exactly (from lap 3: laps 1-2 take exact steps); off: the "
                                              "exact steps of Hughes & Sudderth 2013.",
                              {"metavar": "on|off"}))

register_option("fit", BIRTH_TARGETS_OPTION)

_DATA = (f"a .npy or .npz file of shape (N, D), or a bundled dataset: {', '.join(DATASET_NAMES)}")
_FIT_USES = {
    "data": Use(_DATA + "; a .npy file or a .zarr array is read from disk batch by batch with --algo memo",
                default="digits"),
    "family": Use(default="gauss", choices=FAMILY_NAMES),
    "algo": Use("vb: full-batch coordinate ascent; memo: memoized online VB over --batches fixed batches; "
                "memory-bounded: epochs of --epoch items seen once, kept as clumps within --memory numbers "
                "(Gomes et al. 2008; K fixed unless --moves birth,merge)",
                default="vb", choices=("vb", "memo", "memory-bounded")),
    "memory": Use(needs=BOUNDED),
    "epoch": Use(needs=BOUNDED),
    "lifetime": Use(needs=BOUNDED),
    "K": Use(default=20),
    "batches": Use(default=10, needs=MEMO),
    "laps": Use(MEMORY_BOUNDED_LAPS, default=100),
    "tol": Use(default=1e-7),
    "alpha": Use("DP concentration", default=1.0),
    "alpha_prior": Use(default="", needs=NOT_BOUNDED),
    "prior": Use(default=""),
    "prior_scale": Use(default=1.0),
    "init": Use("initial responsibilities", default="kmeans++", choices=("kmeans++", "random")),
    "init_items": Use(default=10_000, needs=NOT_BOUNDED),
    "seed": Use(default=0),
    "device": Use(default="cpu"),
    "dtype": Use(default="float64", choices=("float64", "float32")),
    "local_dtype": Use(default=None, choices=("float32", "float64"), needs=NOT_BOUNDED),
    "sparse_L": Use(needs=NOT_BOUNDED),
    "sparse_candidates": Use(needs=NOT_BOUNDED),
    "workers": Use(needs=MEMO),
    "scheduler": Use(needs=MEMO),
    "round_size": Use(needs=MEMO),
    "overrelax": Use(default="on", choices=("on", "off"), needs=MEMO),
    "moves": Use("birth, merge, delete (exact full-data ELBO acceptance) or greedy-merge (the paper's ablation); "
                 "e.g. --moves birth,merge,delete --K 1 grows the model from one component; with --algo "
                 "memory-bounded: birth, merge (exact tied-bound acceptance in each epoch's model building)",
                 default="", needs=(("algo", ("memo", "memory-bounded")),)),
    "birth_targets": Use("components targeted per lap, each with its own subsample and fresh mixture, adopted "
                         "together, so a fit from --K 1 grows in fewer laps", default=1, needs=MEMO),
    "json": Use("keys: elbo (total nats), elbo_trace (per lap), K, weights, lap_seconds, seconds, k_trace, "
                "emptied (per lap, components whose expected size fell below one item: collapse), N, D, "
                "moves (--algo memo), nmi (labelled data), ..."),
    "save": Use("DIR/model.pt (the fitted model, for pyro-memo predict and pyro_memo.load_model), "
                "DIR/posterior.npz (weights, labels; means and covariances for Gaussian families), DIR/trace.png "
                "(ELBO and K per lap) and, for --algo memo, DIR/state.pt (after every lap; resumable)"),
    "resume": Use(needs=MEMO),
    "quiet": Use(default=False),
}


class Progress:
    """A progress bar of lap, exact ELBO, K and the components the lap emptied (collapse);
    also records K per lap."""

    def __init__(self, total, enabled, k_trace=None):
        self.k_trace = [] if k_trace is None else k_trace
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="lap", file=sys.stderr, leave=False, dynamic_ncols=True)

    def __call__(self, lap, elbo, posterior, moves=None, emptied=0):
        k = effective_k(posterior.expected_weights().cpu().numpy())
        self.k_trace.append(k)
        if self.bar is not None:
            accepted = "".join(f"  {name} {c['accepted']}/{c['proposed']}" for name, c in (moves or {}).items())
            self.bar.set_postfix_str(f"ELBO {elbo:.6g}  K {k}  emptied {emptied}{accepted}")
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _check_batches(batches, num_items, what="items"):
    """Raise a :class:`ValueError` naming ``--batches`` when it exceeds ``num_items`` (the data's ``what``): each
    batch needs an item (the batch source's own error names neither the option nor the data)."""
    if batches > num_items:
        raise ValueError(f"--batches {batches} exceeds the number of {what} ({num_items})")


def _load(args, dtype):
    """Data (in memory, or a file source), labels, description, and the family."""
    on_disk = args.data.endswith(".npy") or args.data.rstrip("/").endswith(".zarr")
    if args.algo in ("memo", "memory-bounded") and on_disk and args.data not in BUNDLED and os.path.exists(args.data):
        num_items = make_batches(args.data, 1).num_items  # the header: N, before B batches
        if args.algo == "memo":
            _check_batches(args.batches, num_items)
        source = make_batches(args.data, args.batches if args.algo == "memo" else -(-num_items // args.epoch))
        parts, count, b = [], 0, 0
        while count < min(PRIOR_SAMPLE, source.num_items) and b < source.num_batches:
            parts.append(np.asarray(source.batch(b)))
            count, b = count + len(parts[-1]), b + 1
        family = _family(args, np.concatenate(parts), dtype)
        shape = f"{source.num_items} x {family.dim}"
        return source, None, f"{args.data}: {shape} array read batch by batch", family
    x_np, labels, description = load_dataset(args.data)
    if args.algo == "memo":
        _check_batches(args.batches, len(x_np))
    family = _family(args, x_np, dtype)
    with _naming(args.data):
        return family.check_data(x_np), labels, description, family


@contextmanager
def _naming(data):
    """A problem with the data raised inside names DATA."""
    try:
        yield
    except ValueError as err:
        raise ValueError(f"{data}: {err}") from None


def _family(args, x, dtype=None):
    """``--family`` with its data-scaled default prior, changed by ``--prior`` and ``--prior-scale``; a
    problem with the data ``x`` (its first rows when read batch by batch) names DATA."""
    with _naming(args.data):
        family = get_family(args.family).from_data(x, dtype=dtype or torch.float64,
                                                   device=getattr(args, "device", None))
    try:
        return family.with_prior(args.prior_scale, scale_name="--prior-scale", **parse_prior(args.prior, args.family))
    except ValueError as err:
        raise ValueError(f"--prior / --prior-scale: {err}") from None


def _labels(posterior, data, family):
    if torch.is_tensor(data):
        return posterior.responsibilities(data).argmax(-1).cpu().numpy()
    return np.concatenate([posterior.responsibilities(family.check_data(np.asarray(b))).argmax(-1).cpu().numpy()
                           for b in data])


def _run(args, data, family, state, progress):
    """Fit by the chosen algorithm (``state``: a memoized fit's, possibly resumed); returns the result."""
    if args.algo == "vb":
        vb = FullBatchVB(family, args.K, args.alpha, max_iter=args.laps, tol=args.tol, init=args.init, seed=args.seed,
                         init_items=args.init_items, local_dtype=args.local_dtype,
                         alpha_prior=parse_alpha_prior(args.alpha_prior), sparse_L=args.sparse_L,
                         sparse_candidates=args.sparse_candidates)

        def vb_callback(lap, elbo, posterior):
            progress(lap, elbo, posterior, emptied=state.emptied[-1])
            return stop_requested(args)

        return vb.fit(data, state=state, callback=vb_callback)
    source = data if not torch.is_tensor(data) else ArrayBatches(data, args.batches, shuffle_seed=args.seed)
    memo = MemoizedVB(family, args.K, args.alpha, laps=args.laps, tol=args.tol, init=args.init, seed=args.seed,
                      init_items=args.init_items, local_dtype=args.local_dtype, round_size=args.round_size,
                      moves=args.moves, move_options=birth_options(args.moves, targets=args.birth_targets),
                      alpha_prior=parse_alpha_prior(args.alpha_prior), sparse_L=args.sparse_L,
                      sparse_candidates=args.sparse_candidates, overrelax=args.overrelax == "on")

    def callback(lap, elbo, posterior):
        progress(lap, elbo, posterior, state.move_log[-1] if state.move_log else None, state.emptied[-1])
        if args.save:
            save_state(os.path.join(args.save, "state.pt"), state)
        return stop_requested(args)

    with dask_executor(args) as executor:
        return memo.fit(source, state=state, callback=callback, executor=executor)


def _fit_memory_bounded(args, data, labels, description, family):
    """``--algo memory-bounded``: epochs of ``--epoch`` items, seen once, kept within ``--memory`` numbers."""
    from ...inference.memory_bounded import MemoryBoundedVB

    num_items = len(data) if torch.is_tensor(data) else data.num_items
    lifetime = args.lifetime or num_items
    model = MemoryBoundedVB(family, args.K, args.memory, args.epoch, alpha=args.alpha, lifetime=lifetime,
                            laps=args.laps, tol=args.tol, seed=args.seed, moves=args.moves)

    def progress(record):
        if not args.quiet:
            print(f"epoch {record['epoch'] + 1}: {record['items']} items, tied bound {record['elbo']:.6g}, "
                  f"K {record['K']}, "
                  f"{record['clumps']} clumps, {record['singlets']} singlets, {record['memory_used']} numbers",
                  file=sys.stderr, flush=True)
        return stop_requested(args)

    start = time.perf_counter()
    result = model.fit(data if torch.is_tensor(data) else args.data, callback=progress)  # a file: epoch by epoch
    post = result.posterior
    weights = post.expected_weights().cpu().numpy()
    pred = _labels(post, data, family)
    out = {"data": args.data, "model": "dp", "family": args.family, "algo": args.algo, "N": int(num_items),
           "D": int(family.dim), "truncation": len(weights), "initial_truncation": args.K, "memory": args.memory,
           "epoch": args.epoch,
           "lifetime": lifetime, "elbo": result.elbo, "elbo_trace": [r["elbo"] for r in result.epochs],
           "K": effective_k(weights), "weights": weights.tolist(), "epochs": result.epochs,
           "seconds": time.perf_counter() - start, "alpha": float(post.sticks.alpha),
           "laps": sum(r["laps"] for r in result.epochs),  # model building's, in all (--laps bounds each epoch's)
           "prior_scale": args.prior_scale, "prior": parse_prior(args.prior, args.family), "moves_on": bool(args.moves)}
    if labels is not None and len(labels) == len(pred):
        out["nmi"] = nmi(labels, pred)
    if args.save:
        save_model(os.path.join(args.save, "model.pt"), post, result.summary)
        write_posterior_npz(os.path.join(args.save, "posterior.npz"), weights, pred,
                            family.point_estimates(post.component))
        write_trace_plot(os.path.join(args.save, "trace.png"), out["elbo_trace"],
                         [out["K"]] * len(out["elbo_trace"]), description)
        out["saved"] = args.save
    return report(summary_text(out, description), out, args.json)


def _check_resume(args, state, num_items, family):
    """Refuse a checkpoint fitted with other options or data than this run's."""
    post, total = state.posterior, state.cache.total
    given_prior, saved_prior = parse_alpha_prior(args.alpha_prior), post.sticks.alpha_prior
    saved = {"--family": (args.family, post.family.name), "--dtype": (args.dtype, str(post.dtype).split(".")[-1]),
             "--alpha-prior": (prior_text(given_prior), prior_text(saved_prior)),
             "columns in DATA": (family.dim, post.family.dim), **memo_resume_entries(args, state, post.K)}
    if given_prior is None and saved_prior is None:  # a learnt alpha makes --alpha unused
        saved["--alpha"] = (float(args.alpha), float(post.sticks.alpha))
    if total is not None:
        saved["items in DATA"] = (int(num_items), int(round(float(total.counts.sum()))))
    check_resume_matches(args, saved)
    if not all(torch.allclose(family.prior[k].cpu().double(), v.cpu().double(), rtol=1e-9, atol=0)
               for k, v in post.family.prior.items()):
        raise ValueError(f"--resume {args.resume}: this run's prior (from --prior, --prior-scale and the DATA it is "
                         f"scaled to) differs from the saved fit's (resume with the saved run's options and DATA)")


class DPMixture(CliModel):
    """``--model dp``."""

    name = "dp"
    aliases = ("dp-mixture",)
    summary = "a DP mixture of --family components over an (N, D) array"
    why_not = {}
    uses = {
        "fit": _FIT_USES,
        "compare": {
            "data": Use(_DATA, default="digits"),
            "methods": Use("DP-mixture methods: memo, memo-moves, memo-incremental (bnpy's first lap), memo-exact "
                           "(no over-relaxed steps), vb, svi-*, pyro-svi*, sga*, gibbs-*, sklearn-bgm",
                           default="memo,vb,svi-k0.5-d10,sga+f,sklearn-bgm"),
            "seeds": Use(default="0,1,2"),
            "passes": Use(default=20.0),
            "seconds": Use(),
            "family": Use(default="gauss", choices=FAMILY_NAMES),
            "K": Use(default=25),
            "batches": Use(default=20),
            "alpha": Use("DP concentration", default=1.0),
            "prior": Use(default=""),
            "prior_scale": Use(default=1.0),
            "heldout": Use("fraction of items held out for the predictive density (0: none)", default=0.2),
            "out": Use(default="compare-out"),
            "quiet": Use(default=False),
        },
    }

    def check(self, command, args):
        parse_prior(args.prior, args.family)
        if args.prior_scale != 1.0 and args.family not in SPREAD_KEYS:
            raise ValueError(f"--prior-scale: the {args.family} family has no covariance scale; set its priors with "
                             f"--prior ({', '.join(PRIOR_NAMES[args.family])})")
        if command == "fit":
            if args.algo == "memory-bounded" and (args.memory is None or args.epoch is None):
                raise ValueError("--algo memory-bounded needs --memory M (stored numbers) and --epoch E (items)")
            for flag, value in (("--memory", args.memory), ("--epoch", args.epoch), ("--lifetime", args.lifetime)):
                if value is not None and value < 1:
                    raise ValueError(f"{flag} must be a positive integer; got {value}")
            if args.algo == "memory-bounded" and args.init != "kmeans++":
                raise ValueError("--algo memory-bounded starts from k-means++ on the first epoch; leave --init out")
            moves = parse_moves(args.moves, DP_MOVE_NAMES, self.name)
            tied = [m for m in moves if m not in ("birth", "merge")]
            if args.algo == "memory-bounded" and tied:
                raise ValueError(f"--moves {','.join(tied)} is not available with --algo memory-bounded (birth, merge)")
            if args.birth_targets != _FIT_USES["birth_targets"].default and "birth" not in moves:
                raise ValueError("--birth-targets sets the birth move; add birth to --moves (e.g. --moves "
                                 "birth,merge,delete)")
            parse_alpha_prior(args.alpha_prior)
            check_device(args.device, "--device")
        else:  # names known at parse time: a bad list fails before torch is imported
            parse_methods(args.methods, DP_METHOD_NAMES, self.name)
            parse_seeds(args.seeds)

    def fit(self, args):
        _imports()
        data, labels, description, family = _load(args, getattr(torch, args.dtype))
        if args.algo == "memory-bounded":
            return _fit_memory_bounded(args, data, labels, description, family)
        num_items = data.shape[0] if torch.is_tensor(data) else data.num_items
        state = MemoState(rng=np.random.default_rng(args.seed))
        resumed_laps = 0
        if args.resume:
            state = load_resume(args, self.name)
            _check_resume(args, state, num_items, family)
            family, resumed_laps = state.posterior.family, state.laps_done
        # K per lap lives in the state, so a resumed fit's trace covers the laps before the resume too
        progress = Progress(args.laps - state.laps_done, not args.quiet, state.traces.setdefault("k", []))
        start = time.perf_counter()
        result = _run(args, data, family, state, progress)
        progress.close()
        post = result.posterior
        weights = post.expected_weights().cpu().numpy()
        pred = _labels(post, data, family)
        out = {
            "data": args.data, "model": self.name, "family": args.family, "algo": args.algo, "N": int(num_items),
            "D": int(family.dim), "truncation": len(weights), "initial_truncation": args.K,
            "batches": args.batches if args.algo == "memo" else 1,
            "elbo": result.elbo, "elbo_trace": result.elbo_trace, "K": effective_k(weights),
            "k_trace": per_lap(progress.k_trace, len(result.elbo_trace)),
            "weights": weights.tolist(),
            "counts": result.summary.counts.cpu().numpy().tolist(), "laps": len(result.elbo_trace),
            "converged": result.converged, "lap_seconds": result.lap_seconds, "emptied": result.emptied,
            "seconds": time.perf_counter() - start, "resumed_laps": resumed_laps,
            "moves_on": bool(args.moves), "prior_scale": args.prior_scale,
            "birth_targets": args.birth_targets if args.algo == "memo" else None,
            "sparse_L": args.sparse_L, "sparse_candidates": args.sparse_candidates, "init_items": args.init_items,
            "prior": parse_prior(args.prior, args.family),
        }
        if post.sticks.alpha_prior is not None:  # learnt: E_q[alpha] and the Gamma factor q(alpha) = Gamma(w1, w2)
            out.update(alpha=post.expected_alpha(), alpha_prior=list(post.sticks.alpha_prior),
                       q_alpha=[float(v) for v in post.q_alpha])
        else:
            out["alpha"] = float(post.sticks.alpha)
        if args.algo == "memo":
            out["moves"] = result.state.move_log
        if labels is not None and len(labels) == len(pred):
            out["nmi"] = nmi(labels, pred)
        if args.save:
            save_model(os.path.join(args.save, "model.pt"), result)
            write_posterior_npz(os.path.join(args.save, "posterior.npz"), weights, pred,
                                family.point_estimates(post.component))
            write_trace_plot(os.path.join(args.save, "trace.png"), result.elbo_trace,
                             progress.k_trace or [out["K"]] * len(result.elbo_trace), description)
            out["saved"] = args.save
        return report(summary_text(out, description), out, args.json)

    def compare(self, args):
        _imports()
        from ...comparison import COLUMNS, METHODS, Budget, Settings, compare, load_array_split

        methods = parse_methods(args.methods, METHODS, self.name)
        seeds = parse_seeds(args.seeds)
        x_np, labels, description = load_dataset(args.data)
        with _naming(args.data):  # NaN / inf: the row of DATA, before the held-out split shuffles it
            check_finite(torch.as_tensor(x_np), get_family(args.family).name)
        x, y, heldout = load_array_split(x_np, labels, args.heldout, seed=0)
        _check_batches(args.batches, len(x), "training items")
        family = _family(args, x)
        if not args.quiet:
            print(f"{description}; {len(x)} training items, {0 if heldout is None else len(heldout)} held out",
                  file=sys.stderr)
        rows, _ = compare(x, methods, seeds, family=family, labels=y, heldout=heldout,
                          budget=Budget(args.passes, args.seconds), settings=Settings(args.K, args.batches, args.alpha),
                          out_dir=args.out, progress=compare_progress(args))
        print_comparison(rows, COLUMNS, args.out)
        return 0


register_model(DPMixture())
