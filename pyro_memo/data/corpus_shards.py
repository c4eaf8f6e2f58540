"""A bag-of-words corpus sharded on disk: one ``.npz`` file of documents per batch, so a memoized HDP fit
holds one shard at a time (plus the memo), and a Dask executor reads each shard on the worker that owns it.

Layout of a shard directory (written by :func:`write_corpus_shards`)::

    corpus.json        {"format": "pyro-memo corpus shards", "version": 1, "vocab_size": V,
                        "shards": ["shard-00000.npz", ...], "docs": [D_0, ...], "tokens": [T_0, ...]}
    shard-00000.npz    doc_ptr, word_ids, counts of shard 0's documents (a :class:`~pyro_memo.topics.Corpus`)
    ...
    vocab.txt          optional: one word per line
"""

import contextlib
import json
import math
import os

import numpy as np

from ..checks import as_positive_int, as_rng, as_seed
from .batch_source import BatchSource
from .corpus import Corpus, from_documents, ldac_documents, read_vocab
from .files import DAMAGED_FILE_ERRORS, write_atomically

__all__ = ["CorpusShards", "is_corpus_shards", "shard_ldac", "write_corpus_shards"]

FORMAT, VERSION, INDEX = "pyro-memo corpus shards", 1, "corpus.json"


def is_corpus_shards(path):
    """Whether ``path`` is a directory written by :func:`write_corpus_shards`."""
    return isinstance(path, (str, os.PathLike)) and os.path.isfile(os.path.join(path, INDEX))


