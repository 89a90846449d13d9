"""Two runs on one work directory: the second is refused, naming the first; the first is untouched."""

import os
import socket
import subprocess
import time

import pytest

from tests.training.helpers import cyclic_tokens, write_records
from tests.training.subprocess_runs import REPO, environment, metrics, pretrain_command
from xlnet_tf.cli import pretrain as pretrain_cli

TRAIN_STEPS = 40
STEPS = [f"training.train_steps={TRAIN_STEPS}", "training.steps_per_epoch=2",
         "training.log_every_steps=1"]


@pytest.mark.large
@pytest.mark.subprocess
@pytest.mark.slow
def test_second_run_on_a_busy_workdir_is_refused_with_the_holder_named(tmp_path, capsys):
    records = write_records(str(tmp_path / "records"), cyclic_tokens(4000, period=11),
                            vocabulary_size=40)
    workdir = str(tmp_path / "run")
    command = pretrain_command(workdir, records, STEPS)
    first = subprocess.Popen(command, cwd=REPO, env=environment(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and first.poll() is None:
            if os.path.exists(os.path.join(workdir, "metrics.jsonl")):
                break  # Training: the lock is held.
            time.sleep(0.02)
        assert first.poll() is None, "the first run ended before the second could start"

        # The same command again, in this process, while the first one trains.
        assert pretrain_cli.main(command[4:]) == 2
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        _, first_err = first.communicate(timeout=300)
    err = capsys.readouterr().err
    for expected in ("is in use by another run", f"host {socket.gethostname()}", f"pid {first.pid}",
                     os.path.join(workdir, "RUN_LOCK"), "started "):
        assert expected in err, (expected, err)
    assert first.returncode == 0, first_err[-3000:]
    # The first run's history is intact: every step once, in order.
    assert [m["step"] for m in metrics(workdir)] == list(range(1, TRAIN_STEPS + 1))
    assert not os.path.exists(os.path.join(workdir, "RUN_LOCK"))
