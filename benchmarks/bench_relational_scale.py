"""Issue #15 scale bar: seconds per memoized lap of the relational model at K = 50 and the process's
peak resident memory, on a synthetic assortative graph (default 100,000 nodes, about 1,000,000 links,
``assortative_graph(..., sparse=True)``) or a graph-tool collection file (``--graph cond-mat-2005.gt.gz``).

    python benchmarks/bench_relational_scale.py [--nodes 100000] [--edges 1000000] [--K 50]
        [--batches 10] [--laps 3] [--threads 1] [--graph FILE]
"""

import resource
import time

import torch
from _common import make_parser

from pyro_memo.data import assortative_graph, read_graph_tool
from pyro_memo.relational import MemoizedRelational


def peak_rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: kilobytes


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=float, default=1_000_000)
    parser.add_argument("--communities", type=int, default=50)
    parser.add_argument("--K", type=int, default=50)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--laps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--graph", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.graph:
        graph = read_graph_tool(args.graph)
    else:
        graph, _, _ = assortative_graph(args.nodes, args.communities, alpha=0.01, expected_edges=args.edges,
                                        sparse=True, seed=0)
    print(f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges} links (made in "
          f"{time.perf_counter() - start:.1f} s); peak RSS so far {peak_rss_gb():.2f} GB", flush=True)
    fit = MemoizedRelational(K=args.K, laps=args.laps, tol=0, seed=0).fit(graph, args.batches)
    laps = ", ".join(f"{s:.1f}" for s in fit.state.lap_seconds)
    print(f"K = {args.K}, {args.batches} batches, {args.threads} thread(s): seconds per lap {laps}; "
          f"bound {fit.elbo_trace[-1]:.6g}; peak RSS {peak_rss_gb():.2f} GB", flush=True)


if __name__ == "__main__":
    main()
