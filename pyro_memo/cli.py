"""The ``pyro-memo`` console script."""

import argparse
import os
import sys
import time

import numpy as np
import torch

from .data_sources import ArrayBatches, FileBatches
from .datasets import BUNDLED, load_dataset
from .families import FAMILIES, get_family
from .inference import FullBatchVB, MemoizedVB, MemoState, load_state, save_state
from .inference.moves import make_moves
from .reporting import effective_k, summary_text, write_json, write_posterior_npz, write_trace_plot

ALGORITHMS = ("vb", "memo")
#: default priors of out-of-core data come from at most this many leading items
PRIOR_SAMPLE = 100_000


def build_parser():
    parser = argparse.ArgumentParser(prog="pyro-memo",
                                     description="Variational inference for Dirichlet-process mixtures (pyro-memo).")
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="fit a DP mixture to a dataset and print a summary",
                         description="Fit a DP mixture to DATA and print a summary (ELBO, components, weights).")
    fit.add_argument("data", nargs="?", default="digits", metavar="DATA",
                     help=f"a .npy or .npz file of shape (N, D), or a bundled dataset: {', '.join(BUNDLED)} "
                          "(default: digits). A .npy file is read from disk batch by batch with --algo memo.")
    fit.add_argument("--model", choices=("dp-mixture", "hdp"), default="dp-mixture",
                     help="dp-mixture (default): a DP mixture of --family components over an (N, D) array; hdp: the "
                          "HDP topic model over a corpus DATA: an LDA-C file (.ldac, with --vocab or a vocab.txt "
                          "beside it), a scipy sparse count matrix (.npz), or a bundled corpus: wiki (7,961 "
                          "Wikipedia documents, fetched once from PyPI's bnpy 0.1.7 sdist), bars (synthetic)")
    fit.add_argument("--family", choices=sorted(FAMILIES), default="gauss",
                     help="observation family: gauss (full covariance, Normal-Wishart prior), zm-gauss (zero mean, "
                          "Wishart), diag-gauss (Normal-Gamma), mult (Dirichlet), bern (Beta), poisson (Gamma). "
                          "Default priors are scaled to the data. Default: gauss")
    fit.add_argument("--algo", choices=ALGORITHMS, default="vb",
                     help="vb: full-batch coordinate ascent; memo: memoized online VB over --batches fixed batches "
                          "(default vb)")
    fit.add_argument("--K", type=int, default=20, help="truncation level, the number of components (default 20)")
    fit.add_argument("--batches", type=int, default=10, help="number of fixed batches for --algo memo (default 10)")
    fit.add_argument("--laps", type=int, default=100, help="maximum passes through the data (default 100)")
    fit.add_argument("--tol", type=float, default=1e-7,
                     help="stop when the exact ELBO's relative change over a lap is below this (default 1e-7)")
    fit.add_argument("--alpha", type=float, default=None,
                     help="DP concentration (default 1.0; for --model hdp the document-level one, default 0.5)")
    fit.add_argument("--gamma", type=float, default=10.0, help="--model hdp: top-level concentration (default 10)")
    fit.add_argument("--lam0", type=float, default=0.1,
                     help="--model hdp: symmetric Dirichlet prior on topic-word distributions (default 0.1)")
    fit.add_argument("--vocab", metavar="PATH",
                     help="--model hdp: vocabulary file of an LDA-C corpus, one word per line")
    fit.add_argument("--init", choices=("kmeans++", "random"), default="kmeans++",
                     help="initial responsibilities (default kmeans++); --model hdp: initial topics, kmeans++ "
                          "(a KL k-means of the documents) or random (random documents)")
    fit.add_argument("--seed", type=int, default=0, help="seed of initialisation and batch order (default 0)")
    fit.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1, ... (default cpu)")
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="floating type of the variational math (default float64)")
    fit.add_argument("--moves", default="", metavar="LIST",
                     help="comma-separated moves for --algo memo: birth, merge, delete (exact full-data ELBO "
                          "acceptance) or greedy-merge (the paper's ablation); e.g. --moves birth,merge,delete "
                          "--K 1 grows the model from one component")
    fit.add_argument("--json", metavar="PATH",
                     help="write results as JSON: elbo (total nats), elbo_trace (per lap), K, weights, "
                          "lap_seconds, seconds, k_trace, N, D, ...")
    fit.add_argument("--save", metavar="DIR",
                     help="write DIR/posterior.npz (weights, labels; means and covariances for Gaussian "
                          "families), DIR/trace.png (ELBO and K per lap) and, for --algo memo, DIR/state.pt "
                          "(after every lap; resumable)")
    fit.add_argument("--resume", metavar="DIR",
                     help="continue a memoized fit from DIR/state.pt (same DATA; --laps counts all laps)")
    fit.add_argument("--quiet", action="store_true", help="no progress bar")
    from .comparison.cli import add_compare_parser

    add_compare_parser(sub)
    return parser


