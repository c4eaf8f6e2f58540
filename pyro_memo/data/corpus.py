"""Bag-of-words corpora: documents as (word id, count) pairs, LDA-C and count-matrix readers."""

from dataclasses import dataclass

import numpy as np
import torch

from ..checks import as_count, as_rng
from .files import text_lines


@dataclass
class Corpus:
    """A bag-of-words corpus in compressed-row form: document ``d``'s distinct words are
    ``word_ids[doc_ptr[d]:doc_ptr[d + 1]]`` with ``counts`` in the same slots.

    :ivar numpy.ndarray doc_ptr: ``(D + 1,)`` int64 row pointers.
    :ivar numpy.ndarray word_ids: ``(U,)`` int64 word ids in ``[0, V)``.
    :ivar numpy.ndarray counts: ``(U,)`` float64 positive counts.
    :ivar int vocab_size: ``V``.
    :ivar list vocab: optional words, ``vocab[v]`` for id ``v``.
    """

    doc_ptr: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray
    vocab_size: int
    vocab: list = None

    def __post_init__(self):
        self.doc_ptr = np.asarray(self.doc_ptr, dtype=np.int64)
        self.word_ids = np.asarray(self.word_ids, dtype=np.int64)
        self.counts = np.asarray(self.counts, dtype=np.float64)
        self.vocab_size = int(self.vocab_size)
        self.validate()

    def validate(self):
        """Raise ``ValueError`` naming the first problem found."""
        if self.doc_ptr.ndim != 1 or len(self.doc_ptr) < 1 or self.doc_ptr[0] != 0:
            raise ValueError("doc_ptr must be a 1-D array of row pointers starting at 0")
        if np.any(np.diff(self.doc_ptr) < 0) or self.doc_ptr[-1] != len(self.word_ids):
            raise ValueError("doc_ptr must be non-decreasing and end at len(word_ids)")
        if self.word_ids.shape != self.counts.shape:
            raise ValueError(f"word_ids {self.word_ids.shape} and counts {self.counts.shape} differ in shape")
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be positive; got {self.vocab_size}")
        if len(self.word_ids) and (self.word_ids.min() < 0 or self.word_ids.max() >= self.vocab_size):
            raise ValueError(f"word ids must lie in [0, {self.vocab_size}); found "
                             f"[{self.word_ids.min()}, {self.word_ids.max()}]")
        if not np.all(np.isfinite(self.counts)):
            raise ValueError("counts contain NaN or inf")
        if np.any(self.counts <= 0):
            raise ValueError("counts must be positive (drop zero entries; negative counts are invalid)")
        if self.vocab is not None and len(self.vocab) != self.vocab_size:
            raise ValueError(f"vocab has {len(self.vocab)} words but vocab_size is {self.vocab_size}")

    @property
    def num_docs(self):
        return len(self.doc_ptr) - 1

    @property
    def num_tokens(self):
        return float(self.counts.sum())

    def __len__(self):
        return self.num_docs

    def __repr__(self):
        return f"Corpus({self.num_docs} documents, V = {self.vocab_size}, {self.num_tokens:.0f} tokens)"

    def subset(self, docs):
        """The corpus of documents ``docs`` (an index array), in that order.

        :raises ValueError: for an index outside ``[0, num_docs)``.
        """
        docs = np.asarray(docs, dtype=np.int64).reshape(-1)
        if len(docs) and (docs.min() < 0 or docs.max() >= self.num_docs):
            raise ValueError(f"document indices must lie in [0, {self.num_docs}); found [{docs.min()}, {docs.max()}]")
        starts, ends = self.doc_ptr[docs], self.doc_ptr[docs + 1]
        lengths = ends - starts
        index = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)]) if len(docs) else \
            np.zeros(0, dtype=np.int64)
        return Corpus(np.concatenate([[0], np.cumsum(lengths)]), self.word_ids[index], self.counts[index],
                      self.vocab_size, self.vocab)

    def tokens(self, docs=None, dtype=torch.float64, device=None):
        """Flat tensors for documents ``docs`` (default all): ``(doc, word, count)``, where
        ``doc`` numbers the chosen documents ``0 .. len(docs) - 1``."""
        part = self if docs is None else self.subset(docs)
        doc = np.repeat(np.arange(part.num_docs), np.diff(part.doc_ptr))
        return (torch.as_tensor(doc, device=device), torch.as_tensor(part.word_ids, device=device),
                torch.as_tensor(part.counts, dtype=dtype, device=device))

    def to_dense(self):
        """``(D, V)`` count matrix (small corpora only)."""
        out = np.zeros((self.num_docs, self.vocab_size))
        doc = np.repeat(np.arange(self.num_docs), np.diff(self.doc_ptr))
        np.add.at(out, (doc, self.word_ids), self.counts)
        return out


