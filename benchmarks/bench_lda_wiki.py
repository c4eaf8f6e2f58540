"""tomotopy's LDA (collapsed Gibbs, K = 100, its own asymmetric alpha optimisation) on the
7,961-document Wikipedia corpus (80/20 document split), scored as the LDA it is: the held-out
documents' prior is tomotopy's learnt Dir(alpha_1..alpha_K) and their fold-in uses its point
topics (``pyro_memo.comparison.tomotopy_lda_posterior``). Trains on one thread for a CPU-time
budget (``time.process_time()`` of the training calls; wall time printed too), scoring the
held-out log-likelihood per token by document completion (half of each test document's tokens
observed) every ``--eval-every`` CPU minutes, and at the end also under bnpy's protocol (80% of
each test document's word types observed, 20% scored).

``--score-memo PATH`` scores a memoized-HDP posterior saved by ``bench_hdp_wiki.py --save``
instead (no LDA run), under the standard scoring and under the same point-estimate fold-in
(``pyro_memo.comparison.point_estimate``). ``--save PATH`` saves the LDA's posterior in the same
form. ``--alphas A1,A2,..`` (with ``--score-memo``) also scores the saved posterior with its
documents' total concentration replaced by each ``A`` (the topics and their weights kept), and
prints how its topics are spread: how many carry more than 1% and 0.1% of the weight, the
exponential of the weights' entropy, and the weighted mean entropy of the topics' word
distributions (nats).

    OMP_NUM_THREADS=1 python benchmarks/bench_lda_wiki.py [--K 100] [--minutes 12] [--eval-every 3] [--save lda.pt]
    python benchmarks/bench_lda_wiki.py --score-memo memo.pt [--alphas 1,2,4,6.2,10]
"""

import time

import torch
from _common import document_split, load_topic_posterior, make_parser, save_topic_posterior

from pyro_memo.comparison import TopicSettings, point_estimate, tomotopy_lda_model, tomotopy_lda_posterior
from pyro_memo.topics import HDPPosterior, document_completion


def scores(posterior, test):
    """Held-out nats per token: (half the tokens observed, bnpy's 80% of word types observed)."""
    return (document_completion(posterior, test),
            document_completion(posterior, test, fraction=0.8, split="types"))


def spread(posterior):
    """How the topics share the weight, and how broad they are."""
    weights = posterior.expected_beta().double()
    phi = posterior.topic_means().double()
    entropy = -(phi * phi.clamp_min(1e-300).log()).sum(1)
    kept = weights[:-1]
    return (f"topics with E[beta] > 1%: {int((kept > 0.01).sum())}, > 0.1%: {int((kept > 0.001).sum())}; "
            f"exp(entropy of the weights) {float(torch.exp(torch.special.entr(weights).sum())):.1f}; "
            f"weighted mean topic entropy {float((kept * entropy).sum() / kept.sum()):.3f} nats")


def score_memo(path, test, alphas=()):
    posterior = load_topic_posterior(path)
    for name, post in (("standard", posterior), ("point-estimate", point_estimate(posterior))):
        tokens, types = scores(post, test)
        print(f"memoized HDP ({path}), {name} scoring: held-out {tokens:.4f} nats/token; bnpy protocol "
              f"{types:.4f}", flush=True)
    if alphas:
        print(f"{path}: alpha {float(posterior.alpha):.4f}; {spread(posterior)}", flush=True)
    for alpha in alphas:
        rescored = HDPPosterior(posterior.lam, posterior.rho, posterior.omega, alpha, posterior.gamma, posterior.lam0)
        heldout = document_completion(rescored, test)
        print(f"{path} with alpha {alpha:g}: held-out {heldout:.4f} nats/token", flush=True)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=12.0, help="CPU-time budget of the training calls")
    parser.add_argument("--eval-every", type=float, default=3.0, help="CPU minutes between held-out scores")
    parser.add_argument("--sweeps", type=int, default=10, help="Gibbs sweeps per training call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="tomotopy's worker threads")
    parser.add_argument("--score-memo", metavar="PATH", help="score a saved memoized-HDP posterior; no LDA run")
    parser.add_argument("--alphas", default="", help="with --score-memo: also score at these concentrations")
    parser.add_argument("--save", metavar="PATH", help="save the LDA's posterior here")
    args = parser.parse_args()

    corpus, train, test = document_split()
    print(f"{corpus}; train {train.num_docs} docs / {train.num_tokens:.0f} tokens, test {test.num_docs} docs",
          flush=True)
    if args.score_memo:
        score_memo(args.score_memo, test, [float(a) for a in args.alphas.split(",") if a])
        return
    settings = TopicSettings(K=args.K)
    model = tomotopy_lda_model(train, settings, args.seed)
    print(f"tomotopy LDAModel: K = {args.K}, alpha starts at {settings.alpha / args.K:g} per topic, eta 0.01, "
          f"optim_interval {model.optim_interval}, seed {args.seed}; {args.sweeps} sweeps per call, "
          f"{args.workers} worker(s); budget {args.minutes:g} CPU minutes", flush=True)
    cpu = wall = 0.0
    sweeps = 0
    next_eval = 60 * args.eval_every
    while cpu < 60 * args.minutes:
        c0, w0 = time.process_time(), time.perf_counter()
        model.train(args.sweeps, workers=args.workers)
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        sweeps += args.sweeps
        if cpu >= next_eval:
            next_eval += 60 * args.eval_every
            posterior = tomotopy_lda_posterior(model, train, settings)
            heldout = document_completion(posterior, test)
            print(f"{sweeps} sweeps, {cpu:.0f} CPU s, {wall:.0f} wall s: train ll/word {model.ll_per_word:.4f}, "
                  f"sum alpha {float(model.alpha.sum()):.3f}, held-out {heldout:.4f} nats/token", flush=True)
    posterior = tomotopy_lda_posterior(model, train, settings)
    tokens, types = scores(posterior, test)
    alpha = model.alpha
    print(f"\ntomotopy LDA: {sweeps} sweeps in {cpu:.0f} CPU s / {wall:.0f} wall s (training calls only); "
          f"sum alpha {float(alpha.sum()):.3f} (min {float(alpha.min()):.4f}, max {float(alpha.max()):.4f}); "
          f"final held-out {tokens:.4f} nats/token; bnpy protocol {types:.4f} nats/token")
    if args.save:
        save_topic_posterior(posterior, args.save)


if __name__ == "__main__":
    main()
