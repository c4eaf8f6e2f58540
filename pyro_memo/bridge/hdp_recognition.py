"""Recognise a user's Pyro HDP topic model by tracing it, and verify the wiring numerically.

Conventions (the shape of :class:`~pyro_memo.models.HDPTopicModel`; any site and plate names):

1. Top-level sticks: one latent ``Beta(1, gamma)`` site in a plate of size ``K``; the global
   weights are :math:`\\beta_k = u_k \\prod_{\\ell<k}(1 - u_\\ell)` over ``K + 1`` entries (the
   last the tail beyond the truncation).
2. Topics: one latent ``Dirichlet(lam0 * ones(V))`` site in a plate of size ``K + 1``.
3. Document weights: one latent ``Dirichlet(alpha * beta)`` site in a document plate of size
   ``D``, which may be subsampled with ``subsample=batch`` (the batch's document ids).
4. Tokens: in one token plate, a latent ``Categorical(pi[doc])`` assignment and an observed
   ``Categorical(phi[z])`` word. The token-to-document ids ``doc`` and the word ids are
   arguments of the model; under a document batch the plate holds the batch's tokens in their
   order (see :func:`batch_tokens`), either as ``plate(N, subsample=tokens)`` or as a plate of
   their number.

5. Optionally, latent concentrations: a scalar ``Gamma(s1, s2)`` site outside every plate used as
   ``gamma`` (the sticks' second Beta parameter) and / or one used as ``alpha`` (the document
   Dirichlet's scale); see :data:`CONCENTRATION_FORM`. Each is identified by its wiring: the model
   is re-run with the site conditioned on another value, and the sticks' (resp. the documents')
   parameters must follow it. The fit then learns :math:`q(\\alpha)` / :math:`q(\\gamma)`.

The checks run at random values: the document Dirichlet's concentration is ``alpha`` times
the stick-breaking weights, the assignment's probabilities are the document weights indexed
by each token's document, and the word's ``log_prob`` is ``log phi[z, word]``. Anything else
raises :class:`~pyro_memo.ModelStructureError`.
"""

from dataclasses import dataclass, field

import pyro.distributions as dist
import torch
from pyro import poutine

from ..allocation import stick_breaking_weights
from ..checks import as_index_tensor, as_positive_int
from .structure import (
    ArgumentReader,
    ModelStructureError,
    _base,
    _constant_over_components,
    _find_sticks,
    _plates,
    check_subsample,
    positional_names,
    probe_trace,
    refuse_sequential,
    refuse_subsampled,
    single_plate,
    sites_moved_by,
)

#: the supported HDP form, quoted in error messages
HDP_FORM = ("u ~ Beta(1, gamma) in a plate of size K; phi ~ Dirichlet(lam0 * ones(V)) in a plate of size K + 1; "
            "pi ~ Dirichlet(alpha * beta(u)) in a document plate; z ~ Categorical(pi[doc]) and "
            "x ~ Categorical(phi[z]) (observed) in a token plate")

#: the token form of an HDP topic model's documents and words, quoted to a model written per document
TOKEN_FORM = ("with pyro.plate('docs', D): pi = pyro.sample('pi', dist.Dirichlet(alpha * beta)); then "
              "with pyro.plate('tokens', len(doc)): z = pyro.sample('z', dist.Categorical(pi[doc])); "
              "pyro.sample('w', dist.Categorical(phi[z]), obs=word), where doc and word are each token's document "
              "and word ids (from a count matrix: doc, word = counts.nonzero(as_tuple=True) with each pair "
              "repeated counts[doc, word] times, e.g. by torch.repeat_interleave)")


def refuse_document_observation(obs, assignment, data_plate):
    """Raise :class:`ModelStructureError` naming the observed site, the document-weight site and the plate if
    the observation draws a whole document (``Multinomial(total, pi @ phi)`` of its word counts) from the
    document weights, with no per-token assignment: pyro-memo's HDP reads each token's topic from a latent
    ``Categorical`` site, and the message gives that token form (:data:`TOKEN_FORM`)."""
    weights = [s["name"] for s in assignment if isinstance(_base(s["fn"]), dist.Dirichlet)]
    counts = isinstance(_base(obs["fn"]), (dist.Multinomial, dist.Categorical))
    if not counts or not weights or any(isinstance(_base(s["fn"]), dist.Categorical) for s in assignment):
        return
    raise ModelStructureError(
        f"observed site '{obs['name']}' ({type(_base(obs['fn'])).__name__}) draws each document of plate "
        f"'{data_plate}' from its topic weights '{weights[0]}' (Dirichlet) directly (a bag of words, the topic "
        f"assignments summed out): pyro-memo's HDP topic model needs one latent Categorical topic assignment per "
        f"token and a Categorical word, in a token plate. Write the tokens: {TOKEN_FORM}. Supported HDP form: "
        f"{HDP_FORM}")


