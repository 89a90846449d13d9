"""Shared base of the fine-tuning task models (backbone handling, presets, `<cls>` pooling).

A task preset (written by `XLNetTask.save_to_preset`, read by `XLNetTask.from_preset`
and `load_task_preset`) is in keras-hub's layout (see `xlnet_tf.storage.preset_io`):

- `config.json` + `model.weights.h5` + `metadata.json`: the backbone, as a backbone preset;
- `task.json`: the serialized task model (backbone and preprocessor inside);
- `task.weights.h5`: the head's weights only (backbone layers skipped, no optimizer state);
- `preprocessor.json`, `tokenizer.json`, `assets/tokenizer/vocabulary.spm` (+ `spiece.model`):
  the task's preprocessor and vocabulary, when known;
- `preprocessing.json` (extra, when known): how raw text was packed and the serving
  metadata `xlnet-tf export` needs (task type, sequence length, text fields, label names,
  SQuAD `null_score_threshold`, ...).

A backbone or pretraining preset (no `task.json`) gives the backbone's weights and a fresh head.
"""

import math
import os
import re
import sys
import warnings

import keras
import numpy as np
from keras import ops
from keras_hub.models import Task

from xlnet_tf import tasks
from xlnet_tf.formats.preset_files import PREPROCESSING_FILE
from xlnet_tf.formats.preset_files import TASK_CONFIG_FILE
from xlnet_tf.formats.preset_files import TASK_WEIGHTS_FILE
from xlnet_tf.formats.preset_files import PREPROCESSOR_CONFIG_FILE
from xlnet_tf.formats.special_tokens import CLS_TOKEN_ID
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.models.xlnet_backbone import REQUIRED_INPUTS, XLNetBackbone
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.token_id_checks import check_token_id_inputs
from xlnet_tf.models.first_replica_build import FirstReplicaBuild
from xlnet_tf.models.traced_dropout_step import TracedDropoutStep
from xlnet_tf.preprocessing.string_inputs import contains_string_data, describe_input, dtype_name
from xlnet_tf.preprocessing.xlnet_preprocessor import is_packed
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io
from xlnet_tf.tensorflow_required import TensorFlowRequiredError, tensorflow_available
from xlnet_tf.optimizers.build_optimizer import BUILD_OPTIMIZER_ARGUMENTS
from xlnet_tf.optimizers.build_optimizer import build_optimizer
from xlnet_tf.optimizers.build_optimizer import exclude_from_weight_decay


_PACKED_IDS = "(token_ids, segment_ids, padding_mask, each int [batch, length])"


def _is_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (TensorFlow is the data side; without it no data set exists)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.data.Dataset)


