"""The end of a fine-tuning run: the final evaluation and the fine-tuned task preset.

`eval_results.json` holds the final evaluation; `final/` the task preset in keras-hub's
layout plus `preprocessing.json`, the serving metadata (task type, packing, text fields,
label names, the tuned SQuAD `null_score_threshold`), which `XLNetClassifier.from_preset(...)`
& co., `load_task_preset` and `xlnet-tf export` read.
"""

import logging
import os

from xlnet_tf.data import finetuning as data
from xlnet_tf.finetuning.evaluation import evaluate
from xlnet_tf.formats.special_tokens import SPECIAL_TOKEN_IDS
from xlnet_tf.storage import atomic_files
from xlnet_tf.tasks import task_type

_log = logging.getLogger(__name__)
FINAL_DIR = "final"


def finish_run(model, inputs, workdir):
    """The final evaluation (`eval_results.json`) and the final task preset (`final/`), written by the chief.

    Args:
        model: the run's trained task model.
        inputs: the run's `FinetuningInputs`.
        workdir: the work directory.

    Returns:
        The run summary's entries: `eval` (the final metrics, with an evaluation set),
        `final_dir`, and what the task type reports of its tuned task (`summary_fields`).

    Example:
    >>> # skip-example: evaluates and saves the model a run trained in `workdir`
    >>> from xlnet_tf.finetuning.final_preset import finish_run
    >>> finish_run(model, inputs, "runs/mrpc")["final_dir"]
    'runs/mrpc/final'
    """
    config = inputs.config
    task = config.task
    summary = {}
    if inputs.has_eval:
        results = evaluate(model, task, inputs.tokenizer, config.evaluation.batch_size,
                           data_dir=task.data_dir or None, collapse_warning=config.evaluation.collapse_warning)
        summary["eval"] = results
        if results.get("truncated_examples"):
            print(f"{results['truncated_examples']} of the evaluation examples were longer than "
                  f"task.max_segments x task.sequence_length = {task.max_segments} x {task.sequence_length} "
                  "pieces and were cut to their first pieces (truncated_examples in eval_results.json).")
        atomic_files.write_json(os.path.join(workdir, "eval_results.json"),
                                {"step": config.training.train_steps, **results})
        task = tuned_task(task, results)
        summary.update(inputs.task_type.summary_fields(task))
    final_dir = os.path.join(workdir, FINAL_DIR)
    model.save_to_preset(final_dir, vocabulary_file=inputs.preset.vocabulary, preprocessing=preprocessing_info(task))
    summary["final_dir"] = final_dir
    return summary


def tuned_task(task, results):
    """`task` with what the final evaluation tunes (SQuAD 2.0 with `tune_null_threshold`: the best-F1
    null threshold).

    The final preset's `preprocessing.json` then carries it, where `xlnet-tf export`
    (and so `predict`) reads `null_score_threshold`.
    """
    tuned = task_type(task.task_type).tuned_spec(task, results)
    changes = {k: v for k, v in vars(tuned).items() if v != getattr(task, k)}
    if changes:
        _log.info("The final evaluation tuned %s.", ", ".join(
            f"task.{k} {getattr(task, k)} -> {v}" for k, v in changes.items()))
    return tuned


def preprocessing_info(task):
    """What `preprocessing.json` of a task preset records (how raw text becomes features)."""
    entry = task_type(task.task_type)
    pair = data.has_text_pair(task) if entry.pairs else False
    fields = list(task.text_fields or (["text", "text_pair"] if pair else ["text"]))
    info = {"task_type": entry.name, "sequence_length": task.sequence_length,
            "max_segments": task.max_segments, "lowercase": task.lowercase, "truncate": task.truncate,
            "text_fields": fields[:2] if pair else fields[:1], "has_text_pair": pair,
            "label_names": list(task.label_names) if task.label_names else None,
            "num_classes": task.num_classes, "special_ids": {k: SPECIAL_TOKEN_IDS[k] for k in ("cls", "sep", "pad")},
            "segment_ids": {"a": 0, "b": 1, "cls": 2, "pad": 4}}
    info.update(entry.preprocessing_fields(task, has_question=data.has_question(task)))
    return info
