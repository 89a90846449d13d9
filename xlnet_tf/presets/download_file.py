"""Downloading one file and checking it against the recorded values and what the server states.

Checks, each applied when its value is available:

- size: bytes received == `Content-Length` (a connection closed early is a
  truncated download), == `x-goog-stored-content-length` (Google Cloud Storage),
  == `X-Linked-Size` (Hugging Face LFS files), == the size recorded in the registry;
- md5: `x-goog-hash: md5=<base64>` (Google Cloud Storage; composite objects carry
  only crc32c, which is not checked);
- sha256: `X-Linked-Etag` (Hugging Face LFS files: the sha256 of the content), or an
  `ETag` of 64 hex digits, and the sha256 recorded in the registry;
- git blob sha1: a 40-hex-digit `ETag` on a Hugging Face file that is not in LFS
  (small files such as `config.json`): `sha1("blob <size>\\0" + content)`.

Hugging Face answers LFS files with a redirect to its CDN; the `X-Linked-*`
headers are on the redirect, so the headers of every hop are kept.

Time: every read waits at most the per-read timeout and what is left of the
overall deadline (`DownloadLimits`); reads return whatever has arrived, so a
server trickling bytes meets the deadline too.
"""

import base64
import dataclasses
import hashlib
import http.client
import logging
import os
import re
import urllib.error
import urllib.request

from xlnet_tf.formats.preset_files import TRANSFORMERS_WEIGHTS_FILE
from xlnet_tf.presets.download_limits import DownloadLimits
from xlnet_tf.presets.preset_error import PresetError
from xlnet_tf.storage import atomic_files

_log = logging.getLogger(__name__)
_CHUNK = 1 << 20


@dataclasses.dataclass
class DownloadRecord:
    """What was downloaded and how it was checked.

    Attributes:
        url: the URL asked for.
        path: the local file (complete and checked).
        size: bytes received.
        sha256: hex sha256 of the content.
        md5: hex md5 of the content.
        checks: human-readable list of the checks that passed, e.g. `"md5 == x-goog-hash"`.
    """

    url: str
    path: str
    size: int
    sha256: str
    md5: str
    checks: list

    def to_json(self):
        return {"url": self.url, "file": os.path.basename(self.path), "size": self.size,
                "sha256": self.sha256, "md5": self.md5, "checks": list(self.checks)}


class _RecordingRedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follows redirects like urllib does, keeping each redirect response's headers."""

    def __init__(self):
        super().__init__()
        self.hops = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.hops.append(headers)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _header(hops, name):
    """The first value of header `name` over the hops (first hop first), or None."""
    for headers in hops:
        value = headers.get(name)
        if value:
            return value.strip()
    return None


def _strip_etag(value):
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"').lower()


def _goog_md5(hops):
    """The base64 md5 of `x-goog-hash` (which may be repeated or comma-separated), or None."""
    for headers in hops:
        for value in headers.get_all("x-goog-hash") or []:
            for part in value.split(","):
                key, _, digest = part.strip().partition("=")
                if key.lower() == "md5" and digest:
                    return digest.strip()
    return None


def _mismatch(what, file_name, url, expected, received):
    return PresetError(f"{file_name}: {what} mismatch for the download from {url}: expected {expected}, "
                       f"received {received}. The file is corrupt or was changed at the source; "
                       "nothing was cached. Try again, and report it if it persists.")


def _verify(file_name, url, hops, size, digests, expected_size, expected_sha256, hugging_face):
    """Raises `PresetError` on the first failed check; returns the list of checks that passed."""
    sha256, md5, git_sha1 = digests
    checks = []
    final = hops[-1]
    length = final.get("Content-Length")
    if length is not None and final.get("Content-Encoding", "identity") == "identity":
        if int(length) != size:
            raise PresetError(
                f"{file_name}: truncated download from {url}: expected {int(length)} bytes "
                f"(Content-Length), received {size}. Nothing was cached; try again.")
        checks.append("size == Content-Length")
    for header in ("x-goog-stored-content-length", "X-Linked-Size"):
        stated = _header(hops, header)
        if stated is not None:
            if int(stated) != size:
                raise _mismatch(f"size ({header})", file_name, url, f"{int(stated)} bytes", f"{size} bytes")
            checks.append(f"size == {header}")
    if expected_size is not None:
        if int(expected_size) != size:
            raise _mismatch("size (recorded in the preset registry)", file_name, url,
                            f"{int(expected_size)} bytes", f"{size} bytes")
        checks.append("size == registry")
    goog_md5 = _goog_md5(hops)
    if goog_md5 is not None:
        received = base64.b64encode(bytes.fromhex(md5)).decode("ascii")
        if goog_md5 != received:
            raise _mismatch("md5 (x-goog-hash)", file_name, url, f"md5={goog_md5}", f"md5={received}")
        checks.append("md5 == x-goog-hash")
    linked = _header(hops, "X-Linked-Etag")
    etag = _header(hops[:1], "ETag")  # The CDN's own ETag on a later hop is not a content hash.
    for header, value in (("X-Linked-Etag", linked), ("ETag", etag)):
        if value is None:
            continue
        value = _strip_etag(value)
        if re.fullmatch(r"[0-9a-f]{64}", value):
            if value != sha256:
                raise _mismatch(f"sha256 ({header})", file_name, url, value, sha256)
            checks.append(f"sha256 == {header}")
            break
        if hugging_face and re.fullmatch(r"[0-9a-f]{40}", value):
            if value != git_sha1:
                raise _mismatch(f"git blob sha1 ({header})", file_name, url, value, git_sha1)
            checks.append(f"git blob sha1 == {header}")
            break
    if expected_sha256 is not None:
        if expected_sha256.lower() != sha256:
            raise _mismatch("sha256 (recorded in the preset registry)", file_name, url,
                            expected_sha256.lower(), sha256)
        checks.append("sha256 == registry")
    return checks


