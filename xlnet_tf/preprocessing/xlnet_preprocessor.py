"""`XLNetPreprocessor`: the shared base of the task preprocessors (tokenizer + `XLNetPacker`, presets)."""

import inspect
import re
import warnings

import keras
from keras_hub.models import Preprocessor

from xlnet_tf.formats.preset_files import PREPROCESSING_FILE
from xlnet_tf.formats.preset_files import PREPROCESSOR_CONFIG_FILE
from xlnet_tf.formats.special_tokens import CLS_TOKEN_ID
from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID
from xlnet_tf.formats.special_tokens import SEP_TOKEN_ID
from xlnet_tf.preprocessing.segment_layout import packed_length
from xlnet_tf.preprocessing.task_encoding import ragged_ids
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.text_normalization import replace_undecodable
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

def is_packed(x):
    """Whether `x` is already a dict of packed ids (passed through unchanged)."""
    return isinstance(x, dict) and "token_ids" in x


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetPreprocessor(Preprocessor):
    """Base of the XLNet task preprocessors: an `XLNetTokenizer` and an `XLNetPacker`.

    Subclasses implement `call(x, y=None, sample_weight=None)`; raw text goes
    through the tokenizer and the packer (TensorFlow ops only, so a
    preprocessor maps over a `tf.data.Dataset` and traces into a SavedModel),
    and a dict that already holds `token_ids` passes through unchanged.

    Args:
        tokenizer: an `xlnet_tf.XLNetTokenizer`.
        sequence_length: packed length L.
        truncate: `XLNetPacker` truncation (`"longest_first"` or `"keep_second"`).
        second_max_length (int | None): `XLNetPacker.second_max_length` (for `"keep_second"`).
        **kwargs: `keras.layers.Layer` arguments.
    """

    def __init__(self, tokenizer, sequence_length=512, truncate="longest_first",
                 second_max_length=None, **kwargs):
        # "xlnet_classifier_preprocessor", not Keras' automatic "xl_net_...".
        kwargs.setdefault("name", "xlnet_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__[5:]).lower())
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)
        self.truncate = truncate
        self.second_max_length = second_max_length
        self.packer = XLNetPacker(
            self.sequence_length, sep_token_id=SEP_TOKEN_ID, cls_token_id=CLS_TOKEN_ID, pad_token_id=PAD_TOKEN_ID,
            truncate=truncate, second_max_length=second_max_length, name="packer")

    def __call__(self, *args, **kwargs):
        # Python strings that are not valid Unicode (lone surrogates) cannot become tensors; they
        # get the tokenizer's policy (U+FFFD, a warning naming where) before Keras converts them.
        repaired = []
        names = ("x", "y", "sample_weight")
        args = tuple(_python_text_repaired(value, names[i] if i < len(names) else f"argument {i}", repaired)
                     for i, value in enumerate(args))
        kwargs = {key: _python_text_repaired(value, key, repaired) for key, value in kwargs.items()}
        if repaired:
            shown = "; ".join(repaired[:10]) + ("; ..." if len(repaired) > 10 else "")
            warnings.warn(f"{type(self).__name__}: {len(repaired)} input string(s) were not valid Unicode; each "
                          f"lone surrogate was replaced with U+FFFD (surrogate escapes by the bytes they stand "
                          f"for, then decoded): {shown}.", UnicodeWarning, stacklevel=2)
        return super().__call__(*args, **kwargs)

    def _set_max_segments(self, max_segments):
        """Long documents: `max_segments` S and, above 1, a `document_packer` of one window of S * L."""
        if isinstance(max_segments, bool) or int(max_segments) < 1:
            raise ValueError(f"{type(self).__name__}.max_segments must be an int >= 1, got {max_segments!r}.")
        self.max_segments = int(max_segments)
        if self.max_segments > 1:
            # `packer` keeps the single-segment length (already packed inputs are checked against it).
            self.document_packer = XLNetPacker(
                packed_length(self.sequence_length, self.max_segments), sep_token_id=SEP_TOKEN_ID,
                cls_token_id=CLS_TOKEN_ID, pad_token_id=PAD_TOKEN_ID, truncate=self.truncate,
                second_max_length=self.second_max_length, name="document_packer")

    def build(self, input_shape=None):
        # Nothing to build: the tokenizer and the packers are complete at construction.
        self.built = True

    def tokenize(self, text):
        """Token ids of a string tensor (ragged int32 `[B, None]` for a batch)."""
        return ragged_ids(self.tokenizer(text))

    def get_config(self):
        config = super().get_config()
        config.update({"sequence_length": self.sequence_length, "truncate": self.truncate,
                       "second_max_length": self.second_max_length})
        return config

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset_settings(cls, info):
        """Constructor arguments read from a task preset's `preprocessing.json` (subclasses extend)."""
        settings = {}
        if info.get("sequence_length"):
            settings["sequence_length"] = int(info["sequence_length"])
        if info.get("truncate") and "truncate" in cls._accepted_arguments():
            settings["truncate"] = info["truncate"]
        if info.get("second_max_length") is not None and "second_max_length" in cls._accepted_arguments():
            settings["second_max_length"] = int(info["second_max_length"])
        if info.get("max_segments") and "max_segments" in cls._accepted_arguments():
            settings["max_segments"] = int(info["max_segments"])
        return settings

    @classmethod
    def _accepted_arguments(cls):
        names = set()
        for klass in cls.__mro__:
            if "__init__" in vars(klass):
                names |= set(inspect.signature(klass.__init__).parameters)
            if klass is XLNetPreprocessor:
                break
        return names

    # keras-hub's loader reads `preprocessor.json` only; a fine-tuned preset's packing is in `preprocessing.json`
    # and a pretraining preset has neither, only the vocabulary.
    @classmethod
    def from_preset(cls, preset, **kwargs):
        """Builds the preprocessor from a preset (name, directory, `hf://` / `kaggle://` handle).

        Reads the vocabulary (`spiece.model`, or keras-hub's
        `assets/tokenizer/vocabulary.spm`) and, in a fine-tuned task preset,
        `preprocessing.json` (sequence length, truncation, lowercasing) or, in
        keras-hub's layout, `preprocessor.json`. `kwargs` override what the
        preset records.

        Example:
        >>> from xlnet_tf import XLNetClassifierPreprocessor
        >>> preprocessor = XLNetClassifierPreprocessor.from_preset(
        ...     "xlnet_base_cased", sequence_length=128)
        """
        if cls is XLNetPreprocessor:
            raise ValueError("Call from_preset on a task preprocessor, e.g. "
                             "XLNetClassifierPreprocessor.from_preset(...).")
        preset = preset_io.resolve(preset)
        saved = preset_io.fetch(preset, PREPROCESSOR_CONFIG_FILE, required=False)
        if saved is not None:
            config = atomic_files.read_json(saved)
            saved_class = keras.saving.get_registered_object(config.get("registered_name", ""))
            if saved_class is not None and issubclass(saved_class, cls):
                tokenizer = kwargs.pop("tokenizer", None) or XLNetTokenizer.from_preset(preset)
                inner = {k: v for k, v in config["config"].items() if k != "tokenizer"}
                inner.update(kwargs)
                return saved_class(tokenizer=tokenizer, **inner)
        info_path = preset_io.fetch(preset, PREPROCESSING_FILE, required=False)
        settings = cls.preset_settings(atomic_files.read_json(info_path)) if info_path else {}
        settings.update(kwargs)
        if settings.get("tokenizer") is None:
            settings["tokenizer"] = XLNetTokenizer.from_preset(preset)
        return cls(**settings)


def _python_text_repaired(value, path, repaired):
    """`value` with every Python `str` made valid (`replace_undecodable`); notes each repair in `repaired`."""
    if isinstance(value, str):
        text, positions = replace_undecodable(value)
        if positions:
            where = ", ".join(str(p) for p in positions[:5]) + (", ..." if len(positions) > 5 else "")
            repaired.append(f"{path} (character {where})")
        return text
    if isinstance(value, (list, tuple)):
        return type(value)(_python_text_repaired(v, f"{path}[{i}]", repaired) for i, v in enumerate(value))
    if isinstance(value, dict):
        return {k: _python_text_repaired(v, f"{path}[{k!r}]", repaired) for k, v in value.items()}
    return value
