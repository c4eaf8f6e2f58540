"""``--model relational``: the assortative HDP relational model (mixed-membership communities;
Kim, Gopalan, Blei & Sudderth 2013) over an undirected graph, fitted by memoized inference, with
held-out link prediction."""

import os
import sys
import time

from ...checks import check_device
from ..common import (
    ALPHA_PRIOR_OPTION,
    check_resume_matches,
    compare_progress,
    dask_executor,
    given_prior_text,
    laps_text,
    load_resume,
    memo_resume_entries,
    parse_alpha_prior,
    parse_methods,
    parse_moves,
    parse_seeds,
    print_comparison,
    prior_text,
    report,
    say,
    stop_requested,
)
from ..names import RELATIONAL_METHOD_NAMES
from ..registry import CliModel, Option, Use, register_model, register_option


def _imports():
    """Import the heavy modules (torch, the relational model) when a command runs, not when the
    parser is built: ``--help`` and option errors return at once."""
    global np, torch, assortative_graph, load_networkx_graph, read_edge_list, read_graph_tool, read_npz
    global split_pairs, save_state, per_lap, write_atomically, write_trace_plot, GammaConcentration
    global MemoizedRelational, link_prediction, nmi, hungarian_accuracy
    import numpy as np
    import torch

    from ...allocation.concentration import GammaConcentration
    from ...data.graphs import (
        assortative_graph,
        load_networkx_graph,
        read_edge_list,
        read_graph_tool,
        read_npz,
        split_pairs,
    )
    from ...memo import save_state
    from ...metrics import hungarian_accuracy, nmi
    from ...relational import MemoizedRelational, link_prediction
    from ...reporting import per_lap, write_atomically, write_trace_plot


#: graphs pyro-memo can load by name
BUNDLED_GRAPHS = {
    "karate": "Zachary's karate club (34 members, 78 ties, the two factions as labels; needs networkx)",
    "lesmis": "Les Miserables co-appearances (77 characters, 254 links, no labels; needs networkx)",
    "synthetic": "a synthetic assortative mixed-membership graph (500 nodes, 5 communities, known labels)",
}
#: the error of a missing graph (raised when the options are checked, before any heavy import)
NO_GRAPH = ("--model relational needs a graph GRAPH: an edge-list file (.txt, .edges, .csv), an .npz or .gt file, "
            f"or {' / '.join(BUNDLED_GRAPHS)}")
#: the fraction of communities' weight E[beta] above which a community counts in K
MIN_WEIGHT = 0.01

for _command in ("fit", "compare"):
    register_option(_command, ALPHA_PRIOR_OPTION)
for _command in ("fit", "compare"):
    register_option(_command, Option("--eps", "background probability of a link between nodes in different communities "
                                       "(fixed, in (0, 1)).", {"type": float}))
for _command in ("fit", "compare"):
    register_option(_command, Option("--learn-eps", "learn the background probability from --eps by maximising the "
                                                    "exact bound (empirical Bayes).", {"action": "store_true"}))
register_option("fit", Option("--nonlinks", "variational family of the non-linked pairs' roles.",
                              {"metavar": "FAMILY"}))
register_option("fit", Option("--heldout", "fraction of the links held out, with as many non-links, for held-out "
                                           "link prediction (0: fit the whole graph).", {"type": float}))

_DATA = ("a graph: an edge-list text file (two integer node ids per line; .txt, .edges, .csv, a header allowed), "
         "a scipy sparse adjacency matrix (.npz), a graph-tool file (.gt, .gt.gz), or a bundled graph: "
         f"{', '.join(BUNDLED_GRAPHS)}; no default")
#: the community moves the fit command offers
COMMUNITY_MOVES = ("birth", "delete", "merge")
_WHY_NOT = {"family": "its links are Bernoulli given the communities, with a Beta prior on each community's "
                      "link probability",
            "algo": "it is always fitted by memoized inference over --batches fixed batches of nodes"}


