"""The error every converter raises for a checkpoint that does not fit the model."""


class ConversionError(ValueError):
    """A checkpoint variable is missing, unused, duplicated or of the wrong shape.

    The message lists every problem found, each naming the source variable,
    the model weight and both shapes where they apply.
    """