def write_corpus_shards(corpus, directory, num_shards=None, docs_per_shard=None, seed=None):
    """Write ``corpus`` to ``directory`` as shards of documents: ``num_shards`` (or shards of
    ``docs_per_shard`` documents), consecutive documents by default, a random partition with ``seed``.
    Every file is written atomically and the index last, so an interrupted write leaves no readable
    shard set. Corpora larger than memory are written shard by shard with :meth:`CorpusShards.append`.

    :returns: the :class:`CorpusShards` of ``directory``.
    :raises ValueError: naming ``num_shards`` or ``docs_per_shard`` unless it is a positive integer (``0`` divided
        by zero, ``2.5`` was truncated), ``seed`` for a bad seed.
    """
    if (num_shards is None) == (docs_per_shard is None):
        raise ValueError("give one of num_shards and docs_per_shard")
    n = corpus.num_docs
    if num_shards is None:
        num_shards = -(-n // as_positive_int(docs_per_shard, "docs_per_shard"))
    if not 1 <= as_positive_int(num_shards, "num_shards") <= n:
        raise ValueError(f"num_shards must lie in [1, {n}] (the number of documents); got {num_shards}")
    order = np.arange(n) if seed is None else np.random.default_rng(as_seed(seed)).permutation(n)
    parts = [np.sort(part) for part in np.array_split(order, int(num_shards))]
    shards = CorpusShards.create(directory, corpus.vocab_size, corpus.vocab)
    with _whole_or_unreadable(directory):
        for part in parts:
            shards.append(corpus.subset(part))
    return shards


def shard_ldac(path, directory, docs_per_shard, vocab_path=None, vocab_size=None):
    """Shard an LDA-C file (one document per line, ``N id:count ...``) into ``directory``, streaming:
    memory holds one shard's documents, however large the file. Shards hold consecutive documents.

    :param vocab_path: optional vocabulary file (its length sets ``V``; copied as ``vocab.txt``).
    :param int vocab_size: ``V`` without a vocabulary (default: the largest id + 1, found by a first pass).
    :returns: the :class:`CorpusShards` of ``directory``.
    """
    docs_per_shard = as_positive_int(docs_per_shard, "docs_per_shard")
    vocab = None if vocab_path is None else read_vocab(vocab_path)
    if vocab is not None:
        vocab_size = len(vocab)
    elif vocab_size is None:
        vocab_size = max((int(ids.max()) for ids, _ in ldac_documents(path) if len(ids)), default=0) + 1
    shards = CorpusShards.create(directory, vocab_size, vocab)
    with _whole_or_unreadable(directory):
        pending = []
        for document in ldac_documents(path, vocab_size):
            pending.append(document)
            if len(pending) == docs_per_shard:
                shards.append(from_documents(pending, vocab_size, vocab))
                pending = []
        if pending:
            shards.append(from_documents(pending, vocab_size, vocab))
        if shards.num_batches == 0:
            raise ValueError(f"{path}: no documents")
    return shards


@contextlib.contextmanager
def _whole_or_unreadable(directory):
    """Shards written inside either all get into ``directory``'s index, or the index goes: a write that failed
    or was interrupted (a bad word id on line 5, Ctrl-C) left an index of the shards written so far, a readable
    corpus that a fit then took, silently, for the whole one."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(directory, INDEX))
        raise


class CorpusShards(BatchSource):
    """A corpus sharded on disk (see the module's layout), read one shard at a time; shards are the batches.

    :param directory: a directory written by :func:`write_corpus_shards` or :meth:`create` / :meth:`append`.
    :ivar int vocab_size: ``V``.
    :ivar list vocab: the words, or ``None``.
    """

    portable = True

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        index = os.path.join(self.directory, INDEX)
        try:
            with open(index, encoding="utf-8") as fh:
                meta = json.load(fh)
        except (FileNotFoundError, NotADirectoryError):
            raise ValueError(f"{self.directory}: not a corpus shard directory (no {INDEX})") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{index}: not valid JSON ({err})") from None
        self.meta = meta = _check_index(meta, index)
        self.vocab_size = int(meta["vocab_size"])
        self.vocab = self._read_vocab()
        self.num_batches = len(meta["shards"])
        self.num_items = int(sum(meta["docs"]))

    @classmethod
    def create(cls, directory, vocab_size, vocab=None):
        """An empty shard set in ``directory`` (created; an existing shard index there is an error)."""
        os.makedirs(directory, exist_ok=True)
        if is_corpus_shards(directory):
            raise ValueError(f"{directory}: already holds corpus shards ({INDEX}); write to a new directory")
        if vocab is not None:
            if len(vocab) != int(vocab_size):
                raise ValueError(f"vocab has {len(vocab)} words but vocab_size is {vocab_size}")
            _write_text(os.path.join(directory, "vocab.txt"), "".join(w + "\n" for w in vocab))
        meta = {"format": FORMAT, "version": VERSION, "vocab_size": int(vocab_size), "shards": [], "docs": [],
                "tokens": []}
        _write_index(directory, meta)
        return cls(directory)

    def append(self, corpus):
        """Add ``corpus`` (a :class:`~pyro_memo.topics.Corpus` over the same vocabulary) as the next shard.

        :raises TypeError: for anything but a corpus (a count matrix: :func:`~pyro_memo.topics.from_counts`).
        """
        if not isinstance(corpus, Corpus):
            raise TypeError(f"append takes a pyro_memo.topics.Corpus (from_counts, from_documents); got "
                            f"{type(corpus).__name__}")
        if corpus.vocab_size != self.vocab_size:
            raise ValueError(f"the shard's vocabulary has {corpus.vocab_size} words; the shard set's has "
                             f"{self.vocab_size}")
        if corpus.num_docs == 0:
            raise ValueError("a shard needs at least one document")
        name = f"shard-{self.num_batches:05d}.npz"

        def write(tmp):
            with open(tmp, "wb") as fh:  # a handle: np.savez would append ".npz" to the temporary name
                np.savez(fh, doc_ptr=corpus.doc_ptr, word_ids=corpus.word_ids, counts=corpus.counts)

        write_atomically(os.path.join(self.directory, name), write)
        meta = dict(self.meta, shards=[*self.meta["shards"], name], docs=[*self.meta["docs"], corpus.num_docs],
                    tokens=[*self.meta["tokens"], corpus.num_tokens])
        _write_index(self.directory, meta)
        self.meta, self.num_batches, self.num_items = meta, self.num_batches + 1, self.num_items + corpus.num_docs

    def _read_vocab(self):
        path = os.path.join(self.directory, "vocab.txt")
        if not os.path.exists(path):
            return None
        vocab = read_vocab(path)
        if len(vocab) != self.vocab_size:
            raise ValueError(f"{path} has {len(vocab)} words; the index says vocab_size {self.vocab_size}")
        return vocab

    @property
    def num_docs(self):
        return self.num_items

    @property
    def num_tokens(self):
        return float(sum(self.meta["tokens"]))

    def __repr__(self):
        return (f"CorpusShards({self.directory!r}: {self.num_batches} shards, {self.num_docs} documents, "
                f"V = {self.vocab_size}, {self.num_tokens:.0f} tokens)")

    def batch(self, b):
        """Shard ``b`` as a :class:`~pyro_memo.topics.Corpus` (validated: a damaged shard is one clear error)."""
        path = os.path.join(self.directory, self.meta["shards"][b])
        try:
            with np.load(path) as f:
                shard = Corpus(f["doc_ptr"], f["word_ids"], f["counts"], self.vocab_size, self.vocab)
        except (OSError, KeyError, ValueError, *DAMAGED_FILE_ERRORS) as err:
            raise ValueError(f"{path}: not a readable corpus shard, damaged or truncated? ({type(err).__name__}: "
                             f"{str(err)[:160]})") from None
        if shard.num_docs != self.meta["docs"][b]:
            raise ValueError(f"{path} holds {shard.num_docs} documents; the index says {self.meta['docs'][b]}")
        if not math.isclose(shard.num_tokens, self.meta["tokens"][b], rel_tol=1e-9):
            raise ValueError(f"{path} holds {shard.num_tokens:.12g} tokens; the index {INDEX} says "
                             f"{self.meta['tokens'][b]:.12g} (the per-token bound counts the index's tokens): was "
                             f"the shard or the index changed since they were written? Write the shards again")
        return shard

    def sample(self, max_docs, seed=0):
        """Up to ``max_docs`` documents drawn uniformly at random without replacement across all shards,
        read one shard at a time (memory ``O(max_docs)``), as one :class:`~pyro_memo.topics.Corpus`."""
        rng = as_rng(seed)
        chosen = np.sort(rng.permutation(self.num_docs)[:int(max_docs)])
        starts = np.concatenate([[0], np.cumsum(self.meta["docs"])])
        parts = []
        for b in range(self.num_batches):
            inside = chosen[(chosen >= starts[b]) & (chosen < starts[b + 1])] - starts[b]
            if len(inside):
                parts.append(self.batch(b).subset(inside))
        return _concatenate(parts, self.vocab_size, self.vocab)


def _check_index(meta, index):
    """``meta``, the parsed ``index`` file, if it is a shard index: the format and version, a whole-number
    ``vocab_size`` and lists ``shards`` (file names), ``docs`` and ``tokens`` (counts) of one length each.

    :raises ValueError: naming ``index`` and what is missing or malformed (was a KeyError or AttributeError).
    """
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        found = (f"format {meta.get('format')!r}, version {meta.get('version')!r}" if isinstance(meta, dict)
                 else f"a JSON {type(meta).__name__}, not an object")
        raise ValueError(f"{index}: not a pyro-memo corpus shard index ({found})")
    missing = [key for key in ("vocab_size", "shards", "docs", "tokens") if key not in meta]
    if missing:
        raise ValueError(f"{index}: a corpus shard index without {', '.join(missing)}; damaged?")
    lists = [meta[key] for key in ("shards", "docs", "tokens")]
    if not isinstance(meta["vocab_size"], int) or isinstance(meta["vocab_size"], bool) or meta["vocab_size"] < 1 \
            or not all(isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1 \
            or not all(isinstance(s, str) for s in meta["shards"]) \
            or not all(isinstance(d, int) and d >= 0 for d in meta["docs"]) \
            or not all(isinstance(t, (int, float)) for t in meta["tokens"]):
        raise ValueError(f"{index}: a malformed corpus shard index (vocab_size must be a positive integer, shards a "
                         f"list of file names, docs and tokens lists of counts, one per shard); damaged?")
    return meta


def _concatenate(parts, vocab_size, vocab):
    offsets = np.cumsum([0] + [len(p.word_ids) for p in parts])
    doc_ptr = np.concatenate([[0]] + [p.doc_ptr[1:] + offset for p, offset in zip(parts, offsets, strict=False)])
    return Corpus(doc_ptr, np.concatenate([p.word_ids for p in parts]), np.concatenate([p.counts for p in parts]),
                  vocab_size, vocab)


def _write_text(path, text):
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    write_atomically(path, write)


def _write_index(directory, meta):
    _write_text(os.path.join(directory, INDEX), json.dumps(meta))
