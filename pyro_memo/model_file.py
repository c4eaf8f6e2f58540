"""Save a fitted model to one file and load it back for prediction: :func:`save_model`, :func:`load_model`.

A model file is a dict of plain tensors, numbers and strings (``torch.load(weights_only=True)``
reads it; no class is pickled)::

    {"format": "pyro-memo-model", "format_version": 1, "kind": "dp-mixture" | "hdp-topics",
     "family": family name, "posterior": the posterior's state_dict (family prior, sticks,
     variational parameters), "summary": the whole-data summary (DP mixtures: the predictive needs it),
     "vocab": the topic model's words, ``vocab[v]`` for word id ``v``, or None}

A file without ``"vocab"`` (written before it was kept) reads as a model without a vocabulary.

It is written like a checkpoint (:func:`~pyro_memo.memo.checkpoint.write_payload`: temporary
file + rename, so a failed write leaves an existing file as it was). A loaded model gives
exactly the responsibilities, labels and log densities of the fit it was saved from.
"""

from .checks import check_device
from .memo.checkpoint import read_payload, write_payload
from .memo.shapes import shape_problems

#: the format this version writes (and the newest it reads)
MODEL_FORMAT_VERSION = 1
#: the ``"format"`` tag of a model file
MODEL_FORMAT = "pyro-memo-model"
DP_MIXTURE = "dp-mixture"
HDP_TOPICS = "hdp-topics"

__all__ = ["HDP_TOPICS", "DP_MIXTURE", "MODEL_FORMAT_VERSION", "SavedMixture", "SavedTopics", "load_model",
           "save_model"]


class SavedMixture:
    """A fitted DP mixture loaded by :func:`load_model` (or wrapping a fit): assignments and
    predictive densities of new items.

    :ivar posterior: the :class:`~pyro_memo.DPMixturePosterior`.
    :ivar summary: the whole-data :class:`~pyro_memo.Summary` its components came from.
    """

    kind = DP_MIXTURE

    def __init__(self, posterior, summary):
        self.posterior, self.summary = posterior, summary

    @property
    def family(self):
        return self.posterior.family

    @property
    def K(self):
        return self.posterior.K

    def check_data(self, x):
        """``x`` as an ``(N, D)`` tensor of the model's dtype and device (:class:`ValueError` on a
        wrong shape, NaN, values outside the family's support)."""
        return self.family.check_data(x)

    def predict_proba(self, x):
        """``(N, K)`` responsibilities :math:`q(z_n = k)` of new items under the fitted globals."""
        return self.posterior.responsibilities(self.check_data(x))

    def predict(self, x):
        """``(N,)`` most responsible component of each item (the labels ``fit --save`` writes)."""
        return self.predict_proba(x).argmax(-1)

    def score_samples(self, x):
        """``(N,)`` log predictive density of each item
        (:func:`~pyro_memo.vb_log_predictive`)."""
        from .inference.predictive import vb_log_predictive

        return vb_log_predictive(self.posterior, self.summary, self.check_data(x))

    def expected_weights(self):
        return self.posterior.expected_weights()


