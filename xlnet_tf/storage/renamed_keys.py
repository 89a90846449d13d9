"""Reads files written with a key's old spelling: one spelling per concept, old names kept for one release.

`RENAMED_KEYS` lists every renamed key of the files users already have (run configs and
`--set` overrides, `workdir/config.yaml`, `preprocessing.json`, the fine-tuning records
manifest, `xlnet_tf_serving.json`); `renamed_keys` applies a part of it to one mapping.

Example:
>>> renamed_keys({"data": {"seq_length": 64}}, RENAMED_KEYS["run_config"], source="old.yaml")
{'data': {'sequence_length': 64}}

It warns once: `FutureWarning: old.yaml: data.seq_length is deprecated; use data.sequence_length.`
"""

import warnings
from collections.abc import Mapping

# Old key -> new key; a nested mapping renames keys inside that section.
RENAMED_KEYS = {
    # Pretraining and fine-tuning run configs (YAML files, `--set`, `workdir/config.yaml`).
    "run_config": {"data": {"seq_length": "sequence_length"}, "task": {"type": "task_type"}},
    # A task preset's `preprocessing.json` (the packing and serving metadata).
    "preprocessing": {"lower_case": "lowercase"},
    # `manifest.json` of `xlnet-tf prepare-finetuning` records.
    "finetuning_manifest": {"task": {"kind": "task_type"}},
    # `xlnet_tf_serving.json` of an exported SavedModel.
    "serving_metadata": {"task": "task_type"},
}


def renamed_keys(values, renames, *, source=None, warn=True, error=ValueError):
    """`values` with each old key of `renames` replaced by its new name (a new dict; `values` is kept).

    Args:
        values: a mapping read from a file (other values are returned as they are).
        renames: `{old: new}`; a mapping value (`{"data": {"seq_length": ...}}`)
            renames inside that section.
        source: the file or flag the values came from, named in messages.
        warn: whether an old key gives a one-line `FutureWarning` naming the old and
            the new key: True for what users write (config files, `--set`), False
            for files an earlier version of this project wrote (`config.yaml` of a
            run, presets, records, exports), which users need not edit.
        error: the exception class raised when both spellings are present.

    Returns:
        A dict (or `values` itself when it is not a mapping).

    Raises:
        error: `values` holds both the old and the new key (the message names both).
    """
    where = f"{source}: " if source else ""
    used = []
    result = _renamed(values, renames, "", used, where, error)
    if warn:
        for old, new in used:
            warnings.warn(f"{where}{old} is deprecated; use {new}.", FutureWarning, stacklevel=2)
    return result


def _renamed(values, renames, prefix, used, where, error):
    if not isinstance(values, Mapping):
        return values
    result = dict(values)
    for old, new in renames.items():
        if isinstance(new, Mapping):
            if old in result:
                result[old] = _renamed(result[old], new, f"{prefix}{old}.", used, where, error)
            continue
        if old not in result:
            continue
        if new in result:
            raise error(f"{where}both {prefix}{old} (the old name) and {prefix}{new} are set; "
                        f"keep only {prefix}{new}.")
        used.append((prefix + old, prefix + new))
        # Keep the key order, so a rewritten file reads the same apart from the name.
        result = {(new if key == old else key): value for key, value in result.items()}
    return result
