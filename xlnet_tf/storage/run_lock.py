"""One run per work directory: the `RUN_LOCK` file."""

import contextlib
import datetime
import json
import logging
import os
import socket
import sys
import time
import uuid
import warnings

from xlnet_tf.config_schema import ConfigError
from xlnet_tf.storage import atomic_files

_log = logging.getLogger(__name__)

LOCK_FILE = "RUN_LOCK"
# A lock file that cannot be parsed (only possible on filesystems without hard
# links, killed between create and write) is considered abandoned after this long.
_UNREADABLE_GRACE_S = 60.0


class RunLockedError(ConfigError):
    """The work directory is held by another live run; the message names the holder."""


def _process_start_ticks(pid):
    """The start time of `pid` in clock ticks since boot (Linux), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # Fields after the parenthesised command name; starttime is field 22 overall.
    fields = stat[stat.rfind(")") + 2:].split()
    if fields and fields[0] == "Z":
        return "zombie"
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _process_alive(pid, start_ticks=None):
    """Whether process `pid` of this host is running (and is the same process, when known)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    current = _process_start_ticks(pid)
    if current == "zombie":
        return False
    # A reused pid: the recorded process is gone, another one has its number.
    return not (start_ticks is not None and current is not None and current != start_ticks)


class RunLock:
    """Holds `workdir/RUN_LOCK` for the duration of a run, so two runs never share a work directory.

    The lock file is JSON: host, pid, start time, command and a random token.
    It is created atomically: locally by hard-linking a complete temporary file
    to the lock name (fails if it exists; `os.open(O_CREAT | O_EXCL)` where the
    filesystem has no hard links), elsewhere (`gs://`, `ram://`) by
    `tf.io.gfile.rename(..., overwrite=False)`. A second run gets
    `RunLockedError` naming the holder. A lock whose holder is a dead process
    of this host (killed, crashed) is taken over with a one-line warning. The
    lock is released when the `with` block ends, also on exceptions; a killed
    run leaves it behind for the next run to take over.

    Args:
        workdir: the run's work directory (created if needed).
        command: what the holder runs, for the error message (default: `sys.argv`).
        enabled: False makes the lock a no-op (non-chief workers of a multi-worker run).

    Example:
    >>> with RunLock("ram://doc/run") as lock:
    ...     tf.io.gfile.exists(lock.path)
    True
    """

    def __init__(self, workdir, *, command=None, enabled=True):
        self.workdir = str(workdir)
        self.path = os.path.join(self.workdir, LOCK_FILE)
        self.command = command if command is not None else " ".join(sys.argv)
        self.enabled = enabled
        self.held = False
        self._token = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info):
        self.release()
        return False

    def _record(self):
        pid = os.getpid()
        return {"host": socket.gethostname(), "pid": pid,
                "pid_start_ticks": _process_start_ticks(pid),
                "start_time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "command": self.command, "token": self._token}

    def acquire(self):
        """Takes the lock; raises `RunLockedError` naming the holder when another live run has it."""
        if not self.enabled or self.held:
            return
        atomic_files.gfile(self.workdir).makedirs(self.workdir)
        self._token = uuid.uuid4().hex
        content = json.dumps(self._record(), indent=2) + "\n"
        for _ in range(3):
            if self._create(content):
                self.held = True
                return
            holder = self._read_holder()
            if holder is None:
                continue  # Released in the meantime: try again.
            reason = self._abandoned(holder)
            if reason is None:
                raise RunLockedError(self._locked_message(holder))
            warnings.warn(f"Taking over {self.path}: {reason}.", stacklevel=2)
            self._remove_if_unchanged(holder)
        raise RunLockedError(f"Could not take {self.path}: other runs keep taking it; "
                             "is another run starting in the same --workdir?")

    def release(self):
        """Removes the lock file if this lock still holds it."""
        if not self.held:
            return
        self.held = False
        holder = self._read_holder()
        if holder is not None and holder.get("token") == self._token:
            with contextlib.suppress(*atomic_files.not_found_errors(self.path)):
                atomic_files.gfile(self.path).remove(self.path)

    def _create(self, content):
        """Creates the lock file with `content` unless it exists; True when created."""
        temporary = atomic_files.temporary_path(self.path)
        if atomic_files.is_local(self.path):
            with open(temporary, "w") as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(temporary, self.path)
                return True
            except FileExistsError:
                return False
            except OSError:
                return self._create_exclusive(content)
            finally:
                with contextlib.suppress(OSError):
                    os.remove(temporary)
        gfile = atomic_files.gfile(self.path)
        with gfile.GFile(temporary, "w") as f:
            f.write(content)
        try:
            gfile.rename(temporary, self.path, overwrite=False)
            return True
        except atomic_files.already_exists_errors(self.path):
            gfile.remove(temporary)
            return False

    def _create_exclusive(self, content):
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        return True

    def _read_holder(self):
        """The holder's record; `{"unreadable": reason}` when the file cannot be parsed; None when absent."""
        try:
            with atomic_files.gfile(self.path).GFile(self.path, "r") as f:
                text = f.read()
        except atomic_files.not_found_errors(self.path):
            return None
        try:
            holder = json.loads(text)
            if not isinstance(holder, dict):
                raise ValueError("not a JSON object")
            return holder
        except ValueError as error:
            return {"unreadable": f"{error}", "raw": text}

    def _abandoned(self, holder):
        """Why the holder's lock may be taken over, or None when its run may still be alive."""
        if "unreadable" in holder:
            try:
                age = time.time() - atomic_files.gfile(self.path).stat(self.path).mtime_nsec / 1e9
            except atomic_files.not_found_errors(self.path):
                return "it was removed"
            if age > _UNREADABLE_GRACE_S:
                return f"it is unreadable ({holder['unreadable']}) and {age:.0f} s old"
            return None
        if holder.get("host") != socket.gethostname():
            return None
        pid = holder.get("pid")
        if _process_alive(pid, holder.get("pid_start_ticks")):
            return None
        return (f"its run (host {holder.get('host')}, pid {pid}, started "
                f"{holder.get('start_time')}) is no longer running")

    def _remove_if_unchanged(self, stale):
        # Another run may have taken over first; remove only the lock judged stale.
        current = self._read_holder()
        if current is not None and current == stale:
            with contextlib.suppress(*atomic_files.not_found_errors(self.path)):
                atomic_files.gfile(self.path).remove(self.path)

    def _locked_message(self, holder):
        if "unreadable" in holder:
            return (f"{self.workdir} is in use by another run: its lock file {self.path} is being "
                    "written. Use another --workdir, or wait for that run to finish.")
        return (f"{self.workdir} is in use by another run: host {holder.get('host')}, pid "
                f"{holder.get('pid')}, started {holder.get('start_time')} "
                f"(command: {holder.get('command')}); lock file {self.path}. Wait for that run to "
                "finish or use another --workdir; if that run is gone for good (e.g. its machine "
                f"was lost), delete {self.path}.")
