"""Running `xlnet-tf pretrain` in subprocesses (for kill/resume and multi-worker tests)."""

import json
import os
import socket
import sys

import numpy as np

from tests.training.helpers import TINY_RUN

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pretrain_command(workdir, records, extra=(), strategy="one_device"):
    """The CLI command of a tiny run; it skips the final export (tests compare checkpoints)."""
    sets = sum([["--set", s] for s in list(TINY_RUN) + [f"data.train_files={records}"] + list(extra)], [])
    return [sys.executable, "-m", "xlnet_tf.cli", "pretrain", "--workdir", workdir,
            "--strategy", strategy, "--no-export"] + sets


def environment(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               KERAS_BACKEND="tensorflow", PYTHONPATH=REPO)
    env.update(extra)
    return env


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def final_weights(workdir):
    """Every array (model and optimizer state) of the newest checkpoint, by path."""
    import h5py

    from xlnet_tf.training.callbacks import list_checkpoints

    arrays = {}
    with h5py.File(list_checkpoints(os.path.join(workdir, "checkpoints"))[-1], "r") as f:
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


def assert_same_weights(a, b, rtol=1e-5, atol=1e-6):
    assert sorted(a) == sorted(b) and len(a) > 20
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=atol, err_msg=name)


def metrics(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def tf_config(ports, index):
    return json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def kill_at_backup_epoch(process, workdir, epoch=3, timeout=300):
    """SIGKILLs `process` as soon as its backup metadata reports `epoch`; returns the epoch it saw.

    Returns None when the process ended (or `timeout` passed) before that, so the caller's
    assertion names a run too fast to kill. The metadata is written atomically, so a read
    never sees half a file; a missing file counts as epoch 0.
    """
    import signal
    import time

    metadata = os.path.join(workdir, "backup", "training_metadata.json")
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        try:
            with open(metadata) as f:
                seen = json.load(f)["epoch"]
        except (OSError, ValueError, KeyError):
            seen = 0
        if seen >= epoch:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            return seen
        time.sleep(0.02)
    process.wait(timeout=60)
    return None
