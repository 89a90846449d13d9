"""SIGKILL a pretraining run, damage each kind of file it writes, run the same command: it resumes.

A real kill cannot be timed to land inside one particular write, so the run is
killed once for real (SIGKILL, mid-training) and each kind of half-written file
is then simulated in its own copy of the killed work directory: the file itself
is cut to half its length (or a half line appended, for the append-only
metrics log) and a half-written `.tmp-` sibling is left next to it, as a kill
inside an atomic write would. Rerunning the same command must finish, resume
where the damage allows, and leave one consistent history.
"""

import glob
import os
import shutil
import signal
import subprocess
import warnings

import h5py
import pytest
import yaml

from tests.training.helpers import cyclic_tokens, write_records
from tests.training.subprocess_runs import (REPO, environment, kill_at_backup_epoch, metrics,
                                            pretrain_command)
from xlnet_tf.cli import pretrain as pretrain_cli
from xlnet_tf.cli import export
from xlnet_tf.storage import atomic_files

TRAIN_STEPS, STEPS_PER_EPOCH = 12, 2
STEPS = [f"training.train_steps={TRAIN_STEPS}", f"training.steps_per_epoch={STEPS_PER_EPOCH}",
         "training.log_every_steps=1"]


def _epoch_in(path):
    with h5py.File(path, "r") as f:
        return int(f.attrs["xlnet_backup_epoch"])


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    """A work directory whose run was SIGKILLed after its third backup, and the run's records."""
    root = tmp_path_factory.mktemp("killed")
    records = write_records(str(root / "records"), cyclic_tokens(4000, period=11), vocabulary_size=40)
    workdir = str(root / "run")
    run = subprocess.Popen(pretrain_command(workdir, records, STEPS), cwd=REPO, env=environment(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed = kill_at_backup_epoch(run, workdir, epoch=3) is not None
    assert killed and run.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert os.path.exists(os.path.join(workdir, "RUN_LOCK"))  # Left behind by the killed run.
    return workdir, records


def _half_write(path):
    """Cuts `path` to half its length and leaves a half-written temporary of it alongside."""
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    with open(atomic_files.temporary_path(path), "wb") as f:
        f.write(data[:len(data) // 3])


def _damage(workdir, kind):
    """Damages one kind of file; returns (expected resume step, file named in a warning or None)."""
    backup = os.path.join(workdir, "backup")
    latest = os.path.join(backup, "latest.weights.h5")
    epoch = _epoch_in(latest) if os.path.exists(latest) else _epoch_in(latest + ".bkp")
    if kind == "backup weights":
        if not os.path.exists(latest):  # Killed inside a save: the previous backup is .bkp.
            shutil.copyfile(latest + ".bkp", latest)
        epoch = _epoch_in(latest + ".bkp")
        _half_write(latest)
        return epoch * STEPS_PER_EPOCH, latest
    if kind == "backup metadata":
        path = os.path.join(backup, "training_metadata.json")
        _half_write(path)
        return epoch * STEPS_PER_EPOCH, None  # The epoch is also recorded inside the weights.
    if kind == "checkpoint":
        _half_write(sorted(glob.glob(os.path.join(workdir, "checkpoints", "ckpt-*.weights.h5")))[-1])
        return epoch * STEPS_PER_EPOCH, None  # Checkpoints are for export, not for resuming.
    if kind == "memory state":
        path = os.path.join(backup, f"recurrence_memory-0-epoch-{epoch:06d}.npz")
        _half_write(path)
        return epoch * STEPS_PER_EPOCH, path
    if kind == "config.yaml":
        _half_write(os.path.join(workdir, "config.yaml"))
        return epoch * STEPS_PER_EPOCH, None
    assert kind == "metrics.jsonl"
    with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
        f.write('{"step": 999, "epoch": 4, "lo')  # A kill in the middle of an append.
    return epoch * STEPS_PER_EPOCH, os.path.join(workdir, "metrics.jsonl")


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["backup weights", "backup metadata", "checkpoint", "memory state",
                                  "config.yaml", "metrics.jsonl"])
@pytest.mark.large
def test_rerun_after_sigkill_with_a_half_written_file_resumes(killed_run, tmp_path, capsys, kind):
    killed_dir, records = killed_run
    workdir = str(tmp_path / "run")
    shutil.copytree(killed_dir, workdir)
    resume_step, warned_file = _damage(workdir, kind)

    # The same command as the killed run (in this process: no second TensorFlow start-up).
    argv = pretrain_command(workdir, records, STEPS)[4:]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert pretrain_cli.main(argv) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    assert f"Resuming at step {resume_step} of {TRAIN_STEPS}" in out, out[-2000:]
    assert resume_step >= 2 * STEPS_PER_EPOCH
    messages = [str(w.message) for w in caught]
    assert any("Taking over" in m and "RUN_LOCK" in m for m in messages), messages
    if warned_file:
        assert any(warned_file in m for m in messages), (warned_file, messages)

    # One consistent history, every step once; the run finished with readable files.
    assert [m["step"] for m in metrics(workdir)] == list(range(1, TRAIN_STEPS + 1))
    checkpoints = sorted(glob.glob(os.path.join(workdir, "checkpoints", "ckpt-*.weights.h5")))
    assert os.path.basename(checkpoints[-1]) == f"ckpt-{TRAIN_STEPS:08d}.weights.h5"
    assert all(atomic_files.weights_file_is_readable(c) for c in checkpoints)
    latest = os.path.join(workdir, "backup", "latest.weights.h5")
    assert _epoch_in(latest) == TRAIN_STEPS // STEPS_PER_EPOCH
    assert yaml.safe_load(open(os.path.join(workdir, "config.yaml")))["training"]["train_steps"] == \
        TRAIN_STEPS
    assert not os.path.exists(os.path.join(workdir, "RUN_LOCK"))

    if kind == "checkpoint":
        # Export from a work directory whose newest checkpoint is truncated uses the previous one.
        newest = checkpoints[-1]
        _half_write(newest)
        assert export.main(["--workdir", workdir, "--output", str(tmp_path / "export")]) == 0
        err = capsys.readouterr().err
        assert f"Skipping unreadable checkpoint {newest}" in err and len(err.strip().splitlines()) == 1
        assert os.path.exists(tmp_path / "export" / "saved_model" / "saved_model.pb")
        assert [n for n in os.listdir(tmp_path / "export") if n.startswith(".tmp-")] == []
