"""RunLock: one run per work directory, dead holders taken over, released on exceptions."""

import json
import os
import socket
import subprocess
import sys
import uuid

import pytest
import tensorflow as tf

from xlnet_tf.models.xlnet_config import ConfigError
from xlnet_tf.storage.run_lock import LOCK_FILE, RunLock, RunLockedError


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_second_taker_is_refused_with_the_holder_named(tmp_path):
    workdir = str(tmp_path / "run")
    with RunLock(workdir, command="xlnet-tf pretrain --workdir run") as first:
        record = json.loads(open(first.path).read())
        assert record["host"] == socket.gethostname() and record["pid"] == os.getpid()
        with pytest.raises(RunLockedError) as caught:
            RunLock(workdir, command="second").acquire()
        message = str(caught.value)
        for expected in (f"host {socket.gethostname()}", f"pid {os.getpid()}",
                         record["start_time"], os.path.join(workdir, LOCK_FILE),
                         "xlnet-tf pretrain --workdir run"):
            assert expected in message, expected
        assert isinstance(caught.value, ConfigError)
    assert not os.path.exists(os.path.join(workdir, LOCK_FILE))
    with RunLock(workdir):  # Free again once released.
        pass


def test_released_after_an_exception(tmp_path):
    workdir = str(tmp_path)
    with pytest.raises(RuntimeError, match="training diverged"):
        with RunLock(workdir):
            raise RuntimeError("training diverged")
    assert os.listdir(workdir) == []


@pytest.mark.subprocess
def test_dead_holder_is_taken_over_with_a_warning(tmp_path):
    path = tmp_path / LOCK_FILE
    pid = _dead_pid()
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": pid,
                                "start_time": "2020-01-01T00:00:00+00:00", "command": "killed"}))
    with pytest.warns(UserWarning, match=rf"Taking over .*{LOCK_FILE}.*pid {pid}.*no longer running"):
        lock = RunLock(str(tmp_path))
        lock.acquire()
    assert json.loads(path.read_text())["pid"] == os.getpid()
    lock.release()
    assert not path.exists()


@pytest.mark.subprocess
def test_holder_on_another_host_is_never_taken_over(tmp_path):
    (tmp_path / LOCK_FILE).write_text(json.dumps(
        {"host": "other-machine", "pid": _dead_pid(), "start_time": "t0", "command": "c"}))
    with pytest.raises(RunLockedError, match="host other-machine"):
        RunLock(str(tmp_path)).acquire()


def test_release_leaves_a_lock_taken_over_by_another_run(tmp_path):
    lock = RunLock(str(tmp_path))
    lock.acquire()
    (tmp_path / LOCK_FILE).write_text(json.dumps({"host": "h", "pid": 1, "token": "other"}))
    lock.release()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["token"] == "other"


def test_disabled_lock_and_ram_filesystem():
    workdir = f"ram://lock-{uuid.uuid4().hex}"
    with RunLock(workdir, enabled=False):
        assert not tf.io.gfile.exists(os.path.join(workdir, LOCK_FILE))
    with RunLock(workdir) as lock:
        assert tf.io.gfile.exists(lock.path)
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
            RunLock(workdir).acquire()
    assert not tf.io.gfile.exists(os.path.join(workdir, LOCK_FILE))
