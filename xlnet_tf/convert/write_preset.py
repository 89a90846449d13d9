"""`write_preset`: saves a converted pretrainer as a preset directory, never leaving half a preset."""


def write_preset(pretrainer, output, vocabulary_file=None):
    """Saves the converted preset to `output` so that an interrupted run never leaves half a preset.

    The preset is in keras-hub's layout (`XLNetPretrainer.save_to_preset`), so
    `keras_hub.upload_preset` and every `from_preset` take it.

    A new `output` directory is written under a temporary sibling name and renamed
    when complete; into an existing directory each file is written atomically.

    Args:
        pretrainer: the converted `XLNetPretrainer`.
        output: the preset directory (local or any `tf.io.gfile` scheme).
        vocabulary_file: the SentencePiece model (bytes or a path), or None.

    Returns:
        `output`.

    Example:
    >>> pretrainer, mapping, vocabulary = convert_tf1_checkpoint("xlnet_cased_L-12_H-768_A-12")  # doctest: +SKIP
    >>> write_preset(pretrainer, "presets/xlnet_base", vocabulary)  # doctest: +SKIP
    'presets/xlnet_base'
    """
    import tensorflow as tf

    from xlnet_tf.storage import atomic_files

    if tf.io.gfile.exists(output):
        pretrainer.save_to_preset(output, vocabulary_file=vocabulary_file)
    else:
        atomic_files.replace_directory(
            lambda directory: pretrainer.save_to_preset(directory, vocabulary_file=vocabulary_file), output)
    return output
