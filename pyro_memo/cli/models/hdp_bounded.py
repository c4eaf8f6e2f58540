"""``pyro-memo fit DATA --model hdp --algo memory-bounded``: an HDP mixture of ``--family`` components over
groups of items (images as groups of pixel features), its groups seen once in epochs of ``--epoch`` groups
and kept within ``--memory`` numbers (Gomes, Welling & Perona 2008; :class:`~pyro_memo.MemoryBoundedHDP`)."""

import os
import sys
import time

from ..common import report, stop_requested

#: grouped data pyro-memo can load by name
BUNDLED_GROUPS = {"tiles": "30 colour tiles of 200 x 160 pixels cut from scikit-image's photographs, each pixel "
                           "(x, y, L, a, b)"}


def check_groups_source(source):
    """Raise the error of a ``DATA`` that is neither a bundled name nor a ``.npz`` file (checked at parse time)."""
    if source not in BUNDLED_GROUPS and (source is None or not str(source).endswith(".npz")):
        raise ValueError(f"--algo memory-bounded for --model hdp reads a .npz file with arrays x (N, D) and groups "
                         f"(N,), or a bundled name ({', '.join(BUNDLED_GROUPS)}); got {source}")


def load_groups(source):
    """``(groups, description)``: a list of ``(n_g, D)`` float64 arrays from a bundled name
    (:data:`BUNDLED_GROUPS`) or a ``.npz`` file with ``x`` ``(N, D)`` and ``groups`` ``(N,)`` (each item's group,
    integers; groups in order of first appearance)."""
    import numpy as np

    if source == "tiles":
        from ...data.pixels import color_tiles, pixel_features

        return [pixel_features(t) for t in color_tiles(30)], BUNDLED_GROUPS["tiles"]
    check_groups_source(source)
    if not os.path.isfile(source):
        raise ValueError(f"{source}: no such file")
    try:
        with np.load(source, allow_pickle=False) as arrays:
            arrays = {name: np.asarray(arrays[name]) for name in arrays.files}
    except Exception as err:  # a corrupt or foreign file: numpy raises many types
        raise ValueError(f"{source}: not a readable .npz file ({type(err).__name__}: {str(err)[:120]})") from None
    missing = [k for k in ("x", "groups") if k not in arrays]
    if missing:
        raise ValueError(f"{source}: no array named {' or '.join(missing)} (it holds {', '.join(arrays)}); "
                         f"save x (N, D) and groups (N,) with numpy.savez")
    x, groups = arrays["x"], arrays["groups"]
    if x.ndim != 2 or groups.ndim != 1 or len(groups) != len(x):
        raise ValueError(f"{source}: expected x of shape (N, D) and groups of shape (N,); got {x.shape} and "
                         f"{groups.shape}")
    if len(x) == 0:
        raise ValueError(f"{source}: x has no items (shape {x.shape})")
    if not np.issubdtype(groups.dtype, np.integer):
        raise ValueError(f"{source}: groups must be integers (each item's group); got dtype {groups.dtype}")
    if np.issubdtype(x.dtype, np.number) and not np.isfinite(x).all():  # rows of the file, before grouping
        rows = np.flatnonzero(~np.isfinite(x).all(1))
        raise ValueError(f"{source}: x has NaN or inf values in {len(rows)} of its {len(x)} rows; the first is "
                         f"row {rows[0]}")
    parts = split_groups(x, groups)
    return parts, f"{source}: {len(x)} items of dimension {x.shape[1]} in {len(parts)} groups"


def split_groups(x, groups):
    """The rows of ``x`` by ``groups`` (each row's group id), groups in order of first appearance and each group's
    rows in file order, cut from one stable sort (a pass over all rows per group took 18.6 s for 400,000 rows in
    8,000 groups, growing as rows times groups)."""
    import numpy as np

    _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    rank = np.empty_like(first)
    rank[np.argsort(first)] = np.arange(len(first))  # each group's place by its first row
    item_rank = rank[inverse.reshape(-1)]
    order = np.argsort(item_rank, kind="stable")
    return np.split(x[order], np.cumsum(np.bincount(item_rank, minlength=len(first)))[:-1])


