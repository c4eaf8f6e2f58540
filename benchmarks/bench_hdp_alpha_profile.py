"""Issue #14: is the memoized HDP's learnt document concentration far from its joint optimum on Wikipedia?

The learnt :math:`\\alpha` of the memoized HDP rises slowly lap after lap (0.59 at lap 5, 1.04 at lap 33 in
``benchmarks/results/bench_hdp_wiki_learnt.txt``), well below tomotopy LDA's summed :math:`\\alpha` (6.2). One
explanation would be slow coordinate ascent: :math:`q(\\alpha)` is updated with every document's
:math:`q(\\pi_d) = \\mathrm{Dir}(\\theta_d)` held fixed. This script measures the joint optimum instead. With
:math:`\\theta_d = \\alpha E[\\beta] + N_d` re-optimised for each :math:`\\alpha` (the exact optimum given the
documents' topic counts :math:`N_d`), the bound's terms in :math:`\\alpha` (the surrogate of Hughes, Kim &
Sudderth 2015, eq. 11) collapse to

.. math:: f(\\alpha) = DK\\log\\alpha + \\sum_d \\Big[\\sum_{k \\le K+1} \\log\\Gamma(\\alpha E[\\beta_k] + N_{dk})
          - \\log\\Gamma(\\alpha + N_d)\\Big],

a Dirichlet-multinomial likelihood of the counts. It fits the HDP (every concentration and :math:`\\lambda_0`
learnt, as ``bench_hdp_wiki.py --alpha-prior 1,1 --gamma-prior 1,0.1 --learn-lam0``) for ``--laps`` laps and
prints :math:`f` on a grid, its maximiser and its gain over the fit's :math:`E_q[\\alpha]`.

    python benchmarks/bench_hdp_alpha_profile.py [--laps 6]
"""

import time

import numpy as np
import torch
from _common import document_split, make_parser

from pyro_memo.topics import MemoizedHDP


def profile(counts, beta):
    """:math:`f` above, as a function of :math:`\\alpha`, for ``(D, K)`` topic counts and ``(K + 1,)`` expected
    weights (the tail's counts, zero, and each document's total formed once)."""
    counts = torch.cat([counts, counts.new_zeros(counts.shape[0], 1)], 1)
    totals, scale = counts.sum(1), counts.shape[0] * (counts.shape[1] - 1)
    return lambda alpha: scale * np.log(alpha) + float(torch.lgamma(alpha * beta + counts).sum()
                                                       - torch.lgamma(alpha + totals).sum())


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--laps", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    _, train, _ = document_split()
    model = MemoizedHDP(K=100, laps=args.laps, seed=args.seed, dtype=torch.float32, alpha_prior=(1, 1),
                        gamma_prior=(1, 0.1), learn_lam0=True)
    start = time.perf_counter()
    fit = model.fit(train, 20)
    counts = torch.cat([c for _, c in sorted(fit.state.warm_starts.items())]).double()
    beta = fit.posterior.expected_beta().double()
    current = float(fit.posterior.alpha)
    print(f"{args.laps} laps in {time.perf_counter() - start:.0f} s; {counts.shape[0]} documents, "
          f"K = {counts.shape[1]}; E_q[alpha] = {current:.4f}")
    f = profile(counts, beta)
    grid = np.exp(np.linspace(np.log(0.1), np.log(50.0), 400))
    values = np.array([f(a) for a in grid])
    best, gain = grid[values.argmax()], values.max() - f(current)
    print(f"joint optimum alpha = {best:.4f}; f(optimum) - f(E_q[alpha]) = {gain:.1f} nats "
          f"({gain / train.num_tokens:.2e} per token)")
    for a in (0.5, current, 1.0, 2.0, 3.0, 6.2):
        print(f"  alpha {a:6.3f}: f(alpha) - f(optimum) = {f(a) - values.max():12.1f}")


if __name__ == "__main__":
    main()
