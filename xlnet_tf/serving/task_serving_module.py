"""`TaskServingModule`: the `tf.Module` that a task SavedModel is made of."""


import keras
import tensorflow as tf

from xlnet_tf import tasks
from xlnet_tf.preprocessing.task_encoding import encode_choices, encode_words, question_with_option, split_words
from xlnet_tf.serving.token_input_checks import check_token_inputs
from xlnet_tf.text_normalization import replace_undecodable_tf
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.serving.long_document_packer import LongDocumentPacker
from xlnet_tf.serving.signature_outputs import SignatureOutputs
from xlnet_tf.models.segment_recurrence import split_into_segments

TOKEN_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def _model_vocabulary_size(model):
    """The number of rows of the model's token embedding, or None when unknown."""
    for owner in (getattr(model, "backbone", None), model):
        size = getattr(getattr(owner, "config", None), "vocabulary_size", None)
        if isinstance(size, int) and not isinstance(size, bool):
            return size
    # Functional stand-ins: the first embedding layer in topological order reads token_ids.
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.Embedding):
            return int(layer.input_dim)
    return None


def _vocabulary_size(model, vocabulary, vocabulary_size):
    """The exclusive upper bound of `token_ids`: as given, else the model's, else `len(vocabulary)`."""
    if vocabulary_size is None:
        vocabulary_size = _model_vocabulary_size(model)
    if vocabulary_size is None and vocabulary is not None:
        vocabulary_size = len(vocabulary)
    return vocabulary_size


def _has_xlnet_backbone(model):
    """Whether `model` reads its tokens through an `XLNetBackbone` (relative positions only)."""
    return isinstance(getattr(model, "backbone", None), XLNetBackbone)


def _without_leading_padding(features):
    """`features` without the leading columns that are padding in every row (at least one column kept).

    Exact for XLNet models: positions are relative, and a padded key is closed to
    every query but itself, so the real tokens of a left-padded row see the same
    keys at the same distances. The last column (`<cls>`) is always kept.
    """
    mask = features["padding_mask"]
    length = tf.shape(mask)[-1]
    # Explicit sizes, no -1: an empty batch could not infer it.
    rows = tf.reduce_prod(tf.shape(mask)[:-1])
    real_columns = tf.reduce_any(tf.not_equal(tf.reshape(mask, [rows, length]), 0), axis=0)  # [L]
    first_real = tf.argmax(tf.cast(real_columns, tf.int32), output_type=tf.int32)
    start = tf.where(tf.reduce_any(real_columns), first_real, length - 1)
    return {key: value[..., start:] for key, value in features.items()}