def load_graph(source):
    """A :class:`~pyro_memo.data.Graph` and its description from a name in :data:`BUNDLED_GRAPHS`,
    an edge-list text file, a ``.npz`` sparse adjacency matrix or a graph-tool ``.gt`` / ``.gt.gz`` file."""
    if source is None:
        raise ValueError(NO_GRAPH)
    _imports()
    if source == "synthetic":
        return assortative_graph(500, 5, seed=0)[0], BUNDLED_GRAPHS["synthetic"]
    if source in BUNDLED_GRAPHS:  # networkx's (tests/test_cli_startup.py checks the names)
        try:
            return load_networkx_graph(source), BUNDLED_GRAPHS[source]
        except ImportError:
            raise ValueError(f"the bundled graph {source} needs networkx, an optional dependency: "
                             "pip install networkx") from None
    if not os.path.exists(source):
        raise ValueError(f"{source}: no such file, and not a bundled graph ({', '.join(BUNDLED_GRAPHS)})")
    if os.path.isdir(source):
        raise ValueError(f"{source}: is a directory, not a graph file")
    try:
        if source.endswith(".npz"):
            graph = read_npz(source)
        elif source.endswith((".gt", ".gt.gz")):
            graph = read_graph_tool(source)
        else:
            graph = read_edge_list(source)
    except (ValueError, OSError, UnicodeDecodeError) as err:
        message = str(err) if not isinstance(err, UnicodeDecodeError) else "not a text edge list (undecodable bytes)"
        raise ValueError(message if message.startswith(source) else f"{source}: {message}") from None
    return graph, source


def node_count_hint(graph, source):
    """What to say when a fit of ``graph`` (read from ``source``) runs out of memory, where its ``N`` was set by
    an edge list's largest node id and exceeds twice its links, so that most nodes have none: every node holds
    numbers per community, and an id like 3000000000 asks for tens of GiB. ``None`` otherwise (the usual advice
    stands)."""
    if source in BUNDLED_GRAPHS or str(source).endswith((".npz", ".gt", ".gt.gz")) \
            or graph.num_nodes <= 2 * graph.num_edges:
        return None
    return (f"N = {graph.num_nodes} nodes, the largest node id in {source} + 1, for {graph.num_edges} links: every "
            f"node holds numbers per community, and most of these have no link; renumber the node ids from 0 without "
            f"gaps, else lower --K")


def _graph_text(graph, description):
    labels = "" if graph.labels is None else f", {len(np.unique(graph.labels))} label classes"
    loops = graph.self_loops
    dropped = f" ({loops} self loop{'s' * (loops != 1)} dropped: the model has no self links)" if loops else ""
    return f"{description}: {graph.num_nodes} nodes, {graph.num_edges} links{labels}{dropped}{_isolated_text(graph)}"


def _isolated_text(graph):
    """How many nodes have no link; where node 0 is one, the hint that ids are kept as given (a file
    numbered from 1 leaves node 0 without links)."""
    degrees = graph.degrees()
    isolated = int((degrees == 0).sum())
    if not isolated:
        return ""
    hint = "; ids are kept as given, so an edge list numbered from 1 leaves node 0 without links" if degrees[0] == 0 \
        else ""
    return f" ({isolated} node{'s' * (isolated != 1)} without links{hint})"


def _hyper_text(args, out):
    alpha = (f"E[alpha] {out['alpha']:.4g} (Gamma({args.alpha_prior}) prior)" if args.alpha_prior
             else f"alpha {args.alpha:g}")
    return f"{alpha}, eps {out['eps']:.4g}" + (" (learnt)" if args.learn_eps else "")


def _summary(args, out, description, fit):
    """The printed summary of a fit."""
    from ...reporting import truncation_text

    lines = [f"data      {description}",
             f"model     assortative HDP relational model, {truncation_text(out)}, {_hyper_text(args, out)}",
             f"inference memoized, {args.batches} batch{'es' if args.batches > 1 else ''} of nodes: {laps_text(out)}"
             + ("" if fit.converged else " (not converged: raise --laps)"),
             f"bound     {fit.elbo:.6g} nats",
             f"K         {out['K']} communities with E[beta] > {MIN_WEIGHT:g}"]
    weights, links = out["weights"], out["link_probabilities"]
    kept = [k for k in sorted(range(len(weights)), key=lambda k: -weights[k]) if weights[k] > MIN_WEIGHT]
    lines += [f"community {k:<4d}weight {weights[k]:.3f}  link probability {links[k]:.3f}" for k in kept[:10]]
    if "nmi" in out:
        lines.append(f"labels    NMI {out['nmi']:.3f}, Hungarian accuracy {out['accuracy']:.3f}")
    if "heldout_auc" in out:
        lines.append(f"held out  {out['heldout_pairs']} pairs ({args.heldout:g} of the links and as many "
                     f"non-links): AUC {out['heldout_auc']:.4f}, log-likelihood {out['heldout_log_lik']:.4f} "
                     "per pair")
    if args.save:
        lines.append(f"saved     {args.save}")
    return "\n".join(lines)


