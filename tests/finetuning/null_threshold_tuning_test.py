"""SQuAD 2.0 fine-tuning reports best_f1/best_f1_thresh and writes the threshold where export reads it."""

import dataclasses
import json
import os
import random

import pytest

from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.finetuning.finetuning_run import preprocessing_info
from xlnet_tf.finetuning.finetuning_run import tuned_task

from finetune_cli_test import COLORS, FILLER, NO_DROPOUT, SPAN_SETTINGS, _run


def _squad_v2(path, n=24):
    """SQuAD 2.0 JSON: "which color?" is answerable when the passage has a color, else not."""
    rng = random.Random(0)
    data = []
    for qid in range(n):
        words = rng.sample(FILLER, 5)
        qa = {"id": f"q{qid}", "question": "which color?"}
        if qid % 3:
            color = rng.choice(COLORS)
            words.insert(rng.randrange(6), color)
            context = " ".join(words)
            qa.update(answers=[{"text": color, "answer_start": context.index(color)}], is_impossible=False)
        else:
            context = " ".join(words)
            qa.update(answers=[], is_impossible=True)
        data.append({"context": context, "qas": [qa]})
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": data}]}))


@pytest.mark.slow
def test_finetune_writes_the_best_f1_threshold_into_the_final_preset(preset, tmp_path):  # noqa: F811
    _squad_v2(tmp_path / "squad.json")
    workdir = str(tmp_path / "run")
    args = ["--init", preset, "--workdir", workdir, *SPAN_SETTINGS, "--set", "task.version_2=true",
            "--set", f"task.train_file={tmp_path / 'squad.json'}",
            "--set", f"task.eval_file={tmp_path / 'squad.json'}",
            "--set", "training.global_batch_size=8", "--set", "training.train_steps=4",
            "--set", "training.steps_per_epoch=4", "--set", "optimizer.warmup_steps=1",
            "--set", "evaluation.every_epoch=false", *sum((["--set", s] for s in NO_DROPOUT), [])]
    assert _run(args) == 0
    results = json.load(open(os.path.join(workdir, "eval_results.json")))
    for key in ("exact_match", "f1", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
                "best_f1_has_answer_f1", "best_f1_no_answer_f1"):
        assert key in results, key
    assert results["best_f1"] >= results["f1"] - 1e-9  # the config's 0.0 is one of the candidates
    assert (results["has_answer_total"], results["no_answer_total"]) == (16, 8)
    preprocessing = json.load(open(os.path.join(workdir, "final", "preprocessing.json")))
    assert preprocessing["version_2"] is True
    assert preprocessing["null_score_threshold"] == results["best_f1_thresh"]


def test_tuned_task_only_changes_squad_v2_with_the_option_on():
    results = {"best_f1_thresh": -1.25, "best_f1": 70.0}
    v2 = TaskSpec(task_type="span", version_2=True, null_score_threshold=0.0)
    assert preprocessing_info(tuned_task(v2, results))["null_score_threshold"] == -1.25
    off = dataclasses.replace(v2, tune_null_threshold=False)
    assert tuned_task(off, results).null_score_threshold == 0.0
    v1 = TaskSpec(task_type="span", version_2=False)
    assert tuned_task(v1, results).null_score_threshold is None
    assert tuned_task(v2, {"f1": 50.0}).null_score_threshold == 0.0  # no search ran
