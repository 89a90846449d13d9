"""The shared test harness: a tiny config and inputs, and the checks every layer, model and task runs.

Modelled on keras-hub's `TestCase.run_layer_test` / `run_precision_test` /
`run_model_saving_test` / `run_preset_test`, as plain functions (the tests here are
plain pytest functions). Import them as `from tests.harness import ...`.

Calling convention: a `keras.Model` (backbone, pretrainer, task) is called with
its one input dict, `model(inputs)`; any other layer takes `input_data` as
keyword arguments, `layer(**input_data)`.

Example:
>>> from xlnet_tf.models.xlnet_backbone import XLNetBackbone
>>> config = tiny_config(memory_length=2)
>>> inputs = tiny_inputs(config, batch_size=2, sequence_length=5)
>>> run_layer_test(XLNetBackbone, {"config": config}, inputs,
...                {"sequence_output": (2, 5, 8), "new_mems": (2, 2, 2, 8)})
"""

import os
import tempfile

import keras
import numpy as np

from xlnet_tf.formats.special_tokens import SPECIAL_PIECES

# Random tokens are plain pieces: the special ones come first in the vocabulary.
FIRST_PLAIN_ID = len(SPECIAL_PIECES)


def tiny_config(**overrides):
    """A 2-layer XLNetConfig small enough for a unit test (hidden 8); `overrides` replace fields.

    Example:
    >>> tiny_config(num_layers=3).num_layers
    3
    """
    from xlnet_tf.models.xlnet_config import XLNetConfig

    values = dict(vocabulary_size=40, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8,
                  intermediate_dim=16, dropout=0.0, attention_dropout=0.0)
    values.update(overrides)
    return XLNetConfig(**values)


