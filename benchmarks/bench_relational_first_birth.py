"""Relational births from K = 1 on graphs with and without held-out links: communities found,
exact bound, held-out link AUC and seconds (the review's case: a planted 10-block partition of
1,000 nodes, p_in 0.1, p_out 0.005, with 10% of its links held out, stayed at one community).

For each case and seed, two fits from K = 1 with birth, delete and merge (50 laps): one on the
training graph of ``split_pairs(graph, 0.1, seed)`` (held-out AUC printed) and one on the whole
graph. Cases: ``planted`` (networkx's planted partition above, labels the blocks), ``assort``
(``assortative_graph(1000, 10, alpha=0.01)``, strengths uniform in [0.05, 0.3], eps 1e-4),
``karate`` and ``lesmis`` (bundled with networkx; one batch). K counts communities with
E[beta] > 1%; NMI is of the dominant memberships against the labels where there are labels.

    python benchmarks/bench_relational_first_birth.py planted --seeds 0,1,2
"""

import time

import networkx as nx
import numpy as np
from _common import make_parser
from sklearn.metrics import normalized_mutual_info_score

from pyro_memo.data import assortative_graph, from_networkx, load_networkx_graph, split_pairs
from pyro_memo.relational import MemoizedRelational, link_prediction


def make_graph(case, seed):
    """``(graph, labels or None, batches)`` of a case."""
    if case == "planted":
        graph = from_networkx(nx.planted_partition_graph(10, 100, 0.1, 0.005, seed=seed))
        return graph, np.repeat(np.arange(10), 100), 5
    if case == "assort":
        w = np.random.default_rng(1000 + seed).uniform(0.05, 0.3, 10)
        graph, _, labels = assortative_graph(1000, 10, alpha=0.01, link_probs=w, epsilon=1e-4, seed=seed)
        return graph, labels, 5
    graph = load_networkx_graph(case)
    return graph, graph.labels, 1


def run(case, seed, name, data, pairs, held, labels, batches, laps):
    start = time.perf_counter()
    fit = MemoizedRelational(K=1, moves="birth,delete,merge", laps=laps, seed=seed).fit(data, batches)
    seconds = time.perf_counter() - start
    post = fit.posterior
    K = int((post.expected_beta()[:-1] > 0.01).sum())
    auc = link_prediction(post, pairs, held)["auc"] if name == "heldout" else float("nan")
    score = normalized_mutual_info_score(labels, post.memberships().argmax(1).numpy()) if labels is not None \
        else float("nan")
    moves = {}
    for gain in fit.state.move_gains:
        moves[gain["move"]] = moves.get(gain["move"], 0) + 1
    print(f"{case} seed {seed} {name:7s}: K={K:2d} (K_all={post.K:2d}) elbo {fit.elbo_trace[-1]:10.1f} auc {auc:.3f} "
          f"nmi {score:.3f} laps {len(fit.elbo_trace):2d} {seconds:5.1f}s accepted {moves}", flush=True)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("case", choices=["planted", "assort", "karate", "lesmis"])
    parser.add_argument("--seeds", default="0", help="comma-separated")
    parser.add_argument("--laps", type=int, default=50)
    args = parser.parse_args()
    for seed in (int(s) for s in args.seeds.split(",")):
        graph, labels, batches = make_graph(args.case, seed)
        train, pairs, held = split_pairs(graph, 0.1, seed=seed)
        for name, data in (("heldout", train), ("full", graph)):
            run(args.case, seed, name, data, pairs, held, labels, batches, args.laps)


if __name__ == "__main__":
    main()
