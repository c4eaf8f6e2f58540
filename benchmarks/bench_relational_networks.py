"""Issue #15 on real networks: the relational methods side by side through the one comparison harness
(``pyro_memo.comparison.compare_relational``), scored alike by held-out link AUC and log-likelihood per
held-out pair (10% of the links and as many non-links), NMI of the dominant memberships against the
known classes where the graph has them, and communities found.

The graphs come from graph-tool's network collection (``football``, ``polblogs``, ``netscience``, ...;
Debian's python3-graph-tool ships them: ``apt-get download python3-graph-tool`` and ``dpkg -x`` give the
``.gt.gz`` files without installing it) or networkx's bundled graphs (``karate``, ``lesmis``); nothing
is downloaded.

    python benchmarks/bench_relational_networks.py GRAPH [--K 12] [--seeds 0,1,2] [--passes 30]
        [--seconds S] [--eps 1e-4] [--learn-eps] [--alpha 1] [--alpha-prior S1,S2]
        [--methods memo,memo-moves,svi-hdp,svi-ammsb,louvain]
"""

from _common import make_parser

from pyro_memo.comparison import Budget, RelationalSettings, compare_relational
from pyro_memo.data import load_networkx_graph, read_graph_tool


def main():
    parser = make_parser(__doc__)
    parser.add_argument("graph")
    parser.add_argument("--K", type=int, default=12)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--passes", type=float, default=30)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--eps", type=float, default=1e-4)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--learn-eps", action="store_true",
                        help="the memoized methods learn eps from --eps by empirical Bayes (the stochastic keep it)")
    parser.add_argument("--alpha-prior", default=None,
                        help="S1,S2: the memoized methods learn alpha ~ Gamma(S1, S2) (the stochastic keep --alpha)")
    parser.add_argument("--methods", default="memo,memo-moves,svi-hdp,svi-ammsb,louvain")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    graph = read_graph_tool(args.graph) if ".gt" in args.graph else load_networkx_graph(args.graph)
    print(f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges} links, K = {args.K}, eps = {args.eps}, "
          f"alpha = {args.alpha}, alpha prior: {args.alpha_prior}, learn eps: {args.learn_eps}", flush=True)
    alpha_prior = tuple(float(v) for v in args.alpha_prior.split(",")) if args.alpha_prior else None
    seeds = [int(s) for s in args.seeds.split(",")]
    rows, runs = compare_relational(graph, args.methods.split(","), seeds, Budget(args.passes, args.seconds),
                                 RelationalSettings(K=args.K, eps=args.eps, alpha=args.alpha, learn_eps=args.learn_eps,
                                                    alpha_prior=alpha_prior),
                                 out_dir=args.out,
                                 progress=lambda message: print(message, flush=True))
    for row in rows:
        posterior = runs[row["method"], row["seed"]].posterior
        eps, alpha = (float(getattr(posterior, name, float("nan"))) for name in ("eps", "alpha"))
        print("  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
              + f"  final_eps {eps:.4g}  final_alpha {alpha:.4g}", flush=True)


if __name__ == "__main__":
    main()
