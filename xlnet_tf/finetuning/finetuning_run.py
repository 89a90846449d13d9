"""A whole fine-tuning run: model from a preset, `fit` with resume, evaluation, final task preset.

Work directory layout:
- `config.yaml`: the resolved config (has a `task` section; `training.init_from` is the preset);
- `metrics.jsonl`: training lines (step, loss, learning rate, ...) from the pretraining logger,
  plus one `{"step", "split": "eval", ...metrics}` line per evaluation;
- `backup/`: `RunBackup` state (crash-safe, the previous backup kept as `.bkp`); re-running the
  same command resumes;
- `RUN_LOCK`: while a run is active, who holds the work directory (one run at a time);
- `eval_results.json`: the final evaluation;
- `final/`: the fine-tuned task preset in keras-hub's layout (`config.json`, `model.weights.h5`,
  `metadata.json`, `task.json`, `task.weights.h5`, `preprocessor.json`, `tokenizer.json`,
  `assets/tokenizer/vocabulary.spm`, `spiece.model`) plus `preprocessing.json`, the serving
  metadata (task type, packing, text fields, label names, tuned SQuAD `null_score_threshold`);
  read by `XLNetClassifier.from_preset(...)` & co., `load_task_preset` and `xlnet-tf export`.

What the run reads before its first write (the task completed from its data, the initial
preset's vocabulary and config) is resolved once, at the top, by `FinetuningInputs` and handed
down. The strategy, batch split, work directory checks, run lock, config.yaml and backup choice are
the training engine's (`xlnet_tf.training.run_setup`, `xlnet_tf.training.run_directory`), the
same as pretraining's. The phases below each have their module: the model
(`finetuning_model`), `fit` (`finetuning_fit`), the final evaluation and preset (`final_preset`).
"""

import contextlib

import yaml

from xlnet_tf.finetuning.final_preset import finish_run
from xlnet_tf.finetuning.finetuning_config import FinetuneConfig
from xlnet_tf.finetuning.finetuning_fit import fit_task_model
from xlnet_tf.finetuning.finetuning_inputs import FinetuningInputs
from xlnet_tf.finetuning.finetuning_model import finetuning_model
from xlnet_tf.training.run_directory import open_run_directory
from xlnet_tf.training.run_setup import start_run


def run_finetuning(config: FinetuneConfig, workdir: str, *, strategy=None) -> dict:
    """Fine-tunes (or resumes) the run of `config` in `workdir`; returns a summary dict.

    Args:
        config: a `FinetuneConfig`; `training.init_from` names the initial preset
            (a backbone preset, or a task preset to continue from).
        workdir: work directory (created; re-running resumes from `backup/`). The chief
            holds `workdir/RUN_LOCK` from the first write to the end (`RunLock`).
        strategy (tf.distribute.Strategy | None): a `tf.distribute.Strategy` instead of resolving `config.distribution`.

    Returns:
        `{"eval": {...final metrics...}, "final_dir": path, "train_steps": int, ...}`.

    Example:
    >>> # skip-example: downloads GLUE MRPC from TensorFlow Datasets; tests/notebooks runs this call on the CPU
    >>> from xlnet_tf import finetune_config_from_dict, run_finetuning
    >>> config = finetune_config_from_dict({
    ...     "task": {"dataset": "glue/mrpc"},
    ...     "training": {"init_from": "runs/base/export/preset", "global_batch_size": 32}})
    >>> summary = run_finetuning(config, "runs/mrpc")  # doctest: +SKIP
    >>> summary["final_dir"]  # doctest: +SKIP
    'runs/mrpc/final'
    """
    inputs = FinetuningInputs.resolve(config)
    config, task = inputs.config, inputs.config.task
    with contextlib.ExitStack() as run_scope:  # releases the run lock when the run ends
        setup = start_run(config, workdir, run_scope, strategy,
                          paths={"task.train_file": task.train_file, "task.eval_file": task.eval_file,
                                 "task.records_dir": task.records_dir, "task.data_dir": task.data_dir,
                                 "workdir": workdir}, model_config=inputs.backbone_config)
        record = config.to_yaml() + setup.devices_yaml()
        if inputs.init_adjustments:
            record += yaml.safe_dump({"init_adjustments": inputs.init_adjustments}, sort_keys=False)
        # Before the first write: a second run on this work directory stops here, naming this one.
        directory = open_run_directory(workdir, record, run_scope, is_chief=setup.is_chief, task_id=setup.task_id,
                                       steps=(config.training.steps_per_epoch, config.training.train_steps))
        for notice in inputs.notices if setup.is_chief else ():
            print(notice)
        model = finetuning_model(inputs, setup)
        summary = fit_task_model(model, inputs, setup, directory, workdir)
        if setup.is_chief:
            summary.update(finish_run(model, inputs, workdir))
        return summary