#: the latent concentrations pyro-memo learns in an HDP topic model
CONCENTRATION_FORM = ("gamma = pyro.sample('gamma', dist.Gamma(s1, s2)) and / or alpha = pyro.sample('alpha', "
                      "dist.Gamma(s1, s2)), scalars outside every plate, then u ~ Beta(1, gamma) in the sticks' "
                      "plate and pi ~ Dirichlet(alpha * beta(u)) in the document plate")


def batch_tokens(doc, batch, num_docs):
    """The tokens of the documents ``batch``: ``(token_indices, local_doc)``.

    ``token_indices`` are the positions (in their original order) of the tokens whose document
    is in ``batch``; ``local_doc`` is each of them's position in ``batch``, the row of the
    document plate's subsampled sites. A model subsampling its document plate uses them as::

        with pyro.plate("docs", num_docs, subsample=batch):
            pi = pyro.sample("pi", dist.Dirichlet(alpha * beta))
        tok, local = pyro_memo.batch_tokens(doc, batch, num_docs)
        with pyro.plate("tokens", len(doc), subsample=tok):
            z = pyro.sample("z", dist.Categorical(pi[local]))
            pyro.sample("w", dist.Categorical(phi[z]), obs=word[tok])
    """
    num_docs = as_positive_int(num_docs, "num_docs")
    doc = as_index_tensor(doc, num_docs, "batch_tokens' doc (each token's document id)")
    batch = check_subsample(torch.as_tensor(batch).to(doc.device), num_docs, "batch_tokens' batch of documents")
    position = torch.full((num_docs,), -1, dtype=torch.long, device=doc.device)
    position[batch] = torch.arange(len(batch), device=doc.device)
    local = position[doc]
    tokens = torch.nonzero(local >= 0).squeeze(-1)
    return tokens, local[tokens]


@dataclass
class TokenBatch:
    """The tokens of a batch of documents, and their distinct (document, word) pairs.

    :ivar docs: ``(B,)`` document ids of the batch (the document plate's rows).
    :ivar tokens: ``(n,)`` positions of the batch's tokens in the model's token arrays.
    :ivar local_doc: ``(n,)`` each token's row in ``docs``.
    :ivar pair_doc, pair_word, pair_count: the distinct (row, word) pairs and their counts,
        the input of :meth:`~pyro_memo.topics.HDPPosterior.local_step`.
    :ivar token_pair: ``(n,)`` each token's pair.
    :ivar size: the number of documents of the call's corpus (the document plate's size).
    :ivar corpus: a key of the call's corpus (its size and a checksum of its tokens): stored
        document-level parameters belong to the corpus of one key (``None`` for a call without the words).
    """

    docs: torch.Tensor
    tokens: torch.Tensor
    local_doc: torch.Tensor
    pair_doc: torch.Tensor
    pair_word: torch.Tensor
    pair_count: torch.Tensor
    token_pair: torch.Tensor
    size: int = 0
    corpus: tuple = ()

    @property
    def num_docs(self):
        return len(self.docs)


