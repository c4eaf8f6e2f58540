"""One harness for memoized VB and its baselines: same model, data, seeds and objective."""

from .harness import COLUMNS, compare, load_array_split, markdown_tables, merge_outputs, read_outputs, summarize
from .methods import METHODS, Budget, Run, Settings
from .topic_harness import TOPIC_COLUMNS, compare_topics
from .topic_methods import (
    TOPIC_METHODS,
    TopicRun,
    TopicSettings,
    add_tomotopy_documents,
    bag_of_words,
    posterior_from_topics,
    tomotopy_topics,
)

__all__ = ["COLUMNS", "METHODS", "TOPIC_COLUMNS", "TOPIC_METHODS", "Budget", "Run", "Settings", "TopicRun",
           "TopicSettings", "compare", "compare_topics", "load_array_split", "markdown_tables", "merge_outputs",
           "read_outputs", "summarize", "add_tomotopy_documents", "bag_of_words", "posterior_from_topics",
           "tomotopy_topics"]