def _check_options(args):
    for name in ("K", "laps", "batches"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be a positive integer; got {getattr(args, name)}")
    if args.alpha is None:
        args.alpha = 0.5 if args.model == "hdp" else 1.0
    for name in ("alpha", "gamma", "lam0"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name} must be positive; got {getattr(args, name)}")
    if args.model == "hdp" and args.moves:
        unknown = {m.strip() for m in args.moves.split(",") if m.strip()} - {"birth", "merge", "delete"}
        if unknown:
            raise ValueError(f"--moves {','.join(sorted(unknown))} is not available for --model hdp "
                             "(birth, merge, delete)")
    if args.resume and args.algo != "memo" and args.model != "hdp":
        raise ValueError("--resume needs --algo memo")
    if args.moves and args.algo != "memo" and args.model != "hdp":
        raise ValueError("--moves needs --algo memo")
    if args.moves and args.model != "hdp":
        make_moves(args.moves)  # validates the names
    try:
        device = torch.device(args.device)
    except RuntimeError as err:
        raise ValueError(f"--device: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: CUDA is not available on this machine")


class Progress:
    """A progress bar of lap, exact ELBO and K; also records K per lap."""

    def __init__(self, total, enabled):
        self.k_trace = []
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="lap", file=sys.stderr, leave=False, dynamic_ncols=True)

    def __call__(self, lap, elbo, posterior, moves=None):
        k = effective_k(posterior.expected_weights().cpu().numpy())
        self.k_trace.append(k)
        if self.bar is not None:
            accepted = "".join(f"  {name} {c['accepted']}/{c['proposed']}" for name, c in (moves or {}).items())
            self.bar.set_postfix_str(f"ELBO {elbo:.6g}  K {k}{accepted}")
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _load(args, dtype):
    """Data (in memory, or a file source), labels, description, and the family."""
    if args.algo == "memo" and args.data.endswith(".npy") and args.data not in BUNDLED and os.path.exists(args.data):
        source = FileBatches.from_npy(args.data, args.batches)
        parts, count, b = [], 0, 0
        while count < min(PRIOR_SAMPLE, source.num_items) and b < source.num_batches:
            parts.append(np.asarray(source.batch(b)))
            count, b = count + len(parts[-1]), b + 1
        family = get_family(args.family).from_data(np.concatenate(parts), dtype=dtype, device=args.device)
        return source, None, f"{args.data}: {source.shape[0]} x {source.shape[1]} array read batch by batch", family
    x_np, labels, description = load_dataset(args.data)
    family = get_family(args.family).from_data(x_np, dtype=dtype, device=args.device)
    return family.check_data(x_np), labels, description, family


def _labels(posterior, data, family):
    if torch.is_tensor(data):
        return posterior.responsibilities(data).argmax(-1).cpu().numpy()
    return np.concatenate([posterior.responsibilities(family.check_data(np.asarray(b))).argmax(-1).cpu().numpy()
                           for b in data])


def run_fit(args):
    _check_options(args)
    if args.model == "hdp":
        from .topics.fit_cli import run_fit_hdp

        if args.data == "digits":
            raise ValueError("--model hdp needs a corpus: an .ldac or .npz file, or wiki / bars")
        return run_fit_hdp(args)
    data, labels, description, family = _load(args, getattr(torch, args.dtype))
    num_items = data.shape[0] if torch.is_tensor(data) else data.num_items
    state, laps_before = None, 0
    if args.resume:
        state = load_state(os.path.join(args.resume, "state.pt"), device=args.device)
        family, laps_before = state.posterior.family, state.laps_done
    progress = Progress(args.laps - laps_before, not args.quiet)
    start = time.perf_counter()
    if args.algo == "vb":
        vb = FullBatchVB(family, args.K, args.alpha, max_iter=args.laps, tol=args.tol, init=args.init, seed=args.seed)
        result = vb.fit(data, callback=progress)
    else:
        source = data if not torch.is_tensor(data) else ArrayBatches(data, args.batches, shuffle_seed=args.seed)
        memo = MemoizedVB(family, args.K, args.alpha, laps=args.laps, tol=args.tol, init=args.init, seed=args.seed,
                          moves=args.moves)
        state = state or MemoState(rng=np.random.default_rng(args.seed))

        def callback(lap, elbo, posterior):
            progress(lap, elbo, posterior, state.move_log[-1] if state.move_log else None)
            if args.save:
                save_state(os.path.join(args.save, "state.pt"), state)

        result = memo.fit(source, state=state, callback=callback)
    progress.close()
    post = result.posterior
    weights = post.expected_weights().cpu().numpy()
    pred = _labels(post, data, family)
    out = {
        "data": args.data, "family": args.family, "algo": args.algo, "N": int(num_items), "D": int(family.dim),
        "truncation": args.K, "batches": args.batches if args.algo == "memo" else 1,
        "elbo": result.elbo, "elbo_trace": result.elbo_trace, "K": effective_k(weights),
        "k_trace": progress.k_trace, "weights": weights.tolist(),
        "counts": result.summary.counts.cpu().numpy().tolist(), "laps": len(result.elbo_trace),
        "converged": result.converged, "lap_seconds": result.lap_seconds,
        "seconds": time.perf_counter() - start,
    }
    if args.algo == "memo":
        out["moves"] = result.state.move_log
    if labels is not None and len(labels) == len(pred):
        from sklearn.metrics import normalized_mutual_info_score

        out["nmi"] = float(normalized_mutual_info_score(labels, pred))
    if args.save:
        write_posterior_npz(os.path.join(args.save, "posterior.npz"), weights, pred,
                            family.point_estimates(post.component))
        write_trace_plot(os.path.join(args.save, "trace.png"), result.elbo_trace,
                         progress.k_trace or [out["K"]] * len(result.elbo_trace), description)
        out["saved"] = args.save
    print(summary_text(out, description))
    if args.json:
        write_json(args.json, out)
    return 0


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "fit":
            return run_fit(args)
        if args.command == "compare":
            from .comparison.cli import run_compare

            return run_compare(args)
    except (ValueError, FloatingPointError, OSError) as err:
        print(f"pyro-memo: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
