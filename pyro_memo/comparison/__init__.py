"""One harness for memoized VB and its baselines: same model, data, seeds and objective."""

from .harness import COLUMNS, compare, load_array_split, markdown_tables, merge_outputs, read_outputs, summarize
from .methods import METHODS, Budget, Run, Settings

__all__ = ["COLUMNS", "METHODS", "Budget", "Run", "Settings", "compare", "load_array_split", "markdown_tables",
           "merge_outputs", "read_outputs", "summarize"]