@dataclass
class HDPSpec(ArgumentReader):
    """What recognition learnt about an HDP topic model: hyperparameters, site and plate names."""

    K: int
    V: int
    alpha: float
    gamma: float
    lam0: float
    stick_site: str
    stick_plate: str
    topic_site: str
    topic_plate: str
    doc_site: str
    doc_plate: str
    assignment_site: str
    obs_site: str
    token_plate: str
    num_docs: int
    num_tokens: int
    doc_arg: tuple
    word_arg: tuple
    subsample_arg: tuple = None
    token_subsampled: bool = False
    num_docs_arg: tuple = None
    docs_from_tokens: bool = False
    #: the latent document-level concentration's site (``alpha ~ Gamma(s1, s2)`` outside every plate), if any
    alpha_site: str = None
    #: ``(s1, s2)``: shape and rate of its Gamma prior (``alpha`` is then the prior mean ``s1 / s2``)
    alpha_prior: tuple = None
    #: the latent top-level concentration's site, if any
    gamma_site: str = None
    #: ``(s1, s2)`` of its Gamma prior (``gamma`` is then the prior mean)
    gamma_prior: tuple = None
    extra: dict = field(default_factory=dict)

    kind = "hdp"
    batch_plate_field = "doc_plate"

    @property
    def concentration_sites(self):
        """``{"alpha": site, "gamma": site}`` of the latent concentrations (absent ones left out)."""
        return {k: v for k, v in (("alpha", self.alpha_site), ("gamma", self.gamma_site)) if v is not None}

    def has_words(self, args, kwargs):
        """Whether this call passes the observed word ids (``Predictive`` generating new words leaves them
        out or passes ``None``)."""
        return self._get(self.word_arg, args, kwargs, None) is not None

    def _where(self, where):
        """The argument at ``where``, named for an error: "argument 'doc'" (its parameter name where the model's
        signature gives one), else "positional argument 0" or "keyword argument 'doc'"."""
        kind, key = where
        names = self.extra.get("arg_names", ())
        if kind == "arg" and key < len(names):
            return f"argument {names[key]!r}"
        return f"keyword argument {key!r}" if kind == "kwarg" else f"positional argument {key}"

    def _raw_tokens(self, args, kwargs, words=True):
        """The call's ``(doc, word)`` ids; without the words (:meth:`has_words` false) a ``ValueError``, or
        with ``words=False`` zeros in their place (token positions whose words are to be generated)."""
        doc = self._get(self.doc_arg, args, kwargs, None)
        if doc is None:
            raise ValueError(f"this call passes no document ids (the model's {self._where(self.doc_arg)}, each "
                             f"token's document): the guide's document weights '{self.doc_site}' and assignments "
                             f"'{self.assignment_site}' are those of the call's tokens. To draw new documents from "
                             "the fitted posterior, pass their tokens' document ids (the words may be left out), "
                             "or let the model draw everything: pyro.infer.Predictive(model, "
                             "posterior_samples=guide.sample_posterior(num_samples))(...)")
        doc = torch.as_tensor(doc).long()
        if self.has_words(args, kwargs):
            word = torch.as_tensor(self._get(self.word_arg, args, kwargs)).long()
        elif words:
            kind, key = self.word_arg
            where = f"keyword argument {key!r}" if kind == "kwarg" else f"positional argument {key}"
            raise ValueError(f"this call passes no word ids (the model's {where}, observed at site "
                             f"'{self.obs_site}'); fitting, scoring and starting a guide need them: only a call "
                             "that generates words (Predictive with a fitted guide) may leave them out")
        else:
            word = torch.zeros_like(doc)
        if doc.shape != word.shape or doc.dim() != 1:
            raise ValueError(f"document ids {tuple(doc.shape)} and word ids {tuple(word.shape)} must be equal-length "
                             "1-D arrays")
        return doc, word

    def plate_size(self, args, kwargs):
        """The number of documents of this call (the document plate's size), read from the call:
        the argument that gives it (``num_docs_arg``), else ``max(doc) + 1`` when the model
        counts its documents from the tokens (``docs_from_tokens``), else the recognised size."""
        if self.num_docs_arg is not None:
            value = self._get(self.num_docs_arg, args, kwargs, None)
            if value is not None:
                return int(value)
        if self.docs_from_tokens:
            doc, _ = self._raw_tokens(args, kwargs, words=False)
            return int(doc.max()) + 1 if len(doc) else 0
        return self.num_docs

    def raw_data(self, args, kwargs):
        """The call's tokens as one ``(N, 2)`` tensor of (document id, word id) rows, the object the
        data fingerprint is taken of; the same tensor object while the call's token arrays are."""
        doc = self._get(self.doc_arg, args, kwargs)
        word = self._get(self.word_arg, args, kwargs, None)
        versions = (getattr(doc, "_version", None), getattr(word, "_version", None))
        cached = self.extra.get("_raw")
        if cached is not None and cached[0] is doc and cached[1] is word and cached[2] == versions:
            return cached[3]
        d, w = self._raw_tokens(args, kwargs)
        raw = torch.stack([d, w], 1)
        self.extra["_raw"] = (doc, word, versions, raw, None)
        return raw

    def corpus_key(self, args, kwargs):
        """``(number of documents, number of tokens, checksum of the tokens)`` of this call's corpus."""
        raw = self.raw_data(args, kwargs)
        cached = self.extra["_raw"]
        if cached[4] is None:
            from .param_store import fingerprint

            self.extra["_raw"] = cached[:4] + (int(fingerprint(raw)[2]),)
        return self.plate_size(args, kwargs), len(raw), self.extra["_raw"][4]

    def tokens(self, args, kwargs, words=True):
        """The model's ``(doc, word)`` token arrays (all documents), validated; ``words=False``: zeros for
        the words of a call that leaves them out (``_raw_tokens()``)."""
        doc, word = self._raw_tokens(args, kwargs, words)
        size = self.plate_size(args, kwargs)
        if len(doc) and (int(doc.min()) < 0 or int(doc.max()) >= size):
            raise ValueError(f"document ids must lie in [0, {size}) (the document plate's size)")
        if len(word) and (int(word.min()) < 0 or int(word.max()) >= self.V):
            raise ValueError(f"word ids must lie in [0, {self.V}) (the topics' vocabulary)")
        return doc, word

    def batch(self, args, kwargs, docs=None, words=True):
        """The ``TokenBatch`` of documents ``docs`` (default: the model's batch, else all);
        ``words=False`` as :meth:`tokens`."""
        doc, word = self.tokens(args, kwargs, words)
        if docs is None:
            docs = self.batch_indices(args, kwargs)
        size = self.plate_size(args, kwargs)
        if docs is None:
            docs = torch.arange(size, device=doc.device)
        docs = torch.as_tensor(docs, dtype=torch.long, device=doc.device)
        tokens, local = batch_tokens(doc, docs, size)
        key = local * self.V + word[tokens]
        pairs, token_pair, count = torch.unique(key, return_inverse=True, return_counts=True)
        return TokenBatch(docs, tokens, local, pairs // self.V, pairs % self.V, count.to(torch.float64), token_pair,
                          size, self.corpus_key(args, kwargs) if self.has_words(args, kwargs) else None)


