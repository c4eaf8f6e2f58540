"""Births of HDP topics accepted only when the exact memoized bound rises (Sudderth's HDP talk,
"Birth moves"; for the HDP, Hughes, Kim & Sudderth 2015 §5).

A target topic's tokens (weighted by their responsibilities for it) are clustered by the KL k-means
of :mod:`~pyro_memo.topics.topic_init` into ``num_new`` fresh topics (for the first birth, from
``K = 1``, refined by ``refine_steps`` iterations of VB for an HDP of the fresh topics alone on those
tokens: the creation step of Hughes & Sudderth 2013 §3.1, "fitting a DP mixture model with K'
components to x', running variational inference for a limited budget of iterations"; bnpy's
``b_nRefineSteps``), scaled to the target's share of the whole corpus, and the candidate replaces the
target by them. During a lap every batch runs a second local step under the current globals with that
replacement, building a complete candidate memo; after the lap the candidate's sticks are optimised and
the birth is kept only if the exact bound rises.

Only the documents that hold the target run that second local step (at least ``hold_tokens`` of its
expected tokens; on 20-token LDA documents 20-50% of them). The others keep the responsibilities of the
fit's own local step, the target's share of each token spread over the other topics in proportion, none
on the fresh topics, and their Dirichlets refit to them: a valid (restricted) local posterior under the
candidate, so its bound is exact and a birth is still kept only when the exact bound rises. Splitting the
target's weight among the fresh topics leaves every other topic's expected log weight in such a document
unchanged (up to the target's share, below ``hold_tokens``), so the candidate's own local step would
change its responsibilities little.

Where the target's tokens come from (``collect``): by default (``"lap"``) from every batch of one lap,
the collection phase of Hughes & Sudderth (2013, §3.1): while the lap visits the batches, the
documents holding the largest topic not tried since the last accepted birth give up their target tokens
(at most ``max_docs`` documents, drawn in proportion to their target tokens); the fresh topics are
created at the lap's end and the candidate memo is built in the next lap, while that lap collects for
the next target. With ``"batch"`` (the births before the collection lap) the fresh topics come from the
first batch of the candidate's own lap alone.

With ``num_targets`` above one, one candidate splits that many of the largest untried topics at once, each
into its own fresh topics (their tokens collected in the same lap), and is kept or rejected as a whole; a
rejected candidate's targets all count as tried. With ``patience``, a candidate that fell short runs on for
up to that many laps, a memoized fit of its own from the optimum of its last memo, before it is rejected.
"""

import zlib

import numpy as np
import torch

from ..allocation.hdp_sticks import split_sticks, sticks_from_sizes
from ..checks import as_non_negative_float, as_positive_int
from .candidate_memo import CandidateMemoMove, tried_topics
from .corpus import Corpus
from .hdp_posterior import HDPPosterior
from .topic_init import kmeans_topics

#: where a birth's target tokens come from (see the module docstring)
COLLECT = ("lap", "batch")
#: which births' fresh topics are refined (``TopicBirthMove``'s ``refine``)
REFINE = ("first", "every")


def target_tokens(batch, resp, target):
    """``(doc, word, weight)`` numpy arrays: the tokens of ``batch`` with their counts weighted by their
    responsibility for topic ``target`` (those above 1e-6), documents numbered within the batch."""
    doc, word, count, _ = batch
    weight = count * resp[:, target]
    keep = weight > 1e-6
    return doc[keep].cpu().numpy(), word[keep].cpu().numpy(), weight[keep].double().cpu().numpy()


def weighted_doc_keys(doc, weight, rng):
    """One key per token, its document's: an exponential draw over the document's target tokens, so the
    ``n`` documents of smallest keys are a sample drawn in proportion to them (Efraimidis & Spirakis 2006)."""
    docs, inverse = np.unique(doc, return_inverse=True)
    mass = np.bincount(inverse, weights=weight, minlength=len(docs))
    return (rng.exponential(size=len(docs)) / mass)[inverse]


def smallest_docs(tokens, max_docs):
    """``tokens`` ``(doc, word, weight, key)`` kept to the ``max_docs`` documents of smallest keys."""
    doc, key = tokens[0], tokens[3]
    first = np.unique(doc, return_index=True)[1]
    if len(first) <= max_docs:
        return tokens
    limit = np.partition(key[first], max_docs - 1)[max_docs - 1]
    keep = key <= limit
    return tuple(a[keep] for a in tokens)


