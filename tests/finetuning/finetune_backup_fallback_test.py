"""A fine-tuning run killed after a backup, its latest backup then cut in half: the rerun resumes from `.bkp`.

The fine-tuning twin of the "backup weights" case of `tests/training/crash_resume_test.py`:
both runs take their work directory through `xlnet_tf.training.run_setup`, so the
same damage gets the same recovery (a warning naming the file, the previous backup's step).
"""

import json
import os
import warnings

import pytest

from tests.training.helpers import SimulatedKill, kill_after_backup, sentiment_jsonl
from xlnet_tf.storage import atomic_files

STEPS_PER_EPOCH, TRAIN_STEPS = 2, 6


def _half_write(path):
    """Cuts `path` to half its length, as a kill inside a non-atomic write would."""
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


@pytest.mark.large
@pytest.mark.slow
def test_truncated_latest_backup_resumes_from_the_previous_one(preset, tmp_path, monkeypatch, capsys):
    from xlnet_tf.finetuning.finetuning_config import load_finetune_config
    from xlnet_tf.finetuning.finetuning_run import run_finetuning

    (tmp_path / "train.jsonl").write_text(sentiment_jsonl(32, 0))
    config = load_finetune_config([], overrides=[
        f"training.init_from={preset}", f"task.train_file={tmp_path / 'train.jsonl'}",
        "task.sequence_length=16", "training.global_batch_size=8",
        f"training.train_steps={TRAIN_STEPS}", f"training.steps_per_epoch={STEPS_PER_EPOCH}",
        "training.log_every_steps=1", "optimizer.warmup_steps=1", "training.verbose=0"])
    workdir = str(tmp_path / "run")

    restore = kill_after_backup(monkeypatch, 2)
    with pytest.raises(SimulatedKill):
        run_finetuning(config, workdir)
    restore()
    latest = os.path.join(workdir, "backup", "latest.weights.h5")
    assert os.path.exists(latest + ".bkp")  # The previous backup (epoch 1) is kept.
    _half_write(latest)
    capsys.readouterr()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = run_finetuning(config, workdir)
    messages = [str(w.message) for w in caught]
    assert any(latest in m and "instead" in m for m in messages), messages
    assert summary["first_step"] == STEPS_PER_EPOCH  # Epoch 1, from latest.weights.h5.bkp.
    assert f"Resuming at step {STEPS_PER_EPOCH} of {TRAIN_STEPS}" in capsys.readouterr().out
    assert atomic_files.weights_file_attributes(latest)["xlnet_backup_epoch"] == \
        TRAIN_STEPS // STEPS_PER_EPOCH
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f if line.strip()]
    assert steps[-1] == TRAIN_STEPS and os.path.isdir(os.path.join(workdir, "final"))