def check_has_tokens(corpus, where):
    """Raise ``ValueError`` unless ``corpus`` (a :class:`Corpus`, or anything with ``num_tokens``) has a
    token: a corpus whose documents are all empty leaves a topic model nothing to fit or score. ``where``
    names the caller in the message."""
    if not corpus.num_tokens > 0:
        raise ValueError(f"{where}: every document is empty (the corpus has no tokens: no word has a positive "
                         "count)")


#: a topic model's bound sums terms of each token's count times a log-probability or log-gamma (up to the log of
#: the dtype's largest number, 89 in float32, 710 in float64): a corpus's tokens stay this far below that number
TOKEN_MARGIN = 1e4


def check_tokens_fit(corpus, dtype, where):
    """Raise ``ValueError`` unless ``corpus``'s tokens (:attr:`Corpus.num_tokens`; a sum of counts), times
    :data:`TOKEN_MARGIN`, fit the floating ``dtype`` a topic model fits in: the bound's terms (a count times a
    log-probability) overflowed first, and the fit failed in its first lap with "the objective became NaN" (counts
    of 1e35 in float32, 1e303 in float64) or in numpy's "Probabilities contain NaN" (1e305). ``where`` names the
    caller in the message."""
    limit = torch.finfo(dtype).max / TOKEN_MARGIN
    if not corpus.num_tokens <= limit:
        name = str(dtype).removeprefix("torch.")
        raise ValueError(f"{where}: the corpus's {corpus.num_tokens:.3g} tokens (counts up to "
                         f"{_largest_count(corpus):.3g}) are too many for {name}, whose topic model bound holds at "
                         f"most {limit:.3g} ({TOKEN_MARGIN:g} times fewer than its largest number); rescale the counts"
                         + (" or fit in float64" if dtype != torch.float64 else ""))


def _largest_count(corpus):
    """The largest count of ``corpus`` (a :class:`Corpus`; a sharded corpus, which holds none in memory, ``nan``)."""
    counts = getattr(corpus, "counts", None)
    return float(counts.max()) if counts is not None and len(counts) else float("nan")


def _holds_complex(matrix):
    """Whether ``matrix`` (an array, a scipy or torch matrix) holds complex numbers; nested lists are read as
    an array (a ragged one is not, and is refused as no matrix)."""
    if callable(getattr(matrix, "is_complex", None)):  # a torch tensor
        return bool(matrix.is_complex())
    if isinstance(matrix, (list, tuple)):
        try:
            matrix = np.asarray(matrix)
        except ValueError:
            return False
    kind = getattr(matrix, "dtype", None)
    return kind is not None and np.issubdtype(kind, np.complexfloating)


def _numeric(matrix):
    """``matrix``, or an array of objects or nested lists as float64; ``None``, or entries that are ``None`` or
    text, a :class:`ValueError` (scipy reads ``None`` as a 1 x 1 matrix of no counts, and ``None`` entries as
    zeros: a silent drop)."""
    if matrix is None:
        raise ValueError("a count matrix must be a 2-D (documents, words) array of numbers; got None")
    if isinstance(matrix, (list, tuple, np.ndarray)):
        try:
            kind = np.asarray(matrix).dtype
        except ValueError:
            return matrix  # ragged: refused as no matrix below
        if kind == np.dtype(object):
            try:
                return np.asarray(matrix, dtype=np.float64)
            except (TypeError, ValueError) as err:
                raise ValueError(f"a count matrix must be a 2-D (documents, words) array of numbers; got entries "
                                 f"that are not numbers ({str(err).splitlines()[0][:80]})") from None
    return matrix


def from_counts(matrix, vocab=None):
    """A corpus from a ``(D, V)`` count matrix: dense array or any scipy sparse matrix.

    Counts need not be whole numbers (weighted or scaled term frequencies work). ``matrix`` is never
    modified: the corpus holds its own copy (a CSR matrix of float64 would otherwise be summed and
    pruned in place, through the arrays it shares with the caller).

    :raises ValueError: on complex, negative or non-finite counts, or counts whose total overflows float64.
    """
    import scipy.sparse as sp

    if _holds_complex(matrix):
        raise ValueError("a count matrix must hold real counts; got complex numbers (their imaginary part would be "
                         "dropped)")
    matrix = _numeric(matrix)
    try:
        m = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as err:
        kind = getattr(matrix, "shape", None) or type(matrix).__name__
        raise ValueError(f"a count matrix must be a 2-D (documents, words) array of numbers; got {kind} "
                         f"({str(err).splitlines()[0][:80]})") from None
    m.sum_duplicates()
    if not np.all(np.isfinite(m.data)):
        raise ValueError("count matrix contains NaN or inf")
    if np.any(m.data < 0):
        raise ValueError("count matrix contains negative counts")
    with np.errstate(over="ignore"):
        total = m.data.sum()
    if not np.isfinite(total):
        raise ValueError(f"count matrix's counts (up to {m.data.max():.3g}) sum past float64's largest number "
                         f"({np.finfo(np.float64).max:.3g}); rescale them")
    m.eliminate_zeros()
    return Corpus(m.indptr, m.indices, m.data, m.shape[1], vocab)


