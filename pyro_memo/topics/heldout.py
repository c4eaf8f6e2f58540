"""Held-out scores for topic models by document completion, and topic read-outs."""

import numpy as np
import torch

from ..checks import as_positive_int
from ..data.corpus import check_fraction
from .corpus import Corpus, split_tokens, split_types


def document_completion(posterior, corpus, fraction=0.5, seed=0, local_iters=100, local_tol=1e-3,
                        docs_per_chunk=2000, split="tokens"):
    """Held-out log-likelihood per token by document completion.

    With ``split="tokens"`` each test document's tokens are split at random; with
    ``split="types"`` its distinct words are (bnpy's protocol for its published scores: a
    held-out word never occurs in the observed part; documents with fewer than 20 distinct
    words are skipped). On the observed ``fraction`` the
    document-level local step (topics fixed) estimates :math:`\\theta_d`; the other tokens
    are scored by :math:`\\log \\sum_k \\hat\\pi_{dk}\\hat\\phi_{kw}` with point estimates
    :math:`\\hat\\pi_d = \\theta_d / \\sum\\theta_d` and :math:`\\hat\\phi_k = E_q[\\phi_k]`; the
    tail's mass :math:`\\hat\\pi_{d,K+1}` predicts with the prior's mean, uniform over words.

    :param posterior: a fitted :class:`~pyro_memo.topics.HDPPosterior`.
    :param corpus: test documents (:class:`~pyro_memo.topics.Corpus`).
    :param float fraction: the observed share of each document's tokens (or, with ``"types"``, of its
        distinct words); the rest are scored.
    :param int seed: seed of the random observed / held-out split.
    :param int local_iters: cap on the document-level iterations of the local step on the observed part.
    :param float local_tol: the local step's convergence threshold (mean change in counts).
    :param int docs_per_chunk: documents whose local step runs at once (bounds the memory, not the score).
    :param str split: ``"tokens"`` or ``"types"``.
    :returns: nats per held-out token (higher is better).
    """
    check_corpus(posterior, corpus)
    fraction, docs_per_chunk = check_fraction(fraction, "fraction"), as_positive_int(docs_per_chunk, "docs_per_chunk")
    if split == "tokens":
        observed, heldout = split_tokens(corpus, fraction, seed)
    elif split == "types":
        observed, heldout, _ = split_types(corpus, 1 - fraction, seed)
    else:
        raise ValueError(f"split must be 'tokens' or 'types'; got {split!r}")
    by_word = posterior.topic_means().T.contiguous()  # (V, K): a token's row is contiguous
    total, tokens = 0.0, 0.0
    for lo in range(0, observed.num_docs, docs_per_chunk):
        docs = np.arange(lo, min(lo + docs_per_chunk, observed.num_docs))
        pi = doc_topic_weights(posterior, observed, docs, local_iters, local_tol)
        doc, word, count = heldout.tokens(docs, dtype=by_word.dtype, device=by_word.device)
        prob = (pi[doc, :-1] * by_word[word]).sum(1) + pi[doc, -1] / posterior.V
        total += float((count * torch.log(prob)).sum())
        tokens += float(count.sum())
    if tokens == 0:
        raise ValueError("the test documents have no held-out tokens")
    return total / tokens


def check_corpus(posterior, corpus):
    """``corpus`` if it is a :class:`~pyro_memo.topics.Corpus` whose word ids lie in the model's vocabulary.

    :raises TypeError: for another type (a count matrix: :func:`~pyro_memo.topics.from_counts`).
    :raises ValueError: for a corpus with a larger vocabulary than the model's.
    """
    if not isinstance(corpus, Corpus):
        raise TypeError(f"expected a pyro_memo.topics.Corpus; got {type(corpus).__name__} (convert a (D, V) count "
                        f"matrix with pyro_memo.topics.from_counts(matrix), an .ldac file with read_ldac(path))")
    if corpus.vocab_size > posterior.V:
        raise ValueError(f"the corpus has a vocabulary of {corpus.vocab_size} words but the model has {posterior.V}")
    return corpus


#: document-level iterations and tolerance of :func:`doc_topic_weights` by default, which
#: :meth:`SavedTopics.predict_proba <pyro_memo.model_file.SavedTopics.predict_proba>` and ``HDPTopics.transform``
#: share (tight, so a document's proportions do not depend on which other documents are read with it, nor on the
#: path taken to them)
PREDICT_ITERS = 1000
PREDICT_TOL = 1e-10


def doc_topic_weights(posterior, corpus, docs, local_iters=PREDICT_ITERS, local_tol=PREDICT_TOL):
    """``(len(docs), K + 1)`` posterior-mean topic weights of documents ``docs`` with the
    globals fixed (an empty document gets its prior mean, :math:`E[\\beta]`)."""
    check_corpus(posterior, corpus)
    doc, word, count = corpus.tokens(docs, dtype=posterior.lam.dtype, device=posterior.lam.device)
    _, counts, _, _ = posterior.local_step(doc, word, count, len(docs), max_iter=local_iters, tol=local_tol)
    prior = posterior.alpha * posterior.expected_beta()
    theta = torch.cat([counts + prior[:-1], prior[-1:].expand(len(docs), 1)], 1)
    return theta / theta.sum(1, keepdim=True)


def top_words(posterior, vocab=None, num_words=10):
    """The ``num_words`` most probable words of each topic, biggest topics first:
    a list of ``(topic index, expected weight E[beta_k], [words])``."""
    num_words = as_positive_int(num_words, "num_words")  # -1 dropped each topic's last word, silently
    if vocab is not None and len(vocab) < posterior.V:
        raise ValueError(f"vocab has {len(vocab)} words but the model has {posterior.V}")
    weights = posterior.expected_beta()[:-1]
    phi = posterior.topic_means()
    out = []
    for k in torch.argsort(weights, descending=True).tolist():
        ids = torch.argsort(phi[k], descending=True)[:num_words].tolist()
        out.append((k, float(weights[k]), [vocab[i] if vocab is not None else str(i) for i in ids]))
    return out
