"""XLNet's SentencePiece tokenizer (tensorflow-text ops inside graphs)."""

import base64
import binascii
import os
import warnings

import keras
import numpy as np
from xlnet_tf.tensorflow_required import tensorflow as tf
from keras_hub.tokenizers import SentencePieceTokenizer

from xlnet_tf.preprocessing.digit_comma_split import DigitCommaSplit
from xlnet_tf.formats import special_tokens
from xlnet_tf.formats.preset_files import TOKENIZER_CONFIG_FILE
from xlnet_tf.formats.preset_files import TOKENIZER_REGISTERED_NAME
from xlnet_tf.formats.special_tokens import SPECIAL_PIECES
from xlnet_tf.text_normalization import normalize_text
from xlnet_tf.text_normalization import normalize_text_tf
from xlnet_tf.text_normalization import replace_undecodable
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io

# `SPECIAL_PIECES` (re-exported from `xlnet_tf.formats.special_tokens`) are the released
# vocabulary's reserved pieces, by id. Everything else in the project (packer, pretraining
# records, reader) relies on these ids, so a vocabulary that orders them differently is
# refused at load time.


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetTokenizer(SentencePieceTokenizer):
    """SentencePiece tokenizer for XLNet vocabularies.

    A thin layer over `keras_hub.tokenizers.SentencePieceTokenizer` that
    1. checks the vocabulary's pieces 0..8 are
       `<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>` (the released
       layout, which the rest of the package relies on),
    2. applies XLNet's text normalization before SentencePiece (whitespace
       collapsed, LaTeX quotes to `"`, accents stripped unless `keep_accents`,
       lowercasing when `lowercase`), the same normalization the pretraining
       data went through (`xlnet_tf.text_normalization`),
    3. exposes the special ids the keras-hub way (`cls_token_id`, `sep_token_id`, ...).

    Inside `tf.data.Dataset.map` or a `tf.function` (and so in an exported
    SavedModel) it runs tensorflow-text ops only; called eagerly it runs the
    `sentencepiece` package, with identical ids. `tokenize` adds no special
    tokens: putting `<sep>`/`<cls>` in place is the packer's job.

    After SentencePiece it applies the original XLNet piece splitting
    (`prepro_utils.encode_pieces`, Hugging Face `XLNetTokenizer._tokenize`): a
    piece like `▁1990,` becomes `▁1990` `,` (`xlnet_tf.preprocessing.digit_comma_split`), in
    the graph and eagerly alike, so the ids are the ones the released models
    were trained on.

    Args:
        proto (str | bytes): the SentencePiece model: a path to `spiece.model`, its `bytes`,
            or the base64 `str` that `get_config` stores.
        lowercase: lowercase before tokenizing (uncased vocabularies).
        keep_accents: when False, strip accents (NFKD, drop combining marks),
            as the released models expect.
        remove_space: collapse whitespace runs and strip the ends.
        split_digit_comma: split pieces ending in "digit," into the number and
            the comma, as the original tokenizer (default; the released models
            need it). False keeps SentencePiece's segmentation.
        sequence_length (int | None): when set, outputs are dense, truncated or right-padded
            with `<pad>` (id 5) to this length.
        dtype: output dtype, an integer type or "string" (pieces).
        **kwargs: `keras.layers.Layer` arguments (`name`, ...).

    Call arguments:
        inputs: `str`, list of `str`, or `tf.string` tensor of shape `[]` or `[B]`.

    Returns:
        Token ids: `[L]` for one string, `[B, None]` ragged for a batch (or
        `[B, sequence_length]` dense when `sequence_length` is set).

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf import XLNetTokenizer
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> ids = tokenizer("A quiet river.")
    >>> tokenizer.detokenize(ids)
    'A quiet river.'
    >>> ds = tf.data.Dataset.from_tensor_slices(["a", "b"]).map(tokenizer)
    """

    def __init__(
        self,
        proto=None,
        lowercase=False,
        keep_accents=False,
        remove_space=True,
        split_digit_comma=True,
        sequence_length=None,
        dtype="int32",
        **kwargs,
    ):
        self.split_digit_comma = bool(split_digit_comma)
        self._digit_comma = None  # (proto bytes, DigitCommaSplit), built once per vocabulary
        self.lowercase = bool(lowercase)
        self.keep_accents = bool(keep_accents)
        self.remove_space = bool(remove_space)
        # Registered the keras-hub way too, so keras-hub packers find
        # `cls_token_id`, `pad_token_id`, ... (dense outputs pad with `<pad>`).
        for piece, name in zip(SPECIAL_PIECES, ("unk", "start", "end", "cls", "sep", "pad", "mask", "eod", "eop")):
            self._add_special_token(piece, f"{name}_token")
        super().__init__(proto=_decode_proto(proto), sequence_length=sequence_length, dtype=dtype, **kwargs)

    @property
    def special_ids(self):
        """`{"unk": 0, "bos": 1, ..., "eop": 8}`, the layout written into manifests."""
        return dict(special_tokens.SPECIAL_TOKEN_IDS)

    def set_proto(self, proto):
        try:
            super().set_proto(_decode_proto(proto))
        except ValueError:
            # Leave no half-loaded vocabulary behind a refused one.
            super().set_proto(None)
            raise

    def digit_comma_split(self):
        """The `DigitCommaSplit` for this vocabulary, or None when `split_digit_comma` is off."""
        self._check_vocabulary()
        return self._split_for(self.proto)

    def _split_for(self, proto):
        if not self.split_digit_comma:
            return None
        if isinstance(proto, str):
            with open(proto, "rb") as f:
                proto = f.read()
        if self._digit_comma is None or self._digit_comma[0] != proto:
            self._digit_comma = (proto, DigitCommaSplit.from_proto(proto))
        return self._digit_comma[1]

    def _set_proto_tf(self, proto):
        # optional dependency: the in-graph tokenizer is a tf.Module; keras-hub takes this path only with TensorFlow
        from xlnet_tf.preprocessing.digit_comma_sentencepiece import DigitCommaSentencepiece

        split = self._split_for(proto)
        self._sentence_piece = DigitCommaSentencepiece(proto, out_type=self.compute_dtype,
                                                       split=split if split is not None and split.fires else False)

    def _set_proto_spm(self, proto):
        super()._set_proto_spm(proto)
        split = self._split_for(proto)
        if split is not None and split.fires:
            self._sentence_piece_spm = _SplittingProcessor(
                self._sentence_piece_spm, split, pieces=self.compute_dtype == "string")

    def _update_special_token_ids(self):
        # Runs at the end of `set_proto`, before keras-hub's own lookup, so a wrong
        # vocabulary gets the specific message.
        vocabulary = self._vocabulary
        if len(vocabulary) < len(SPECIAL_PIECES):
            raise ValueError(
                f"XLNetTokenizer: the SentencePiece model has {len(vocabulary)} pieces; an XLNet vocabulary needs "
                f"at least the {len(SPECIAL_PIECES)} special pieces {list(SPECIAL_PIECES)}."
            )
        for token_id, expected in enumerate(SPECIAL_PIECES):
            if vocabulary[token_id] != expected:
                raise ValueError(
                    f"XLNetTokenizer: id {token_id} of the SentencePiece model is {vocabulary[token_id]!r}, "
                    f"expected {expected!r}. XLNet vocabularies reserve ids 0..8 for "
                    f"{' '.join(SPECIAL_PIECES)}; train one with `xlnet-tf vocab`."
                )
        super()._update_special_token_ids()

    def _normalize_python(self, inputs):
        options = dict(lowercase=self.lowercase, keep_accents=self.keep_accents, remove_space=self.remove_space)
        texts = self._valid_unicode(inputs)
        if isinstance(texts, str):
            return normalize_text(texts, **options)
        return [normalize_text(text, **options) for text in texts]

    def _valid_unicode(self, inputs):
        """Python strings (`str`, or a list of them for a batch), undecodable parts replaced with U+FFFD.

        The one policy of every path (`xlnet_tf.text_normalization.replace_undecodable`; graphs
        use `replace_undecodable_tf`, with the same result); here a `UnicodeWarning` also says
        how many strings were repaired, which ones and where.
        """
        single = isinstance(inputs, (str, bytes))
        if single:
            texts = [inputs]
        elif isinstance(inputs, (list, tuple)):
            texts = list(inputs)
        else:
            array = keras.ops.convert_to_numpy(inputs) if not isinstance(inputs, np.ndarray) else inputs
            if array.ndim > 1:
                raise ValueError(
                    f"XLNetTokenizer expects a string or a 1-D batch of strings, got shape {array.shape}.")
            single = array.ndim == 0
            texts = [array.item()] if single else array.tolist()
        clean, repaired = [], []
        for row, text in enumerate(texts):
            if not isinstance(text, (str, bytes)):
                raise ValueError(
                    f"XLNetTokenizer expects strings, got {type(text).__name__} at row {row}: {text!r}.")
            text, positions = replace_undecodable(text)
            if positions:
                unit = "byte" if isinstance(texts[row], bytes) else "character"
                where = ", ".join(str(p) for p in positions[:5]) + (", ..." if len(positions) > 5 else "")
                repaired.append(f"row {row} ({len(positions)} at {unit} {where})")
            clean.append(text)
        if repaired:
            shown = "; ".join(repaired[:10]) + ("; ..." if len(repaired) > 10 else "")
            warnings.warn(
                f"XLNetTokenizer: {len(repaired)} of {len(texts)} input string(s) were not valid UTF-8; each "
                f"undecodable part was replaced with U+FFFD, as in graphs and the exported SavedModel: {shown}.",
                UnicodeWarning, stacklevel=4)
        return clean[0] if single else clean

    def tokenize(self, inputs):
        self._check_vocabulary()
        if self._use_tf_workflow():
            if isinstance(inputs, (str, bytes, list, tuple)):
                # A Python `str` with a lone surrogate cannot become a tensor.
                inputs = self._valid_unicode(inputs)
            inputs = normalize_text_tf(
                tf.convert_to_tensor(inputs),
                lowercase=self.lowercase,
                keep_accents=self.keep_accents,
                remove_space=self.remove_space,
            )
        else:
            inputs = self._normalize_python(inputs)
        return super().tokenize(inputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                # Inline, so `from_config(get_config())` needs no side file; keras-hub presets
                # also store it as an asset (`vocabulary.spm`).
                "proto": None if self.proto is None else base64.b64encode(self.proto).decode("ascii"),
                "lowercase": self.lowercase,
                "keep_accents": self.keep_accents,
                "remove_space": self.remove_space,
                "split_digit_comma": self.split_digit_comma,
            }
        )
        return config


    # keras-hub's loader needs `tokenizer.json` and knows no preset names; a converted checkpoint or release
    # folder may hold only `spiece.model`, read here with the default settings.
    @classmethod
    def from_preset(cls, preset, config_file=TOKENIZER_CONFIG_FILE, **kwargs):
        """The tokenizer of a preset: a name (`xlnet-tf presets`), a directory (local,
        `gs://`, `ram://`) or a `hf://` / `kaggle://` handle.

        Reads keras-hub's layout (`tokenizer.json` + `assets/tokenizer/vocabulary.spm`);
        a directory with only a `spiece.model` gives a tokenizer with the default
        settings. `kwargs` override the saved constructor arguments.

        Example:
        >>> from xlnet_tf import XLNetTokenizer
        >>> tokenizer = XLNetTokenizer.from_preset("xlnet_base_cased")
        """
        preset = preset_io.resolve(preset)
        settings = {}
        saved = preset_io.fetch(preset, config_file, required=False)
        if saved is not None:
            config = atomic_files.read_json(saved)
            if config.get("registered_name") != TOKENIZER_REGISTERED_NAME:
                raise ValueError(f"{saved} holds a {config.get('class_name')!r}, not an XLNetTokenizer.")
            settings = dict(config.get("config", {}))
            if isinstance(settings.get("dtype"), dict):  # serialized by keras-hub's / our preset writer
                settings["dtype"] = keras.dtype_policies.deserialize(settings["dtype"]).name
        settings.update(kwargs)
        if settings.get("proto") is None:
            settings["proto"] = preset_io.read_bytes(preset_io.vocabulary_path(preset))
        return cls(**settings)