def _restrict(batch, docs, tokens):
    """``(part, rows)``: the documents ``docs`` (a ``(num_docs,)`` mask) of ``batch`` as a batch of their
    own, numbered in order, with ``tokens`` (``(T,)``, their tokens); ``rows`` their numbers in ``batch``."""
    doc, word, count, _ = batch
    rows = torch.nonzero(docs).squeeze(1)
    number = torch.cumsum(docs, 0) - 1
    return (number[doc[tokens]], word[tokens], count[tokens], len(rows)), rows


class TopicBirthMove(CandidateMemoMove):
    """Exact-bound births of HDP topics, as a move of :class:`~pyro_memo.topics.MemoizedHDP`.

    :param int num_new: topics that replace the target (at least 2). From K = 1 on Wikipedia (20 laps) five
        reached -7.834 nats per token held out with 27 topics against -7.867 with 19 for three, eight no
        more, twelve -7.873; on bars (3 seeds) five gave a lower bound on every seed, on LDA mixed, so the
        default stays three (``benchmarks/results/bench_hdp_wiki_births.txt``).
    :param float min_tokens: the collected target tokens must be at least this many.
    :param int refine_steps: VB iterations (local step, then global step) of a birth's fresh topics alone
        on the target's tokens before the candidate lap (``0``: the k-means topics as they are); which
        births, see ``refine``.
    :param str refine: ``"first"`` (default): only the first birth's, from ``K = 1``: a first birth rejected
        there ends the fit's growth (the one topic stays tried while ``K`` does not change), and on
        20-token LDA documents the k-means topics of one batch lost to the one topic on 2 of 3 seeds.
        ``"every"``: every birth's. From ``K > 1`` refining was measured mixed: a bars fit from K = 12 with
        one-batch collections kept a blend of two bars (held-out -2.78 against -2.69 nats per token); with
        lap collections, from K = 1 on Wikipedia (20 laps) -7.858 held-out against -7.867 in 11% more time,
        but on LDA and bars (3 seeds each) a lower bound on 2 seeds of 3.
    :param str collect: ``"lap"`` (default): the target's tokens of every batch, collected in the lap before
        the candidate's; ``"batch"``: those of the first batch of the candidate's lap (see the module
        docstring). On 20-token LDA documents a blend of two topics split by one batch's tokens (a quarter
        of the corpus) lost to it at 3 of 4 k-means seeds, and split by the whole lap's won at all 4.
    :param int max_docs: a collection keeps at most this many documents (Hughes & Sudderth's 2013 §3.1
        targeted subsample of at most ``N' = 10^4``).
    :param float hold_tokens: the documents holding at least this many of the target's expected tokens
        run the candidate's local step; the others keep their responsibilities without the target (see
        the module docstring). ``0``: every document runs it. On LDA documents a topic's expected count in
        a document was either above 0.5 or below 1e-6, so the default 0.01 separates them.
    :param int num_targets: topics one candidate splits (see the module docstring). From K = 1 on Wikipedia
        (20 laps) three grew to 21 topics by lap 7 and reached -7.857 nats per token held out, against 19
        topics and -7.867 with one, in the same time; on 20-token LDA documents (3 seeds) the bound was higher
        or equal on every seed, but on bars (3 seeds) lower on every seed, so the default stays one
        (``benchmarks/results/bench_hdp_births_short_docs.txt``, ``bench_hdp_wiki_births.txt``).
    :param int patience: laps a candidate that fell short runs on, a memoized fit of its own from the
        optimum of its last memo, before it is rejected
        (:class:`~pyro_memo.engine.candidate_memo.CandidateMemoMove`); the next
        targets' tokens are collected meanwhile. Fresh topics start behind a fit that has run many laps:
        on Wikipedia (21 topics) four of six splits that lost after one lap won after three. From K = 1 on
        Wikipedia (30 laps) ``patience=2`` reached -7.855 nats per token held out with 22 topics against
        -7.864 with 20; on LDA and bars (3 seeds each) it moved no bound by more than 1e-4 per token, so
        the default is 0.
    """

    name = "birth"
    #: document-level sweeps of each refinement step's local step (a limited budget: on 10-token
    #: documents of 20 bars the first birth from K = 1 gained more with 10 than with 100)
    refine_local_iters = 10

    def __init__(self, num_new=3, min_tokens=50.0, refine_steps=10, collect="lap", max_docs=10_000,
                 hold_tokens=0.01, num_targets=1, refine="first", patience=0):
        if int(num_new) < 2:
            raise ValueError(f"num_new must be at least 2; got {num_new}")
        if int(refine_steps) < 0:
            raise ValueError(f"refine_steps must be a non-negative integer; got {refine_steps}")
        if collect not in COLLECT:
            raise ValueError(f"collect must be one of {', '.join(COLLECT)}; got {collect!r}")
        if int(max_docs) < int(num_new):
            raise ValueError(f"max_docs must be at least num_new ({num_new}); got {max_docs}")
        self.hold_tokens = as_non_negative_float(hold_tokens, "hold_tokens")
        self.num_targets = as_positive_int(num_targets, "num_targets")
        if refine not in REFINE:
            raise ValueError(f"refine must be one of {', '.join(REFINE)}; got {refine!r}")
        self.refine = refine
        super().__init__(patience)
        self.num_new, self.min_tokens, self.refine_steps = int(num_new), float(min_tokens), int(refine_steps)
        self.collect, self.max_docs = collect, int(max_docs)
        self.targets, self.new_lams, self.sizes = [], [], {}
        self.pending = None  # fresh topics created at the end of the last lap: dict, see end_lap
        self.collecting, self.gathered = [], {}

    def start_lap(self, state, driver):
        self.target, self.targets, self.new_lams, self.batches, self.driver = None, [], [], {}, driver
        pending, self.pending, self.continuing = self.pending, None, None
        continued = self.take_continued(state, state.posterior.lam.dtype, state.posterior.lam.device)
        self.collecting, self.gathered = [], {}
        post, total = state.posterior, state.cache.total
        self.gains_at_start = len(state.move_gains)
        if total is None or len(state.cache) == 0:
            if self.collect == "lap" and total is None:  # the first lap: the initial topics, largest first
                self.collecting = list(range(min(self.num_targets, post.K)))
            return
        tried = tried_topics(state, self.name, total.K)
        if continued is not None:  # a candidate that fell short runs on, under its own globals (the lap
            # collects the next targets' tokens afresh)
            self.continuing = continued[0]
            self.targets = list(continued[1]["targets"])
        elif self.collect == "batch":
            self.targets = self.largest_untried(total, tried, self.num_targets)
            self.sizes = {t: float(total.topic_counts[t]) for t in self.targets}
        elif pending is not None and pending["K"] == post.K and pending["gains"] == len(state.move_gains):
            self.targets = list(pending["targets"])
            self.new_lams = [lam.to(dtype=post.lam.dtype, device=post.lam.device) for lam in pending["new_lam"]]
        if self.collect == "lap":
            self.collecting = self.largest_untried(total, tried + self.targets, self.num_targets)
        self.target = self.targets[0] if self.targets else None
        self.num_components = total.K

    @staticmethod
    def largest_untried(total, tried, n=1):
        """The (at most ``n``) largest topics of ``total`` not in ``tried``, largest first."""
        return [k for k in torch.argsort(total.topic_counts, descending=True).tolist() if k not in tried][:n]

    def note_tried(self, state, K, topics):
        """Note ``topics`` rejected (or too small to split) since the topics were last renumbered."""
        tried_topics(state, self.name, K).extend(topics)

    def kept_plan(self):
        """A candidate that runs on keeps its targets."""
        return {"targets": list(self.targets)}

    def mark_tried(self, state):
        """A rejected candidate: every target counts as tried."""
        self.note_tried(state, state.posterior.K, self.targets)

    def converged(self, state):
        """Not while a candidate runs on, nor after a lap that judged none while fresh topics wait for their
        candidate lap (a resumed fit's first lap with births only collects)."""
        last = state.move_log[-1].get(self.name, {}) if state.move_log else {}
        return super().converged(state) and (self.pending is None or last.get("proposed", 0) > 0)

    def _new_topics(self, batch, resp, post, target, seed):
        """``(num_new, V)`` Dirichlet parameters of topic ``target``'s tokens in ``batch`` clustered
        by document, scaled to the target's share of the corpus; ``None`` if too few."""
        return self._fresh_topics(target_tokens(batch, resp, target), self.sizes[target], post, seed)

    def _fresh_topics(self, tokens, size, post, seed):
        """``(num_new, V)`` Dirichlet parameters of the target's tokens ``(doc, word, weight)`` clustered by
        document (and refined, see :meth:`_refine`), scaled to the target's ``size`` (its expected tokens in
        the corpus); ``None`` if fewer than ``min_tokens`` tokens or ``num_new`` documents."""
        d, w, c = tokens[:3]
        mass = float(c.sum())
        if mass < self.min_tokens:
            return None
        docs, inverse = np.unique(d, return_inverse=True)
        if len(docs) < self.num_new:
            return None
        order = np.argsort(inverse, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(docs)))])
        restricted = Corpus(ptr, w[order], c[order], post.V)
        centers = torch.as_tensor(kmeans_topics(restricted, self.num_new, post.lam0, seed=seed),
                                  dtype=post.lam.dtype, device=post.lam.device)
        centers = self._refine(restricted, centers, post)
        return post.lam0 + centers * (size / mass)

    def _refine(self, restricted, centers, post):
        """``(num_new, V)`` topic-word counts after ``refine_steps`` VB iterations, each a document-level
        local step of at most :attr:`refine_local_iters` sweeps (restarted from the globals, as the
        fit's own local step is: a warm start keeps the k-means assignments and gains less) then the
        globals optimal for its summary, of an HDP whose topics are the fresh ones alone, started from
        the pooled counts ``centers``, on the target's tokens ``restricted`` (Hughes & Sudderth 2013
        §3.1, creation; bnpy's ``b_nRefineSteps``). It only shapes the proposal: acceptance still
        compares the exact bounds of the full data. With ``refine="first"`` only for the first birth
        (``post.K == 1``)."""
        if self.refine_steps == 0 or (post.K > 1 and self.refine == "first"):
            return centers
        lam0 = float(post.lam0)
        rho, omega = sticks_from_sizes(centers.sum(1), post.gamma, restricted.num_docs)
        fresh = HDPPosterior(lam0 + centers, rho, omega, post.alpha, post.gamma, lam0)
        tokens = (*restricted.tokens(dtype=post.lam.dtype, device=post.lam.device), restricted.num_docs)
        driver = self.driver
        for _ in range(self.refine_steps):
            summary = fresh.local_step(*tokens, max_iter=self.refine_local_iters, tol=driver.local_tol,
                                       sparse_L=driver.sparse_L)[2]
            fresh = fresh.update(summary)
        return fresh.lam - lam0

    def _candidate(self, post):
        """The current globals with each target replaced by its new topics (appended last, in the targets'
        order), each target's expected weight shared among its new topics in proportion to their sizes."""
        lam, rho, omega, order = post.lam, post.rho, post.omega, list(range(post.K))
        for target, new_lam in zip(self.targets, self.new_lams, strict=True):
            at = order.index(target)
            rho, omega = split_sticks(rho, omega, at, (new_lam - post.lam0).sum(1))
            lam = torch.cat([lam[[k for k in range(len(lam)) if k != at]], new_lam])
            order = order[:at] + order[at + 1:] + [-1] * len(new_lam)
        return HDPPosterior(lam, rho, omega, post.alpha, post.gamma, post.lam0)

    def gather(self, state, key, batch, resp):
        """Collection, one batch: each collected topic's tokens of batch ``key`` join those of the lap's
        earlier batches (documents renumbered to stay distinct), then the ``max_docs`` documents of
        smallest keys (``weighted_doc_keys``, drawn from the lap and the batch) are kept."""
        for topic in self.collecting:
            d, w, c = target_tokens(batch, resp, topic)
            if len(d) == 0:
                continue
            rng = np.random.default_rng([state.laps_done, zlib.crc32(repr(key).encode()), topic])
            gathered = self.gathered.get(topic)
            if gathered is None:
                self.gathered[topic] = (d, w, c, weighted_doc_keys(d, c, rng))
                continue
            part = (d + int(gathered[0].max()) + 1, w, c, weighted_doc_keys(d, c, rng))
            joined = tuple(np.concatenate([a, b]) for a, b in zip(gathered, part, strict=True))
            self.gathered[topic] = smallest_docs(joined, self.max_docs)

    def visit_batch(self, state, key, batch, local, summary):
        post = state.posterior
        if self.collecting and post.K > max(self.collecting):
            self.gather(state, key, batch, local.resp)
        if self.target is None or post.K != self.num_components:
            return summary
        if self.continuing is None and not self.new_lams:  # collect="batch": this batch's target tokens
            made = {t: self._new_topics(batch, local.resp, post, t, seed=state.laps_done) for t in self.targets}
            self.note_tried(state, post.K, [t for t, lam in made.items() if lam is None])
            self.targets = [t for t, lam in made.items() if lam is not None]
            self.new_lams = [made[t] for t in self.targets]
            if not self.targets:
                self.target = None
                return summary
            self.target = self.targets[0]
        # the candidate's batch step runs under the current globals with the split, so it keeps pace with
        # the main fit's updates during the lap; one that runs on steps under its own, refit after each batch
        self.candidate = self._candidate(post) if self.continuing is None else self.continuing
        self.batches[key] = self._candidate_step(batch, local)
        if self.continuing is not None:
            self.continuing = self.run_on(key)
        return summary

    def _candidate_step(self, batch, local):
        """``(counts, summary)`` of ``batch`` under the candidate: the candidate's local step on the
        documents holding a target, the others' responsibilities ``local.resp`` without the targets (see the
        module docstring); the documents keep their order in ``counts`` ``(num_docs, K')``."""
        doc, word, count, num_docs = batch
        cand = self.candidate
        holding = (local.counts[:, self.targets] >= self.hold_tokens).any(1)
        if bool(holding.all()):
            return self._local_step(cand, batch)
        counts = cand.lam.new_empty(num_docs, cand.K)
        held, summary = holding[doc], None
        if bool(holding.any()):
            part, rows = _restrict(batch, holding, held)
            counts[rows], summary = self._local_step(cand, part)
        part, rows = _restrict(batch, ~holding, ~held)
        counts[rows], rest = self._without_targets(cand, part, local.resp[~held])
        return counts, rest if summary is None else summary + rest

    def _local_step(self, cand, batch):
        """``(counts, summary)``: the candidate's document-level local step of ``batch``."""
        driver = self.driver
        _, counts, summary, _ = cand.local_step(*batch, max_iter=driver.local_iters, tol=driver.local_tol,
                                                sparse_L=driver.sparse_L)
        return counts, summary

    def _without_targets(self, cand, batch, resp):
        """``(counts, summary)`` under the candidate of the documents of ``batch`` whose tokens keep their
        responsibilities ``resp`` ``(T, K)`` but the targets', renormalised, with none on the fresh topics,
        and whose Dirichlets are :math:`\\theta_d = \\alpha E[\\beta] + N_d` (the optimum given them)."""
        doc, word, count, num_docs = batch
        keep = [k for k in range(resp.shape[1]) if k not in self.targets]
        resp = resp[:, keep].to(cand.dtype)
        resp = resp / resp.sum(1, keepdim=True).clamp_min(torch.finfo(resp.dtype).tiny)
        resp = torch.cat([resp, resp.new_zeros(len(resp), cand.K - len(keep))], 1)
        count = count.to(cand.dtype)
        counts = resp.new_zeros(num_docs, cand.K).index_add_(0, doc, resp * count[:, None])
        return counts, cand.summary_of(doc, word, count, resp, counts)

    def end_lap(self, state, driver):
        """The candidate's acceptance (``CandidateMemoMove``), then the creation of the
        next candidate's fresh topics from this lap's collection (renumbered past a kept birth's removed
        targets), but for the collected topics whose tokens were too few (they then count as tried). A
        move listed before this one that was kept this lap renumbered the topics: the collection is dropped;
        one listed after it that is kept makes the next lap drop the fresh topics."""
        targets = self.targets
        super().end_lap(state, driver)
        collecting, gathered = self.collecting, self.gathered
        self.collecting, self.gathered, self.targets, self.new_lams = [], {}, [], []
        post, total = state.posterior, state.cache.total
        kept = [gain["move"] for gain in state.move_gains[self.gains_at_start:]]
        if any(name != self.name for name in kept):
            return  # a move listed before this one renumbered the topics
        if kept:  # the kept birth removed its targets, their fresh topics go last
            gathered = {c - sum(c > t for t in targets): g for c, g in gathered.items()}
            collecting = [c - sum(c > t for t in targets) for c in collecting]
        if not collecting or total is None or total.K != post.K or max(collecting) >= post.K:
            return
        made = []
        for topic in collecting:
            new_lam = None
            if topic in gathered:
                new_lam = self._fresh_topics(gathered[topic], float(total.topic_counts[topic]), post, state.laps_done)
            if new_lam is None:
                self.note_tried(state, post.K, [topic])
            else:
                made.append((topic, new_lam))
        if made:
            self.pending = {"targets": [t for t, _ in made], "K": post.K, "gains": len(state.move_gains),
                            "new_lam": [lam for _, lam in made]}

    def state_dict(self):
        pending = self.pending
        if pending is not None:
            pending = dict(pending, new_lam=[lam.cpu() for lam in pending["new_lam"]])
        return {**super().state_dict(), "pending": pending}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        pending = state.get("pending")
        if pending is not None and "target" in pending:  # a checkpoint of one target's births
            pending = {"targets": [pending["target"]], "K": pending["K"], "gains": pending["gains"],
                       "new_lam": [pending["new_lam"]]}
        self.pending = pending
