"""The commands' one policy for input text that is not valid UTF-8: replace, then warn once per input.

`xlnet-tf predict` and `xlnet-tf generate` take text from the command line and
from files. A byte sequence that is not UTF-8 is replaced with U+FFFD before the
model (`replace_undecodable`, what the SavedModel itself does with such bytes),
and one warning line on stderr names each input where that happened, so the
output never silently differs from what the user typed.
"""

import sys

from xlnet_tf.text_normalization import replace_undecodable


def valid_text(text, where, warnings):
    """`text` as valid Unicode (`replace_undecodable`); `where` is added to `warnings` when it was not.

    Args:
        text: `str` (command-line arguments carry undecodable bytes as surrogate escapes) or `bytes`.
        where: how the warning names the input, e.g. `"TEXT argument 2"` or `"rows.jsonl:7"`.
        warnings: a list collecting the inputs that held undecodable bytes.

    Returns:
        The text, valid Unicode.

    Example:
    >>> warnings = []
    >>> valid_text(b"caf\\xe9", "TEXT argument 1", warnings) == "caf\\ufffd", warnings
    (True, ['TEXT argument 1'])
    """
    text, positions = replace_undecodable(text)
    if positions:
        warnings.append(where)
    return text


def warn_undecodable(command, warnings, file=None):
    """Prints one warning line per input in `warnings` (in order, each once) for `xlnet-tf COMMAND`.

    Example:
    >>> warn_undecodable("generate", ["PROMPT argument 1"])  # prints, on stderr:
    ... # xlnet-tf generate: warning: PROMPT argument 1 is not valid UTF-8; each undecodable byte
    ... # sequence was replaced with U+FFFD before the model.
    """
    for where in dict.fromkeys(warnings):
        print(f"xlnet-tf {command}: warning: {where} is not valid UTF-8; each undecodable byte sequence was "
              "replaced with U+FFFD before the model.", file=file or sys.stderr)