def download_file(url, target, *, expected_size=None, expected_sha256=None, hugging_face=False,
                  limits=None, progress=None):
    """Downloads `url` to `target`, checked; `target` appears only once every check passed.

    Streams into a `.tmp-<uuid>-` sibling of `target` while hashing, checks it
    (see the module docstring), then renames it to `target`. On any failure the
    temporary is removed and `target` is not created.

    Args:
        url: the http(s) URL.
        target: the local file to create.
        expected_size: size in bytes recorded for this file, or None.
        expected_sha256: hex sha256 recorded for this file, or None.
        hugging_face: whether the server is Hugging Face (a 40-hex ETag is then a git blob sha1).
        limits: `DownloadLimits` (per-read timeout, overall deadline); None: from the environment.
        progress: optional callable `(received_bytes, total_bytes_or_None)`.

    Returns:
        A `DownloadRecord`.

    Raises:
        PresetError: naming the file, the URL and, for a failed check, expected vs received (for a
            timeout or the deadline, the limit and how to raise it).

    Example:
    >>> from xlnet_tf.presets.download_file import download_file
    >>> record = download_file("https://huggingface.co/xlnet/xlnet-base-cased/resolve/main/config.json",
    ...                        "/tmp/config.json", hugging_face=True)  # doctest: +SKIP
    """
    file_name = os.path.basename(target)
    redirects = _RecordingRedirectHandler()
    opener = urllib.request.build_opener(redirects)
    request = urllib.request.Request(url, headers={"User-Agent": "xlnet_tf", "Accept-Encoding": "identity"})
    temporary = atomic_files.temporary_path(target)
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    size, total = 0, None
    limits = DownloadLimits() if limits is None else limits
    try:
        if limits.expired():
            raise limits.past_deadline(file_name, url, 0, None)
        try:
            response = opener.open(request, timeout=limits.read_timeout())
        except urllib.error.HTTPError as e:
            hint = ""
            if e.code == 404 and hugging_face and file_name == TRANSFORMERS_WEIGHTS_FILE:
                hint = (" This repository revision has no model.safetensors (only pytorch_model.bin?); the "
                        "converter reads safetensors only: save the model with transformers' "
                        "save_pretrained(..., safe_serialization=True) and run `xlnet-tf convert`.")
            raise PresetError(f"{file_name}: download from {url} failed: HTTP {e.code} {e.reason}.{hint}") from e
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError):
                raise limits.timed_out(file_name, url, 0, None) from e
            raise PresetError(f"{file_name}: cannot reach {url}: {reason}. Check the network, or point "
                              "the source's base-URL variable at a mirror (see `xlnet-tf presets --help`).") from e
        with response:
            hops = redirects.hops + [response.headers]
            total = response.headers.get("Content-Length")
            total = int(total) if total is not None else None
            git_sha1 = hashlib.sha1(f"blob {total}\0".encode()) if total is not None else None
            with open(temporary, "wb") as f:
                while True:
                    if limits.expired():
                        raise limits.past_deadline(file_name, url, size, total)
                    _set_read_timeout(response, limits.read_timeout())
                    try:
                        # read1: what has arrived (one socket read), so a trickle meets the deadline.
                        chunk = response.read1(_CHUNK)
                    except http.client.IncompleteRead as e:
                        chunk = e.partial
                        _update(f, chunk, sha256, md5, git_sha1)
                        size += len(chunk)
                        break
                    except TimeoutError as e:
                        raise limits.timed_out(file_name, url, size, total) from e
                    except (OSError, http.client.HTTPException) as e:
                        raise PresetError(f"{file_name}: download from {url} broke off after {size} bytes"
                                          + (f" of {total}" if total is not None else "")
                                          + f": {type(e).__name__}: {e}. Nothing was cached; try again.") from e
                    if not chunk:
                        break
                    _update(f, chunk, sha256, md5, git_sha1)
                    size += len(chunk)
                    if progress is not None:
                        progress(size, total)
                f.flush()
                os.fsync(f.fileno())
        if git_sha1 is None or total != size:
            git_sha1 = hashlib.sha1(f"blob {size}\0".encode())  # Only used when the size check passed.
            with open(temporary, "rb") as f:
                for block in iter(lambda: f.read(_CHUNK), b""):
                    git_sha1.update(block)
        digests = (sha256.hexdigest(), md5.hexdigest(), git_sha1.hexdigest())
        checks = _verify(file_name, url, hops, size, digests, expected_size, expected_sha256, hugging_face)
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    _log.info("Downloaded %s (%d bytes, sha256 %s; checks: %s)", url, size, digests[0], ", ".join(checks))
    return DownloadRecord(url=url, path=target, size=size, sha256=digests[0], md5=digests[1], checks=checks)


def _set_read_timeout(response, seconds):
    """The socket timeout of `response`'s next read (`http.client` keeps the one of the connect)."""
    sock = getattr(getattr(response.fp, "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _update(f, chunk, sha256, md5, git_sha1):
    f.write(chunk)
    sha256.update(chunk)
    md5.update(chunk)
    if git_sha1 is not None:
        git_sha1.update(chunk)
