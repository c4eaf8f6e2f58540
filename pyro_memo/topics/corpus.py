"""Old import path of :mod:`pyro_memo.data.corpus` (bag-of-words corpora) and of the Wikipedia corpus
(:mod:`pyro_memo.data.wikipedia`), kept working."""

from ..data.corpus import Corpus, from_counts, read_ldac, split_documents, split_tokens, split_types
from ..data.wikipedia import fetch_wikipedia, load_wikipedia

__all__ = ["Corpus", "fetch_wikipedia", "from_counts", "load_wikipedia", "read_ldac", "split_documents",
           "split_tokens", "split_types"]
