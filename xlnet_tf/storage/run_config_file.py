"""`workdir/config.yaml`: the resolved config of a run, written atomically with an end marker."""

import logging
import os

import yaml

from xlnet_tf.storage import atomic_files

_log = logging.getLogger(__name__)

RUN_CONFIG_FILE = "config.yaml"
# The last line of every config.yaml a run writes: a file without it was cut short
# (copied partially or damaged).
END_MARKER = "# end of run config\n"


def write_run_config(workdir, yaml_text):
    """Writes `workdir/config.yaml` atomically, ending with `END_MARKER`; returns its path."""
    text = yaml_text if yaml_text.endswith("\n") else yaml_text + "\n"
    return atomic_files.write_text(os.path.join(workdir, RUN_CONFIG_FILE), text + END_MARKER)


def read_run_config(workdir):
    """The earlier run's config of `workdir` as a dict, or None when there is none to compare with.

    None also when the file is damaged or incomplete (no end marker, not a YAML
    mapping): a one-line warning names it, and the run rewrites it. Reads
    through `tf.io.gfile` for non-local work directories.
    """
    path = os.path.join(workdir, RUN_CONFIG_FILE)
    if not atomic_files.gfile(path).exists(path):
        return None
    text = atomic_files.read_text(path)
    problem = None
    try:
        values = yaml.safe_load(text)
        if not isinstance(values, dict):
            problem = "not a YAML mapping"
    except yaml.YAMLError as error:
        problem = str(error).splitlines()[0]
    if problem is None and not text.endswith(END_MARKER):
        problem = f"incomplete: its last line is not {END_MARKER.strip()!r}"
    if problem:
        _log.warning("%s is unreadable (%s); not compared with this run's config, and rewritten.",
                     path, problem)
        return None
    return values
