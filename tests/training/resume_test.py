"""Kill a pretraining process with SIGKILL, run the same command again: it resumes where it was.

The resumed run must end with exactly the weights of an uninterrupted run: that
only happens when weights, optimizer state, schedule step, the data position and
every replica's recurrence memory are all restored, and when the resumed run
draws the dropout masks of the uninterrupted one (dropout is on here; the masks
follow the restored optimizer step, see `xlnet_tf.layers.seeded_dropout`).
"""

import os
import signal
import subprocess

import pytest
import yaml

from tests.training.helpers import cyclic_tokens, write_records
from tests.training.subprocess_runs import (REPO, assert_same_weights, environment, final_weights,
                                            kill_at_backup_epoch,
                                            metrics, pretrain_command)

STEPS = ["training.train_steps=24", "training.steps_per_epoch=2", "training.log_every_steps=1",
         # After TINY_RUN's 0.0: the last --set wins.
         "model.dropout=0.1", "model.attention_dropout=0.1"]


@pytest.mark.large
@pytest.mark.subprocess
@pytest.mark.slow
def test_sigkill_then_same_command_resumes_at_the_same_data_position(tmp_path):
    records = write_records(str(tmp_path / "records"), cyclic_tokens(4000, period=11),
                            vocabulary_size=40)
    reference_dir, resumed_dir = str(tmp_path / "reference"), str(tmp_path / "resumed")
    reference = subprocess.Popen(pretrain_command(reference_dir, records, STEPS), cwd=REPO,
                                 env=environment(), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    command = pretrain_command(resumed_dir, records, STEPS)
    first = subprocess.Popen(command, cwd=REPO, env=environment(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    killed_at_epoch = kill_at_backup_epoch(first, resumed_dir, epoch=3)
    assert killed_at_epoch is not None, "the first run ended before it could be killed"
    assert first.returncode == -signal.SIGKILL

    second = subprocess.run(command, cwd=REPO, env=environment(), capture_output=True, text=True,
                            timeout=400)
    assert second.returncode == 0, second.stderr[-3000:]
    resumed_line = [line for line in second.stdout.splitlines() if line.startswith("Resuming at step")]
    assert resumed_line, second.stdout[-2000:]
    resumed_step = int(resumed_line[0].split()[3])
    assert 6 <= resumed_step < 24 and resumed_step % 2 == 0
    assert reference.wait(timeout=400) == 0
    with open(os.path.join(resumed_dir, "config.yaml")) as f:
        model_config = yaml.safe_load(f)["model"]
    assert model_config["dropout"] == 0.1 and model_config["attention_dropout"] == 0.1

    # One consistent history: every step logged once, in order, and the loss curves agree.
    steps = [m["step"] for m in metrics(resumed_dir)]
    assert steps == list(range(1, 25))
    for got, want in zip(metrics(resumed_dir), metrics(reference_dir)):
        if got["step"] > resumed_step:  # Epoch-running means restart with the resumed epoch.
            assert abs(got["loss"] - want["loss"]) < 1e-5
    assert_same_weights(final_weights(resumed_dir), final_weights(reference_dir))
