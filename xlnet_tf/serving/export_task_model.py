"""`export_task_model`: write a fine-tuned task model as a two-signature SavedModel."""

import os

import numpy as np
import keras
import tensorflow as tf

from xlnet_tf.formats.serving_metadata import METADATA_FILE
from xlnet_tf.formats.serving_metadata import METADATA_FORMAT
from xlnet_tf.serving.signature_custom_ops import signature_custom_ops
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage.output_directory import check_output_directory
from xlnet_tf.serving.task_serving_module import TOKEN_INPUTS, TaskServingModule

PARITY_TOLERANCE = 1e-5
EXPORT_DTYPES = ("float32", "bfloat16")
# Documented gap of a bfloat16 export to the float32 model: probabilities of the
# classification tests differ by at most this (weights rounded to 8 mantissa bits).
BFLOAT16_TOLERANCE = 2e-2


def model_in_dtype(model, dtype):
    """`model` itself for float32, else a copy whose variables and compute are `dtype`.

    A bfloat16 export stores bfloat16 variables (the Keras `"bfloat16"` policy):
    no per-call cast of the weights, half the SavedModel's size, and oneDNN's
    bfloat16 matmuls on CPUs that have them (`benchmarks/RESULTS.md` has the
    ratios). Softmax and layer norm still run in float32 inside the layers.

    Args:
        model: a task `keras.Model` serializable with `get_config`.
        dtype: `"float32"` or `"bfloat16"`.

    Returns:
        A `keras.Model`.

    Raises:
        ValueError: `dtype` is not one of `EXPORT_DTYPES`.
    """
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"export dtype must be one of {EXPORT_DTYPES}, got {dtype!r}.")
    if dtype == "float32":
        return model
    config = _with_dtype_policy(keras.saving.serialize_keras_object(model), dtype)
    copy = keras.saving.deserialize_keras_object(config)
    copy.set_weights([np.asarray(w, np.float32) for w in model.get_weights()])
    return copy


_FLOAT_POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")
# Entries of a task's config that do no float compute of the model: the attached
# preprocessor turns text into ids, and the compile settings (metrics) are not served.
_NOT_MODEL_COMPUTE = ("preprocessor", "compile_config")


def _with_dtype_policy(config, dtype):
    """`config` (a serialized Keras object) with the dtype policy of every float layer set to `dtype`.

    A policy that is not a float one stays: a tokenizer's `int32` (or `string`)
    policy is the type of the ids it emits, not a precision to lower. The task's
    preprocessor and compile settings keep theirs.
    """
    if isinstance(config, dict):
        if config.get("class_name") in ("DTypePolicy", "FloatDTypePolicy"):
            if (config.get("config") or {}).get("name") not in _FLOAT_POLICIES:
                return config
            return {**config, "config": {**config["config"], "name": dtype}}
        return {k: v if k in _NOT_MODEL_COMPUTE
                else dtype if k == "dtype" and v in _FLOAT_POLICIES
                else _with_dtype_policy(v, dtype)
                for k, v in config.items()}
    if isinstance(config, list):
        return [_with_dtype_policy(v, dtype) for v in config]
    return config