def tiny_inputs(config, batch_size=4, sequence_length=6, seed=0):
    """Backbone inputs: random plain tokens, segments `0.. | 1.. | 2` (`<cls>` segment last), no padding.

    Example:
    >>> tiny_inputs(tiny_config(), batch_size=2, sequence_length=4)["segment_ids"].tolist()
    [[0, 0, 1, 2], [0, 0, 1, 2]]
    """
    rng = np.random.default_rng(seed)
    segment_ids = np.zeros((batch_size, sequence_length), "int32")
    segment_ids[:, sequence_length // 2:] = 1
    segment_ids[:, -1] = 2
    return {"token_ids": rng.integers(FIRST_PLAIN_ID, config.vocabulary_size,
                                      (batch_size, sequence_length)).astype("int32"),
            "segment_ids": segment_ids,
            "padding_mask": np.ones((batch_size, sequence_length), "int32")}


def tiny_two_stream_inputs(config, batch_size=2, sequence_length=6, num_predict=3, seed=0,
                           memory_length=None):
    """`tiny_inputs` plus a random `perm_mask`, a `target_mapping` onto the first `num_predict`
    positions and, when the config (or `memory_length`) asks for memory, random `mems`.

    Example:
    >>> inputs = tiny_two_stream_inputs(tiny_config(memory_length=3), batch_size=2)
    >>> inputs["target_mapping"].shape, inputs["mems"].shape
    ((2, 3, 6), (2, 2, 3, 8))
    """
    inputs = tiny_inputs(config, batch_size, sequence_length, seed)
    rng = np.random.default_rng(seed + 1)
    inputs["perm_mask"] = (rng.random((batch_size, sequence_length, sequence_length)) < 0.3).astype("float32")
    inputs["target_mapping"] = np.eye(sequence_length, dtype="float32")[None, :num_predict].repeat(batch_size, 0)
    memory_length = config.memory_length if memory_length is None else memory_length
    if memory_length:
        inputs["mems"] = rng.normal(
            size=(batch_size, config.num_layers, memory_length, config.hidden_dim)).astype("float32")
    return inputs


def pretraining_features(token_ids, target_positions, perm_mask, target_mask, segment_ids=None):
    """A pretraining batch in `pretraining_dataset`'s layout from its random parts.

    Args:
        token_ids: int `[B, L]`.
        target_positions: int `[B, P]`, the predicted position of each target.
        perm_mask: float `[B, L, L]`, 1 = row may not attend to column.
        target_mask: float `[B, P]`, 1 = a real target.
        segment_ids: int `[B, L]`; default: two halves, 0 then 1.

    Returns:
        The dict with `padding_mask` (all real), `target_mapping` (one-hot rows) and `target_ids` added.

    Example:
    >>> batch = pretraining_features(np.array([[9, 10, 11, 12]]), np.array([[2]]),
    ...                              np.zeros((1, 4, 4), "float32"), np.ones((1, 1), "float32"))
    >>> batch["target_ids"].tolist(), batch["segment_ids"].tolist()
    ([[11]], [[0, 0, 1, 1]])
    """
    batch_size, sequence_length = token_ids.shape
    if segment_ids is None:
        halves = [0] * (sequence_length // 2) + [1] * (sequence_length - sequence_length // 2)
        segment_ids = np.repeat([halves], batch_size, 0)
    return {
        "token_ids": token_ids.astype("int32"),
        "segment_ids": np.asarray(segment_ids).astype("int32"),
        "padding_mask": np.ones((batch_size, sequence_length), "int32"),
        "perm_mask": perm_mask.astype("float32"),
        "target_mapping": np.eye(sequence_length, dtype="float32")[target_positions],  # [B, P, L]
        "target_ids": np.take_along_axis(token_ids, target_positions, 1).astype("int32"),
        "target_mask": target_mask.astype("float32"),
    }


def call_layer(layer, input_data, training=None):
    """Calls a model with its input dict, any other layer with `input_data` as keyword arguments."""
    if isinstance(layer, keras.Model):
        return layer(input_data, training=training)
    return layer(**input_data, training=training)


def as_numpy(outputs):
    """Outputs of any structure, every tensor as a float32 (or integer) numpy array."""
    def convert(value):
        if value is None:  # an absent output (a layer's query stream without queries)
            return None
        value = keras.ops.convert_to_numpy(value)
        return value.astype("float32") if value.dtype.kind == "f" or value.dtype.name == "bfloat16" else value

    return keras.tree.map_structure(convert, outputs)


def assert_outputs_close(actual, expected, atol=1e-6, rtol=0.0):
    """Same structure (dict keys, tuple length) and values within `atol` / `rtol`."""
    actual, expected = as_numpy(actual), as_numpy(expected)
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), (sorted(actual), sorted(expected))
    flat_actual, flat_expected = keras.tree.flatten(actual), keras.tree.flatten(expected)
    assert len(flat_actual) == len(flat_expected)
    for index, (a, e) in enumerate(zip(flat_actual, flat_expected)):
        if e is None:
            assert a is None, f"output {index} should be absent"
            continue
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, err_msg=f"output {index}")


def assert_same_weights(actual, expected):
    """Same number of weights, shapes and values, in order."""
    actual_weights, expected_weights = actual.get_weights(), expected.get_weights()
    assert len(actual_weights) == len(expected_weights)
    for a, e in zip(actual_weights, expected_weights):
        assert a.shape == e.shape
        np.testing.assert_array_equal(a, e)


def _is_shape(value):
    return isinstance(value, (tuple, list)) and all(d is None or isinstance(d, int) for d in value)


def assert_output_shapes(outputs, expected_output_shape):
    """`expected_output_shape`: one shape, or a dict / tuple of shapes mirroring the outputs
    (None where the output is None)."""
    if expected_output_shape is None:
        assert outputs is None, "expected an absent output"
    elif _is_shape(expected_output_shape):
        assert tuple(outputs.shape) == tuple(expected_output_shape), (outputs.shape, expected_output_shape)
    elif isinstance(expected_output_shape, dict):
        assert sorted(outputs) == sorted(expected_output_shape), (sorted(outputs), sorted(expected_output_shape))
        for key, shape in expected_output_shape.items():
            assert_output_shapes(outputs[key], shape)
    else:
        assert len(outputs) == len(expected_output_shape), (len(outputs), len(expected_output_shape))
        for output, shape in zip(outputs, expected_output_shape):
            assert_output_shapes(output, shape)