def read_vocab(path):
    """The words of a vocabulary file, one per line; blank lines after the last word are no words (a file
    ending in an empty line had an extra word ``''``).

    :raises ValueError: for a word listed twice, naming it and its two line numbers (word ``i`` is line ``i + 1``:
        a repeated word would silently give two ids one name, and the topics' top words would be ambiguous), or
        for a file without words (the corpus's first word id was blamed as outside the vocabulary).
    """
    words = [line.rstrip("\n") for _, line in text_lines(path)]
    while words and not words[-1].strip():
        words.pop()
    if not words:
        raise ValueError(f"{path}: no words (an empty vocabulary file)")
    first = {}
    for lineno, word in enumerate(words, 1):
        if word in first:
            raise ValueError(f"{path}: the word {word!r} is on lines {first[word]} and {lineno}; a vocabulary "
                             f"lists each word once (line i + 1 is word id i)")
        first[word] = lineno
    return words


def ldac_documents(path, vocab_size=None):
    """The documents of an LDA-C file as ``(word ids, counts)`` array pairs, read line by line (blank
    lines skipped).

    :param int vocab_size: ``V``, when known: word ids must lie below it.
    :raises ValueError: naming the line of a malformed document: not ``N id:count ...``, a count that
        is not a positive finite number, a negative word id, or one at or above ``vocab_size``.
    """
    for lineno, line in text_lines(path):
        fields = line.split()
        if not fields:
            continue
        try:
            pairs = [f.split(":") for f in fields[1:]]
            doc_ids = np.array([int(a) for a, _ in pairs], dtype=np.int64)
            doc_counts = np.array([float(b) for _, b in pairs])
            declared = int(fields[0])
        except (ValueError, OverflowError) as err:  # OverflowError: an id past int64
            raise ValueError(f"{path}, line {lineno}: not 'N id:count ...' ({err})") from None
        if declared != len(pairs):
            raise ValueError(f"{path}, line {lineno}: declares {declared} distinct words, lists {len(pairs)}")
        _check_ldac_line(doc_ids, doc_counts, vocab_size, f"{path}, line {lineno}")
        yield doc_ids, doc_counts


def _check_ldac_line(ids, counts, vocab_size, where):
    """Raise :class:`ValueError` naming ``where`` for a count that is not positive and finite, or a word id
    outside ``[0, vocab_size)``."""
    bad = ~(np.isfinite(counts) & (counts > 0))
    if bad.any():
        raise ValueError(f"{where}: count {counts[bad][0]:g} of word {ids[bad][0]}; counts must be positive and finite")
    if len(ids) and (ids.min() < 0 or (vocab_size is not None and ids.max() >= vocab_size)):
        word = ids.min() if ids.min() < 0 else ids.max()
        raise ValueError(f"{where}: word id {word} outside the vocabulary [0, {vocab_size or 'V'})")


def from_documents(documents, vocab_size, vocab=None):
    """A corpus from ``(word ids, counts)`` pairs, one per document."""
    documents = list(documents)
    ptr = np.concatenate([[0], np.cumsum([len(ids) for ids, _ in documents])])
    ids = np.concatenate([ids for ids, _ in documents]) if documents else np.zeros(0, dtype=np.int64)
    counts = np.concatenate([c for _, c in documents]) if documents else np.zeros(0)
    return Corpus(ptr, ids, counts, vocab_size, vocab)


def read_ldac(path, vocab_path=None, vocab_size=None):
    """Read an LDA-C file: one document per line, ``N id:count id:count ...``.

    :param path: the ``.ldac`` file.
    :param vocab_path: optional vocabulary file, one word per line (its length sets ``V``).
    :param int vocab_size: ``V`` when there is no vocabulary (default: largest id + 1).
    :raises ValueError: naming the line of a malformed document (``ldac_documents()``), or for a file
        without documents, or a vocabulary without words (``read_vocab()``).
    """
    vocab = None if vocab_path is None else read_vocab(vocab_path)
    if vocab is not None:
        vocab_size = len(vocab)
    documents = list(ldac_documents(path, vocab_size))
    if not documents:
        raise ValueError(f"{path}: no documents (an empty file, or only blank lines)")
    if vocab_size is None:
        vocab_size = max((int(ids.max()) for ids, _ in documents if len(ids)), default=0) + 1
    return from_documents(documents, vocab_size, vocab)