class TaskServingModule(tf.Module):
    """A fine-tuned task model with two serving functions, ready for `tf.saved_model.save`.

    `serve_token_ids` takes packed ids and uses core TensorFlow ops only, so any TensorFlow Serving build runs
    it. `serve_text` takes raw strings and runs the tokenizer and the XLNet packer in the graph (it needs the
    tensorflow-text ops; see `xlnet_tf/serving/README.md`). Both have a static sequence length `L` and a
    dynamic batch. Inputs are checked before the model (`check_token_inputs`): a wrong rank or length, ids
    outside `[0, vocabulary_size)` or mismatched segment ids or masks are an `InvalidArgumentError` naming
    the input. Invalid UTF-8 text is repaired to U+FFFD; longer text is truncated by the packer's rule.

    Long-document models (`max_segments > 1` with recurrence memory; classification, regression, multiple
    choice) take documents of any length: they are packed in the fine-tuning layout, cut into `[B, S, L]`
    segments and read in a `tf.while_loop` with memory, so cost grows linearly with length. Multiple choice
    takes `[B, C, L]` ids, or the fields of training as strings: `context` `[B]`, `question` `[B]` and
    `choices` `[B, C]`, each choice packed as fine-tuning packs it (a cloze question gets the choice in its
    blank); a model fine-tuned without questions (`takes_question=False`) has no `question` input, so a
    client cannot send one it never saw. Token classification splits `text` on whitespace into words, each
    tokenized on its own as in training. `trim_padding` cuts the columns that are padding in every row of a
    request before the model (same answers; XLNet's positions are relative), and `jit_compile` compiles the
    model call with XLA (then padding is not cut).

    Args:
        model (keras.Model): the task `keras.Model`; called with a dict of `token_ids`, `segment_ids`, `padding_mask`
            (int32 `[B, L]`) and `training=False`.
        task (str): one of `"classification"`, `"regression"`, `"token_classification"`, `"span"`,
            `"multiple_choice"`.
        sequence_length: int, the packed length `L`.
        preprocessor: optional callable `(text[, text_pair]) -> dict` of int32 `[B, L]` tensors named as
            above; `None` exports ids-in only. When it owns resources (a SentencePiece model, lookup tables)
            it must be trackable (a `tf.Module` or Keras layer) so the SavedModel saves them.
        vocabulary: list of pieces (index = id); needed for the `pieces` output of token classification and
            the answer text of span tasks.
        has_text_pair: whether `serve_text` takes a `text_pair` input.
        label_names (list[str] | None): optional class names, returned next to class indices. For `task="span"`, a
            `SpanAnswerDecoder` instead; the strings-in signature then takes `context` and `question`.
        output_key: which key of a dict-returning model holds the logits.
        num_choices: int, the static number of choices `C`; required for `task="multiple_choice"`.
        takes_question: multiple choice: whether the strings-in signature takes `question` (default True);
            False for a model fine-tuned without questions (each choice packed alone after the context).
        vocabulary_size: int, the exclusive upper bound of `token_ids`; by default read from the model,
            else `len(vocabulary)`.
        max_segments: int >= 1, the segments per document at fine-tuning (`task.max_segments`); above 1,
            with recurrence memory, the signatures take any length. A text signature then needs a
            `TextPreprocessor` as `preprocessor`.
        jit_compile: bool, run the model call as one XLA-compiled function (static-length signatures only).
            Default False: on CPU it is not faster than the TensorFlow executor.
        trim_padding: bool or None: cut all-padding columns before the model. None (default): on for models
            with an `XLNetBackbone` unless `jit_compile`; True for another model is refused.
        name (str): module name.

    Example:

    ```python
    import tensorflow as tf
    from xlnet_tf.serving import TaskServingModule, TextPreprocessor
    from xlnet_tf import XLNetClassifier, XLNetPacker, XLNetTokenizer
    classifier = XLNetClassifier.from_preset("xlnet_base_cased", num_classes=2)
    packer_fn = TextPreprocessor(XLNetTokenizer("spiece.model"), XLNetPacker(128))
    module = TaskServingModule(classifier, task="classification", sequence_length=128,
                               preprocessor=packer_fn, label_names=["neg", "pos"])
    module.serve_text(tf.constant(["a fine film"]))["probabilities"]  # [1, 2]
    ```
    """

    def __init__(
        self,
        model,
        *,
        task,
        sequence_length,
        preprocessor=None,
        vocabulary=None,
        has_text_pair=False,
        label_names=None,
        output_key="logits",
        num_choices=None,
        vocabulary_size=None,
        max_segments=1,
        jit_compile=False,
        trim_padding=None,
        takes_question=True,
        name=None,
    ):
        super().__init__(name=name)
        self._set_task(task, sequence_length)
        self.num_choices, self.takes_question = self._entry.serving_choices(self, num_choices, takes_question)
        self._set_long_documents(max_segments, preprocessor)
        self._set_model_call(model, jit_compile, trim_padding)
        self.has_text_pair = bool(has_text_pair)
        self.vocabulary_size = _vocabulary_size(model, vocabulary, vocabulary_size)
        self._preprocessor = preprocessor
        self.label_names = list(label_names) if label_names else None
        self._signature_outputs = SignatureOutputs(output_key, self.label_names)
        self._vocabulary = (
            tf.constant([str(p) for p in vocabulary], tf.string) if vocabulary is not None else None
        )
        # Multiple choice keeps the choices as their own axis: [B, C, L].
        self.serve_token_ids = tf.function(
            self._serve_token_ids,
            input_signature=[tf.TensorSpec(self._ids_shape(), tf.int32, name=k) for k in TOKEN_INPUTS],
        )
        if preprocessor is not None:
            self.serve_text = self._entry.serving_text_signature(self)

    # -- set-up steps ------------------------------------------------------------------

    def _set_task(self, task, sequence_length):
        if task not in tasks.TASKS:
            raise ValueError(f"task must be one of {tasks.TASK_TYPES}, got {task!r}.")
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"sequence_length must be an int >= 3, got {sequence_length!r}.")
        self.task = task
        self._entry = tasks.task_type(task)
        self.sequence_length = sequence_length

    def one_row_per_example(self, takes_question):
        """`(num_choices, takes_question)` of a task packing one row per example: `(None, None)`."""
        self._check_takes_question(takes_question, may_be_false=False)
        return None, None

    def rows_per_choice(self, num_choices, takes_question):
        """`(num_choices, takes_question)` of a multiple-choice task: one packed row per choice."""
        if not isinstance(num_choices, int) or isinstance(num_choices, bool) or num_choices < 1:
            raise ValueError(f"task={self.task!r} needs num_choices, an int >= 1, got {num_choices!r}.")
        self._check_takes_question(takes_question, may_be_false=True)
        return num_choices, takes_question

    def _check_takes_question(self, takes_question, may_be_false):
        if not isinstance(takes_question, bool) or not (takes_question or may_be_false):
            raise ValueError(f"takes_question must be a bool, False only for a multiple-choice model; got "
                             f"{takes_question!r} for task={self.task!r}.")

    def _set_long_documents(self, max_segments, preprocessor):
        if not isinstance(max_segments, int) or isinstance(max_segments, bool) or max_segments < 1:
            raise ValueError(f"max_segments must be an int >= 1, got {max_segments!r}.")
        self.max_segments = max_segments
        # Only these tasks have a long path in the model: the others keep the [B, L]
        # signatures. A model fine-tuned on segments without memory read the last segment
        # (the end of the document), so it is served the same way.
        self.long_documents = bool(max_segments > 1 and self._entry.long_documents)
        self._long_packer = None
        if self.long_documents and preprocessor is not None:
            self._long_packer = self._make_long_packer(preprocessor, self.sequence_length)

    def _set_model_call(self, model, jit_compile, trim_padding):
        if not isinstance(jit_compile, bool):
            raise ValueError(f"jit_compile must be a bool, got {jit_compile!r}.")
        if jit_compile and self.long_documents:
            raise ValueError("jit_compile=True is for the static-length signatures; a long-document "
                             "model (max_segments > 1 with recurrence memory) takes any length.")
        self.jit_compile = jit_compile
        self.trim_padding = self._trim_padding_setting(model, trim_padding)
        # The model is called through a plain closure and only its variables are
        # tracked: tracking the Keras model itself would make TensorFlow trace
        # Keras' own default signature, which guesses float inputs for subclassed models.
        self.position_heads = self._position_heads(model, self.sequence_length, self.long_documents)

        def call_model(features):
            if self.position_heads is None:
                return model(features, training=False)
            with model.backbone.lend_position_heads(self.position_heads):
                return model(features, training=False)

        self._call_model = call_model
        if jit_compile:
            # Only the model: tensorflow-text ops and `Assert` have no XLA kernels.
            self._call_model = tf.function(self._call_model, jit_compile=True)
        self.model_variables = [getattr(v, "_value", v) for v in model.variables]

    # -- the strings-in signature of each kind of task (`TaskType.serving_text_signature`) ---

    def text_signature(self):
        """`serve_text` of a text task: `text` (+ `text_pair`), packed by the preprocessor."""
        return self._text_function(self._pack_texts, self._no_extras)

    def words_signature(self):
        """`serve_text` of a token classifier: `text` split into words as in training, plus `pieces`."""
        if self._vocabulary is None:
            raise ValueError(f"{self.task} with a text signature needs the vocabulary.")
        return self._text_function(self._pack_words, self._pieces)

    def choices_signature(self):
        """`serve_text` of multiple choice: the fields of training, `context`, `question` (if any), `choices`."""
        context_spec = tf.TensorSpec([None], tf.string, name="context")
        choices_spec = tf.TensorSpec([None, self.num_choices], tf.string, name="choices")
        if not self.takes_question:
            return tf.function(self._serve_choices_alone, input_signature=[context_spec, choices_spec])
        return tf.function(self._serve_choices, input_signature=[
            context_spec, tf.TensorSpec([None], tf.string, name="question"), choices_spec])

    def span_signature(self):
        """`serve_text` of a span task: `context` and `question`, answered by the `SpanAnswerDecoder`."""
        if not hasattr(self._preprocessor, "answer"):
            raise ValueError(f"task={self.task!r} needs a SpanAnswerDecoder as its preprocessor.")
        return tf.function(
            self._serve_span,
            input_signature=[
                tf.TensorSpec([None], tf.string, name="context"),
                tf.TensorSpec([None], tf.string, name="question"),
            ],
        )

    def _text_function(self, pack, extras):
        """`serve_text` on `text` (+ `text_pair`): `pack(*texts)` gives the ids, `extras(features)` more outputs."""
        self._pack_text, self._text_extras = pack, extras
        text_spec = tf.TensorSpec([None], tf.string, name="text")
        if not self.has_text_pair:
            return tf.function(self._serve_text, input_signature=[text_spec])
        pair_spec = tf.TensorSpec([None], tf.string, name="text_pair")
        return tf.function(self._serve_text_pair, input_signature=[text_spec, pair_spec])

    def _ids_shape(self):
        """The ids signature's shape: `[B, L]` / `[B, C, L]`, with a dynamic length for long documents."""
        length = None if self.long_documents else self.sequence_length
        return [None, length] if self.num_choices is None else [None, self.num_choices, length]

    @staticmethod
    def _position_heads(model, sequence_length, long_documents):
        """Each layer's projected relative positions for `sequence_length` tokens and any memory, kept by the module.

        They depend on the weights only, so every request would otherwise
        recompute them (a `[2L, H] x [H, H]` matmul per layer, a noticeable
        share of a short forward pass). Kept as variables (in the checkpoint, not
        the graph). None for models without an `XLNetBackbone` or with `bi_data`.
        """
        if not _has_xlnet_backbone(model):
            return None
        if not model.backbone.projects_positions_ahead:
            return None
        config = model.backbone.config
        # A long document's segments also attend to the memory carried from the segments before them.
        keys = sequence_length + (config.memory_length if long_documents else 0)
        return [tf.Variable(heads, trainable=False, name=f"position_heads_{index}")
                for index, heads in enumerate(model.backbone.project_positions(keys))]

    def _trim_padding_setting(self, model, trim_padding):
        """The effective `trim_padding` (see the class docstring)."""
        if trim_padding is not None and not isinstance(trim_padding, bool):
            raise ValueError(f"trim_padding must be a bool or None, got {trim_padding!r}.")
        applies = self._entry.long_documents and not self.long_documents
        if trim_padding is None:
            return bool(applies and _has_xlnet_backbone(model) and not self.jit_compile)
        if trim_padding and not (applies and _has_xlnet_backbone(model)):
            raise ValueError(
                "trim_padding=True needs a classification, regression or multiple-choice model with an "
                "XLNetBackbone and static-length signatures (other models may read absolute positions).")
        if trim_padding and self.jit_compile:
            raise ValueError("trim_padding=True and jit_compile=True: XLA would compile one program per "
                             "trimmed length; pick one.")
        return trim_padding

    @staticmethod
    def _make_long_packer(preprocessor, sequence_length):
        packer = getattr(preprocessor, "packer", None)
        if not callable(getattr(preprocessor, "tokenize", None)) or packer is None:
            raise ValueError(
                "Long-document serving (max_segments > 1) packs whole documents itself, so its preprocessor "
                "must be a TextPreprocessor (with `tokenize` and `packer`); got "
                f"{type(preprocessor).__name__}.")
        return LongDocumentPacker(
            sequence_length, truncate=getattr(packer, "truncate", "longest_first"),
            second_max_length=getattr(packer, "second_max_length", None))

    @property
    def has_text_signature(self):
        """Whether `serving_default` takes strings (a preprocessor was given) rather than ids."""
        return self._preprocessor is not None

    def signatures(self):
        """Returns the `{name: concrete_function}` map to pass to `tf.saved_model.save`."""
        ids_fn = self.serve_token_ids.get_concrete_function()
        if not self.has_text_signature:
            return {"serving_default": ids_fn, "serve_token_ids": ids_fn}
        return {"serving_default": self.serve_text.get_concrete_function(), "serve_token_ids": ids_fn}

    # -- serving functions -------------------------------------------------------------

    def _serve_token_ids(self, token_ids, segment_ids, padding_mask):
        features = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        if self.long_documents:
            return self._predict(self._segments(self._checked(features)))
        return self._predict(self._checked(features))

    def _serve_text(self, text):
        text = self._sanitize(text)
        if self.long_documents:
            return self._predict(self._segments(self._checked(self._pack_long(text))))
        features = self._preprocess(text)
        outputs = self._predict(features)
        outputs.update(self._text_extras(features))
        return outputs

    def _serve_text_pair(self, text, text_pair):
        text, text_pair = self._sanitized_pair(text, text_pair, "text", "text_pair")
        if self.long_documents:
            return self._predict(self._segments(self._checked(self._pack_long(text, text_pair))))
        features = self._preprocess(text, text_pair)
        outputs = self._predict(features)
        outputs.update(self._text_extras(features))
        return outputs

    def _serve_choices_alone(self, context, choices):
        # Fine-tuning read an empty question for every example: each choice alone is its B segment.
        return self._serve_choices(context, tf.fill(tf.shape(context), ""), choices)

    def _serve_choices(self, context, question, choices):
        batch = tf.shape(context)[0]
        # A loaded signature does not enforce the static choices axis, so check it here.
        checks = [
            tf.debugging.assert_equal(
                batch, tf.shape(choices)[0], message="context and choices must have the same batch size"
            ),
            tf.debugging.assert_equal(
                batch, tf.shape(question)[0], message="context and question must have the same batch size"
            ),
            tf.debugging.assert_equal(
                tf.shape(choices)[1],
                self.num_choices,
                message=f"choices must have {self.num_choices} columns (the model's number of choices)",
            ),
        ]
        # Grappler may run the packer before the assertions in a loaded SavedModel;
        # swapping in well-shaped placeholders on a mismatch means only the
        # assertions' messages can reach the client.
        well_shaped = tf.reduce_all(tf.equal(tf.shape(choices), tf.stack([batch, self.num_choices])))
        choices = tf.cond(
            well_shaped, lambda: choices, lambda: tf.fill([batch, self.num_choices], "")
        )  # [B, C]
        question = tf.cond(well_shaped, lambda: question, lambda: tf.fill([batch], ""))  # [B]
        with tf.control_dependencies(checks):
            context = self._sanitize(context)
            question = self._sanitize(question)
            choices = self._sanitize(choices)
        # One packed row per (context, choice) pair, as fine-tuning packs RACE: the context is
        # the A segment of each of its C rows, the question with the choice the B segment.
        if self.long_documents:
            contexts = tf.repeat(context, self.num_choices)  # [B*C]
            seconds = question_with_option(tf.repeat(question, self.num_choices), tf.reshape(choices, [-1]))
            rows = self._pack_long(contexts, seconds)  # each [B*C, T]
            length = tf.shape(rows["token_ids"])[1]
            features = {key: tf.reshape(value, [batch, self.num_choices, length])  # [B, C, T]
                        for key, value in rows.items()}
            return self._predict(self._segments(self._checked(features)))
        rows, _ = encode_choices(self._preprocessor.tokenize, self._preprocessor.packer, context, question,
                                 choices)
        rows = self._static_rows(rows, tf.shape(choices)[0] * self.num_choices)  # each [B*C, L]
        features = {
            key: tf.reshape(value, [batch, self.num_choices, self.sequence_length])  # [B, C, L]
            for key, value in rows.items()
        }
        return self._predict(self._checked(features))

    def _serve_span(self, context, question):
        context, question = self._sanitized_pair(context, question, "context", "question")
        # The decoder calls the model on its windows; the ids the tokenizer made are checked too.
        return self._preprocessor.answer(
            lambda features: self._call_model(self._checked(features)), context, question)

    # -- pieces ------------------------------------------------------------------------

    @staticmethod
    def _sanitize(text):
        # The tokenizer replaces invalid UTF-8 too; span answers are cut from the context, so
        # it must be the repaired text the offsets point into.
        return replace_undecodable_tf(text)

    def _sanitized_pair(self, first, second, first_name, second_name):
        """`_sanitize` of two `[B]` string inputs, once they are checked to have the same batch size."""
        check = tf.debugging.assert_equal(
            tf.shape(first),
            tf.shape(second),
            message=f"{first_name} and {second_name} must have the same batch size",
        )
        with tf.control_dependencies([check]):
            return self._sanitize(first), self._sanitize(second)

    def _checked(self, features):
        """`features` gated by the shape and range checks of `check_token_inputs`."""
        features = check_token_inputs(features, shape=self._ids_shape(), vocabulary_size=self.vocabulary_size)
        if not self.long_documents:
            return features
        # Any length, but not none: an empty row would leave no segment to run.
        length = tf.shape(features["token_ids"])[-1]
        check = tf.Assert(length >= 1, ["token_ids must have a length (last axis) >= 1; got shape",
                                        tf.shape(features["token_ids"])])
        with tf.control_dependencies([check]):
            return {k: tf.identity(v) for k, v in features.items()}

    def _pack_long(self, text, text_pair=None):
        """Whole documents (no truncation) packed at a multiple of `L`: int32 `[B, T]` each."""
        if text_pair is None:
            return self._long_packer([self._preprocessor.tokenize(text)])
        # One tokenizer call for both segments (one SentencePiece op in the graph).
        batch = tf.shape(text)[0]
        both = self._preprocessor.tokenize(tf.concat([text, text_pair], axis=0))  # [2B, None]
        return self._long_packer([both[:batch], both[batch:]])

    def _segments(self, features):
        """Packed `[B, T]` (`[B, C, T]`) features -> `[B, S, L]` (`[B, C, S, L]`), S = ceil(T / L)."""
        if self.num_choices is None:
            return split_into_segments(features, self.sequence_length)
        # Explicit sizes, no -1: an empty batch could not infer it.
        batch, length = tf.shape(features["token_ids"])[0], tf.shape(features["token_ids"])[2]
        flat = {k: tf.reshape(v, [batch * self.num_choices, length])  # [B*C, T]
                for k, v in features.items()}
        split = split_into_segments(flat, self.sequence_length)  # each [B*C, S, L]
        num_segments = tf.shape(split["token_ids"])[1]
        return {
            k: tf.reshape(v, [batch, self.num_choices, num_segments, self.sequence_length])  # [B, C, S, L]
            for k, v in split.items()
        }

    def _pack_texts(self, *texts):
        return self._preprocessor(*texts)

    def _pack_words(self, *texts):
        if not hasattr(self._preprocessor, "tokenize"):
            # A custom preprocessor without `tokenize` and `packer` packs the text itself.
            return self._preprocessor(*texts)
        # Word lists, as in training: each whitespace-separated word tokenized on its own.
        return encode_words(self._preprocessor.tokenize, self._preprocessor.packer, split_words(texts[0]))[0]

    def _preprocess(self, *texts):
        features = self._pack_text(*texts)
        missing = [k for k in TOKEN_INPUTS if k not in features]
        if missing:
            raise ValueError(f"The preprocessor did not return {missing}; it returned {sorted(features)}.")
        out = self._static_rows(features, tf.shape(texts[0])[0])
        # Ids from the tokenizer are checked as well: a vocabulary larger than the
        # model's embedding would otherwise be read as other rows (or zeros on GPU).
        return self._checked(out)

    def _static_rows(self, features, batch):
        """Packed features as int32 `[batch, L]` with a static length."""
        out = {}
        for key in TOKEN_INPUTS:
            value = tf.cast(features[key], tf.int32)
            # A static [B, L] shape keeps one compiled model graph for every request.
            value = tf.ensure_shape(value, [None, self.sequence_length])
            out[key] = tf.reshape(value, [batch, self.sequence_length])  # [B, L]
        return out

    def full_length_outputs(self, features):
        """The outputs of `serve_token_ids` with every column given to the model (no padding trimmed).

        Args:
            features: dict of int32 `token_ids`, `segment_ids`, `padding_mask` (`[B, L]`; `[B, C, L]`).

        Returns:
            The output dict of `serve_token_ids`.
        """
        features = {k: tf.convert_to_tensor(features[k], tf.int32) for k in TOKEN_INPUTS}
        return self._predict(self._checked(features), trim=False)

    def _predict(self, features, trim=True):
        model_features = _without_leading_padding(features) if trim and self.trim_padding else features
        outputs = self._call_model(model_features)
        return self._entry.decode_serving_outputs(self._signature_outputs, outputs, features)

    @staticmethod
    def _no_extras(features):
        return {}

    def _pieces(self, features):
        """`pieces` `[B, L]`: the strings-in signature's piece of each position ("" on padding)."""
        pieces = tf.gather(self._vocabulary, features["token_ids"])  # [B, L]
        return {"pieces": tf.where(features["padding_mask"] > 0, pieces, "")}
