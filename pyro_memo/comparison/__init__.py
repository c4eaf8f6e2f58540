"""One harness for every model: a task (data + scorer + columns) runs its registered methods x
seeds under one budget, scored alike, written as the same tables and plots.

Tasks: :class:`MixtureTask` (DP mixtures, :func:`compare`), :class:`TopicTask` (HDP topic
models, :func:`compare_topics`) and :class:`RelationalTask` (relational
models, :func:`compare_relational`); the loop is :func:`run_comparison`.
"""

from .harness import (
    Budget,
    Table,
    Task,
    markdown_tables,
    run_comparison,
    summarize,
    write_outputs,
)
from .methods import METHODS, Run, Settings
from .mixture_task import COLUMNS, MIXTURE_TABLE, MixtureTask, compare, load_array_split, merge_outputs, read_outputs
from .relational_methods import RELATIONAL_METHODS, BlockDensity, RelationalRun, RelationalSettings
from .relational_task import RELATIONAL_COLUMNS, RELATIONAL_TABLE, RelationalTask, compare_relational
from .topic_methods import (
    TOPIC_METHODS,
    TopicRun,
    TopicSettings,
    add_tomotopy_documents,
    bag_of_words,
    point_estimate,
    posterior_from_topics,
    run_tomotopy_lda,
    tomotopy_lda_model,
    tomotopy_lda_posterior,
    tomotopy_topics,
)
from .topic_task import TOPIC_COLUMNS, TOPIC_TABLE, TopicTask, compare_topics

__all__ = ["RELATIONAL_COLUMNS", "RELATIONAL_METHODS", "RELATIONAL_TABLE", "BlockDensity", "RelationalRun",
           "RelationalSettings", "RelationalTask", "compare_relational",
           "COLUMNS", "METHODS", "MIXTURE_TABLE", "TOPIC_COLUMNS", "TOPIC_METHODS", "TOPIC_TABLE", "Budget",
           "MixtureTask", "Run", "Settings", "Table", "Task", "TopicRun", "TopicSettings", "TopicTask", "compare",
           "compare_topics", "load_array_split", "markdown_tables", "merge_outputs", "read_outputs",
           "run_comparison", "summarize", "write_outputs", "add_tomotopy_documents", "bag_of_words",
           "point_estimate", "posterior_from_topics", "run_tomotopy_lda", "tomotopy_lda_model",
           "tomotopy_lda_posterior",
           "tomotopy_topics"]