def _is_ragged(x):
    """Whether `x` is a `tf.RaggedTensor` (word lists and their labels)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.RaggedTensor)


def _is_array_data(x):
    """Whether `x` is held in memory (arrays, tensors, lists, dicts and tuples of them), not a generator."""
    return all(isinstance(leaf, (np.ndarray, np.generic, list, tuple, str, bytes, int, float, bool))
               or hasattr(leaf, "shape") for leaf in _leaves(x))


def _leaves(x):
    """The inputs of `x` as `tf.data.Dataset.from_tensor_slices` reads them: a list is one input."""
    if isinstance(x, dict):
        return [leaf for value in x.values() for leaf in _leaves(value)]
    if isinstance(x, tuple):
        return [leaf for value in x for leaf in _leaves(value)]
    return [x]


def _lists_as_arrays(x):
    """`x` with every list input (a list is one input, as in `_leaves`) as a numpy array.

    `keras.Model.fit` walks lists as nests of separate inputs. Python numbers narrow to
    the dtypes `tf.data.Dataset.from_tensor_slices` gives them (int32, float32), as
    keras-hub's data set does; arrays and tensors keep their own dtype.
    """
    if isinstance(x, dict):
        return {key: _lists_as_arrays(value) for key, value in x.items()}
    if isinstance(x, tuple):
        return tuple(_lists_as_arrays(value) for value in x)
    if not isinstance(x, list):
        return x
    array = np.asarray(x)
    narrower = {np.dtype("int64"): "int32", np.dtype("float64"): "float32"}.get(array.dtype)
    return array if narrower is None else array.astype(narrower)


def _row_count(x):
    """Rows of the first input of `x`, or None when its shape does not say."""
    leaves = _leaves(x)
    if not leaves:
        return None
    first = leaves[0]
    if isinstance(first, list):
        return len(first)
    if _is_ragged(first):
        return int(first.nrows())
    shape = getattr(first, "shape", None)
    if shape is None or getattr(shape, "rank", 1) is None or len(shape) == 0:
        return None
    return shape[0]


def _split_rows(data, validation_split):
    """`(train, validation)`: the first `floor(rows * (1 - validation_split))` rows of every input, and the rest."""
    rows = _row_count(data[0])
    at = int(math.floor(rows * (1.0 - validation_split)))
    if at in (0, rows):
        raise ValueError(f"validation_split={validation_split} of {rows} examples leaves no example for training "
                         "or for validation; pass more examples or another validation_split.")

    def rows_of(value, start, end):
        if isinstance(value, dict):
            return {key: rows_of(item, start, end) for key, item in value.items()}
        if isinstance(value, tuple):
            return tuple(rows_of(item, start, end) for item in value)
        return None if value is None else value[start:end]

    return rows_of(data, 0, at), rows_of(data, at, rows)


def _holds_numbers(x):
    """Whether some input of `x` holds numbers (ids), not text: a number, a numeric array or tensor."""
    for leaf in keras.tree.flatten(x):
        if isinstance(leaf, (bool, int, float, np.number)):
            return True
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and dtype_name(dtype) not in ("string", "object"):
            return True
    return False


def cls_positions(token_ids, padding_mask, cls_token_id=CLS_TOKEN_ID):
    """Index of the `<cls>` token of every row, whatever side the padding is on.

    The last real `<cls>` of a row is used (XLNet puts `<cls>` last). A row
    without any `<cls>` falls back to its last real token, which is where the
    `<cls>` sits for both left padding (`L - 1`) and right padding
    (`length - 1`); a row without any real token falls back to `L - 1`.

    Args:
        token_ids: int tensor `[B, L]`.
        padding_mask: int/bool tensor `[B, L]`, 1 = real token.
        cls_token_id: id of `<cls>`.

    Returns:
        int32 tensor `[B]`.
    """
    length = ops.shape(token_ids)[1]
    real = ops.cast(padding_mask, "bool")
    positions = ops.arange(length, dtype="int32")[None, :]  # [1, L]
    is_cls = ops.logical_and(ops.equal(token_ids, cls_token_id), real)
    last_cls = ops.max(ops.where(is_cls, positions, -1), axis=1)
    last_real = ops.max(ops.where(real, positions, -1), axis=1)
    index = ops.where(last_cls >= 0, last_cls, last_real)
    return ops.where(index >= 0, index, length - 1)


def gather_positions(sequence, index):
    """Picks `sequence[b, index[b]]` with a one-hot product (works on every device).

    Args:
        sequence: `[B, L, H]`.
        index: int `[B]`.

    Returns:
        `[B, H]`.
    """
    one_hot = ops.one_hot(index, ops.shape(sequence)[1], dtype=sequence.dtype)  # [B, L]
    return ops.einsum("blh,bl->bh", sequence, one_hot)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetTask(FirstReplicaBuild, TracedDropoutStep, Task):
    """Base class of the XLNet task models: backbone, preprocessor, compile defaults, presets.

    A `keras_hub.models.Task` (so a `PipelineModel`): `fit`, `evaluate` and
    `predict` map the `preprocessor` over their data, so they take raw text
    (strings, pairs, questions/contexts, choices: see each task's
    preprocessor) or dicts of already packed ids. A model built without a
    preprocessor takes packed ids only and names the fix when given text.

    Token-id inputs are checked by `xlnet_tf.models.token_id_checks.check_token_id_inputs`
    (a dict of the three inputs, integer, agreeing shapes, ids inside the vocabulary):
    in `model(x)`, before `fit`/`evaluate`/`predict` build their data set (every check
    on concrete values; structure, dtypes and shapes on a `tf.data.Dataset`'s element
    spec), and with `Assert`s on every batch of the preprocessing map, the ids a
    preprocessor packs included. A batch without examples is refused too.

    Subclasses create their head layers in `__init__`, create their weights in
    `build_head(hidden_dim)` and end `__init__` with `self.build()`, so that a
    model is complete before any call (a `.keras` load then restores every
    weight); they implement `call`, `default_compile_arguments` and list their
    own constructor arguments in `get_config` by extending `super().get_config()`.

    Args:
        backbone: an `xlnet_tf.models.xlnet_backbone.XLNetBackbone`.
        preprocessor: the task's preprocessor (e.g. `XLNetClassifierPreprocessor`)
            or None (inputs must then be packed ids).
        compile: compile with the defaults (`compile()`) once built.
        **kwargs: `name`, `dtype`, `trainable` of `keras.Model`.

    Example:
    >>> from xlnet_tf import XLNetClassifier
    >>> classifier = XLNetClassifier.from_preset("xlnet_base_cased", num_classes=2)
    >>> classifier.predict(["A fine film.", "A dull film."], verbose=0).shape
    (2, 2)
    """

    # The preprocessor class of each task model, as keras-hub's `Task.preprocessor_cls`.
    preprocessor_cls = None

    def __init__(self, backbone, preprocessor=None, compile=True, **kwargs):
        # "xlnet_classifier", not Keras' automatic "xl_net_classifier".
        kwargs.setdefault("name", "xlnet_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__[5:]).lower())
        # keras-hub's Task compiles at the end of its __init__, before the head
        # exists; the defaults need the built model, so `build()` compiles.
        super().__init__(compile=False, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self._compile_when_built = bool(compile)

    # ------------------------------------------------------------------ inputs
    # The shapes of `token_ids` the model reads, axis names (subclasses with long documents add theirs).
    input_shapes = (("batch", "length"),)
    # The raw inputs of the task's preprocessor, as a user passes them (for the messages).
    text_inputs = "raw text"

    def _no_preprocessor_message(self):
        name = type(self).__name__
        return (f"{name} was built without a preprocessor, so it takes dicts of packed ids "
                "(token_ids, segment_ids, padding_mask) and cannot read text. Pass "
                f"preprocessor={getattr(self.preprocessor_cls, '__name__', 'a preprocessor')}(tokenizer, ...) when "
                f"building it, or build it with {name}.from_preset(...), which attaches one.")

    def _ids_hint(self):
        """What else the model takes, added to the messages that refuse its token-id inputs."""
        name = type(self).__name__
        if self.preprocessor is None:
            preprocessor = getattr(self.preprocessor_cls, "__name__", "a preprocessor")
            return (f" {name} has no preprocessor, so it reads packed ids only: {preprocessor}(tokenizer, ...)(x) "
                    f"packs raw text into them, and {name}(backbone, preprocessor=...) or {name}.from_preset(...) "
                    "builds a model that takes the text itself.")
        return (f" With its {type(self.preprocessor).__name__} it also takes raw text: {self.text_inputs}; "
                "model.preprocessor(x) shows the dict it packs them into.")

    def _checked_token_ids(self, inputs, assert_in_graph=False):
        """`inputs` once `check_token_id_inputs` accepts them for this model (see that module)."""
        return check_token_id_inputs(
            inputs, vocabulary_size=self.backbone.config.vocabulary_size, caller=type(self).__name__,
            shapes=self.input_shapes, hint=self._ids_hint(), assert_in_graph=assert_in_graph)

    def _text_inputs(self, x):
        """Raw inputs of the preprocessor (or a data set's element spec), refused when they hold numbers."""
        if _holds_numbers(x):
            raise ValueError(
                f"{type(self).__name__} takes raw text through its {type(self.preprocessor).__name__}: "
                f"{self.text_inputs}; or a dict of packed ids {_PACKED_IDS}; got {describe_input(x)}. "
                "model.preprocessor(x) shows the dict it packs text into.")
        return x

    def _text_labels(self, y):
        """Labels of raw text, as `fit`/`evaluate` take them (subclasses convert ragged lists)."""
        return y

    def _host_data(self, x, y, method):
        """`(x, y, direct)` of `fit`/`evaluate`/`predict`, checked before any data set is built from them.

        Concrete inputs get every check of `check_token_id_inputs` (values included)
        here, where a failure is a plain exception; a `tf.data.Dataset` gets the
        structure, dtype and shape checks on its `element_spec`, and its values are
        checked batch by batch in `preprocess_samples`. Other inputs (generators,
        `PyDataset`s) pass unchanged to the same per-batch checks.

        `direct`: give `x`, `y` to `keras.Model`'s own loop instead of keras-hub's, which
        builds a `tf.data` (or grain) data set only to map the preprocessor over it. So
        for in-memory packed ids, which every preprocessor passes through unchanged
        (their values checked here), and for every input when TensorFlow is not
        installed; raw text then raises `TensorFlowRequiredError`, as the tokenizer and
        the packer are TensorFlow ops.
        """
        if _is_dataset(x):
            spec = keras.utils.unpack_x_y_sample_weight(x.element_spec)[0]
            if self.preprocessor is None and contains_string_data(spec):
                raise ValueError(self._no_preprocessor_message())
            if self.preprocessor is None or is_packed(spec):
                self._checked_token_ids(spec)
            else:
                self._text_inputs(spec)
            return x, y, False
        if x is None or not _is_array_data(x):
            return x, y, not tensorflow_available()
        if self.preprocessor is None and contains_string_data(x):
            raise ValueError(self._no_preprocessor_message())
        if self.preprocessor is None or is_packed(x):
            self._checked_token_ids(x)
            # Ragged values need keras-hub's tf.data set (Keras' array loop cannot slice them).
            direct = not any(_is_ragged(leaf) for leaf in _leaves((x, y)))
            return (_lists_as_arrays(x), _lists_as_arrays(y), True) if direct else (x, y, False)
        if _row_count(x) == 0:
            raise ValueError(f"{type(self).__name__}.{method} got 0 examples ({describe_input(x)}); pass at least one.")
        if not tensorflow_available():
            raise TensorFlowRequiredError(
                f"{type(self).__name__}.{method} on raw text",
                f"its {type(self.preprocessor).__name__} tokenizes and packs with TensorFlow ops; got "
                f"{describe_input(x)}. Without TensorFlow pass a dict of packed ids {_PACKED_IDS}")
        return self._text_inputs(x), self._text_labels(y), False

    def __call__(self, *args, **kwargs):
        inputs = args[0] if args else kwargs.get("inputs")
        if contains_string_data(inputs):
            if self.preprocessor is None:
                raise ValueError(self._no_preprocessor_message())
            return super().__call__(*args, **kwargs)  # keras-hub's message: text goes through predict/fit
        self._checked_token_ids(inputs)
        return super().__call__(*args, **kwargs)

    def preprocess_samples(self, x, y=None, sample_weight=None):
        if self.preprocessor is None and contains_string_data(x):
            raise ValueError(self._no_preprocessor_message())
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(super().preprocess_samples(x, y, sample_weight))
        # The ids as the model will read them, text packed by the preprocessor included (its tokenizer may
        # know more pieces than the embedding): in a `tf.data` map, Asserts on each batch.
        x = self._checked_token_ids(x, assert_in_graph=True)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None, **kwargs):
        x, y, direct = self._host_data(x, y, "fit")
        split = kwargs.get("validation_split")
        if split and validation_data is None and any(_is_ragged(leaf) for leaf in _leaves((x, y))):
            # keras-hub splits arrays only; word lists are ragged. The same rule: the last rows validate.
            kwargs.pop("validation_split")
            (x, y, sample_weight), validation_data = _split_rows((x, y, sample_weight), split)
        elif validation_data is not None and not _is_dataset(validation_data):
            vx, vy, vsw = keras.utils.unpack_x_y_sample_weight(validation_data)
            vx, vy, validation_direct = self._host_data(vx, vy, "fit")
            direct = direct and validation_direct
            validation_data = keras.utils.pack_x_y_sample_weight(vx, vy, _lists_as_arrays(vsw))
        elif validation_data is not None:
            direct = False  # a `tf.data.Dataset`: keras-hub maps the preprocessor over it
        if direct:
            # Keras' own loop: keras-hub's would build a data set only to pass the packed ids through.
            return keras.Model.fit(self, x, y, batch_size=batch_size, sample_weight=_lists_as_arrays(sample_weight),
                                   validation_data=validation_data, **kwargs)
        return super().fit(x, y, batch_size=batch_size, sample_weight=sample_weight,
                           validation_data=validation_data, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        if kwargs.get("_use_cached_eval_dataset", False):  # `fit`'s validation data, already prepared
            return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)
        x, y, direct = self._host_data(x, y, "evaluate")
        if direct:
            return keras.Model.evaluate(self, x, y, batch_size=batch_size,
                                        sample_weight=_lists_as_arrays(sample_weight), **kwargs)
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def predict(self, x=None, batch_size=None, **kwargs):
        x, _, direct = self._host_data(x, None, "predict")
        if direct:
            return keras.Model.predict(self, x, batch_size=batch_size, **kwargs)
        return super().predict(x, batch_size=batch_size, **kwargs)

    # ------------------------------------------------------------------ compile
    def compile_from_config(self, config):
        """Recompiles a loaded model (`.keras`) with its saved optimizer, loss and metrics."""
        config = keras.saving.deserialize_keras_object(config)
        super().compile(**config)
        optimizer = self.optimizer
        if optimizer is None:
            return
        # The exclusions are by variable, so they are not in the saved config.
        exclude_from_weight_decay(optimizer, self)
        # Build the slots only when the file holds them (a trained model): a model
        # saved before training (compiled at construction) has just the step counter.
        load_own_variables = optimizer.load_own_variables
        model = self

        def load_saved_slots(store):
            if not optimizer.built and len(store.keys()) > len(optimizer.variables):
                optimizer.build(model.trainable_variables)
            load_own_variables(store)

        optimizer.load_own_variables = load_saved_slots

    @classmethod
    def default_compile_arguments(cls, **settings):
        """`loss` (and `metrics`, `loss_weights`) of this task; `settings` are constructor values."""
        raise NotImplementedError(f"{cls.__name__} must implement default_compile_arguments().")

    def _compile_settings(self):
        return {}

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs):
        """`keras.Model.compile` with this task's defaults for every `"auto"` argument.

        The default optimizer is `xlnet_tf.optimizers.build_optimizer`'s, the one
        `xlnet-tf finetune` trains with: AdamW on a linear warmup and decay,
        global-norm clipping, no weight decay on LayerNorm parameters and biases,
        optional layer-wise learning-rate decay. Its settings are
        `build_optimizer`'s keyword arguments, named as the keys of the run
        config's `optimizer` section (`learning_rate`, `warmup_steps`,
        `train_steps`, `end_learning_rate`, `decay_power`, `weight_decay`,
        `adam_epsilon`, `beta_1`, `beta_2`, `clip_norm`, `layer_decay`,
        `gradient_accumulation_steps`, ...), with the same defaults.

        Args:
            optimizer: `"auto"`: `build_optimizer(self, **settings)`; or any Keras
                optimizer (e.g. a `build_optimizer` result).
            loss: `"auto"`: the task's loss (`default_compile_arguments`).
            metrics: `"auto"`: the task's metrics.
            **kwargs: the default optimizer's settings (only with `optimizer="auto"`),
                and other `keras.Model.compile` arguments.

        Raises:
            ValueError: optimizer settings given with an optimizer other than `"auto"`.

        Example:
        >>> from xlnet_tf import XLNetBackbone, XLNetClassifier, XLNetConfig
        >>> classifier = XLNetClassifier(XLNetBackbone(XLNetConfig(
        ...     vocabulary_size=32, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8, intermediate_dim=16)),
        ...     num_classes=2)
        >>> classifier.compile()  # AdamW 2e-5 after 100 warmup steps, cross-entropy, accuracy
        >>> classifier.compile(learning_rate=5e-5, train_steps=1000, layer_decay=0.75)
        >>> type(classifier.optimizer).__name__  # per-layer learning rates
        'LayerwiseAdamW'
        """
        settings = {key: kwargs.pop(key) for key in BUILD_OPTIMIZER_ARGUMENTS if key in kwargs}
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = build_optimizer(self, **settings)
        elif settings:
            raise ValueError(f"{sorted(settings)} set the default optimizer (optimizer=\"auto\"), but "
                             f"optimizer={optimizer!r} was given: pass them to "
                             "xlnet_tf.optimizers.build_optimizer instead, or drop them.")
        defaults = type(self).default_compile_arguments(**self._compile_settings())
        if isinstance(loss, str) and loss == "auto":
            loss = defaults["loss"]
            if "loss_weights" in defaults:
                kwargs.setdefault("loss_weights", defaults["loss_weights"])
        if isinstance(metrics, str) and metrics == "auto":
            metrics = defaults.get("metrics")
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def backbone_inputs(self, inputs):
        """The three backbone inputs of a feature dict (other keys, e.g. labels, are dropped).

        `__call__` has checked them (`check_token_id_inputs`) before `call` runs.
        """
        return {key: inputs[key] for key in REQUIRED_INPUTS}

    def backbone_sequence(self, features, training, output_positions=None):
        """The backbone's content stream for `features`, and the dropout seed of the head.

        Backbone and head draw their dropout masks from sub-seeds of one step
        seed (None outside `fit`), so both survive a resume.

        Args:
            features: the backbone inputs (`backbone_inputs`), `[B, L]` each.
            training: the call's `training` flag.
            output_positions: optional int `[B, Q]`, the backbone's
                `output_positions` (the sequence is then `[B, Q, H]`).

        Returns:
            `(sequence [B, L, H], head_seed)`; `head_seed` is an int64 `[2]` or None,
            for `seeded_dropout.apply_dropout` in the head.
        """
        step_seed = seeded_dropout.training_dropout_seed(self, training)
        sequence = self.backbone(
            features, training=training,
            dropout_seed=seeded_dropout.sub_seed(step_seed, seeded_dropout.BACKBONE_SEED),
            output_positions=output_positions,
        )["sequence_output"]  # [B, L, H]
        return sequence, seeded_dropout.sub_seed(step_seed, seeded_dropout.HEAD_SEED)

    def build(self, input_shape=None):
        """Creates every weight from the config alone (the inputs' shapes are not needed)."""
        if not self.backbone.built:
            self.backbone.build()
        self.build_head(self.backbone.config.hidden_dim)
        self.built = True
        if getattr(self, "_compile_when_built", False):
            self._compile_when_built = False
            self.compile()

    def build_head(self, hidden_dim):
        """Builds the head's layers for a backbone of width `hidden_dim` (subclasses)."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_head(hidden_dim).")

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": (None if self.preprocessor is None
                             else keras.saving.serialize_keras_object(self.preprocessor)),
        }

    @classmethod
    def from_config(cls, config):
        """Rebuilds the model from `get_config`'s dict (the backbone serialized under `backbone`)."""
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        backbone = config.pop("backbone", None)
        if backbone is None:
            raise ValueError(f"{cls.__name__}.from_config needs `backbone`; got keys {sorted(config)}.")
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if isinstance(config.get("preprocessor"), dict):
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(backbone=backbone, **config)

    def build_with_dummy_inputs(self):
        """Creates every weight by running the model once on a tiny input."""
        self(self.dummy_inputs(), training=False)

    def dummy_inputs(self, batch_size=1, sequence_length=4):
        """A tiny valid input dict for this task (used to build weights before loading)."""
        token_ids = ops.concatenate(
            [ops.full((batch_size, sequence_length - 1), 10, dtype="int32"),
             ops.full((batch_size, 1), CLS_TOKEN_ID, dtype="int32")], axis=1)  # [B, L]
        return {
            "token_ids": token_ids,
            "segment_ids": ops.zeros((batch_size, sequence_length), dtype="int32"),
            "padding_mask": ops.ones((batch_size, sequence_length), dtype="int32"),
        }

    # keras-hub's `Task.from_preset` neither gives a pretraining backbone the fine-tuning settings
    # (`XLNetConfig.finetuning_adjustments`) nor reads a task preset's `preprocessing.json` or our preset names.
    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds the task model from a task preset or from a backbone preset.

        Args:
            preset: a preset name (`xlnet-tf presets`, downloaded on first use),
                a directory (local, `gs://`, `ram://`) or a `hf://` / `kaggle://`
                handle. With `task.json` (a saved task model of this class) the
                whole model is restored and `kwargs` override its config.
                Without it, the preset is a backbone (or pretraining) preset: the
                backbone is loaded with the fine-tuning settings
                (`XLNetConfig.finetuning_adjustments`: `bi_data` off and no recurrence memory,
                also when the preset comes from pretraining with them on) and a
                new head is built from `kwargs`. Either preset layout.
            load_weights: load weights (False: same architecture, fresh weights).
            **kwargs: constructor arguments of the task class; `preprocessor`
                defaults to the task's preprocessor read from the preset (None
                when the preset has no vocabulary).

        Returns:
            A built, compiled task model.

        Raises:
            ValueError: the preset holds a task model of another class.

        Example:
        >>> import tensorflow as tf
        >>> from xlnet_tf import XLNetClassifier
        >>> classifier = XLNetClassifier.from_preset("xlnet_base_cased", num_classes=2)
        >>> texts, labels = ["A fine film.", "A dull film."], [1, 0]
        >>> history = classifier.fit(tf.data.Dataset.from_tensor_slices((texts, labels)).batch(2), verbose=0)
        """
        if cls is XLNetTask:
            raise ValueError("Call from_preset on a task class (XLNetClassifier, XLNetSpanLabeler, "
                             "XLNetMultipleChoice, XLNetTokenClassifier), or use load_task_preset().")
        contents = preset_io.preset_contents(preset)
        preset = contents.preset
        if contents.is_task_preset:
            name = contents.task_config.get("class_name")
            if name != cls.__name__:
                raise ValueError(
                    f"Preset {preset} holds a {name} ({TASK_CONFIG_FILE}), not a {cls.__name__}: "
                    f"load it with {name}.from_preset() or load_task_preset(), or give "
                    f"{cls.__name__}.from_preset a backbone preset (config.json + model.weights.h5).")
            return _load_task(cls, contents, load_weights, kwargs)
        backbone_config, _ = XLNetConfig.from_dict(contents.backbone_config).for_finetuning()
        backbone = XLNetBackbone.from_preset(contents, dtype=kwargs.get("dtype"), load_weights=load_weights,
                                             config=backbone_config)
        if "preprocessor" not in kwargs:
            kwargs["preprocessor"] = cls._preset_preprocessor(contents)
        return cls(backbone=backbone, **kwargs)

    @classmethod
    def _preset_preprocessor(cls, contents):
        """This task's preprocessor read from a preset (`PresetContents`), or None when it has no vocabulary."""
        preprocessor_class = cls.preprocessor_cls
        if preprocessor_class is None or contents.vocabulary is None:
            return None
        return preprocessor_class.from_preset(contents.preset)

    def _preprocessor_for_preset(self, preprocessing, lowercase):
        """The preprocessor `preprocessor.json` describes: this model's, else one from `preprocessing`."""
        if self.preprocessor is not None:
            return self.preprocessor
        preprocessor_class = type(self).preprocessor_cls
        if preprocessor_class is None or not preprocessing:
            return None
        # Only serialized: the vocabulary is the preset's asset, so none is loaded here.
        tokenizer = XLNetTokenizer(proto=None, lowercase=bool(lowercase))
        return preprocessor_class(tokenizer=tokenizer, **preprocessor_class.preset_settings(preprocessing))

    # keras-hub's saver writes files in place (an interrupted save leaves them cut short) and knows
    # neither `preprocessing.json` (the serving metadata) nor the `spiece.model` copy.
    def save_to_preset(self, preset_dir, vocabulary_file=None, max_shard_size=None, *, preprocessing=None):
        """Writes a task preset in keras-hub's layout (see the module docstring), each file atomically.

        Args:
            preset_dir: output directory (local, `gs://`, `ram://`; created).
            vocabulary_file: path of `spiece.model` (or its bytes) to store; by
                default the preprocessor's tokenizer vocabulary, if any.
            max_shard_size: accepted for keras-hub's signature; weights are one file.
            preprocessing: a JSON-serialisable dict describing the input packing
                and serving (e.g. `{"task_type": "classification", "sequence_length":
                128, "text_fields": [...], "label_names": [...]}`), written as
                `preprocessing.json`; by default the preprocessor's settings, if any.

        Example:
        >>> import os, tempfile
        >>> from xlnet_tf import XLNetClassifier
        >>> classifier = XLNetClassifier.from_preset("xlnet_base_cased", num_classes=2)
        >>> preset = os.path.join(tempfile.mkdtemp(), "my_classifier")
        >>> classifier.save_to_preset(preset)
        >>> XLNetClassifier.from_preset(preset).predict(["A fine film."], verbose=0).shape
        (1, 2)
        """
        del max_shard_size
        # Each file atomically: an interrupted save never leaves a truncated file behind.
        preset_io.make_preset_dir(preset_dir)
        if not self.built:
            self.build_with_dummy_inputs()
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        proto = preset_io.vocabulary_bytes(vocabulary_file) if vocabulary_file is not None else None
        if vocabulary_file is not None and proto is None:
            raise FileNotFoundError(f"Vocabulary file not found: {vocabulary_file}")
        if proto is None and tokenizer is not None and tokenizer.proto:
            proto = tokenizer.proto
        if preprocessing is None and self.preprocessor is not None:
            preprocessing = self.default_preprocessing_info()
        lowercase = (preprocessing or {}).get("lowercase")
        if lowercase is None:
            lowercase = bool(getattr(tokenizer, "lowercase", False))
        self.backbone.save_to_preset(preset_dir)
        preprocessor = self._preprocessor_for_preset(preprocessing, lowercase) if proto else None
        if proto is not None:
            # Without a tokenizer, one with the default settings (no vocabulary is loaded).
            preset_io.write_tokenizer(preset_dir, proto, tokenizer=tokenizer or XLNetTokenizer(proto=None),
                                      lowercase=None if tokenizer is not None else lowercase)
        if preprocessor is not None:
            preset_io.write_serialized(preset_dir, PREPROCESSOR_CONFIG_FILE, preprocessor)
        task_config = preset_io.serialize(self)
        task_config["config"]["preprocessor"] = (
            None if preprocessor is None else preset_io.serialize(preprocessor))
        atomic_files.write_json(os.path.join(preset_dir, TASK_CONFIG_FILE), task_config)
        # The head only (keras-hub's `save_task_weights`): the backbone is in model.weights.h5,
        # and a preset carries no optimizer state.
        skipped = list(self.backbone._flatten_layers())
        if self.optimizer is not None:
            skipped.append(self.optimizer)
        preset_io.save_weights_skipping(self, os.path.join(preset_dir, TASK_WEIGHTS_FILE), skipped)
        if preprocessing is not None:
            atomic_files.write_json(os.path.join(preset_dir, PREPROCESSING_FILE), preprocessing)

    def default_preprocessing_info(self):
        """`preprocessing.json` of a preset saved without one: the preprocessor's packing and the task type."""
        info = dict(self.preprocessor.get_config())
        info = {k: v for k, v in info.items()
                if k in ("sequence_length", "truncate", "second_max_length",
                         "max_query_length", "doc_stride", "label_all_pieces")}
        info["lowercase"] = bool(getattr(self.preprocessor.tokenizer, "lowercase", False))
        info["preprocessor_class"] = type(self.preprocessor).__name__
        task_type = self.preprocessing_task_type()
        if task_type:
            info["task_type"] = task_type
        return info

    def preprocessing_task_type(self):
        """The serving task type of this model (`preprocessing.json` `task_type`), None for the base."""
        entry = tasks.of_model(self)
        return entry.name if entry else None