def _check_resume(args, state, graph):
    """Refuse a checkpoint fitted with other options or another graph than this run's."""
    post, total = state.posterior, state.cache.total
    learnt = isinstance(post.alpha, GammaConcentration)
    saved = {"--dtype": (args.dtype, str(post.theta.dtype).split(".")[-1]),
             "--alpha-prior": (given_prior_text(args.alpha_prior), prior_text(post.alpha.prior if learnt else None)),
             "--learn-eps": (bool(args.learn_eps), post.learn_eps), "nodes in GRAPH": (graph.num_nodes, post.N),
             "--nonlinks": (args.nonlinks, "tied" if hasattr(post, "pairs") else "free"),
             **memo_resume_entries(args, state, post.K)}
    if not args.alpha_prior and not learnt:
        saved["--alpha"] = (float(args.alpha), float(post.alpha))
    if not args.learn_eps and not post.learn_eps:
        saved["--eps"] = (float(args.eps), float(post.eps))
    if total is not None:
        saved["links fitted (GRAPH, --heldout)"] = (graph.num_edges, int(round(float(total.num_links))))
    check_resume_matches(args, saved)


def _write_posterior(path, post):
    """``posterior.npz``: memberships, labels, weights and link probabilities, atomically."""
    memberships = post.memberships().cpu().numpy()

    def write(tmp):
        with open(tmp, "wb") as fh:  # a handle: np.savez would append ".npz" to the temporary name
            np.savez(fh, memberships=memberships, labels=memberships.argmax(1).astype(np.int64),
                     weights=post.expected_beta()[:-1].cpu().numpy(),
                     link_probabilities=post.link_probabilities().cpu().numpy())

    write_atomically(path, write)