def _with_dtype(config, dtype):
    """A `get_config()` dict with `dtype` set on it and on every nested serialized Keras object
    that has one (a task's backbone), so the whole model runs under one policy."""
    config = dict(config)
    if "dtype" in config:
        config["dtype"] = dtype
    for key, value in config.items():
        if isinstance(value, dict) and isinstance(value.get("config"), dict) and "class_name" in value:
            config[key] = dict(value, config=_with_dtype(value["config"], dtype))
    return config


def _floating_leaves(outputs):
    return [o for o in keras.tree.flatten(outputs) if o is not None
            and keras.backend.is_float_dtype(keras.backend.standardize_dtype(o.dtype))]


def run_dtype_policy_check(layer_cls, config, input_data, policy, output_dtype=None):
    """Builds `layer_cls` from `config` under `policy` and runs it: variables in the policy's variable
    dtype, floating outputs finite and in the policy's compute dtype, except where `output_dtype`
    says otherwise (one dtype for every output, or a dict output name -> dtype). Returns the layer."""
    layer = layer_cls.from_config(_with_dtype(config, policy))
    outputs = call_layer(layer, input_data)
    policy_object = keras.dtype_policies.get(policy)
    for variable in layer.weights:
        assert keras.backend.standardize_dtype(variable.dtype) == policy_object.variable_dtype, \
            (policy, variable.path, variable.dtype)
    named = outputs.items() if isinstance(outputs, dict) else [(None, outputs)]
    checked = 0
    for name, value in named:
        expected = output_dtype.get(name) if isinstance(output_dtype, dict) else output_dtype
        for output in _floating_leaves(value):
            assert keras.backend.standardize_dtype(output.dtype) == (expected or policy_object.compute_dtype), \
                (policy, name, output.dtype)
            assert np.isfinite(as_numpy(output)).all(), (policy, name)
            checked += 1
    assert checked, f"{layer_cls.__name__} returned no floating output"
    return layer


def run_layer_test(layer_cls, init_kwargs, input_data, expected_output_shape, *,
                   run_precision_checks=True, run_serialization_check=True, output_dtype=None, atol=1e-6):
    """The checks every public layer (and model) passes, as keras-hub's `run_layer_test`.

    1. Builds `layer_cls(**init_kwargs)` and runs it on `input_data`; the outputs have
       `expected_output_shape` (one shape, or a dict / tuple of shapes).
    2. `get_config()` -> `from_config()` gives an equal config; with the weights copied over,
       equal outputs (within `atol`).
    3. With `run_serialization_check`, the same through `keras.saving.serialize_keras_object` /
       `deserialize_keras_object` (the registry path `.keras` files take).
    4. With `run_precision_checks`, a `float32` and a `mixed_bfloat16` build run (see
       `run_dtype_policy_check`); `output_dtype` names the outputs that keep a fixed dtype under
       any policy (task heads return float32 logits): one dtype for all, or a dict name -> dtype.

    Returns:
        The layer built in step 1 (so a test can go on checking numbers).

    Example:
    >>> from xlnet_tf.layers.relative_position_encoding import RelativePositionEncoding
    >>> layer = run_layer_test(RelativePositionEncoding, {"hidden_dim": 4},
    ...                        {"query_length": 2, "key_length": 3}, (1, 5, 4))
    """
    layer = layer_cls(**init_kwargs)
    outputs = call_layer(layer, input_data)
    assert_output_shapes(outputs, expected_output_shape)

    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    call_layer(clone, input_data)
    clone.set_weights(layer.get_weights())
    assert_outputs_close(call_layer(clone, input_data), outputs, atol=atol)

    if run_serialization_check:
        restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        assert type(restored) is layer_cls and restored.get_config() == config
        call_layer(restored, input_data)
        restored.set_weights(layer.get_weights())
        assert_outputs_close(call_layer(restored, input_data), outputs, atol=atol)

    if run_precision_checks:
        for policy in ("float32", "mixed_bfloat16"):
            run_dtype_policy_check(layer_cls, config, input_data, policy, output_dtype)
    return layer