def is_hdp(global_sites, T):
    """Whether the model's global latent sites look like an HDP: three plates, one of them
    holding a Dirichlet over the assignment's ``T`` categories outside the components' plate."""
    plates = {next(iter(_plates(s)), None) for s in global_sites}
    doc_like = [s for s in global_sites if isinstance(_base(s["fn"]), dist.Dirichlet)
                and s["fn"].event_shape[-1:] == (T,)]
    return len(plates) >= 3 and bool(doc_like)


def _single_plate(site, what):
    return single_plate(site, what, f"HDP form: {HDP_FORM}")


def _topics_and_documents(sites, T):
    """Split the two non-stick global sites into the topic site and the document site."""
    kinds = {s["name"]: type(_base(s["fn"])).__name__ for s in sites}
    if len(sites) != 2 or any(k != "Dirichlet" for k in kinds.values()):
        raise ModelStructureError(f"an HDP topic model needs two Dirichlet sites besides the sticks (topics and "
                                  f"document weights); found {kinds}. Supported HDP form: {HDP_FORM}")
    docs = [s for s in sites if s["fn"].event_shape[-1] == T]
    if len(docs) == 2:  # V == T: the topics' prior is symmetric, the documents' is alpha * beta
        docs = [s for s in sites if not _symmetric(_base(s["fn"]).concentration)]
    if len(docs) != 1:
        raise ModelStructureError(f"expected one document-weight site Dirichlet(alpha * beta) over the "
                                  f"assignment's {T} categories among {sorted(kinds)}. Supported HDP form: {HDP_FORM}")
    topic = next(s for s in sites if s is not docs[0])
    return topic, docs[0]


def _symmetric(conc):
    return bool(torch.all(conc == conc[..., :1]))


def _read_lam0(topic, T):
    plate = _single_plate(topic, "topic")
    if plate.size != T:
        raise ModelStructureError(f"topic site '{topic['name']}' must be in a plate of size K + 1 = {T} (the "
                                  f"assignment's categories); its plate '{plate.name}' has size {plate.size}")
    conc = _base(topic["fn"]).concentration.expand(topic["value"].shape)
    conc = _constant_over_components(conc, 1, topic["name"], "concentration")
    if not _symmetric(conc):
        raise ModelStructureError(f"topic site '{topic['name']}' must have a symmetric Dirichlet(lam0 * ones(V)) "
                                  "prior; its concentration differs across words")
    return float(conc[0]), conc.shape[-1]


def _read_alpha(model, args, kwargs, stick, doc_site):
    """``alpha`` from the document site's first concentration with every stick at 1/2, where the
    weights are powers of two (``beta_1 = 1/2``), so the value read is exact and does not depend
    on random draws."""
    half = torch.full_like(stick["value"], 0.5)
    trace = probe_trace(model, args, kwargs, {stick["name"]: half},
                        f"stick site '{stick['name']}' at 1/2 (reading alpha)")
    site = trace.nodes[doc_site["name"]]
    conc = _base(site["fn"]).concentration.expand(site["value"].shape)
    return 2.0 * float(_constant_over_components(conc, 1, doc_site["name"], "concentration")[0])