class SavedTopics:
    """A fitted HDP topic model loaded by :func:`load_model`: topic proportions and
    log-likelihoods of new documents, the topics held fixed.

    :ivar posterior: the :class:`~pyro_memo.topics.HDPPosterior`.
    :ivar vocab: the words of the training corpus (``vocab[v]`` for word id ``v``), or None where the
        corpus had none.
    """

    kind = HDP_TOPICS

    def __init__(self, posterior, summary=None, vocab=None):
        self.posterior, self.summary = posterior, summary
        self.vocab = check_vocab(vocab, posterior.V)

    @property
    def K(self):
        return self.posterior.K

    @property
    def V(self):
        return self.posterior.V

    def check_corpus(self, corpus):
        """Refuse what is not a corpus, one whose word ids lie beyond the model's vocabulary
        (``check_corpus()``), one that lists its words (``corpus.vocab``: a vocabulary file, a bundled corpus)
        and lists another number than the model's (its ids would name other words), one whose words are
        numbered otherwise than the model's (where both list them), and one without documents."""
        from .topics.heldout import check_corpus

        check_corpus(self.posterior, corpus)
        if corpus.vocab is not None and len(corpus.vocab) != self.V:
            raise ValueError(f"the corpus's vocabulary lists {len(corpus.vocab)} words but the model's has {self.V}: "
                             "its word ids would be read as other words of the model's; give the documents over the "
                             "model's vocabulary")
        self._check_same_words(corpus.vocab)
        if corpus.num_docs == 0:
            raise ValueError("the corpus has no documents")
        return corpus

    def _check_same_words(self, words):
        """Word id ``v`` of a corpus with the vocabulary ``words`` must be the model's word ``v``:
        a corpus numbered otherwise would be scored against the wrong topics' words, silently."""
        if words is None or self.vocab is None:
            return
        for v, (ours, theirs) in enumerate(zip(self.vocab, words, strict=True)):
            if ours != theirs:
                raise ValueError(f"the corpus numbers its words otherwise than the model: word id {v} is "
                                 f"{theirs!r} in the corpus's vocabulary and {ours!r} in the model's (renumber the "
                                 "corpus with the model's vocabulary, SavedTopics.vocab)")

    def predict_proba(self, corpus, local_iters=None, local_tol=None):
        """``(D, K + 1)`` posterior-mean topic proportions of each document (the last column the
        tail beyond the truncation; :func:`~pyro_memo.topics.doc_topic_weights`). ``local_iters`` and
        ``local_tol`` (document-level iterations and tolerance) default to ``doc_topic_weights``'s,
        ``PREDICT_ITERS`` and ``PREDICT_TOL`` of ``pyro_memo.topics.heldout``, which ``HDPTopics.transform``
        uses too."""
        import numpy as np

        from .topics.heldout import PREDICT_ITERS, PREDICT_TOL, doc_topic_weights

        corpus = self.check_corpus(corpus)
        return doc_topic_weights(self.posterior, corpus, np.arange(corpus.num_docs),
                                 PREDICT_ITERS if local_iters is None else local_iters,
                                 PREDICT_TOL if local_tol is None else local_tol)

    def predict(self, corpus, **kwargs):
        """``(D,)`` each document's biggest topic."""
        return self.predict_proba(corpus, **kwargs)[:, :-1].argmax(-1)

    def score_samples(self, corpus, **kwargs):
        """``(D,)`` plug-in log-likelihood of each document, :math:`\\sum_n \\log \\sum_k \\hat\\pi_{dk}
        \\hat\\phi_{k x_{dn}}` with :math:`\\hat\\pi_d` from :meth:`predict_proba` and
        :math:`\\hat\\phi_k = E_q[\\phi_k]` (the tail predicts uniformly over words, as
        :func:`~pyro_memo.topics.document_completion` does)."""
        import torch

        pi = self.predict_proba(corpus, **kwargs)
        by_word = self.posterior.topic_means().T.contiguous()  # (V, K): a token's row is contiguous
        doc, word, count = corpus.tokens(dtype=by_word.dtype, device=by_word.device)
        prob = (pi[doc, :-1] * by_word[word]).sum(1) + pi[doc, -1] / self.V
        return pi.new_zeros(corpus.num_docs).index_add_(0, doc, count * torch.log(prob))


def _parts(fit, summary):
    """``(posterior, summary)`` of a fit result, a fitted estimator (``DPMixture``, ``HDPTopics``), a
    ``(posterior, summary)`` pair, a saved model or a posterior."""
    if isinstance(fit, tuple) and len(fit) == 2:
        return fit
    if hasattr(fit, "get_params") and hasattr(fit, "fit"):  # a scikit-learn estimator: its fitted attributes
        if not hasattr(fit, "posterior_"):
            raise ValueError(f"save_model: this {type(fit).__name__} is not fitted; call its fit(X) first")
        return fit.posterior_, getattr(fit, "summary_", None) if summary is None else summary
    if hasattr(fit, "posterior"):
        return fit.posterior, getattr(fit, "summary", None) if summary is None else summary
    return fit, summary


def _words_of(fit):
    """The vocabulary ``fit`` carries: a saved model's ``vocab``, or the feature names a fitted
    ``HDPTopics`` saw (``feature_names_in_``, from a DataFrame's columns); else None."""
    words = getattr(fit, "vocab", None)
    return getattr(fit, "feature_names_in_", None) if words is None else words


def check_vocab(vocab, V):
    """``vocab`` as a list of ``V`` words (strings), or None; :class:`ValueError` otherwise."""
    if vocab is None:
        return None
    vocab = list(vocab)
    if len(vocab) != V or not all(isinstance(word, str) for word in vocab):
        kinds = sorted({type(word).__name__ for word in vocab})
        raise ValueError(f"vocab must be {V} words (strings), one per word id of the model; got {len(vocab)} "
                         f"items of type {', '.join(kinds) or 'none'}")
    return [str(word) for word in vocab]  # plain strings (numpy's str_ from feature names, too)


