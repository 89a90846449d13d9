"""The error both Beam jobs raise for bad input, found before a pipeline starts."""


class PipelineInputError(ValueError):
    """A bad input, vocabulary or setting, found before the pipeline starts.

    The commands catch it and print its message as one line, with no traceback.

    Example:
        >>> raise PipelineInputError("--num-shards must be >= 1, got 0.")
        Traceback (most recent call last):
        ...
        PipelineInputError: --num-shards must be >= 1, got 0.
    """
