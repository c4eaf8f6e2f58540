"""Issue #15, where the relational model stands: community recovery on synthetic assortative graphs
with known mixed memberships (``pyro_memo.data.assortative_graph``), held-out link AUC, and seconds
per memoized lap.

For each seed: an N-node graph with C communities (strengths w_k uniform in [0.05, 0.3], drawn here
and passed to the generator); memoized inference at fixed K = C from the spectral start, and from
K = 1 with birth / delete / merge moves. Printed: communities found (E[beta] > 1%), NMI and Hungarian
accuracy of the dominant memberships against the known dominant community, the held-out link AUC
(10% of the links and as many non-links held out as unobserved pairs), laps and seconds per lap.

Also printed, as the ceiling of any method: the *oracle* NMI, each node classified by the likelihood
of its links as a pure member of each community given everyone else's true memberships and the true
strengths. With the generator's default alpha = 0.05 memberships are so mixed that the oracle stays
near 0.8; alpha = 0.01 gives mostly dominant memberships (oracle about 0.95).

    python benchmarks/bench_relational_synthetic.py [--nodes 2000] [--communities 10] [--seeds 3] [--laps 30]
        [--alpha 0.05]
"""

import time

import numpy as np
from _common import make_parser
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import confusion_matrix, normalized_mutual_info_score

from pyro_memo.data import assortative_graph, split_pairs
from pyro_memo.relational import MemoizedRelational, link_prediction


def hungarian_accuracy(labels, found):
    counts = confusion_matrix(labels, found)
    rows, cols = linear_sum_assignment(-counts)
    return counts[rows, cols].sum() / len(labels)


def oracle_labels(graph, memberships, w, eps):
    """Each node's best pure community given the others' true memberships and strengths (dense N x N)."""
    N = graph.num_nodes
    adjacency = np.zeros((N, N))
    adjacency[graph.edges[:, 0], graph.edges[:, 1]] = 1.0
    adjacency += adjacency.T
    scores = np.empty((N, len(w)))
    for k, w_k in enumerate(w):
        p = w_k * memberships[:, k] + eps * (1 - memberships[:, k])  # link to j if this node is pure k
        log_p, log_q = np.log(p), np.log1p(-p)
        scores[:, k] = adjacency @ log_p + (1 - adjacency) @ log_q - log_q  # less the self pair
    return scores.argmax(1)


def run(train, pairs, y, labels, **options):
    start = time.perf_counter()
    fit = MemoizedRelational(**options).fit(train, 5)
    seconds = time.perf_counter() - start
    post = fit.posterior
    found = post.memberships().argmax(1).numpy()
    return (int((post.expected_beta()[:-1] > 0.01).sum()), normalized_mutual_info_score(labels, found),
            hungarian_accuracy(labels, found), link_prediction(post, pairs, y)["auc"], len(fit.elbo_trace),
            seconds / len(fit.elbo_trace))


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--communities", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--laps", type=int, default=30)
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="the generator's membership concentration (smaller: purer memberships)")
    args = parser.parse_args()
    C, eps = args.communities, 1e-4
    for seed in range(args.seeds):
        w = np.random.default_rng(1000 + seed).uniform(0.05, 0.3, C)
        graph, memberships, labels = assortative_graph(args.nodes, C, alpha=args.alpha, link_probs=w, epsilon=eps,
                                                       seed=seed)
        train, pairs, y = split_pairs(graph, 0.1, seed=seed)
        oracle = normalized_mutual_info_score(labels, oracle_labels(graph, memberships, w, eps))
        print(f"seed {seed}: {graph.num_nodes} nodes, {graph.num_edges} links, {C} communities, generator alpha "
              f"{args.alpha}, oracle NMI {oracle:.3f}", flush=True)
        for name, options in ((f"fixed K = {C}", dict(K=C)), ("K = 1 + moves", dict(K=1, moves="birth,delete,merge"))):
            K, score, accuracy, auc, laps, lap = run(train, pairs, y, labels, laps=args.laps, seed=seed, **options)
            print(f"  {name:14s}: {K:3d} communities, NMI {score:.3f}, accuracy {accuracy:.3f}, held-out AUC "
                  f"{auc:.3f}, {laps} laps, {lap:.2f} s per lap", flush=True)


if __name__ == "__main__":
    main()
