"""A pretraining work directory on TensorFlow's in-memory `ram://` filesystem: runs, resumes, exports."""

import json
import os
import uuid

import tensorflow as tf

from tests.training.helpers import TINY_RUN, cyclic_tokens, write_records
from xlnet_tf.storage import atomic_files


def test_pretraining_in_a_ram_workdir_writes_everything_through_gfile(tmp_path):
    from xlnet_tf.serving.export_pretrained import export_workdir
    from xlnet_tf.pretraining.pretraining_run import run_pretraining
    from xlnet_tf.pretraining.pretraining_config import load_run_config

    records = write_records(str(tmp_path / "records"), cyclic_tokens(2000), vocabulary_size=40)
    config = load_run_config([], overrides=list(TINY_RUN) + [
        f"data.train_files={records}", "training.train_steps=4", "training.steps_per_epoch=2"])
    workdir = f"ram://run-{uuid.uuid4().hex}"
    run_pretraining(config, workdir)

    names = set(tf.io.gfile.listdir(workdir))
    assert {"config.yaml", "metrics.jsonl", "checkpoints", "backup", "logs"} <= names
    assert "RUN_LOCK" not in names
    with tf.io.gfile.GFile(os.path.join(workdir, "metrics.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f.read().splitlines()] == [2, 4]
    checkpoint = os.path.join(workdir, "checkpoints", "ckpt-00000004.weights.h5")
    assert atomic_files.weights_file_attributes(checkpoint)["step"] == 4
    backup = os.path.join(workdir, "backup", "latest.weights.h5")
    assert atomic_files.weights_file_attributes(backup)["xlnet_backup_epoch"] == 2

    # The same call again finds the finished backup (nothing left to train), then the export.
    summary = run_pretraining(config, workdir)
    assert summary["first_step"] == 4
    output = f"{workdir}-export"
    export_workdir(workdir, output)
    assert tf.io.gfile.exists(os.path.join(output, "saved_model", "saved_model.pb"))
    assert tf.io.gfile.exists(os.path.join(output, "preset", "model.weights.h5"))