def _probe_batch(sequence_length, vocabulary_size, batch_size=2, seed=0, shorter=0):
    """Left-padded rows of random ids ending in `<sep> <cls>`, of different lengths.

    Row r has `L - (r + shorter) * (L // 3)` real tokens (at least 3): with `shorter` 0 the
    first row fills every position, with 1 every row starts with padding.
    """
    rng = np.random.default_rng(seed)
    token_ids = np.full([batch_size, sequence_length], 5, np.int32)
    segment_ids = np.full([batch_size, sequence_length], 4, np.int32)
    padding_mask = np.zeros([batch_size, sequence_length], np.int32)
    for row in range(batch_size):
        length = max(3, sequence_length - (row + shorter) * (sequence_length // 3))
        start = sequence_length - length
        token_ids[row, start:] = rng.integers(9, max(10, vocabulary_size), size=length)
        token_ids[row, -2:] = [4, 3]
        segment_ids[row, start:] = 0
        segment_ids[row, -1] = 2
        padding_mask[row, start:] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def _choice_probe_batch(sequence_length, vocabulary_size, num_choices, batch_size=2, shorter=0):
    """`_probe_batch` rows regrouped as `[batch_size, num_choices, L]` (mixed lengths per example)."""
    rows = _probe_batch(sequence_length, vocabulary_size, batch_size * num_choices, shorter=shorter)
    return {k: v.reshape(batch_size, num_choices, sequence_length) for k, v in rows.items()}


def _module_probe(module, length, vocabulary_size, shorter=0):
    """A probe batch of `length` ids in the layout of `module`'s `serve_token_ids`."""
    if module.num_choices is None:
        return _probe_batch(length, vocabulary_size, shorter=shorter)
    return _choice_probe_batch(length, vocabulary_size, module.num_choices, shorter=shorter)


def _max_difference(expected, actual):
    worst = 0.0
    for key, value in expected.items():
        value = np.asarray(value)
        if value.dtype.kind == "f":
            worst = max(worst, float(np.max(np.abs(value - np.asarray(actual[key])), initial=0.0)))
        elif not np.array_equal(value, np.asarray(actual[key])):
            return float("inf")
    return worst


def export_task_model(model, output, *, metadata=None, overwrite=False, verify=True, dtype="float32",
                      **serving_options):
    """Writes `model` as a SavedModel with `serving_default` and `serve_token_ids`.

    `serving_default` takes raw strings (`text`, plus `text_pair` for pair tasks;
    `context` and `question` for span tasks; `context` `[B]`, `question` `[B]`
    (unless `takes_question=False`) and `choices` `[B, C]` for multiple choice)
    when a `preprocessor` is given; without one, the export is ids-in only, `serving_default` is
    `serve_token_ids` and the SavedModel holds core TensorFlow ops only. `xlnet_tf_serving.json`
    beside `saved_model.pb` records the task, signatures, label names (for `xlnet-tf predict`) and
    the non-core ops each signature needs (`custom_ops`). The SavedModel is written and verified in
    a temporary sibling (`.tmp-<uuid>-<name>`), then renamed to `output`: an interrupted or failed
    export never leaves a partial SavedModel where TF Serving would load it.

    Args:
        model (keras.Model): the fine-tuned task `keras.Model` (float32 weights).
        output: directory to write: new or empty, or, with `overwrite`, replaced whole.
        metadata (dict | None): optional JSON-serializable dict stored under `"extra"`.
        overwrite: replace a non-empty `output` directory (the new one is built aside and
            renamed into place; the old one is removed only once the new one is complete).
        verify: reload the SavedModel and check `serve_token_ids` against the in-memory model on a probe
            batch (max abs difference <= 1e-5).
        dtype: `"float32"` (default) or `"bfloat16"`: the variables and compute of the exported
            model (`model_in_dtype`); outputs stay float32, probabilities within `BFLOAT16_TOLERANCE`.
        **serving_options: the keyword arguments of `TaskServingModule` (see its Args), passed on
            as they are: `task` and `sequence_length` are required.

    Returns:
        The `output` path.

    Raises:
        OutputExistsError: (a `FileExistsError`) `output` is a non-empty directory, without `overwrite`.
        ValueError: `output` is a file.
        RuntimeError: the reloaded SavedModel differs from the in-memory model.

    Example:

    ```python
    from xlnet_tf.serving import TextPreprocessor, export_task_model
    from xlnet_tf import XLNetClassifier, XLNetPacker, XLNetTokenizer
    classifier = XLNetClassifier.from_preset("xlnet_base_cased", num_classes=2)
    packer_fn = TextPreprocessor(XLNetTokenizer("spiece.model"), XLNetPacker(128))
    export_task_model(classifier, "exports/sst2/1", task="classification", sequence_length=128,
                      preprocessor=packer_fn, label_names=["negative", "positive"])
    ```
    """
    output = os.fspath(output)
    check_output_directory(output, overwrite=overwrite, what="Export directory")
    module = TaskServingModule(model_in_dtype(model, dtype), **serving_options)
    signatures = module.signatures()

    def build(directory):
        tf.saved_model.save(module, directory, signatures=signatures)
        info = _serving_metadata(module, signatures, directory, dtype, metadata)
        atomic_files.write_json(os.path.join(directory, METADATA_FILE), info)
        if verify:
            _verify(module, directory, output, serving_options.get("vocabulary"), dtype)

    atomic_files.replace_directory(build, output)
    return output


def _serving_metadata(module, signatures, directory, dtype, extra):
    """The `xlnet_tf_serving.json` of the SavedModel of `module` written to `directory`."""
    return {
        "format": METADATA_FORMAT,
        "task_type": module.task,
        "sequence_length": module.sequence_length,
        "has_text_pair": module.has_text_pair,
        "num_choices": module.num_choices,
        "max_segments": module.max_segments,
        "long_documents": module.long_documents,
        "text_signature": module.has_text_signature,
        "label_names": module.label_names,
        "signatures": {
            name: {
                "inputs": sorted(spec.name for spec in tf.nest.flatten(fn.structured_input_signature)),
                "outputs": sorted(fn.structured_outputs),
            }
            for name, fn in signatures.items()
        },
        "token_inputs": list(TOKEN_INPUTS),
        "dtype": dtype,
        "jit_compile": module.jit_compile,
        "trim_padding": module.trim_padding,
        "extra": extra or {},
        # What a TensorFlow Serving binary must register to run each signature.
        "custom_ops": signature_custom_ops(directory),
    }


def _verify(module, directory, output, vocabulary, dtype="float32"):
    """Reloads the SavedModel in `directory`; raises when it differs from `module` on a probe batch."""
    sequence_length = module.sequence_length
    vocabulary_size = len(vocabulary) if vocabulary is not None else 32
    # Long-document models also get a probe of three segments: the in-graph segment loop.
    lengths = [sequence_length] + ([3 * sequence_length] if module.long_documents else [])
    loaded = tf.saved_model.load(directory)
    difference = 0.0
    for length in lengths:
        probe = _module_probe(module, length, vocabulary_size)
        expected = module.serve_token_ids(**probe)
        actual = loaded.signatures["serve_token_ids"](**{k: tf.constant(v) for k, v in probe.items()})
        difference = max(difference, _max_difference(
            {k: v.numpy() for k, v in expected.items()}, {k: v.numpy() for k, v in actual.items()}))
    if module.trim_padding:
        # Rows that all start with padding: the reloaded (trimmed) model against every column.
        probe = _module_probe(module, sequence_length, vocabulary_size, shorter=1)
        expected = module.full_length_outputs(probe)
        actual = loaded.signatures["serve_token_ids"](**{k: tf.constant(v) for k, v in probe.items()})
        trimmed_difference = _max_difference(
            {k: v.numpy() for k, v in expected.items()}, {k: v.numpy() for k, v in actual.items()})
        # bfloat16 sums in another order over fewer columns round differently.
        tolerance = PARITY_TOLERANCE if dtype == "float32" else BFLOAT16_TOLERANCE
        if trimmed_difference > tolerance:
            raise RuntimeError(
                f"The SavedModel at {output!r} answers rows with leading padding {trimmed_difference} away "
                f"(> {tolerance}) from the model run on every column; export with trim_padding=False. "
                f"Nothing was written to {output!r}.")
    if difference > PARITY_TOLERANCE:
        raise RuntimeError(
            f"The SavedModel at {output!r} differs from the in-memory model by {difference} "
            f"(> {PARITY_TOLERANCE}) on serve_token_ids; nothing was written to {output!r}."
        )