def run_precision_test(factory, input_data, tolerance):
    """`mixed_bfloat16` outputs agree with `float32` ones (same weights) within `tolerance`.

    Args:
        factory: `factory(dtype)` -> a new layer or model under that dtype policy.
        input_data: its inputs (see the calling convention above).
        tolerance: largest allowed absolute difference of any output value (bfloat16 keeps about
            3 significant digits; layer-normalised outputs are O(1)).

    Returns:
        `(float32_outputs, mixed_outputs)`: the first as numpy, the second as the mixed model
        returned them (so a test can check their dtypes).

    Example:
    >>> from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    >>> config = tiny_config()
    >>> _ = run_precision_test(lambda dtype: XLNetBackbone(config, dtype=dtype),
    ...                        tiny_inputs(config), tolerance=0.1)
    """
    reference = factory("float32")
    mixed = factory("mixed_bfloat16")
    expected = as_numpy(call_layer(reference, input_data))
    call_layer(mixed, input_data)
    mixed.set_weights(reference.get_weights())
    outputs = call_layer(mixed, input_data)
    for index, output in enumerate(_floating_leaves(outputs)):
        assert np.isfinite(as_numpy(output)).all(), f"output {index} is not finite under mixed_bfloat16"
    assert_outputs_close(outputs, expected, atol=tolerance)
    return expected, outputs


def run_model_saving_test(model, input_data, atol=1e-6):
    """`model.save(.keras)` -> `keras.saving.load_model` in a temp dir: same class, the same weights
    (count, shapes, values) and equal outputs (within `atol`). Returns the loaded model."""
    expected = call_layer(model, input_data, training=False)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
    assert type(restored) is type(model)
    assert_same_weights(restored, model)
    assert_outputs_close(call_layer(restored, input_data, training=False), expected, atol=atol)
    return restored


def run_preset_test(cls, preset_dir, input_data, *, model, expected_files=None, save_kwargs=None,
                    atol=1e-6):
    """`model.save_to_preset(preset_dir)` -> `cls.from_preset(preset_dir)`: equal outputs.

    Args:
        cls: the class whose `from_preset` reads the directory (may differ from the saver's,
            e.g. a backbone read from a pretrainer preset).
        preset_dir: where to write the preset.
        input_data: the inputs both are called on.
        model: the model that writes the preset.
        expected_files: if given, the sorted top-level listing the preset must have.
        save_kwargs: extra arguments of `save_to_preset` (a vocabulary, preprocessing).
        atol: allowed absolute difference of the outputs.

    Returns:
        The restored model.
    """
    model.save_to_preset(preset_dir, **(save_kwargs or {}))
    if expected_files is not None:
        assert sorted(os.listdir(preset_dir)) == sorted(expected_files)
    restored = cls.from_preset(preset_dir)
    assert isinstance(restored, cls)
    reference = model if isinstance(restored, type(model)) else getattr(model, "backbone", model)
    assert_outputs_close(call_layer(restored, input_data, training=False),
                         call_layer(reference, input_data, training=False), atol=atol)
    return restored


def serialize_stream(token_ids, sentence_ids, chunk_length):
    """One token stream's v1 records (`xlnet_tf/formats/README.md`) through the format's one writer.

    Args:
        token_ids: ids `[N]` in [0, 2**32).
        sentence_ids: ids `[N]` in [0, 2**32).
        chunk_length: tokens per record; the last record may be shorter.

    Returns:
        A list of serialized records (bytes).

    Example:
    >>> len(serialize_stream([10, 11, 12, 7], [0, 0, 1, 0], chunk_length=3))  # 3 tokens + 1 token
    2
    """
    from xlnet_tf.formats import pretraining_records

    token_bytes, token_offsets = pretraining_records.packed_varints(token_ids)
    sentence_bytes, sentence_offsets = pretraining_records.packed_varints(sentence_ids)
    cuts = pretraining_records.record_cuts(len(token_offsets) - 1, chunk_length)  # [R+1]
    return pretraining_records.serialize_packed_records(token_bytes, token_offsets[cuts],
                                                        sentence_bytes, sentence_offsets[cuts])


