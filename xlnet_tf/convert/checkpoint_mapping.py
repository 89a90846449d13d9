"""Strict bookkeeping for copying checkpoint arrays into Keras weights."""

import fnmatch

import numpy as np

from xlnet_tf.convert.conversion_error import ConversionError


class CheckpointMapping:
    """Tracks which source arrays were used and which model weights were assigned.

    A converter `take`s source arrays by name, transforms them, and `assign`s
    them to model variables; `ignore` marks source names that are deliberately
    dropped (optimizer slots, step counters). `finish` then fails unless every
    source array was used or ignored and every model weight was assigned exactly
    once. Problems are collected rather than raised one by one, so a bad
    checkpoint reports everything wrong with it in one message.

    Args:
        arrays: dict of source name -> numpy array.
        source: a description of the checkpoint for error messages (a path).

    Example:
    >>> from xlnet_tf.convert.checkpoint_mapping import CheckpointMapping
    >>> import numpy as np
    >>> mapping = CheckpointMapping({"w": np.ones((2, 3))}, source="demo")
    >>> mapping.take("w").shape
    (2, 3)
    """

    def __init__(self, arrays, source):
        self.arrays = dict(arrays)
        self.source = source
        self.errors = []
        self._used = set()
        self._ignored = {}
        self._assigned = {}  # id(variable) -> source description
        self.assigned_values = {}  # variable path -> (source description, array)

    def has(self, name):
        return name in self.arrays

    def take(self, name):
        """Returns the source array `name` and marks it used; None (and an error) when absent."""
        if name not in self.arrays:
            self.errors.append(f"missing source variable {name!r}")
            return None
        self._used.add(name)
        return self.arrays[name]

    def ignore(self, pattern, reason):
        """Marks every not-yet-used source name matching the glob `pattern` as deliberately dropped."""
        for name in self.arrays:
            if name not in self._used and fnmatch.fnmatchcase(name, pattern):
                self._ignored[name] = reason

    def assign(self, variable, value, source_name, source_shape=None):
        """Copies `value` into `variable` after checking its shape.

        Args:
            variable: a Keras variable of the model.
            value: the (already transformed) numpy array, or None when a source was missing.
            source_name: the source variable(s) the value came from, for messages.
            source_shape: the shape as stored in the checkpoint, when the value was transformed.
        """
        path = variable.path
        if id(variable) in self._assigned:
            self.errors.append(f"model weight {path!r} assigned twice (from "
                               f"{self._assigned[id(variable)]!r} and {source_name!r})")
            return
        if value is None:
            return
        value = np.asarray(value)
        expected = tuple(variable.shape)
        if tuple(value.shape) != expected:
            stored = f" (stored as {tuple(source_shape)})" if source_shape is not None else ""
            self.errors.append(
                f"shape mismatch: source {source_name!r} has shape {tuple(value.shape)}{stored}, "
                f"model weight {path!r} has shape {expected}")
            return
        variable.assign(value.astype(np.dtype(variable.dtype)))
        self._assigned[id(variable)] = source_name
        self.assigned_values[path] = (source_name, value)

    def take_tied_copy(self, name, tied_value, tied_to, reason):
        """Takes the optional source `name`: a stored copy of a weight the model ties to another.

        The model has no weight of its own for it, so the copy is accepted only
        when it equals `tied_value`; otherwise the mismatch is an error.

        Args:
            name: the source name; a checkpoint without it is fine.
            tied_value: the source array the model's weight is tied to, or None
                when that one was missing (already an error).
            tied_to: what the copy must equal, for the message (e.g. "the word embedding").
            reason: why, for the message.
        """
        if not self.has(name):
            return
        value = self.take(name)
        if tied_value is not None and (value.shape != tied_value.shape or not np.array_equal(value, tied_value)):
            self.errors.append(f"{name!r} {value.shape} differs from {tied_to} {tied_value.shape}; {reason}")

    def finish(self, model):
        """Raises `ConversionError` listing every problem; returns the names of ignored sources."""
        errors = list(self.errors)
        unused = sorted(set(self.arrays) - self._used - set(self._ignored))
        for name in unused:
            errors.append(f"unused source variable {name!r} with shape {tuple(np.shape(self.arrays[name]))} "
                          f"(the model has no weight for it)")
        for variable in model.weights:
            if id(variable) not in self._assigned:
                errors.append(f"model weight {variable.path!r} with shape {tuple(variable.shape)} "
                              f"was not assigned (no source variable maps to it)")
        if errors:
            lines = "\n  - ".join(errors)
            raise ConversionError(f"cannot convert {self.source}: {len(errors)} problem(s):\n  - {lines}")
        return sorted(self._ignored)