def split_documents(corpus, test_fraction=0.2, seed=0):
    """Random document split: ``(train, test)`` corpora, each of at least one document.

    :raises ValueError: for ``test_fraction`` outside ``(0, 1)`` or a corpus of fewer than 2 documents.
    """
    if not 0 < check_fraction(test_fraction, "test_fraction") < 1:
        raise ValueError(f"test_fraction must lie in (0, 1); got {test_fraction}")
    if corpus.num_docs < 2:
        raise ValueError(f"a train / test split needs at least 2 documents; the corpus has {corpus.num_docs}")
    order = as_rng(seed).permutation(corpus.num_docs)
    n_test = min(max(1, int(round(test_fraction * corpus.num_docs))), corpus.num_docs - 1)
    return corpus.subset(np.sort(order[n_test:])), corpus.subset(np.sort(order[:n_test]))


def check_fraction(value, name):
    """``value`` as a ``float`` in ``[0, 1]`` (a share of each document's tokens or words), else a
    :class:`ValueError` naming ``name`` (NaN, a negative share or one above 1 split nothing sensible)."""
    try:
        number = None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not 0 <= number <= 1:
        raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")
    return number


def split_tokens(corpus, fraction=0.5, seed=0):
    """Document completion split: each document's tokens (count units) divided at random
    into an observed part holding ``fraction`` of them and a held-out part. Returns the two
    corpora (same documents, same order; a document may be empty in one of them).

    :raises ValueError: for counts that are not whole numbers (tokens cannot be divided; hold out
        word types instead, :func:`split_types`, which keeps each word's count whole).
    """
    fraction = check_fraction(fraction, "fraction")
    fractional = corpus.counts != np.round(corpus.counts)
    if fractional.any():
        raise ValueError(f"document completion divides each document's tokens, and {int(fractional.sum())} counts "
                         f"are not whole numbers (the first {corpus.counts[fractional][0]:g}); hold out word types "
                         f"instead (split_types) or round the counts")
    rng = as_rng(seed)
    parts = [[], []]
    for d in range(corpus.num_docs):
        lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
        ids, counts = corpus.word_ids[lo:hi], corpus.counts[lo:hi].astype(np.int64)
        tokens = np.repeat(ids, counts)
        rng.shuffle(tokens)
        cut = int(round(fraction * len(tokens)))
        for part, chunk in zip(parts, (tokens[:cut], tokens[cut:]), strict=True):
            words, n = np.unique(chunk, return_counts=True)
            part.append((words, n))
    out = []
    for part in parts:
        lengths = [len(w) for w, _ in part]
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        ids = np.concatenate([w for w, _ in part]) if part else np.zeros(0, dtype=np.int64)
        counts = np.concatenate([n for _, n in part]).astype(np.float64) if part else np.zeros(0)
        out.append(Corpus(ptr, ids, counts, corpus.vocab_size, corpus.vocab))
    return out[0], out[1]


def split_types(corpus, heldout_fraction=0.2, seed=0, min_size=10):
    """Document completion split by word *types* (bnpy's protocol for its published held-out
    scores): in each document ``ceil(heldout_fraction * U_d)`` of its ``U_d`` distinct words
    (at least ``min_size``), with all their counts, are held out and the rest observed.
    Documents with fewer than ``2 * min_size`` distinct words are left out of both parts.

    :returns: ``(observed, heldout, kept document indices)``.
    """
    heldout_fraction = check_fraction(heldout_fraction, "heldout_fraction")
    min_size = as_count(min_size, "min_size")
    rng = as_rng(seed)
    parts, kept = ([], []), []
    for d in range(corpus.num_docs):
        lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
        unique = hi - lo
        n_out = max(min_size, int(np.ceil(heldout_fraction * unique)))
        if unique - n_out < min_size:
            continue
        order = rng.permutation(unique)
        kept.append(d)
        for part, chosen in zip(parts, (order[n_out:], order[:n_out]), strict=True):
            chosen = np.sort(chosen) + lo
            part.append((corpus.word_ids[chosen], corpus.counts[chosen]))
    out = []
    for part in parts:
        ptr = np.concatenate([[0], np.cumsum([len(w) for w, _ in part])]).astype(np.int64)
        ids = np.concatenate([w for w, _ in part]) if part else np.zeros(0, dtype=np.int64)
        counts = np.concatenate([c for _, c in part]) if part else np.zeros(0)
        out.append(Corpus(ptr, ids, counts, corpus.vocab_size, corpus.vocab))
    return out[0], out[1], np.array(kept, dtype=np.int64)