class _SplittingProcessor:
    """A `sentencepiece.SentencePieceProcessor` whose `Encode` applies `DigitCommaSplit`.

    keras-hub's eager path calls `Encode(inputs, add_bos=, add_eos=)` and
    formats the result; everything else goes to the wrapped processor.
    """

    def __init__(self, processor, split, pieces):
        self._processor = processor
        self._split = split
        self._pieces = pieces

    def __getattr__(self, name):
        return getattr(self._processor, name)

    def Encode(self, inputs, add_bos=False, add_eos=False, **kwargs):  # noqa: N802 - SentencePiece's name
        single = isinstance(inputs, str)
        texts = [inputs] if single else list(inputs)
        ids = self._processor.Encode(texts, out_type=int, add_bos=False, add_eos=False)
        if self._pieces:
            pieces = self._processor.Encode(texts, out_type=str, add_bos=False, add_eos=False)
            out = [self._split.split_pieces(i, p) for i, p in zip(ids, pieces)]
            bos, eos = self._processor.IdToPiece(self._processor.bos_id()), self._processor.IdToPiece(
                self._processor.eos_id())
        else:
            out = [self._split.split_ids(i) for i in ids]
            bos, eos = self._processor.bos_id(), self._processor.eos_id()
        out = [([bos] if add_bos else []) + x + ([eos] if add_eos else []) for x in out]
        return out[0] if single else out

    encode = Encode


def _decode_proto(proto):
    """A path stays a path; a base64 `str` (from `get_config`) becomes `bytes`."""
    if isinstance(proto, os.PathLike):
        proto = os.fspath(proto)
    if not isinstance(proto, str) or os.path.exists(proto):
        return proto
    if "://" in proto:
        files = atomic_files.gfile(proto)
        if not files.exists(proto):
            raise ValueError(f"XLNetTokenizer: SentencePiece model file {proto!r} does not exist.")
        with files.GFile(proto, "rb") as f:
            return f.read()
    # Any real model is kilobytes; a short string is a mistyped path, not base64.
    if len(proto) >= 64:
        try:
            return base64.b64decode(proto, validate=True)
        except (binascii.Error, ValueError):
            pass
    raise ValueError(f"XLNetTokenizer: SentencePiece model file {proto!r} does not exist.")