def _document_plate(doc_site, plates):
    plate = _single_plate(doc_site, "document-weight")
    size, _, subsample = plates.get(plate.name, (plate.size, None, None))
    if subsample is not None and len(subsample) == size and bool(torch.equal(subsample, torch.arange(size))):
        subsample = None
    return plate.name, int(size), subsample


def _candidates(args, kwargs):
    return [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]


def _find_subsample_arg(args, kwargs, subsample):
    for kind, key, value in _candidates(args, kwargs):
        if value is subsample or (torch.is_tensor(value) and value.dim() == 1 and not value.is_floating_point()
                                  and value.shape == subsample.shape and bool(torch.equal(value.long(), subsample))):
            return kind, key
    raise ModelStructureError("the document plate's subsample indices must be passed to the model as an argument "
                              "(pyro.plate(..., subsample=batch) with batch an argument)")


def _int_vectors(args, kwargs):
    return [(kind, key, v) for kind, key, v in _candidates(args, kwargs)
            if torch.is_tensor(v) and v.dim() == 1 and not v.is_floating_point() and not v.dtype == torch.bool]


def _find_token_args(args, kwargs, trace, names, num_docs, subsample):
    """The arguments holding each token's document id and word id; verifies ``z ~ Cat(pi[doc])``."""
    obs = trace.nodes[names["obs"]]["value"]
    probs = _base(trace.nodes[names["z"]]["fn"]).probs.double()
    pi = trace.nodes[names["doc"]]["value"].double()
    docs = torch.arange(num_docs) if subsample is None else subsample
    for d_kind, d_key, doc in _int_vectors(args, kwargs):
        if len(doc) == 0 or int(doc.min()) < 0 or int(doc.max()) >= num_docs:
            continue
        tokens, local = batch_tokens(doc, docs, num_docs)
        if len(tokens) != probs.reshape(-1, probs.shape[-1]).shape[0]:
            continue
        if not bool(torch.allclose(probs.reshape(len(tokens), -1), pi[local], rtol=1e-6, atol=1e-9)):
            continue
        for w_kind, w_key, word in _int_vectors(args, kwargs):
            if word.shape == doc.shape and (w_kind, w_key) != (d_kind, d_key) \
                    and bool(torch.equal(word[tokens].to(obs.device), obs.long().reshape(-1))):
                return (d_kind, d_key), (w_kind, w_key), len(doc), len(tokens)
        raise ModelStructureError(f"observed site '{names['obs']}': the word ids must be passed to the model as an "
                                  "argument, an integer array as long as the document ids")
    raise ModelStructureError(
        f"assignment site '{names['z']}': its probabilities must be the document weights pi[doc] of site "
        f"'{names['doc']}', with doc the tokens' document ids passed to the model as an integer argument "
        f"(under a document batch, the rows of the batch: see pyro_memo.batch_tokens). Supported HDP form: {HDP_FORM}")