def task_classes():
    """Name -> class of every task model, as each registered itself for its task types.

    The subclasses import this module, so this module never imports them; importing any
    of them runs `xlnet_tf/models/__init__.py` first, which imports them all.
    """
    return {cls.__name__: cls for cls in tasks.TASK_MODELS.values()}


def load_task_preset(preset, load_weights=True, **overrides):
    """Rebuilds any saved task model from a task preset.

    Args:
        preset: a preset name, a directory (local, `gs://`, `ram://`) or a
            `hf://` / `kaggle://` handle written by `XLNetTask.save_to_preset`
            (either layout, or by keras-hub's saver); or its `PresetContents`,
            already read (`xlnet_tf.storage.preset_io.read_preset`).
        load_weights: restore the weights.
        **overrides: constructor arguments replacing the saved ones (e.g. `dropout=0.0`,
            `dtype="float32"`); `preprocessor` defaults to the one the preset
            describes (None without a vocabulary).

    Returns:
        The task model (built, compiled with the defaults), an instance of the class named in `task.json`.
    """
    contents = preset_io.preset_contents(preset, require_task=True)
    classes = task_classes()
    name = contents.task_config.get("class_name")
    if name not in classes:
        raise ValueError(f"{contents.task_file}: unknown task class {name!r}; known: {sorted(classes)}.")
    return _load_task(classes[name], contents, load_weights, overrides)