class Relational(CliModel):
    """``--model relational``."""

    name = "relational"
    summary = ("the assortative HDP relational model (mixed-membership communities) over a graph DATA (an "
               f"edge list, .npz or .gt file, or a bundled graph: {', '.join(BUNDLED_GRAPHS)})")
    why_not = _WHY_NOT
    uses = {
        "fit": {
            "data": Use(_DATA), "alpha": Use("membership concentration", default=1.0),
            "K": Use(default=10), "batches": Use(default=1), "laps": Use(default=50), "tol": Use(default=1e-7),
            "init": Use("initial memberships: spectral (the graph's spectral embedding) or random",
                        default="spectral", choices=("spectral", "random")),
            "nonlinks": Use("tied (roles follow the memberships; default) or free (Kim et al. 2013's factors)",
                            default="tied", choices=("tied", "free")),
            "seed": Use(default=0), "device": Use(default="cpu"),
            "dtype": Use(default="float64", choices=("float64", "float32")),
            "local_dtype": Use(default=None, choices=("float32", "float64")),
            "workers": Use(), "scheduler": Use(), "round_size": Use(),
            "json": Use("keys: elbo, elbo_trace, K (communities with E[beta] > 1%), weights, link_probabilities, "
                        "lap_seconds, seconds, laps, converged, nodes, edges, alpha, nmi and accuracy (labelled "
                        "graphs), heldout_auc and heldout_log_lik (--heldout), ..."),
            "save": Use("DIR/posterior.npz (memberships: N x K E[pi] over the explicit communities, labels: "
                        "their argmax per node, weights: E[beta], link_probabilities: E[w]), DIR/trace.png and "
                        "DIR/state.pt (after every lap; resumable)"),
            "resume": Use(), "quiet": Use(default=False),
            "alpha_prior": Use("learn the membership concentration: alpha ~ Gamma(S1, S2) (shape, rate) with its "
                               "closed-form posterior q(alpha), in place of a fixed --alpha", default=""),
            "eps": Use(default=1e-4),
            "learn_eps": Use("each global step sets eps to the maximiser of the bound, A / (A + B): the links' and "
                             "the non-links' expected mass between communities (Kim et al. 2013 fix it); --eps is "
                             "its start", default=False),
            "moves": Use("birth, delete, merge (exact whole-graph bound acceptance); e.g. --moves birth,delete,merge "
                         "--K 1 grows the communities from one", default=""),
            "heldout": Use("drawn by split_pairs with seed 0; the fit sees the rest, the summary and --json report the "
                           "held-out AUC and log-likelihood per pair", default=0.0),
        },
        "compare": {
            "data": Use(_DATA), "alpha": Use("membership concentration", default=1.0), "eps": Use(default=1e-4),
            "learn_eps": Use("memo and memo-moves learn eps from --eps by empirical Bayes (the stochastic methods "
                             "keep it fixed)", default=False),
            "alpha_prior": Use("memo and memo-moves learn alpha ~ Gamma(S1, S2) (shape, rate); memo-eb learns it "
                               "with this prior (Gamma(1, 1) without it) in the second half of its budget (the "
                               "stochastic methods keep --alpha)", default=""),
            "methods": Use("relational methods: memo (fixed --K), memo-moves (from K = 1 with birth, delete, merge), "
                           "memo-eb (fixed --K; alpha and eps learnt in the second half of its budget, from the fit "
                           "at --alpha and --eps of the first), svi-hdp (Kim et al. 2013), svi-ammsb (Gopalan et "
                           "al. 2012), louvain (needs networkx), sbm (graph-tool's minimize_blockmodel_dl; needs "
                           "graph-tool)",
                           default="memo,memo-moves,svi-hdp,svi-ammsb"),
            "seeds": Use(default="0"), "passes": Use(default=20.0), "seconds": Use(), "K": Use(default=10),
            "batches": Use("batches of nodes per pass (memo); the stochastic methods take max(--batches, 10) steps "
                           "per pass", default=1),
            "heldout": Use("fraction of the links held out with as many non-links (split_pairs, seed 0) and scored "
                           "by link AUC and log-likelihood per pair (in (0, 1))", default=0.1),
            "out": Use(default="compare-out"), "quiet": Use(default=False),
        },
    }

    def check(self, command, args):
        if args.data is None:
            raise ValueError(NO_GRAPH)
        if not 0 < args.eps < 1:
            raise ValueError(f"--eps must lie in (0, 1) (the background link probability); got {args.eps}")
        if command == "compare":
            if not 0 < args.heldout < 1:
                raise ValueError(f"--heldout must lie in (0, 1) for --model relational compare; got {args.heldout}")
            parse_methods(args.methods, RELATIONAL_METHOD_NAMES, self.name)
            parse_seeds(args.seeds)
            return
        check_device(args.device, "--device")
        parse_moves(args.moves, COMMUNITY_MOVES, self.name)
        parse_alpha_prior(args.alpha_prior)
        if not 0 <= args.heldout < 1:
            raise ValueError(f"--heldout must lie in [0, 1) (0: no held-out pairs); got {args.heldout}")

    def fit(self, args):
        _imports()
        graph, description = load_graph(args.data)
        args.memory_hint = node_count_hint(graph, args.data)
        full = graph
        if graph.num_nodes < 2:
            raise ValueError(f"{args.data}: the graph has {graph.num_nodes} node; the model needs at least 2")
        if graph.num_edges == 0:
            raise ValueError(f"{args.data}: the graph has no links")
        if args.batches > graph.num_nodes:
            raise ValueError(f"--batches {args.batches} exceeds the number of nodes ({graph.num_nodes})")
        pairs = labels = None
        if args.heldout > 0:
            try:
                graph, pairs, labels = split_pairs(full, args.heldout, seed=0)
            except ValueError as err:
                raise ValueError(f"--heldout {args.heldout:g}: {err}") from None
        model = MemoizedRelational(K=args.K, alpha=args.alpha, eps=args.eps, laps=args.laps, tol=args.tol,
                                   seed=args.seed, dtype=getattr(torch, args.dtype), device=args.device,
                                   local_dtype=args.local_dtype,
                                   alpha_prior=parse_alpha_prior(args.alpha_prior), init=args.init,
                                   moves=args.moves, nonlinks=args.nonlinks, learn_eps=args.learn_eps,
                                   round_size=args.round_size)
        state = model.new_state()
        if args.resume:
            state = load_resume(args, self.name)
            _check_resume(args, state, graph)
        resumed_laps = state.laps_done
        k_trace = state.traces.setdefault("k", [])  # kept in the state: a resumed run's trace covers all laps

        def callback(lap, elbo, posterior):
            k_trace.append(int((posterior.expected_beta()[:-1] > MIN_WEIGHT).sum()))
            if not args.quiet:
                say(f"lap {lap + 1}: bound {elbo:.6g}, {k_trace[-1]} communities > 1%")
            if args.save:
                save_state(os.path.join(args.save, "state.pt"), state)
            return stop_requested(args)

        start = time.perf_counter()
        with dask_executor(args) as executor:
            fit = model.fit(graph, args.batches, state=state, callback=callback, executor=executor)
        post = fit.posterior
        weights = post.expected_beta()[:-1].cpu().numpy()
        out = {
            "data": args.data, "model": self.name, "nodes": full.num_nodes, "edges": full.num_edges,
            "self_loops_dropped": full.self_loops, "truncation": len(weights), "initial_truncation": args.K,
            "batches": args.batches, "init": args.init,
            "eps": post.eps,
            "learn_eps": bool(args.learn_eps),
            "nonlinks": args.nonlinks,
            "elbo": fit.elbo, "elbo_trace": fit.elbo_trace, "K": int((weights > MIN_WEIGHT).sum()),
            "k_trace": per_lap(k_trace, len(fit.elbo_trace)), "weights": weights.tolist(),
            "link_probabilities": post.link_probabilities().cpu().numpy().tolist(),
            "laps": len(fit.elbo_trace), "converged": fit.converged, "lap_seconds": fit.lap_seconds,
            "seconds": time.perf_counter() - start, "emptied": fit.emptied, "resumed_laps": resumed_laps,
            "alpha": float(post.alpha), "moves": fit.state.move_log,
        }
        if full.labels is not None:
            predicted = post.memberships().argmax(1).cpu().numpy()
            out["nmi"], out["accuracy"] = nmi(full.labels, predicted), hungarian_accuracy(full.labels, predicted)
        if pairs is not None:
            scores = link_prediction(post, pairs, labels)
            out.update(heldout=args.heldout, heldout_pairs=len(labels), heldout_auc=scores["auc"],
                       heldout_log_lik=scores["log_lik"])
        if args.save:
            _write_posterior(os.path.join(args.save, "posterior.npz"), post)
            write_trace_plot(os.path.join(args.save, "trace.png"), fit.elbo_trace, k_trace or [out["K"]],
                             description)
            out["saved"] = args.save
        return report(_summary(args, out, _graph_text(full, description), fit), out, args.json)

    def compare(self, args):
        _imports()
        from ...comparison import RELATIONAL_COLUMNS, RELATIONAL_METHODS, Budget, RelationalSettings, compare_relational
        from ...comparison.relational_methods import check_optional_methods

        methods = parse_methods(args.methods, RELATIONAL_METHODS, self.name)
        seeds = parse_seeds(args.seeds)
        try:  # an optional detector that is missing: one error before any method runs
            check_optional_methods(methods)
        except ImportError as err:
            raise ValueError(str(err)) from None
        graph, description = load_graph(args.data)
        args.memory_hint = node_count_hint(graph, args.data)
        if graph.num_edges == 0:
            raise ValueError(f"{args.data}: the graph has no links")
        if args.batches > graph.num_nodes:
            raise ValueError(f"--batches {args.batches} exceeds the number of nodes ({graph.num_nodes})")
        if not args.quiet:
            print(_graph_text(graph, description), file=sys.stderr)
        settings = RelationalSettings(K=args.K, batches=args.batches, alpha=args.alpha, eps=args.eps,
                                      learn_eps=args.learn_eps, alpha_prior=parse_alpha_prior(args.alpha_prior))
        try:
            rows, _ = compare_relational(graph, methods, seeds, budget=Budget(args.passes, args.seconds),
                                         settings=settings, out_dir=args.out, progress=compare_progress(args),
                                         heldout=args.heldout)
        except ValueError as err:
            raise ValueError(f"{args.data}: {err}") from None
        print_comparison(rows, RELATIONAL_COLUMNS, args.out)
        return 0


register_model(Relational())