def _probe_doc_plate(model, args, kwargs, doc_site, changes):
    """The document plate's size when the model runs with the arguments ``changes`` replaced
    (``None`` if it does not run)."""
    args, kwargs = list(args), dict(kwargs)
    for (kind, key), value in changes:
        if kind == "arg":
            args[key] = value
        else:
            kwargs[key] = value
    try:
        with torch.no_grad(), poutine.block():
            trace = poutine.trace(model).get_trace(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a probe that fails only rules a reading out
        return None
    site = trace.nodes.get(doc_site)
    if site is None or len(site["cond_indep_stack"]) != 1:
        return None
    frame = site["cond_indep_stack"][0]
    return int(frame.size if frame.full_size is None else frame.full_size)


def _find_num_docs(model, args, kwargs, doc_site, num_docs, doc_arg, word_arg):
    """Where a call gives the number of documents: ``(num_docs_arg, docs_from_tokens)``.

    Each integer argument equal to ``num_docs`` is raised by one; the one that raises the document
    plate's size is the size's argument. A token of a new document is appended to the token arrays (with
    that argument, if any, left out as ``None``): if the plate grows, the model counts its documents from the
    tokens (for a call without the size's argument, as ``HDPTopicModel(doc, word)`` does when ``num_docs`` is
    omitted; the recognised size held for such a call, and the guide drew another number of documents)."""
    num_docs_arg = None
    for kind, key, value in _candidates(args, kwargs):
        is_int = isinstance(value, int) and not isinstance(value, bool)
        is_int = is_int or (torch.is_tensor(value) and value.dim() == 0 and not value.is_floating_point()
                            and value.dtype != torch.bool)
        if is_int and int(value) == num_docs:
            if _probe_doc_plate(model, args, kwargs, doc_site, [((kind, key), value + 1)]) == num_docs + 1:
                num_docs_arg = (kind, key)
                break
    doc = ArgumentReader._get(doc_arg, args, kwargs)
    word = ArgumentReader._get(word_arg, args, kwargs)
    more = [(doc_arg, torch.cat([doc, doc.new_full((1,), num_docs)])), (word_arg, torch.cat([word, word[:1]]))]
    if num_docs_arg is not None:
        more.append((num_docs_arg, None))
    from_tokens = bool(len(word)) and _probe_doc_plate(model, args, kwargs, doc_site, more) == num_docs + 1
    return num_docs_arg, from_tokens


def _is_stick_like(site, T):
    return isinstance(_base(site["fn"]), dist.Beta) and [f.size for f in site["cond_indep_stack"]] == [T - 1] \
        and site["fn"].event_shape == ()


def _gamma_prior_of(site):
    """``(s1, s2)`` of a scalar Gamma site outside every plate; else :class:`ModelStructureError`."""
    name, prior = site["name"], _base(site["fn"])
    if site["cond_indep_stack"]:
        raise ModelStructureError(
            f"site '{name}' ({type(prior).__name__}) sits inside plate(s) {[f.name for f in site['cond_indep_stack']]};"
            f" besides the HDP's sticks, topics and document weights the only global latents pyro-memo supports "
            f"are latent concentrations, one scalar each outside every plate: {CONCENTRATION_FORM}")
    if not isinstance(prior, dist.Gamma) or site["value"].numel() != 1 or site["fn"].event_shape != ():
        raise ModelStructureError(
            f"site '{name}' is a global latent outside every plate with a {type(prior).__name__} prior of shape "
            f"{tuple(site['value'].shape)}; pyro-memo learns a concentration in closed form under a scalar Gamma "
            f"prior only: {CONCENTRATION_FORM}")
    s1, s2 = float(prior.concentration.reshape(-1)[0]), float(prior.rate.reshape(-1)[0])
    if not (0 < s1 < float("inf") and 0 < s2 < float("inf")):
        raise ModelStructureError(f"site '{name}': its Gamma prior's shape and rate must be positive and finite; "
                                  f"got ({s1}, {s2})")
    return s1, s2


def _latent_concentrations(model, args, kwargs, trace, global_sites, T):
    """The latent concentrations among the global sites: ``{"alpha": (site, prior), "gamma": (site, prior)}``
    (absent ones left out), identified by their wiring. Every global site that is neither a stick
    site nor a Dirichlet, and is outside every plate or scalar within its plates, must be one of them.

    Each candidate is a scalar Gamma site outside every plate; the model is re-run with it
    conditioned on a value ``v`` other than its traced one and every stick at 1/2 (so that
    :math:`\\beta_1 = 1/2` exactly): it is ``gamma`` if the sticks' second Beta parameter is ``v``
    everywhere, ``alpha`` if the document Dirichlet's first concentration is ``v / 2``.
    Either must enter no other site than those (:func:`_refuse_concentration_elsewhere`).
    """
    extras = [s for s in global_sites if not isinstance(_base(s["fn"]), dist.Dirichlet) and not _is_stick_like(s, T)
              and (not s["cond_indep_stack"] or s["fn"].event_shape == ())]  # (event-shaped plated sites: the
    # topics' or documents' place, explained by _topics_and_documents)
    if not extras:
        return {}
    sticks = [s for s in global_sites if _is_stick_like(s, T)]
    docs = [s for s in global_sites if isinstance(_base(s["fn"]), dist.Dirichlet) and s["fn"].event_shape[-1:] == (T,)
            and len(s["cond_indep_stack"]) == 1]
    found = {}
    for site in extras:
        prior = _gamma_prior_of(site)
        name = site["name"]
        value = float(site["value"].detach().reshape(()))
        probe = site["value"].detach() * 0 + (0.5 + 1.37 * value)
        data = {name: probe}
        data.update({s["name"]: torch.full_like(s["value"], 0.5) for s in sticks})
        cond = probe_trace(model, args, kwargs, data, f"site '{name}' at {float(probe):.6g} and the sticks at 1/2 "
                           "(reading which concentration it is)")
        v = float(probe)
        roles = []
        for s in sticks:
            c0 = _base(cond.nodes[s["name"]]["fn"]).concentration0.expand(s["value"].shape).double()
            if bool(torch.allclose(c0, torch.full_like(c0, v), rtol=1e-6, atol=0)):
                roles.append("gamma")
        for s in docs:
            node = cond.nodes[s["name"]]
            conc = _base(node["fn"]).concentration.expand(node["value"].shape).double()
            if bool(torch.allclose(2 * conc[..., 0], torch.full_like(conc[..., 0], v), rtol=1e-6, atol=0)):
                roles.append("alpha")
        if len(roles) != 1:
            what = "neither" if not roles else "both"
            raise ModelStructureError(
                f"site '{name}' is a scalar Gamma latent outside every plate, but it is wired as {what} of the HDP's "
                f"concentrations (conditioned on {v:.6g}, the sticks' Beta(1, gamma) parameter and the document "
                f"Dirichlet's alpha * beta {'do not follow' if not roles else 'both follow'} it); supported form: "
                f"{CONCENTRATION_FORM}")
        role = roles[0]
        _refuse_concentration_elsewhere(model, args, kwargs, trace, site, probe, role, sticks if role == "gamma"
                                        else docs)
        if role in found:
            raise ModelStructureError(
                f"sites '{found[role][0]['name']}' and '{name}' are both wired as the HDP's {role}; one latent "
                f"{role} is supported: {CONCENTRATION_FORM}")
        found[role] = (site, prior)
    return found


def _refuse_concentration_elsewhere(model, args, kwargs, trace, site, probe, role, followers):
    """Raise :class:`ModelStructureError` if the latent concentration ``site`` (wired as ``role``: its
    ``followers``, the sticks or the document weights, take it) enters another site (the topics' prior, the
    other concentration's sites): q(alpha) / q(gamma) is learnt from its followers alone, and recognition would
    read the other site at the one value the trace drew."""
    name, own = site["name"], {s["name"] for s in followers}
    others = [n for n in sites_moved_by(model, args, kwargs, trace, name, probe,
                                        f"site '{name}' at another value (checking which sites it enters)")
              if n not in own]
    if others:
        raise ModelStructureError(
            f"site '{name}' is the HDP's latent {role} (site(s) {sorted(own)} take it), but it also enters site(s) "
            f"{others}: pyro-memo learns q({role}) from {sorted(own)} alone, and would read {others} at one random "
            f"draw of {role}. Use the latent {role} only there, and constants in the other sites' distributions: "
            f"{CONCENTRATION_FORM}")


def recognize_hdp(model, args, kwargs, trace, plates, obs, z_site, global_sites):
    """The :class:`HDPSpec` of a traced HDP topic model (see the module docstring).

    :raises ModelStructureError: naming the offending site and the supported form.
    """
    obs_fn, z_fn = _base(obs["fn"]), _base(z_site["fn"])
    if not isinstance(obs_fn, dist.Categorical):
        raise ModelStructureError(f"observed site '{obs['name']}' is {type(obs_fn).__name__}; an HDP topic model "
                                  f"observes word ids with Categorical(phi[z]). Supported HDP form: {HDP_FORM}")
    T = z_fn.probs.shape[-1]
    for site in global_sites:
        refuse_sequential(site, "global")
    latent = _latent_concentrations(model, args, kwargs, trace, global_sites, T)
    taken = [site for site, _ in latent.values()]
    global_sites = [s for s in global_sites if not any(s is t for t in taken)]
    stick, gamma = _find_sticks(global_sites, T)
    if stick is None:
        raise ModelStructureError(f"an HDP topic model needs a Beta(1, gamma) stick site in a plate of size K; "
                                  f"the assignment '{z_site['name']}' has one category. Supported HDP form: {HDP_FORM}")
    topic, doc_site = _topics_and_documents([s for s in global_sites if s is not stick], T)
    for site, kind in ((stick, "stick"), (topic, "topic")):
        refuse_subsampled(site, kind, f"the documents (plate '{next(iter(_plates(doc_site)), '?')}')")
    lam0, V = _read_lam0(topic, T)
    doc_plate, num_docs, subsample = _document_plate(doc_site, plates)
    alpha = _read_alpha(model, args, kwargs, stick, doc_site)
    priors = {role: prior for role, (_, prior) in latent.items()}
    if "alpha" in priors:
        alpha = priors["alpha"][0] / priors["alpha"][1]
    if "gamma" in priors:
        gamma = priors["gamma"][0] / priors["gamma"][1]
    names = {"obs": obs["name"], "z": z_site["name"], "doc": doc_site["name"]}
    doc_arg, word_arg, num_tokens, batch_size = _find_token_args(args, kwargs, trace, names, num_docs, subsample)
    token_plate = next(iter(_plates(obs)))
    size, sub_size, _ = plates.get(token_plate, (obs["value"].shape[0], None, None))
    if subsample is None and sub_size is not None and sub_size != size:
        raise ModelStructureError(f"token plate '{token_plate}' is subsampled at random; memoized inference needs "
                                  "fixed batches of documents: subsample the document plate with subsample=batch")
    first = topic["value"]
    spec = HDPSpec(
        K=T - 1, V=V, alpha=alpha, gamma=gamma, lam0=lam0,
        stick_site=stick["name"], stick_plate=next(iter(_plates(stick))),
        topic_site=topic["name"], topic_plate=next(iter(_plates(topic))),
        doc_site=doc_site["name"], doc_plate=doc_plate, assignment_site=z_site["name"], obs_site=obs["name"],
        token_plate=token_plate, num_docs=num_docs, num_tokens=num_tokens, doc_arg=doc_arg, word_arg=word_arg,
        subsample_arg=None if subsample is None else _find_subsample_arg(args, kwargs, subsample),
        token_subsampled=int(size) == num_tokens and batch_size != num_tokens,
        alpha_site=latent["alpha"][0]["name"] if "alpha" in latent else None, alpha_prior=priors.get("alpha"),
        gamma_site=latent["gamma"][0]["name"] if "gamma" in latent else None, gamma_prior=priors.get("gamma"),
    )
    spec.extra.update(model_dtype=first.dtype, model_device=first.device, arg_names=positional_names(model))
    spec.num_docs_arg, spec.docs_from_tokens = _find_num_docs(model, args, kwargs, doc_site["name"], num_docs,
                                                              doc_arg, word_arg)
    verify_hdp_wiring(model, args, kwargs, spec)
    return spec


def _close(a, b, dtype):
    rtol = 1e-7 if dtype == torch.float64 else 1e-4
    return bool(torch.allclose(a, b, rtol=rtol, atol=rtol * (1 + b.abs().max())))


def verify_hdp_wiring(model, args, kwargs, spec):
    """Check, at random stick, topic and assignment values, that the document prior is
    ``Dirichlet(alpha * beta(u))`` and the word's log_prob is ``log phi[z, word]``.

    :raises ModelStructureError: naming the site whose numbers disagree.
    """
    g = torch.Generator().manual_seed(0)
    like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
    u = (0.05 + 0.9 * torch.rand(spec.K, generator=g, dtype=torch.float64)).to(**like)
    phi = torch.softmax(torch.randn(spec.K + 1, spec.V, generator=g, dtype=torch.float64), -1).to(**like)
    tb = spec.batch(args, kwargs)
    z = torch.randint(spec.K + 1, (len(tb.tokens),), generator=g).to(like["device"])
    data = {spec.stick_site: u, spec.topic_site: phi, spec.assignment_site: z}
    alpha = spec.alpha
    if spec.alpha_site is not None:  # a latent alpha at a random value
        alpha = float(0.2 + 3 * torch.rand((), generator=g, dtype=torch.float64))
        data[spec.alpha_site] = torch.tensor(alpha, **like)
    if spec.gamma_site is not None:
        data[spec.gamma_site] = torch.tensor(float(0.2 + 3 * torch.rand((), generator=g, dtype=torch.float64)), **like)
    trace = probe_trace(model, args, kwargs, data, f"sites {sorted(data)} at random values (checking its wiring)")
    if spec.gamma_site is not None:
        c0 = _base(trace.nodes[spec.stick_site]["fn"]).concentration0.double()
        want = data[spec.gamma_site].double()
        if not _close(c0.reshape(-1), want.expand(c0.reshape(-1).shape), like["dtype"]):
            raise ModelStructureError(f"stick site '{spec.stick_site}': its Beta(1, gamma) parameter does not follow "
                                      f"the latent gamma '{spec.gamma_site}'; supported form: {CONCENTRATION_FORM}")
    conc = _base(trace.nodes[spec.doc_site]["fn"]).concentration.double()
    expected = alpha * stick_breaking_weights(u.double())
    if not _close(conc.reshape(-1, spec.K + 1), expected.expand(conc.reshape(-1, spec.K + 1).shape), like["dtype"]):
        raise ModelStructureError(
            f"document-weight site '{spec.doc_site}': its concentration is not alpha * beta with beta_k = u_k "
            f"prod_(l<k) (1 - u_l) the stick-breaking weights of site '{spec.stick_site}' (alpha = {alpha:.6g})")
    obs = trace.nodes[spec.obs_site]
    word = obs["value"].long().reshape(-1)
    ours = torch.log(phi.double()[z, word])
    theirs = obs["fn"].log_prob(obs["value"]).double().reshape(-1)
    if not _close(theirs, ours, like["dtype"]):
        raise ModelStructureError(
            f"observed site '{spec.obs_site}': its log_prob is not log phi[z, word] with phi the topic site "
            f"'{spec.topic_site}' indexed by the assignment '{spec.assignment_site}'")
