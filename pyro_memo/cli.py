"""The ``pyro-memo`` console script."""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

from .datasets import BUNDLED, load_dataset
from .families import FAMILIES, get_family
from .inference import FullBatchVB

ALGORITHMS = ("vb",)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="pyro-memo",
        description="Variational inference for Dirichlet-process mixtures (pyro-memo).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser(
        "fit",
        help="fit a DP mixture to a dataset and print a summary",
        description="Fit a DP mixture to DATA and print a summary (ELBO, components, weights).",
    )
    fit.add_argument("data", nargs="?", default="digits", metavar="DATA",
                     help=f"a .npy/.npz file of shape (N, D), or a bundled dataset: {', '.join(BUNDLED)} "
                          "(default: digits)")
    fit.add_argument("--family", choices=sorted(FAMILIES), default="gauss",
                     help="observation family: gauss (full covariance, Normal-Wishart), zm-gauss (zero mean, "
                          "Wishart), diag-gauss (Normal-Gamma), mult (Dirichlet), bern (Beta), poisson (Gamma); "
                          "default gauss")
    fit.add_argument("--algo", choices=ALGORITHMS, default="vb",
                     help="inference algorithm: vb = full-batch coordinate ascent (default vb)")
    fit.add_argument("--K", type=int, default=20, help="truncation level: number of components (default 20)")
    fit.add_argument("--laps", type=int, default=100,
                     help="maximum passes through the data (default 100)")
    fit.add_argument("--tol", type=float, default=1e-7,
                     help="stop when the ELBO's relative change per lap is below this (default 1e-7)")
    fit.add_argument("--alpha", type=float, default=1.0, help="DP concentration (default 1.0)")
    fit.add_argument("--init", choices=("kmeans++", "random"), default="kmeans++",
                     help="initial responsibilities (default kmeans++)")
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default cpu)")
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="floating type of the variational math (default float64)")
    fit.add_argument("--json", metavar="PATH",
                     help="write results as JSON: elbo, elbo_trace, K, weights, lap_seconds, seconds, ...")
    fit.add_argument("--quiet", action="store_true", help="no progress line")
    return parser


class _Progress:
    def __init__(self, enabled):
        self.enabled = enabled and sys.stderr.isatty()
        self.last = time.perf_counter()
        self.lap_seconds = []

    def __call__(self, lap, elbo, posterior):
        now = time.perf_counter()
        self.lap_seconds.append(now - self.last)
        self.last = now
        if self.enabled:
            k = int((posterior.expected_weights() > 1e-3).sum())
            sys.stderr.write(f"\rlap {lap + 1:4d}  ELBO {elbo:.6g}  K {k:3d}")
            sys.stderr.flush()

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")


def _check_options(args):
    if args.K < 1:
        raise ValueError(f"--K must be a positive integer; got {args.K}")
    if args.laps < 1:
        raise ValueError(f"--laps must be a positive integer; got {args.laps}")
    if not args.alpha > 0:
        raise ValueError(f"--alpha must be positive; got {args.alpha}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: CUDA is not available on this machine")
    try:
        torch.device(args.device)
    except RuntimeError as err:
        raise ValueError(f"--device: {err}") from None


def _nmi(labels, pred):
    from sklearn.metrics import normalized_mutual_info_score

    return float(normalized_mutual_info_score(labels, pred))


def run_fit(args):
    _check_options(args)
    dtype = getattr(torch, args.dtype)
    x_np, labels, description = load_dataset(args.data)
    family = get_family(args.family).from_data(x_np, dtype=dtype, device=args.device)
    x = family.check_data(torch.as_tensor(x_np))
    vb = FullBatchVB(family, args.K, alpha=args.alpha, max_iter=args.laps, tol=args.tol, init=args.init,
                     seed=args.seed)
    progress = _Progress(not args.quiet)
    result = vb.fit(x, callback=progress)
    progress.close()
    post = result.posterior
    weights = post.expected_weights().cpu().numpy()
    pred = post.responsibilities(x).argmax(-1).cpu().numpy()
    active = weights > 1e-3
    out = {
        "data": args.data,
        "family": args.family,
        "algo": args.algo,
        "N": int(x.shape[0]),
        "D": int(x.shape[1]),
        "truncation": args.K,
        "elbo": result.elbo,
        "elbo_per_item": result.elbo / x.shape[0],
        "elbo_trace": result.elbo_trace,
        "K": int(active.sum()),
        "weights": weights.tolist(),
        "counts": result.summary.counts.cpu().numpy().tolist(),
        "laps": len(result.elbo_trace),
        "converged": result.converged,
        "lap_seconds": progress.lap_seconds,
        "seconds": result.seconds,
    }
    if labels is not None and len(labels) == len(pred):
        out["nmi"] = _nmi(labels, pred)
    print(_summary_text(out, description, weights))
    if args.json:
        _write_json_atomically(args.json, out)
    return 0


def _summary_text(out, description, weights):
    order = np.argsort(-weights)
    top = ", ".join(f"{weights[k]:.3f}" for k in order[:10] if weights[k] > 1e-3)
    lines = [
        f"data      {description}",
        f"model     DP mixture, family {out['family']}, truncation K = {out['truncation']}",
        f"inference {out['algo']}: {out['laps']} laps in {out['seconds']:.2f} s"
        + ("" if out["converged"] else " (not converged: raise --laps)"),
        f"ELBO      {out['elbo']:.6g} nats ({out['elbo_per_item']:.4f} per item)",
        f"K         {out['K']} components with weight > 0.001",
        f"weights   {top}" + (" ..." if out["K"] > 10 else ""),
    ]
    if "nmi" in out:
        lines.append(f"NMI       {out['nmi']:.3f} against the dataset's labels")
    return "\n".join(lines)


def _write_json_atomically(path, payload):
    """Write to a temporary file beside ``path`` and rename: the old file survives a crash."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(payload, fh, indent=1, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v)
    os.replace(tmp, path)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "fit":
            return run_fit(args)
    except (ValueError, FloatingPointError, OSError) as err:
        print(f"pyro-memo: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
