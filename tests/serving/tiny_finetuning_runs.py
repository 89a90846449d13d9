"""Tiny `xlnet-tf finetune` work directories of every task type, for the export tests.

Each run is real (the CLI, one training step on a handful of generated examples, no
evaluation), so its work directory is exactly what a user has after `xlnet-tf finetune`:
the resolved `config.yaml` and `final/` (keras-hub's layout, the preprocessor attached,
`preprocessing.json`). The runs happen in a child process (`python -m
tests.serving.tiny_finetuning_runs ROOT`): fine-tuning seeds with
`keras.utils.set_random_seed`, which clears TensorFlow's kernel cache and with it the
SentencePiece resources of tokenizers other tests of the session built. The
`finetuned_workdir` fixture of `conftest.py` runs them once per session.
"""

import json
import os
import subprocess
import sys

import numpy as np

VOCABULARY = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
LENGTH = 16
SEGMENTS = 3
TEXTS = ["the old house was good", "a bad day by the river", "the river was lovely and old", "an awful day"]
PAIRS = ["a house", "the day was bad", "", "lovely river"]
CHOICES = ["the house", "the river", "a day"]
# Task name -> task settings beyond the common ones (`long_documents` is a classifier of 3 segments).
TASKS = {
    "classification": [],
    "regression": ["task.task_type=regression"],
    "span": ["task.task_type=span", "task.max_query_length=4", "task.doc_stride=8"],
    "token_classification": ["task.task_type=token_classification", "task.label_names=[O,B]"],
    "multiple_choice": ["task.task_type=multiple_choice", "task.max_qa_length=8"],
    "long_documents": [f"task.max_segments={SEGMENTS}", "model.memory_length=8"],
}


def write_backbone_preset(path):
    """A tiny backbone preset with the test vocabulary (weights drawn at 0.1, so outputs are not flat)."""
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_config import XLNetConfig

    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8,
                                         hidden_dim=16, intermediate_dim=32, initializer_range=0.1))
    ones = np.ones((1, 4), "int32")
    backbone({"token_ids": ones, "segment_ids": ones * 0, "padding_mask": ones})
    backbone.save_to_preset(str(path), vocabulary_file=VOCABULARY)
    return str(path)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def write_training_file(root, task):
    """The training file of `task` under `root` (JSONL, or SQuAD JSON for `span`)."""
    if task == "classification":
        rows = [{"text": t, "text_pair": p, "label": "ab"[i % 2]} for i, (t, p) in enumerate(zip(TEXTS, PAIRS))]
    elif task == "regression":
        rows = [{"text": t, "label": i * 0.5} for i, t in enumerate(TEXTS)]
    elif task == "token_classification":
        rows = [{"tokens": t.split(), "tags": ["BO"[j % 2] for j in range(len(t.split()))]} for t in TEXTS]
    elif task == "multiple_choice":
        rows = [{"context": t, "question": "where?", "options": CHOICES, "label": i % 3}
                for i, t in enumerate(TEXTS)]
    elif task == "long_documents":
        rows = [{"text": (t + " ") * 4, "label": "ab"[i % 2]} for i, t in enumerate(TEXTS)]
    else:
        paragraphs = [{"context": t, "qas": [{"id": f"q{i}", "question": "which?", "answers": [
            {"text": t.split()[1], "answer_start": t.index(" " + t.split()[1]) + 1}]}]} for i, t in enumerate(TEXTS)]
        path = root / "squad.json"
        path.write_text(json.dumps({"version": "v1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
        return str(path)
    return _jsonl(root / f"{task}.jsonl", rows)


def run_tiny_finetuning(root, preset, task):
    """`xlnet-tf finetune` of `task` for one step; returns the work directory."""
    from xlnet_tf.cli.main import main

    workdir = str(root / task)
    settings = [f"task.train_file={write_training_file(root, task)}", f"task.sequence_length={LENGTH}",
                "training.global_batch_size=2", "training.train_steps=1", "training.steps_per_epoch=1",
                "training.verbose=0", "optimizer.warmup_steps=0", "evaluation.every_epoch=false",
                "model.dropout=0.0", "model.attention_dropout=0.0", *TASKS[task]]
    code = main(["finetune", "--init", preset, "--workdir", workdir, *[a for s in settings for a in ("--set", s)]])
    assert code == 0, f"xlnet-tf finetune of {task} exited with {code}"
    return workdir


def run_all_in_a_child_process(root):
    """Every task of `TASKS` fine-tuned under `root` by a child process; returns `{task: workdir}`."""
    repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", KERAS_BACKEND="tensorflow",
                       PYTHONPATH=repository)
    done = subprocess.run([sys.executable, "-m", "tests.serving.tiny_finetuning_runs", str(root)], cwd=repository,
                          env=environment, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return {task: str(root / task) for task in TASKS}


def write_fake_finetuning_workdir(path, task_class="XLNetClassifier"):
    """The files that make `path` look like a fine-tuning run (config.yaml with a task, final/task.json)
    to the checks that run before anything is loaded; nothing can be exported from it."""
    (path / "final").mkdir(parents=True)
    (path / "config.yaml").write_text("task:\n  task_type: classification\n")
    (path / "final" / "task.json").write_text(json.dumps({"class_name": task_class}))
    return str(path)


if __name__ == "__main__":
    import pathlib

    output = pathlib.Path(sys.argv[1])
    backbone = write_backbone_preset(output / "preset")
    for name in TASKS:
        run_tiny_finetuning(output, backbone, name)
