"""Issue #15, where the relational model stands: community recovery on synthetic assortative graphs
with known mixed memberships (``pyro_memo.data.assortative_graph``), held-out link AUC, and seconds
per memoized lap.

For each seed: an N-node graph with C communities; memoized inference at fixed K = C from the
spectral start, and from K = 1 with birth / delete / merge moves. Printed: communities found
(E[beta] > 1%), NMI of the dominant memberships against the known dominant community, the
held-out link AUC (10% of the links and as many non-links held out as unobserved pairs), laps and seconds per lap.

    python benchmarks/bench_relational_synthetic.py [--nodes 2000] [--communities 10] [--seeds 3] [--laps 30]
        [--alpha 0.05]
"""

import time

from _common import make_parser
from sklearn.metrics import normalized_mutual_info_score

from pyro_memo.data import assortative_graph, split_pairs
from pyro_memo.relational import MemoizedRelational, link_prediction


def run(train, pairs, y, labels, **options):
    start = time.perf_counter()
    fit = MemoizedRelational(**options).fit(train, 5)
    seconds = time.perf_counter() - start
    post = fit.posterior
    found = post.memberships().argmax(1).numpy()
    return (int((post.expected_beta()[:-1] > 0.01).sum()), normalized_mutual_info_score(labels, found),
            link_prediction(post, pairs, y)["auc"], len(fit.elbo_trace), seconds / len(fit.elbo_trace))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--communities", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--laps", type=int, default=30)
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="the generator's membership concentration (smaller: purer memberships)")
    args = parser.parse_args()
    C = args.communities
    for seed in range(args.seeds):
        graph, _, labels = assortative_graph(args.nodes, C, alpha=args.alpha, seed=seed)
        train, pairs, y = split_pairs(graph, 0.1, seed=seed)
        print(f"seed {seed}: {graph.num_nodes} nodes, {graph.num_edges} links, {C} communities, generator alpha "
              f"{args.alpha}", flush=True)
        for name, options in ((f"fixed K = {C}", dict(K=C)), ("K = 1 + moves", dict(K=1, moves="birth,delete,merge"))):
            K, score, auc, laps, lap = run(train, pairs, y, labels, laps=args.laps, seed=seed, **options)
            print(f"  {name:14s}: {K:3d} communities, NMI {score:.3f}, held-out AUC {auc:.3f}, {laps} laps, "
                  f"{lap:.2f} s per lap", flush=True)


if __name__ == "__main__":
    main()
