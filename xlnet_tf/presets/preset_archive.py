"""Unpacking a release zip with every member's CRC-32 checked, and finding the release folder in it."""

import glob
import os
import shutil
import zipfile
import zlib

from xlnet_tf.formats.preset_files import TF1_RELEASE_FILES
from xlnet_tf.presets.preset_error import PresetError

_CHUNK = 1 << 20
RELEASE_FILES = TF1_RELEASE_FILES


def extract_zip(archive, directory):
    """Extracts `archive` into `directory`, checking each member's CRC-32; returns the member names.

    Members whose path would leave `directory` (absolute, `..`) are refused.

    Raises:
        PresetError: naming the archive and the member for a bad CRC, a
            truncated member or an unsafe path, or when it is not a zip at all.
    """
    name = os.path.basename(archive)
    root = os.path.realpath(directory)
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            if not members:
                raise PresetError(f"{name}: the archive is empty.")
            for info in members:
                target = os.path.realpath(os.path.join(root, info.filename))
                if os.path.isabs(info.filename) or not (target == root or target.startswith(root + os.sep)):
                    raise PresetError(f"{name}: member {info.filename!r} would be written outside the "
                                      "extraction folder; refusing the archive.")
                if info.is_dir():
                    os.makedirs(target, exist_ok=True)
                    continue
                os.makedirs(os.path.dirname(target), exist_ok=True)
                try:
                    # ZipExtFile checks the CRC-32 when the member has been read to its end.
                    with zf.open(info) as source, open(target, "wb") as sink:
                        shutil.copyfileobj(source, sink, _CHUNK)
                except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as e:
                    raise PresetError(f"{name}: member {info.filename!r} is corrupt ({e}); expected CRC-32 "
                                      f"{info.CRC:08x}, {info.file_size} bytes.") from e
            return [info.filename for info in members]
    except zipfile.BadZipFile as e:
        raise PresetError(f"{name}: not a readable zip archive (truncated or corrupt?): {e}") from e


def find_release_folder(directory, archive_name):
    """The folder of an unpacked release: the one holding `xlnet_config.json`, `spiece.model` and one `*.index`.

    The released zips hold one folder (`xlnet_cased_L-12_H-768_A-12/`, ...);
    files at the top level are accepted too.
    """
    candidates = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(directory, "**", "*.index"),
                                                               recursive=True)})
    complete = [c for c in candidates if all(os.path.isfile(os.path.join(c, f)) for f in RELEASE_FILES)]
    if len(complete) != 1:
        found = sorted(os.path.relpath(os.path.join(d, f), directory)
                       for d, _, files in os.walk(directory) for f in files)
        raise PresetError(
            f"{archive_name}: expected one folder with {', '.join(RELEASE_FILES)} and a TF checkpoint "
            f"(xlnet_model.ckpt.index/.data-*), found {len(complete)} such folders; the archive holds "
            f"{found[:20]}{' ...' if len(found) > 20 else ''}.")
    return complete[0]
