"""What each known fine-tuning dataset looks like: task type, text fields, labels, splits, metrics.

`DATASETS` maps a TFDS name to a `DatasetSpec`; `xlnet_tf.data.finetuning` uses
it to turn TFDS examples into the canonical fields of each task type:

- classification / regression: `text`, optional `text_pair`, `label`;
- span (SQuAD): `id`, `context`, `question`, `answer_text`, `answer_start`, `is_impossible`;
- multiple_choice (RACE): `context`, `question`, `options` [C], `label`;
- token_classification (CoNLL): `tokens` [W], `tags` [W].
"""

import dataclasses

from xlnet_tf import tasks

METRICS = ("accuracy", "f1", "macro_f1", "matthews", "pearson_spearman", "squad")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One TFDS dataset's layout.

    Args:
        task_type: a task type of the task table (`xlnet_tf.tasks`).
        text_fields: TFDS feature names of the text (one or two, A then B).
        label_field: TFDS feature name of the label.
        num_classes: classes (1 for regression; 0 when not a class task).
        label_names: names of the classes, in id order.
        train_split, eval_split: default TFDS splits.
        metrics: evaluation metrics, the first one is the headline.
    """

    task_type: str
    text_fields: tuple[str, ...] = ()
    label_field: str = "label"
    num_classes: int = 0
    label_names: tuple[str, ...] = ()
    train_split: str = "train"
    eval_split: str = "validation"
    metrics: tuple[str, ...] = ("accuracy",)
    version_2: bool = False
    num_choices: int = 0


def _glue(fields, names, metrics=("accuracy",), eval_split="validation"):
    return DatasetSpec(tasks.CLASSIFICATION, fields, num_classes=len(names), label_names=tuple(names),
                       eval_split=eval_split, metrics=metrics)


DATASETS = {
    "glue/cola": _glue(("sentence",), ["unacceptable", "acceptable"], ("matthews", "accuracy")),
    "glue/sst2": _glue(("sentence",), ["negative", "positive"]),
    "glue/mrpc": _glue(("sentence1", "sentence2"), ["not_equivalent", "equivalent"], ("f1", "accuracy")),
    "glue/qqp": _glue(("question1", "question2"), ["not_duplicate", "duplicate"], ("f1", "accuracy")),
    "glue/stsb": DatasetSpec(tasks.REGRESSION, ("sentence1", "sentence2"), num_classes=1,
                             metrics=("pearson_spearman",)),
    "glue/mnli": _glue(("premise", "hypothesis"), ["entailment", "neutral", "contradiction"],
                       eval_split="validation_matched"),
    "glue/mnli_matched": _glue(("premise", "hypothesis"), ["entailment", "neutral", "contradiction"],
                               eval_split="validation"),
    "glue/mnli_mismatched": _glue(("premise", "hypothesis"),
                                  ["entailment", "neutral", "contradiction"], eval_split="validation"),
    "glue/qnli": _glue(("question", "sentence"), ["entailment", "not_entailment"]),
    "glue/rte": _glue(("sentence1", "sentence2"), ["entailment", "not_entailment"]),
    "glue/wnli": _glue(("sentence1", "sentence2"), ["not_entailment", "entailment"]),
    "glue/ax": _glue(("premise", "hypothesis"), ["entailment", "neutral", "contradiction"],
                     ("matthews",), eval_split="test"),
    "imdb_reviews": _glue(("text",), ["neg", "pos"], eval_split="test"),
    "imdb_reviews/plain_text": _glue(("text",), ["neg", "pos"], eval_split="test"),
    "yelp_polarity_reviews": _glue(("text",), ["1", "2"], eval_split="test"),
    "ag_news_subset": _glue(("title", "description"), ["World", "Sports", "Business", "Sci/Tech"],
                            eval_split="test"),
    "squad/v1.1": DatasetSpec(tasks.SPAN, metrics=("squad",)),
    "squad/v2.0": DatasetSpec(tasks.SPAN, metrics=("squad",), version_2=True),
    "race/high": DatasetSpec(tasks.MULTIPLE_CHOICE, num_classes=4, eval_split="dev", num_choices=4),
    "race/middle": DatasetSpec(tasks.MULTIPLE_CHOICE, num_classes=4, eval_split="dev", num_choices=4),
    "conll2003": DatasetSpec(tasks.TOKEN_CLASSIFICATION, label_field="ner", num_classes=9,
                             label_names=("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
                                          "B-MISC", "I-MISC"),
                             metrics=("accuracy", "macro_f1")),
}


def dataset_spec(name: str) -> DatasetSpec:
    """The spec of a known TFDS dataset; a clear error listing the known names otherwise."""
    if name in DATASETS:
        return DATASETS[name]
    raise ValueError(f"Unknown fine-tuning dataset {name!r}. Known TFDS datasets: {sorted(DATASETS)}. "
                     "For other data use task.train_file / task.eval_file (JSONL, CSV/TSV or SQuAD JSON).")

