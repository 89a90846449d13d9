"""`download_preset`: first use of a named preset, downloaded, checked, converted and cached."""

import datetime
import logging
import os
import shutil

from xlnet_tf.presets import preset_cache
from xlnet_tf.presets.preset_archive import extract_zip, find_release_folder
from xlnet_tf.presets.download_file import download_file
from xlnet_tf.presets.download_limits import DownloadLimits
from xlnet_tf.presets.preset_error import PresetError
from xlnet_tf.presets.preset_registry import get_preset_spec
from xlnet_tf.storage import atomic_files
from xlnet_tf._version import __version__

_log = logging.getLogger(__name__)
_WORK_SUFFIX = ".download"


def download_preset(name, force=False, progress=None, timeout=None, deadline=None):
    """Returns the cache directory of preset `name`, downloading and converting it on first use.

    Under a per-preset lock (so simultaneous first uses by several processes
    download once): the files are downloaded into a temporary work folder and
    each is checked (`download_file`); a release zip is unpacked with its
    CRC-32s checked; the strict converter (`convert_tf1_checkpoint` or
    `convert_transformers_checkpoint`) builds the model; the preset
    (keras-hub's layout, written by `write_preset`: `config.json`, `model.weights.h5`,
    `metadata.json`, `lm_head.weights.h5`, `tokenizer.json`, `assets/tokenizer/vocabulary.spm`,
    `spiece.model`)
    and `preset_manifest.json` (url, size, sha256, md5 and checks of every
    download) are written into a temporary directory that is then renamed to
    `<cache>/presets/NAME`. Any failure leaves no entry, and the work folder is
    removed; temporaries of a killed earlier attempt are removed first. An
    existing entry (anything at that path but an empty directory), sound or
    damaged, is only replaced with `force=True`: without it a damaged one is
    refused, never deleted.

    Args:
        name (str): a registered preset name (`xlnet-tf presets`).
        force: download and convert again even when cached (the entry is replaced atomically); the
            fix for a damaged entry.
        progress: optional callable `(file_name, received_bytes, total_bytes_or_None)`.
        timeout (float | None): seconds a read may wait for data (None: `$XLNET_TF_DOWNLOAD_TIMEOUT`, else 60).
        deadline (float | None): seconds the download of all the preset's files may take (None:
            `$XLNET_TF_DOWNLOAD_DEADLINE`, else none); see `DownloadLimits`.

    Returns:
        The preset directory.

    Raises:
        PresetError: unknown name, a cache folder that cannot be created, failed download or check,
            failed conversion, or a damaged cached entry: its manifest unreadable or of the wrong
            shape, or its files no longer matching it (checked once per file per process; the
            message names the preset, what is wrong and the fix, `force=True`).

    Example:
    >>> from xlnet_tf import XLNetPretrainer
    >>> from xlnet_tf.presets import download_preset
    >>> directory = download_preset("xlnet_base_cased")
    >>> pretrainer = XLNetPretrainer.from_preset(directory)
    """
    spec = get_preset_spec(name)
    preset_cache.check_cache_location()
    entry = preset_cache.preset_cache_dir(name)
    if not force and preset_cache.is_cached(name):
        return _checked_entry(name, entry)
    with preset_cache.preset_lock(name):
        if not force and preset_cache.is_cached(name):
            return _checked_entry(name, entry)  # Another process finished it while we waited.
        # Under the lock every temporary of this preset belongs to a dead attempt.
        atomic_files.remove_stale_temporaries(entry)
        work_name = os.path.join(preset_cache.presets_dir(), name + _WORK_SUFFIX)
        atomic_files.remove_stale_temporaries(work_name)
        limits = DownloadLimits(timeout=timeout, deadline=deadline)
        work = atomic_files.temporary_path(work_name)
        os.makedirs(work)
        try:
            records = _download_all(spec, work, progress, limits)
            pretrainer, vocabulary, converted_from = _convert(spec, work, records)
            manifest = {
                "name": spec.name, "source": spec.source, "location": spec.location,
                "revision": spec.revision if spec.source == "hf" else None,
                "files": [r.to_json() for r in records],
                "converted_from": converted_from,
                "xlnet_tf_version": __version__,
                "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            }

            def build(directory):
                # import time: `xlnet-tf presets` lists names without TensorFlow
                from xlnet_tf.convert.write_preset import write_preset

                write_preset(pretrainer, directory, vocabulary)
                # What a load checks the entry against later (`preset_cache.entry_problem`).
                manifest["preset_files"] = preset_cache.preset_file_records(directory)
                atomic_files.write_json(os.path.join(directory, preset_cache.MANIFEST_FILE), manifest)

            atomic_files.replace_directory(build, entry)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _log.info("Cached preset %s in %s", name, entry)
    return entry


def _checked_entry(name, entry):
    """`entry` once its files match the manifest; else a `PresetError` naming them and the fix."""
    problem = preset_cache.entry_problem(entry)
    if problem:
        raise PresetError(preset_cache.damaged_entry_message(name, entry, problem))
    return entry


def _download_all(spec, work, progress, limits):
    records = []
    for preset_file in spec.files:
        report = None if progress is None else (
            lambda received, total, file_name=preset_file.name: progress(file_name, received, total))
        records.append(download_file(spec.file_url(preset_file.name), os.path.join(work, preset_file.name),
                                     expected_size=preset_file.size, expected_sha256=preset_file.sha256,
                                     hugging_face=spec.source == "hf", limits=limits, progress=report))
    return records


def _convert(spec, work, records):
    """Runs the strict converter on the checked downloads; returns `(pretrainer, vocabulary, relative_source)`."""
    # import time: `xlnet-tf presets` lists names without TensorFlow
    from xlnet_tf.convert.conversion_error import ConversionError

    try:
        if spec.source == "tf1_release":
            # import time: `xlnet-tf presets` lists names without TensorFlow
            from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint

            archive = records[0].path
            extracted = os.path.join(work, "extracted")
            extract_zip(archive, extracted)
            os.remove(archive)  # Halves the peak disk use for the large release.
            folder = find_release_folder(extracted, os.path.basename(archive))
            pretrainer, _, vocabulary = convert_tf1_checkpoint(folder)
            return pretrainer, vocabulary, os.path.relpath(folder, extracted)
        # import time: `xlnet-tf presets` lists names without TensorFlow
        from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint

        pretrainer, _, vocabulary = convert_transformers_checkpoint(work)
        return pretrainer, vocabulary, "."
    except (ConversionError, ValueError, FileNotFoundError) as e:
        if isinstance(e, PresetError):
            raise
        raise PresetError(f"Preset {spec.name!r}: the downloaded files passed their checks but do not "
                          f"convert: {e}") from e
