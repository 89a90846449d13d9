"""`TaskSpec`: the typed specification of one fine-tuning task.

Example:
>>> from xlnet_tf.tasks.task_spec import TaskSpec
>>> spec = TaskSpec(task_type="classification", train_file="train.jsonl", num_classes=2)
>>> spec.sequence_length
128
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """The typed task specification: what the model learns and where the examples come from.

    The `task` section of a fine-tuning config, and what `xlnet-tf prepare-finetuning`,
    export and `predict` read a task from. It is resolved once, at the top of a run
    (`resolve_task`, then `task_from_data`), and handed down.

    Data: `dataset` (a TFDS name from `xlnet_tf.data.finetuning_tasks.DATASETS`),
    local files `train_file` / `eval_file` (JSONL, CSV/TSV, SQuAD JSON), or
    `records_dir`, the TFRecords of `xlnet-tf prepare-finetuning` (used for
    training, and for evaluation when no eval file/dataset is set; its
    manifest fixes the task type and sequence length).
    Fields left empty/0/null are filled from the dataset's spec by
    `xlnet_tf.finetuning.finetuning_config.resolve_task`.

    `max_segments` (classification, regression, multiple choice): a document is
    packed like one window but at `max_segments * sequence_length` pieces and
    fed as `max_segments` segments of `sequence_length`, the earlier ones through
    the backbone's recurrence memory (`model.memory_length`); longer documents
    keep their first pieces (the packer's truncation), and the evaluation counts
    them (`truncated_examples`). 1 is the single-window layout.
    """

    task_type: str = ""
    dataset: str = ""
    train_file: str = ""
    eval_file: str = ""
    records_dir: str = ""
    train_split: str = ""
    eval_split: str = ""
    data_dir: str = ""
    text_fields: list[str] | None = None
    label_field: str = ""
    label_names: list[str] | None = None
    num_classes: int = 0
    sequence_length: int = 128
    truncate: str = "longest_first"
    lowercase: bool = False
    max_qa_length: int = 128
    max_query_length: int = 64
    doc_stride: int = 128
    max_answer_length: int = 64
    null_score_threshold: float | None = None
    version_2: bool = False
    # SQuAD 2.0 span tasks: the final evaluation's best-F1 threshold replaces
    # null_score_threshold in the final preset's preprocessing.json.
    tune_null_threshold: bool = True
    start_n_top: int = 5
    end_n_top: int = 5
    head_dropout: float = 0.1
    metrics: list[str] | None = None
    max_train_examples: int = 0
    max_eval_examples: int = 0
    max_segments: int = 1

    def replace(self, **changes):
        """A copy of this specification with `changes` (the task types fill and tune fields with it).

        Example:
        >>> from xlnet_tf.tasks.task_spec import TaskSpec
        >>> TaskSpec(task_type="regression").replace(num_classes=1).num_classes
        1
        """
        return dataclasses.replace(self, **changes)
