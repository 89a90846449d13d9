"""Probes of `XLNetBackbone`, `segment_recurrence` and `RecurrenceMemory` on each Keras backend.

Every probe builds its backbone from one preset, written by the first backend
that runs (TensorFlow) into `workdir/reference/`, so every backend computes the
same function. `backbone_portability` also saves a preset and a `.keras` file
into `workdir/<backend>/` and loads whatever the backends before it saved there
(TensorFlow, then JAX, then PyTorch: JAX reads TensorFlow's files, PyTorch
both); `tests/backends/backbone_backend_test.py` loads JAX's and PyTorch's files
in its own TensorFlow process, so every direction is covered.
"""

import os

import keras
import numpy as np

from tests.harness import FIRST_PLAIN_ID, tiny_config, tiny_two_stream_inputs
from xlnet_tf.models.recurrence_memory import RecurrenceMemory
from xlnet_tf.models.segment_recurrence import last_segment_output, split_into_segments
from xlnet_tf.models.xlnet_backbone import XLNetBackbone

MEMORY_LENGTH = 5
SEGMENT_LENGTH = 4
BACKENDS = ("tensorflow", "jax", "torch")
MEMORY_SHAPE = dict(per_replica_batch_size=2, num_layers=2, memory_length=3, hidden_dim=8)


def reference_preset(workdir):
    """The preset every probe loads: written once, by the first backend that asks (TensorFlow)."""
    preset = os.path.join(workdir, "reference", "preset")
    if not os.path.exists(os.path.join(preset, "model.weights.h5")):
        keras.utils.set_random_seed(0)
        config = tiny_config(memory_length=MEMORY_LENGTH, reuse_length=0, untie_relative_bias=True)
        XLNetBackbone(config).save_to_preset(preset)
    return preset


def load_backbone(workdir, **overrides):
    return XLNetBackbone.from_preset(reference_preset(workdir), **overrides)


def memory_inputs(config):
    """Two-stream inputs with random `mems` and a memory mask closing row 0's first 2 positions."""
    inputs = tiny_two_stream_inputs(config, batch_size=2, sequence_length=6, num_predict=3, seed=3)
    inputs["memory_padding_mask"] = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], "int32")
    return inputs


def mixed_padding_inputs(config):
    """Three rows left-padded by 0, 2 and 4 positions (`<pad>` 5, segment 4), `<cls>` last."""
    rng = np.random.default_rng(7)
    token_ids = rng.integers(FIRST_PLAIN_ID, config.vocabulary_size, (3, 7)).astype("int32")
    segment_ids = np.zeros((3, 7), "int32")
    segment_ids[:, 4:] = 1
    segment_ids[:, -1] = 2
    padding_mask = np.ones((3, 7), "int32")
    for row, padding in enumerate((0, 2, 4)):
        token_ids[row, :padding] = 5
        segment_ids[row, :padding] = 4
        padding_mask[row, :padding] = 0
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def long_documents(config, num_segments=4):
    """Packed documents of 13, 6 and 2 real tokens at length S * L, cut into segments `[3, S, L]`."""
    rng = np.random.default_rng(11)
    total = num_segments * SEGMENT_LENGTH - 1  # split_into_segments pads one more position in front
    token_ids = np.full((3, total), 5, "int32")
    segment_ids = np.full((3, total), 4, "int32")
    padding_mask = np.zeros((3, total), "int32")
    for row, length in enumerate((13, 6, 2)):
        token_ids[row, total - length:] = rng.integers(FIRST_PLAIN_ID, config.vocabulary_size, length)
        token_ids[row, -1] = 3
        segment_ids[row, total - length:-1] = 0
        segment_ids[row, -1] = 2
        padding_mask[row, total - length:] = 1
    segments = split_into_segments(
        {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}, SEGMENT_LENGTH)
    return {key: np.asarray(keras.ops.convert_to_numpy(value)) for key, value in segments.items()}


def numpy_outputs(outputs, prefix=""):
    return {prefix + key: np.asarray(keras.ops.convert_to_numpy(value)) for key, value in outputs.items()
            if key != "key_value_heads"}