# Constructor arguments that change the shape of a task's head weights.
HEAD_SHAPE_ARGUMENTS = ("num_classes",)


def _load_task(task_class, contents, load_weights, overrides):
    """Builds `task_class` from a task preset's `PresetContents` and loads its weights."""
    preset, saved, task_file = contents.preset, contents.task_config, contents.task_file
    if saved.get("registered_name") != f"xlnet_tf>{task_class.__name__}":
        raise ValueError(f"{task_file} holds {saved.get('registered_name')!r}, not an "
                         f"xlnet_tf>{task_class.__name__}.")
    config = dict(saved.get("config") or {})
    # The backbone comes from config.json, the preprocessor from preprocessor.json.
    for key in ("backbone", "preprocessor"):
        config.pop(key, None)
    # As keras-hub's Task.from_preset: a new head size keeps the trained backbone and
    # starts a fresh head, instead of failing on the saved head's shapes.
    resized = {key: (config[key], overrides[key]) for key in HEAD_SHAPE_ARGUMENTS
               if key in overrides and key in config and overrides[key] != config[key]}
    config.update(overrides)
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    if "preprocessor" not in config:
        config["preprocessor"] = task_class._preset_preprocessor(contents)
    weights = preset_io.fetch(preset, TASK_WEIGHTS_FILE, required=False) if load_weights else None
    if load_weights and weights is None:
        raise FileNotFoundError(f"Task weights not found: {os.path.join(preset, TASK_WEIGHTS_FILE)}")
    backbone = XLNetBackbone.from_preset(contents, dtype=config.get("dtype"), load_weights=load_weights)
    # Compiled after the weights are loaded, so no optimizer state is built before them.
    compile_defaults = config.pop("compile", True)
    model = task_class(backbone=backbone, compile=False, **config)
    if not model.built:
        model.build_with_dummy_inputs()
    if load_weights:
        if not resized:
            preset_io.load_weights(model, weights, objects_to_skip=list(backbone._flatten_layers()))
        if resized:
            changes = ", ".join(f"{key} {old} -> {new}" for key, (old, new) in resized.items())
            warnings.warn(f"{preset}: {changes}: the backbone's trained weights are loaded and the "
                          f"{task_class.__name__} head starts fresh.", stacklevel=3)
    if compile_defaults:
        model.compile()
    return model
