"""The error both Beam jobs raise for bad input, before a pipeline starts or on a worker while it runs."""

import re

# How a worker's error shows in the text of a failed job (a formatted traceback on most runners), with the
# step that Beam appends to the message.
_IN_JOB_TEXT = re.compile(r"PipelineInputError: ([^\n]*?)(?: \[while running '[^\n]*'\])*$", re.MULTILINE)


class PipelineInputError(ValueError):
    """A bad input, vocabulary or setting.

    Found before the pipeline starts, or by a worker reading the input (a file
    that cannot be read, a bad line with `--strict`). The commands catch it and
    print its message as one line, with no traceback.

    Example:
        >>> from xlnet_tf.beam.pipeline_input_error import PipelineInputError
        >>> raise PipelineInputError("--num-shards must be >= 1, got 0.")
        Traceback (most recent call last):
        ...
        PipelineInputError: --num-shards must be >= 1, got 0.
    """


def input_error_of_failed_job(error):
    """The `PipelineInputError` a worker raised, recovered from the error of the failed job, or None.

    In-process runners re-raise the worker's exception (its message with the
    step appended); others raise their own exception whose message holds the
    worker's traceback as text. Either way the message comes back as it was
    raised.

    Args:
        error: what running the pipeline (or waiting for it) raised.

    Example:
    >>> from xlnet_tf.beam.pipeline_input_error import input_error_of_failed_job
    >>> input_error_of_failed_job(RuntimeError(
    ...     "Pipeline failed:\\nTraceback ...\\nPipelineInputError: x.txt: bad. [while running 'Read']"))
    PipelineInputError('x.txt: bad.')
    """
    match = _IN_JOB_TEXT.search(f"{type(error).__name__}: {error}")
    return PipelineInputError(match.group(1)) if match else None
