"""`write_preset`: saves a converted pretrainer as a preset directory, never leaving half a preset."""


from xlnet_tf.storage import atomic_files
from xlnet_tf.storage.output_directory import check_output_directory


def write_preset(pretrainer, output, vocabulary_file=None, *, overwrite=False, check=None):
    """Saves the converted preset to `output` so that an interrupted run never leaves half a preset.

    The preset is in keras-hub's layout (`XLNetPretrainer.save_to_preset`), so
    `keras_hub.upload_preset` and every `from_preset` take it.

    The whole directory is written under a temporary sibling name and renamed
    to `output` when complete (and `check` passed). A directory already holding
    files is never written into (its `task.json`, `spiece.model` or
    `tokenizer.json` would stay beside the new weights, another model's): it is
    refused, or with `overwrite` replaced whole, the old one removed only once the
    new one is in place. A failure before that leaves the old directory as it was.

    Args:
        pretrainer: the converted `XLNetPretrainer`.
        output: the preset directory (local or any `tf.io.gfile` scheme): new or
            empty, or replaced with `overwrite`.
        vocabulary_file: the SentencePiece model (bytes or a path), or None.
        overwrite: replace a non-empty `output`.
        check: optional `check(directory)` run on the complete preset before it
            is renamed into place (e.g. a verification); raising aborts the write.

    Returns:
        `output`.

    Raises:
        OutputExistsError: `output` is not empty and `overwrite` is False.
        ValueError: `output` is a file.

    Example:
    >>> from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint
    >>> from xlnet_tf.convert.write_preset import write_preset
    >>> pretrainer, mapping, vocabulary = convert_tf1_checkpoint("xlnet_cased_L-12_H-768_A-12")  # doctest: +SKIP
    >>> write_preset(pretrainer, "presets/xlnet_base", vocabulary)  # doctest: +SKIP
    'presets/xlnet_base'
    """
    check_output_directory(output, overwrite=overwrite, what="Preset directory")

    def build(directory):
        pretrainer.save_to_preset(directory, vocabulary_file=vocabulary_file)
        if check is not None:
            check(directory)

    atomic_files.replace_directory(build, output)
    return output
