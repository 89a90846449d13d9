"""`OutputExistsError`, `check_output_directory`, `check_output_file`: where a command may write its output."""

import os

from xlnet_tf.storage import atomic_files


class OutputExistsError(FileExistsError):
    """The output directory already holds files, and replacing it was not asked for.

    Writers never mix their files with what a directory held before (a new
    preset beside an old tokenizer, a SavedModel beside an old variables
    folder): they refuse, or, asked to overwrite, build the new directory aside
    and rename it into place (`atomic_files.replace_directory`).

    Args:
        path: the directory.
        what: what it is, for the message (e.g. `"Export directory"`).

    Example:
    >>> error = OutputExistsError("exports/sst2", "Export directory")
    >>> error.message("--overwrite")
    'Export directory exports/sst2 already exists and is not empty; pass --overwrite to replace it.'
    """

    def __init__(self, path, what="Output directory"):
        self.path, self.what = str(path), what
        super().__init__(self.message("overwrite=True"))

    def message(self, option):
        """The one-line message naming the directory and `option`, the way to replace it."""
        return f"{self.what} {self.path} already exists and is not empty; pass {option} to replace it."


def normalized_path(path):
    """`path` as compared here: local paths resolved (symlinks too), others without a trailing slash."""
    path = str(path).rstrip("/")
    return os.path.realpath(path) if atomic_files.is_local(path) else path


def _contains(directory, path):
    """Whether `path` is `directory` or lies inside it."""
    directory, path = normalized_path(directory), normalized_path(path)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _nearest_existing_ancestor(path):
    """The closest existing directory (or file) above `path`, or None (a filesystem root reached)."""
    parent = os.path.dirname(str(path).rstrip("/"))
    while parent and not parent.endswith("://") and parent != os.path.dirname(parent):
        if atomic_files.gfile(parent).exists(parent):
            return parent
        parent = os.path.dirname(parent)
    return None


def check_output_directory(path, *, overwrite=False, what="Output directory", sources=()):
    """Refuses an output directory that writing (or replacing) would make wrong.

    Allowed: a path that does not exist, an empty directory, and, with
    `overwrite`, a directory holding files (the writer then replaces it whole).

    Args:
        path: the output directory (local or any `tf.io.gfile` scheme).
        overwrite: whether a non-empty directory may be replaced.
        what: what the directory is, for the messages.
        sources: paths the writer reads from; an output that is one of them, or
            holds one, is refused (replacing it would delete the source).

    Raises:
        OutputExistsError: `path` is a non-empty directory and `overwrite` is False.
        ValueError: `path` (or the directory it would be created in) is a file, or it is or
            holds one of `sources`.
    """
    path = str(path)
    gfile = atomic_files.gfile(path)
    for source in sources:
        if source and _contains(path, source):
            raise ValueError(f"{what} {path} holds the source {source}: writing there would replace "
                             "what is being read; choose another output directory.")
    if not gfile.exists(path):
        ancestor = _nearest_existing_ancestor(path)
        if ancestor is not None and not gfile.isdir(ancestor):
            raise ValueError(f"{what} {path} cannot be created: {ancestor} is a file.")
        return
    if not gfile.isdir(path):
        raise ValueError(f"{what} {path} is a file; the output must be a directory.")
    if gfile.listdir(path) and not overwrite:
        raise OutputExistsError(path, what)


def check_output_file(path, what="Output file"):
    """Refuses an output file path that cannot be written, before any work is done.

    Args:
        path: the file to write (it may exist: it is then replaced atomically).
        what: what it is, for the messages (e.g. `"--output"`).

    Raises:
        ValueError: `path` is a directory, or the directory it would be created in is a file.
    """
    path = str(path)
    gfile = atomic_files.gfile(path)
    if gfile.isdir(path):
        raise ValueError(f"{what} {path} is a directory; give a file name.")
    ancestor = _nearest_existing_ancestor(path)
    if ancestor is not None and not gfile.isdir(ancestor):
        raise ValueError(f"{what} {path} cannot be created: {ancestor} is a file.")