def fit_memory_bounded_hdp(args):
    """Run the fit; returns the exit status (the JSON's ``elbo`` is the final tied bound)."""
    import numpy as np
    import torch

    from ...families import get_family
    from ...inference.memory_bounded import MemoryBoundedHDP
    from ...reporting import write_posterior_npz, write_trace_plot

    groups, description = load_groups(args.data)
    try:  # the family's complaints about the items name DATA
        family = get_family(args.family or "gauss").from_data(np.concatenate(groups),
                                                              dtype=getattr(torch, args.dtype))
        groups = [family.check_data(g) for g in groups]
    except ValueError as err:
        raise ValueError(f"{args.data}: {err}") from None
    num_items = sum(len(g) for g in groups)
    lifetime = args.lifetime or num_items
    model = MemoryBoundedHDP(family, args.K, args.memory, args.epoch, alpha=args.alpha, gamma=args.gamma,
                             max_groups=args.groups, lifetime=lifetime, laps=args.laps, tol=args.tol, seed=args.seed,
                             moves=args.moves)

    def progress(record):
        if not args.quiet:
            print(f"epoch {record['epoch'] + 1}: {record['documents']} groups, {record['items']} items, tied bound "
                  f"{record['elbo']:.6g}, K {record['K']}, {record['clumps']} clumps, {record['singlets']} singlets, "
                  f"{record['groups']} document groups, {record['memory_used']} numbers", file=sys.stderr, flush=True)
        return stop_requested(args)

    start = time.perf_counter()
    result = model.fit(groups, callback=progress)
    post = result.posterior
    weights = post.expected_beta()[:-1].cpu().numpy()
    last = result.epochs[-1]
    out = {"data": args.data, "model": "hdp", "family": family.name, "algo": args.algo, "N": num_items,
           "groups_seen": last["documents"], "D": int(family.dim), "truncation": len(weights),
           "initial_truncation": args.K, "memory": args.memory, "epoch": args.epoch, "max_groups": args.groups,
           "lifetime": lifetime, "elbo": result.elbo,
           "elbo_trace": [r["elbo"] for r in result.epochs], "K": int((weights > 0.01).sum()),
           "weights": weights.tolist(), "epochs": result.epochs, "laps": sum(r["laps"] for r in result.epochs),
           "seconds": time.perf_counter() - start,
           "alpha": float(post.alpha), "gamma": float(post.gamma)}
    if args.save:
        labels = np.concatenate([post.family.expected_log_lik(g, post.component).argmax(1).cpu().numpy()
                                 for g in groups])
        write_posterior_npz(os.path.join(args.save, "posterior.npz"), weights, labels,
                            family.point_estimates(post.component))
        write_trace_plot(os.path.join(args.save, "trace.png"), out["elbo_trace"], [out["K"]] * len(result.epochs),
                         description)
        out["saved"] = args.save
    text = "\n".join([
        f"data      {description}",
        f"model     HDP mixture, family {family.name}, " + (f"from K = {args.K}, moves {args.moves}" if args.moves
                                                               else f"truncation K = {args.K}"),
        f"inference memory-bounded VB: {len(result.epochs)} epochs of {args.epoch} groups in {out['seconds']:.2f} s; "
        f"memory {last['memory_used']} of {args.memory} numbers ({last['clumps']} clumps, {last['singlets']} "
        f"singlets, {last['groups']} document groups)",
        f"bound     {result.elbo:.6g} nats ({result.elbo / num_items:.4f} per item, tied)",
        f"K         {out['K']} components with weight > 0.01",
    ] + ([f"saved     {args.save}/posterior.npz (weights, labels by each item's likeliest component, means, "
          f"covariances) and trace.png"] if args.save else []))
    return report(text, out, args.json)