def save_model(path, fit, summary=None, vocab=None):
    """Write a fitted model to ``path`` (atomically; an existing file is replaced only by a complete one).

    :param fit: a :class:`~pyro_memo.FitResult` of :class:`~pyro_memo.FullBatchVB`,
        :class:`~pyro_memo.MemoizedVB` (a DP mixture over any family) or
        :class:`~pyro_memo.topics.MemoizedHDP` (the HDP topic model); a fitted
        :class:`~pyro_memo.DPMixture` or :class:`~pyro_memo.HDPTopics` (its ``posterior_`` and
        ``summary_``); a ``(posterior, summary)`` pair; a posterior (then pass ``summary``); or a
        model :func:`load_model` returned.
    :param summary: the whole-data summary, where ``fit`` does not carry it (a DP mixture needs it).
    :param vocab: a topic model's words, ``vocab[v]`` for word id ``v`` (default: a saved model's own, or
        a fitted ``HDPTopics``'s ``feature_names_in_``).
        :meth:`~pyro_memo.model_file.SavedTopics.check_corpus` then refuses a corpus whose vocabulary numbers
        words otherwise.
    """
    from .inference.dp_mixture_posterior import DPMixturePosterior
    from .topics.hdp_posterior import HDPPosterior

    posterior, summary = _parts(fit, summary)
    if isinstance(posterior, DPMixturePosterior):
        if vocab is not None:
            raise ValueError("save_model: vocab applies to a topic model; a DP mixture has no words")
        if summary is None:
            raise ValueError("save_model: a DP mixture needs its whole-data summary (FitResult.summary) for the "
                             "predictive density")
        if summary.K != posterior.K:
            raise ValueError(f"save_model: the summary has {summary.K} components, the posterior {posterior.K}")
        kind, family = DP_MIXTURE, posterior.family.name
    elif isinstance(posterior, HDPPosterior):
        kind, family = HDP_TOPICS, "mult"
        vocab = check_vocab(_words_of(fit) if vocab is None else vocab, posterior.V)
    else:
        raise TypeError(f"save_model: cannot save a {type(posterior).__name__}; pass a fit of a DP mixture "
                        "(FullBatchVB, MemoizedVB, a fitted DPMixture) or of the HDP topic model (MemoizedHDP, a "
                        "fitted HDPTopics)")
    payload = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "kind": kind, "family": family,
               "posterior": posterior.state_dict(),
               "summary": None if summary is None else summary.to(device="cpu").to_dict(), "vocab": vocab}
    write_payload(path, payload, "model file")


def load_model(path, device=None):
    """Read a model :func:`save_model` wrote: a :class:`~pyro_memo.model_file.SavedMixture` or a
    :class:`~pyro_memo.model_file.SavedTopics`.

    :raises ValueError: naming ``path`` if it is missing, empty, damaged, not a pyro-memo model
        file (a resumable ``state.pt`` included) or of a newer format than this version reads; naming
        ``device`` if it is not ``cpu`` or ``cuda[:N]`` that this machine has.
    """
    check_device(device)
    d = read_payload(path, "model file")
    if d.get("format") != MODEL_FORMAT:
        hint = " (a resumable checkpoint, state.pt: use the model.pt beside it)" if "laps_done" in d else ""
        raise ValueError(f"{path}: not a pyro-memo model file{hint}")
    version = d["format_version"]
    if not isinstance(version, int) or not 1 <= version <= MODEL_FORMAT_VERSION:
        raise ValueError(f"{path}: model file format {version!r}; this version of pyro-memo reads formats up to "
                         f"{MODEL_FORMAT_VERSION} (a newer pyro-memo wrote it?)")
    try:
        model = _build(d, device)
    except (KeyError, TypeError, AttributeError, IndexError, RuntimeError, ValueError) as err:
        raise ValueError(f"{path}: a damaged model file ({type(err).__name__}: {str(err)[:160]})") from None
    check_shapes(model, path)
    return model


def check_shapes(model, path):
    """Raise one :class:`ValueError` naming ``path`` and every tensor of ``model`` (a loaded
    :class:`SavedMixture` or :class:`SavedTopics`) whose shape disagrees with the model's ``K`` components and
    dimension (:func:`~pyro_memo.memo.shapes.shape_problems`): a hand-edited file (checksums valid) loaded,
    then failed at prediction with torch's "The size of tensor a (6) must match the size of tensor b (5)"."""
    problems = shape_problems(model.posterior, {"summary": model.summary})
    if problems is not None:
        sizes, wrong = problems
        raise ValueError(f"{path}: a model file with inconsistent shapes ({sizes}): {'; '.join(wrong)}")


def _build(d, device):
    from .inference.dp_mixture_posterior import DPMixturePosterior
    from .summaries import Summary, TopicSummary
    from .topics.hdp_posterior import HDPPosterior

    kind = d["kind"]
    if kind == DP_MIXTURE:
        posterior = DPMixturePosterior.from_state_dict(d["posterior"], device)
        summary = Summary.from_dict(d["summary"]).to(posterior.dtype, device)
        return SavedMixture(posterior, summary)
    if kind == HDP_TOPICS:
        posterior = HDPPosterior.from_state_dict(d["posterior"], device)
        summary = d.get("summary")
        summary = None if summary is None else TopicSummary.from_dict(summary).to(device=device)
        return SavedTopics(posterior, summary, d.get("vocab"))
    raise ValueError(f"unknown model kind {kind!r}")
