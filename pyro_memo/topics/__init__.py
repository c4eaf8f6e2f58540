"""The HDP topic model: corpora, its Pyro model, memoized inference and held-out scores."""

from .corpus import (
    Corpus,
    fetch_wikipedia,
    from_counts,
    load_wikipedia,
    read_ldac,
    split_documents,
    split_tokens,
    split_types,
)
from .hdp_posterior import HDPPosterior
from .heldout import doc_topic_weights, document_completion, top_words
from .memoized_hdp import HDPFitResult, HDPState, MemoizedHDP
from .stochastic_hdp import StochasticHDP
from .topic_birth import TopicBirthMove
from .topic_delete import TopicDeleteMove
from .topic_merge import TopicMergeMove
from .topic_summary import TopicSummary

__all__ = [
    "Corpus",
    "HDPFitResult",
    "HDPPosterior",
    "HDPState",
    "MemoizedHDP",
    "StochasticHDP",
    "TopicBirthMove",
    "TopicDeleteMove",
    "TopicMergeMove",
    "TopicSummary",
    "doc_topic_weights",
    "document_completion",
    "top_words",
    "fetch_wikipedia",
    "from_counts",
    "load_wikipedia",
    "read_ldac",
    "split_documents",
    "split_tokens",
    "split_types",
]