def write_pretraining_records(directory, shard_streams, chunk_length=32, *, vocabulary_size=100,
                              vocabulary=None, manifest=True):
    """Writes v1 pretraining records (`xlnet_tf/formats/README.md`) with the format's own serializer.

    Args:
        directory: created if missing.
        shard_streams: one `(token_ids, sentence_ids)` stream per shard.
        chunk_length: tokens per record.
        vocabulary_size: the manifest's vocabulary size (keep the token ids below it).
        vocabulary: a SentencePiece model file to record (path and sha256) in the manifest.
        manifest: False leaves `manifest.json` out (to test what readers say then).

    Returns:
        The shard paths.

    Example:
    >>> paths = write_pretraining_records("/tmp/records", [([9, 10, 11, 7], [0, 0, 1, 1])], chunk_length=2)
    >>> os.path.basename(paths[0])
    'pretrain-00000-of-00001.tfrecord'
    """
    import hashlib
    import json

    import tensorflow as tf

    from xlnet_tf.formats import pretraining_records, special_tokens

    os.makedirs(directory, exist_ok=True)
    entries, paths = [], []
    for shard, (tokens, sentences) in enumerate(shard_streams):
        name = pretraining_records.shard_file_name(shard, len(shard_streams))
        records = serialize_stream(np.asarray(tokens, np.int64), np.asarray(sentences, np.int64), chunk_length)
        with tf.io.TFRecordWriter(os.path.join(directory, name)) as writer:
            for record in records:
                writer.write(record)
        entries.append({"file": name, "num_records": len(records), "num_tokens": len(tokens)})
        paths.append(os.path.join(directory, name))
    if manifest:
        vocabulary_entry = {"file": "", "vocabulary_size": vocabulary_size,
                            "special_ids": dict(special_tokens.SPECIAL_TOKEN_IDS)}
        if vocabulary:
            with open(vocabulary, "rb") as f:
                vocabulary_entry.update(file=vocabulary, sha256=hashlib.sha256(f.read()).hexdigest())
        body = {"format": pretraining_records.FORMAT, "chunk_length": chunk_length,
                "num_shards": len(entries), "shards": entries,
                "num_tokens": sum(e["num_tokens"] for e in entries),
                "documents": {"read": len(entries), "written": len(entries), "skipped": {}},
                "vocabulary": vocabulary_entry, "settings": {"seed": 0}}
        with open(os.path.join(directory, pretraining_records.MANIFEST_FILE), "w") as f:
            json.dump(body, f)
    return paths


# How many logical CPU devices `tests/conftest.py` splits the CPU into for the distribution tests.
NUM_CPU_DEVICES = 2


def split_cpu_devices(count=NUM_CPU_DEVICES):
    """Splits the CPU into `count` logical devices; True if done (or already so), False if too late.

    TensorFlow fixes its devices the first time it creates them, so this must run before
    any test touches TensorFlow: `tests/conftest.py` calls it from `pytest_configure`.
    """
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:  # Devices already created: keep whatever they are.
        pass
    return len(tf.config.list_logical_devices("CPU")) >= count


def assert_two_cpu_devices():
    """Fails the calling test, naming the cause, unless there are 2 logical CPU devices.

    Returns:
        The names of the first two.
    """
    import pytest
    import tensorflow as tf

    devices = tf.config.list_logical_devices("CPU")
    if len(devices) < NUM_CPU_DEVICES:
        pytest.fail(f"needs {NUM_CPU_DEVICES} logical CPU devices, found {len(devices)}: TensorFlow created "
                    "its devices before tests/conftest.py's pytest_configure could split the CPU (was "
                    "TensorFlow used by a plugin or with -p no:... that skips the conftest?)", pytrace=False)
    return [d.name for d in devices[:NUM_CPU_DEVICES]]