def gradient_of(function, variables):
    """`d function() / d variables` (a scalar function of the model's variables), on this backend."""
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            value = function()
        gradients = tape.gradient(value, [v.value for v in variables])
        return value, [tf.convert_to_tensor(g) for g in gradients]  # the embedding's IndexedSlices, dense
    if backend == "jax":
        import jax

        def stateless(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function()

        # Jitted: one compilation instead of one per operation of the eager trace.
        return jax.jit(jax.value_and_grad(stateless))([v.value for v in variables])
    if backend == "torch":
        import torch

        for variable in variables:
            variable.value.grad = None
        value = function()
        gradients = torch.autograd.grad(value, [v.value for v in variables])
        return value, gradients
    raise NotImplementedError(backend)


def as_array(value):
    return np.asarray(keras.ops.convert_to_numpy(value), "float32")


# ---------------------------------------------------------------- the backbone
def probe_backbone_memory(workdir, backend):
    """Content stream and `new_mems` with `mems` and a `memory_padding_mask`; the same through `predict`."""
    backbone = load_backbone(workdir)
    inputs = memory_inputs(backbone.config)
    del inputs["perm_mask"], inputs["target_mapping"]
    outputs = numpy_outputs(backbone(inputs))
    opened = dict(inputs, memory_padding_mask=np.ones_like(inputs["memory_padding_mask"]))
    outputs["open_sequence_output"] = as_array(backbone(opened)["sequence_output"])
    predicted = backbone.predict(inputs, batch_size=2, verbose=0)
    outputs.update(numpy_outputs(predicted, "predict_"))
    return outputs


def probe_backbone_two_stream(workdir, backend):
    """Both streams with `perm_mask`, `target_mapping`, `mems` and a memory mask, and hidden states."""
    backbone = load_backbone(workdir)
    outputs = backbone(memory_inputs(backbone.config), output_hidden_states=True)
    return numpy_outputs(outputs)


def probe_backbone_mixed_padding(workdir, backend):
    """A batch of rows with 0, 2 and 4 padding positions; and `output_positions` reading `<cls>`."""
    backbone = load_backbone(workdir)
    inputs = mixed_padding_inputs(backbone.config)
    outputs = numpy_outputs(backbone(inputs))
    cls = backbone(inputs, output_positions=np.full((3, 1), 6, "int32"))["sequence_output"]
    outputs["cls_output"] = as_array(cls)
    return outputs


def probe_backbone_long_document(workdir, backend):
    """`last_segment_output` over 4 segments (the first all padding), eager and compiled."""
    backbone = load_backbone(workdir)
    features = long_documents(backbone.config)
    outputs = {"last_segment": as_array(last_segment_output(backbone, features)),
               "last_cls": as_array(last_segment_output(
                   backbone, features, output_positions=np.full((3, 1), SEGMENT_LENGTH - 1, "int32")))}
    reuse = load_backbone(workdir, memory_length=6, reuse_length=2)
    outputs["reuse_last_segment"] = as_array(last_segment_output(reuse, features))
    if backend == "jax":
        import jax

        # Traced padding masks: the loop also reads the leading padding segment, closed in the memory.
        outputs["compiled_last_segment"] = as_array(jax.jit(lambda f: last_segment_output(backbone, f))(features))
    weights = keras.ops.convert_to_tensor(np.random.default_rng(5).normal(size=(3, SEGMENT_LENGTH, 8)), "float32")
    table = backbone.token_embedding.embeddings

    def loss():  # a mean: gradients of order one, compared at the same absolute tolerance as outputs
        return keras.ops.mean(last_segment_output(backbone, features) * weights)

    value, (gradient,) = gradient_of(loss, [table])
    outputs["loss"] = as_array(value)
    outputs["embedding_gradient"] = as_array(gradient)
    return outputs


def probe_backbone_gradients(workdir, backend):
    """Gradients of a scalar of the sequence output w.r.t. the word embedding and a bias, plain and rematerialized."""
    outputs = {}
    for name, rematerialize in (("plain", False), ("remat", True)):
        backbone = load_backbone(workdir)
        backbone.rematerialize = rematerialize
        inputs = memory_inputs(backbone.config)
        weights = keras.ops.convert_to_tensor(np.random.default_rng(9).normal(size=(2, 6, 8)), "float32")
        variables = [backbone.token_embedding.embeddings, backbone.content_attention_bias,
                     backbone.blocks[0].attention.query_kernel]

        def loss(backbone=backbone, inputs=inputs, weights=weights):  # means: gradients of order one
            result = backbone(inputs, training=True)
            return (keras.ops.mean(result["sequence_output"] * weights)
                    + keras.ops.mean(keras.ops.square(result["query_output"])))

        value, gradients = gradient_of(loss, variables)
        outputs[f"{name}_loss"] = as_array(value)
        for variable, gradient in zip(variables, gradients):
            outputs[f"{name}_{variable.path.replace('/', '.')}"] = as_array(gradient)
    return outputs


def probe_backbone_portability(workdir, backend):
    """Saves a preset and a `.keras` file into `workdir/<backend>/`; loads those of the backends before."""
    import xlnet_tf  # noqa: F401 - registers the Keras classes for `load_model`

    backbone = load_backbone(workdir)
    inputs = memory_inputs(backbone.config)
    directory = os.path.join(workdir, backend)
    backbone.save_to_preset(os.path.join(directory, "preset"))
    backbone.save(os.path.join(directory, "backbone.keras"))
    outputs = {"saved_dir": np.asarray(directory),
               "own": as_array(backbone(inputs)["query_output"])}
    for source in BACKENDS:
        source_dir = os.path.join(workdir, source)
        if source == backend or not os.path.exists(os.path.join(source_dir, "backbone.keras")):
            continue
        from_preset = XLNetBackbone.from_preset(os.path.join(source_dir, "preset"))
        from_keras = keras.saving.load_model(os.path.join(source_dir, "backbone.keras"))
        outputs[f"from_{source}_preset"] = as_array(from_preset(inputs)["query_output"])
        outputs[f"from_{source}_keras"] = as_array(from_keras(inputs)["query_output"])
    return outputs


# ---------------------------------------------------------------- the recurrence memory
def probe_backbone_recurrence_memory(workdir, backend):
    """Write, read, `reset_every_steps`, reset, and a save/restore round trip (also of other backends' files)."""
    memory = RecurrenceMemory(reset_every_steps=3, **MEMORY_SHAPE)
    shape = memory.shape
    first = np.full(shape, 1.5, "float32")
    second = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    reads = [as_array(memory.read())]  # step 0: a multiple of 3, zeros
    memory.write(first)
    reads.append(as_array(memory.read()))  # step 1: the first write
    memory.write(second)
    reads.append(as_array(memory.read()))  # step 2: the second write
    memory.write(first)
    reads.append(as_array(memory.read()))  # step 3: zeros again
    outputs = {"reads": np.stack(reads), "values": np.stack(memory.local_values())}
    directory = os.path.join(workdir, backend)
    os.makedirs(directory, exist_ok=True)
    memory.save(os.path.join(directory, "memory.npz"))
    memory.reset(step=7)
    outputs["after_reset"] = np.stack(memory.local_values())
    outputs["step_after_reset"] = np.asarray(int(keras.ops.convert_to_numpy(memory.step)))
    for source in BACKENDS:
        path = os.path.join(workdir, source, "memory.npz")
        if os.path.exists(path):
            restored = RecurrenceMemory(**MEMORY_SHAPE)
            outputs[f"restored_{source}_step"] = np.asarray(restored.restore(path))
            outputs[f"restored_{source}"] = np.stack(restored.local_values())
    try:
        RecurrenceMemory(**dict(MEMORY_SHAPE, memory_length=4)).restore(os.path.join(directory, "memory.npz"))
    except ValueError as error:
        outputs["mismatch_message"] = np.asarray(str(error).replace(directory, "<dir>"))
    return outputs


def probe_backbone_memory_through_fit(workdir, backend):
    """Two `fit` steps of `XLNetPretrainer` with recurrence memory: the memory the trainer carried.

    Each step feeds the previous step's `new_mems` back as `mems`; the memory
    after step 2 depends on the one after step 1 and on the weights updated in
    between, so it matches TensorFlow's only if every step read what the one
    before wrote.
    """
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    backbone = load_backbone(workdir)
    pretrainer = XLNetPretrainer(backbone)
    pretrainer.enable_recurrence_memory(2)
    pretrainer.compile(optimizer=keras.optimizers.SGD(0.5))
    rng = np.random.default_rng(13)
    batches = []
    for _ in range(2):
        inputs = tiny_two_stream_inputs(backbone.config, batch_size=2, sequence_length=6, num_predict=3,
                                        seed=int(rng.integers(100)))
        del inputs["mems"]
        inputs["target_ids"] = inputs["token_ids"][:, :3]
        inputs["target_mask"] = np.ones((2, 3), "float32")
        batches.append(inputs)
    data = {key: np.concatenate([batch[key] for batch in batches]) for key in batches[0]}
    history = pretrainer.fit(data, batch_size=2, epochs=1, shuffle=False, verbose=0)
    # The same two steps with the memory reset to zero between them: the second step's loss must change.
    fresh = XLNetPretrainer(load_backbone(workdir))
    fresh.enable_recurrence_memory(2)
    fresh.compile(optimizer=keras.optimizers.SGD(0.5))
    carried = []
    for index, batch in enumerate(batches):
        if index == 1:
            fresh.recurrence_memory.reset()
        fresh.reset_metrics()  # each step's own loss, not a running mean
        carried.append(float(fresh.train_on_batch(batch, return_dict=True)["loss"]))
    return {"memory": np.stack(pretrainer.recurrence_memory.local_values()),
            "reset_losses": np.asarray(carried, "float32"),
            "loss": np.asarray(history.history["loss"], "float32"),
            "step": np.asarray(int(keras.ops.convert_to_numpy(
                pretrainer.recurrence_memory._local_step_variables()[0])))}
