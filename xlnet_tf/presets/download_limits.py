"""`DownloadLimits`: how long a preset download may wait for data, and how long it may take in all."""

import math
import os
import time

from xlnet_tf.presets.preset_error import PresetError

TIMEOUT_ENV = "XLNET_TF_DOWNLOAD_TIMEOUT"
DEADLINE_ENV = "XLNET_TF_DOWNLOAD_DEADLINE"
DEFAULT_TIMEOUT = 60.0  # Seconds a read may wait for data.


class DownloadLimits:
    """The per-read timeout and the overall deadline of one preset download.

    A server that stops sending is caught by the timeout (seconds one read may wait
    for data, also for the connection and the response headers); one that trickles
    a byte at a time never trips it, so the deadline (seconds from the start of the
    download to its last byte, over every file of the preset) bounds the whole.
    Each read waits at most for what is left of the deadline.

    Args:
        timeout (float | None): seconds; None reads `$XLNET_TF_DOWNLOAD_TIMEOUT`, else 60.
        deadline (float | None): seconds; None reads `$XLNET_TF_DOWNLOAD_DEADLINE`, else no deadline.

    Raises:
        PresetError: a value (or the variable it came from) that is not a number of
            seconds > 0, naming it.

    Example:
    >>> from xlnet_tf.presets import DownloadLimits
    >>> limits = DownloadLimits(timeout=10, deadline=3600)
    >>> limits.timeout, limits.deadline
    (10.0, 3600.0)
    """

    def __init__(self, timeout=None, deadline=None):
        self.timeout = _seconds(timeout, "timeout", TIMEOUT_ENV, DEFAULT_TIMEOUT)
        self.deadline = _seconds(deadline, "deadline", DEADLINE_ENV, None)
        self.started = time.monotonic()

    def remaining(self):
        """Seconds left before the deadline (may be <= 0), or None without a deadline."""
        return None if self.deadline is None else self.deadline - (time.monotonic() - self.started)

    def read_timeout(self):
        """How long the next read may wait: the timeout, or less when the deadline is nearer."""
        remaining = self.remaining()
        return self.timeout if remaining is None else max(min(self.timeout, remaining), 1e-3)

    def expired(self):
        remaining = self.remaining()
        return remaining is not None and remaining <= 0

    def timed_out(self, file_name, url, received, total):
        """The `PresetError` for a read that waited its whole timeout (or reached the deadline)."""
        if self.expired():
            return self.past_deadline(file_name, url, received, total)
        return PresetError(f"{file_name}: no data from {url} for {self.timeout:g} s (the per-read timeout) after "
                           f"{_progress(received, total)}. Nothing was cached. A slow connection or proxy: raise it "
                           f"with --timeout SECONDS or ${TIMEOUT_ENV}.")

    def past_deadline(self, file_name, url, received, total):
        """The `PresetError` for a download still running at the deadline."""
        return PresetError(f"{file_name}: the download from {url} did not finish within the {self.deadline:g} s "
                           f"deadline ({_progress(received, total)}). Nothing was cached. Raise it with "
                           f"--deadline SECONDS or ${DEADLINE_ENV}.")


def _progress(received, total):
    return f"{received} bytes" + (f" of {total}" if total is not None else "") + " received"


def seconds_value(value):
    """`value` (a number or its text) as seconds; `ValueError` unless a finite number > 0."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{value!r} is not a number of seconds > 0")
    return seconds


def _seconds(value, option, variable, default):
    source = option
    if value is None:
        value = os.environ.get(variable, "").strip() or None
        source = f"${variable}"
        if value is None:
            return default
    try:
        return seconds_value(value)
    except ValueError as e:
        raise PresetError(f"Download {option}: {source} = {e}.") from None
