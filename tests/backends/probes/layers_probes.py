"""Probes of xlnet_tf.layers on each backend: attention and block outputs and gradients, seeded dropout.

The layers are built, then every weight is set from a fixed numpy generator,
so each backend computes the same function; the inputs (memory, a
permutation mask, a padded token, two predictions of the query stream) come
from the same generator. Gradients are of a fixed weighted sum of both
streams' outputs, with respect to the inputs and every weight, taken with
each backend's own autodiff (TensorFlow's runs `dropped_attention`'s custom
gradient only in seeded training, which `layers_dropped_attention` covers).
"""

import keras
import numpy as np
from keras import ops

from xlnet_tf.layers import (RelativeAttention, RelativePositionEncoding, XLNetBlock, rel_shift,
                             xlnet_attention_masks)
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.layers.dropped_attention import dropped_attention

BATCH, LENGTH, MEMORY, PREDICTIONS, HIDDEN, HEADS, HEAD_DIM, INTERMEDIATE = 2, 5, 3, 2, 8, 2, 4, 16


def _run(backend, function):
    """`function()`, jitted on JAX: one compilation, where JAX's eager ops compile one by one."""
    if backend == "jax":
        import jax

        return jax.jit(function)()
    return function()


def _inputs(seed=0, backend=None):
    """The numpy inputs of a two-stream layer call with memory and a permutation mask."""
    rng = np.random.default_rng(seed)
    padding = np.ones((BATCH, LENGTH), "int32")
    padding[1, 0] = 0  # one padded token
    order = np.stack([rng.permutation(LENGTH) for _ in range(BATCH)])  # [B, L] factorization order
    perm_mask = (order[:, None, :] >= order[:, :, None]).astype("float32")  # [B, L, L]: i can't see j
    content_mask, query_mask = (ops.convert_to_numpy(mask) for mask in _run(backend, lambda: xlnet_attention_masks(
        padding, perm_mask, memory_length=MEMORY)))
    targets = np.array([[1, 3], [4, 2]])
    target_mapping = np.eye(LENGTH, dtype="float32")[targets]  # [B, P, L]
    encoding = RelativePositionEncoding(HIDDEN)
    position = _run(backend, lambda: encoding(query_length=LENGTH, key_length=MEMORY + LENGTH))
    segments = rng.integers(0, 2, (BATCH, MEMORY + LENGTH))
    segments[:, :MEMORY] = 0  # memory columns count as segment 0
    segment_different = segments[:, None, MEMORY:].transpose(0, 2, 1) != segments[:, None, :]  # [B, L, M+L]

    def normal(*shape, scale=0.5):
        return (rng.normal(size=shape) * scale).astype("float32")

    return dict(
        content_stream=normal(BATCH, LENGTH, HIDDEN, scale=1.0),
        position_encoding=ops.convert_to_numpy(position),
        segment_different=segment_different,
        content_mask=content_mask,
        content_bias=normal(HEADS, HEAD_DIM),
        positional_bias=normal(HEADS, HEAD_DIM),
        segment_bias=normal(HEADS, HEAD_DIM),
        segment_encoding=normal(2, HEADS, HEAD_DIM),
        memory=normal(BATCH, MEMORY, HIDDEN, scale=1.0),
        query_stream=normal(BATCH, PREDICTIONS, HIDDEN, scale=1.0),
        query_mask=query_mask,
        target_mapping=target_mapping,
    )


def _set_weights(layer, seed=1):
    """Every weight from a fixed generator, in the order of their paths (the same on every backend)."""
    rng = np.random.default_rng(seed)
    for variable in sorted(layer.weights, key=lambda variable: variable.path):
        variable.assign((rng.normal(size=variable.shape) * 0.4).astype("float32"))


def _attention(seed=1):
    # Zeros: every weight is set below; a random initializer would only cost JAX compilations.
    layer = RelativeAttention(HEADS, HEAD_DIM, dropout=0.2, attention_dropout=0.3, kernel_initializer="zeros",
                              name="attention")
    layer.build((BATCH, LENGTH, HIDDEN))
    _set_weights(layer, seed)
    return layer


def _block(seed=2):
    layer = XLNetBlock(HIDDEN, HEADS, HEAD_DIM, INTERMEDIATE, activation="gelu", dropout=0.2,
                       attention_dropout=0.3, kernel_initializer="zeros", name="block")
    layer.build((BATCH, LENGTH, HIDDEN))
    _set_weights(layer, seed)
    return layer


# Differentiated inputs; the rest are masks, biases and encodings held fixed.
_DIFFERENTIATED = ("content_stream", "query_stream", "memory")


def _loss_weights():
    rng = np.random.default_rng(9)
    return (rng.normal(size=(BATCH, LENGTH, HIDDEN)).astype("float32"),
            rng.normal(size=(BATCH, PREDICTIONS, HIDDEN)).astype("float32"))


def _outputs_and_gradients(layer, inputs, backend, **call_options):
    """`{content, query, grad_<input>, grad_<weight path>}` of `layer(**inputs)` on `backend`."""
    content_weight, query_weight = _loss_weights()
    fixed = {key: value for key, value in inputs.items() if key not in _DIFFERENTIATED}
    variables = list(layer.trainable_variables)
    names = [variable.path.replace("/", "__") for variable in variables]

    def loss_of(outputs):
        content, query = outputs[0], outputs[1]
        return (ops.sum(content * ops.convert_to_tensor(content_weight))
                + ops.sum(query * ops.convert_to_tensor(query_weight)))

    results = {}
    if backend == "tensorflow":
        import tensorflow as tf

        watched = {key: tf.constant(inputs[key]) for key in _DIFFERENTIATED}
        with tf.GradientTape() as tape:
            tape.watch(list(watched.values()))
            outputs = layer(**watched, **fixed, **call_options)
            loss = loss_of(outputs)
        gradients = tape.gradient(loss, list(watched.values()) + variables)
    elif backend == "jax":
        import jax

        trainable = [variable.value for variable in variables]
        non_trainable = [variable.value for variable in layer.non_trainable_variables]

        def function(differentiated, trainable):
            outputs, _ = layer.stateless_call(trainable, non_trainable, **differentiated, **fixed, **call_options)
            return loss_of(outputs), outputs

        differentiated = {key: ops.convert_to_tensor(inputs[key]) for key in _DIFFERENTIATED}
        # Jitted: one compilation instead of one per op of the eager backward pass.
        (loss, outputs), (input_gradients, weight_gradients) = jax.jit(jax.value_and_grad(
            function, argnums=(0, 1), has_aux=True))(differentiated, trainable)
        gradients = [input_gradients[key] for key in _DIFFERENTIATED] + list(weight_gradients)
    else:
        watched = {key: ops.convert_to_tensor(inputs[key]).requires_grad_(True) for key in _DIFFERENTIATED}
        for variable in variables:
            variable.value.grad = None
        outputs = layer(**watched, **fixed, **call_options)
        loss = loss_of(outputs)
        loss.backward()
        gradients = [watched[key].grad for key in _DIFFERENTIATED] + [variable.value.grad for variable in variables]
    results["content"] = ops.convert_to_numpy(outputs[0])
    results["query"] = ops.convert_to_numpy(outputs[1])
    results["loss"] = np.asarray(ops.convert_to_numpy(loss))
    for name, gradient in zip([f"grad_{key}" for key in _DIFFERENTIATED] + [f"grad_{name}" for name in names],
                              gradients):
        results[name] = ops.convert_to_numpy(gradient)
    return results


def _forward(layer, backend, **arguments):
    """`layer(**arguments)`; on JAX a jitted `stateless_call` (JAX's eager ops compile one by one)."""
    if backend != "jax":
        return layer(**arguments)
    trainable = [variable.value for variable in layer.trainable_variables]
    non_trainable = [variable.value for variable in layer.non_trainable_variables]
    return _run(backend, lambda: layer.stateless_call(trainable, non_trainable, **arguments)[0])


def _prefixed(prefix, results):
    return {f"{prefix}_{key}": value for key, value in results.items()}


def _stacked_and_apart(layer, inputs, backend):
    """The layer's outputs and gradients with its two streams stacked into one call and apart."""
    results = _prefixed("stacked", _outputs_and_gradients(layer, inputs, backend, training=False))
    results.update(_prefixed("apart", _outputs_and_gradients(layer, inputs, backend, training=False,
                                                             stack_streams=False)))
    return results


def probe_layers_attention(workdir, backend):
    """RelativeAttention's two streams (stacked and apart) with memory, perm masks and a target mapping."""
    inputs = _inputs(backend=backend)
    layer = _attention()
    results = _stacked_and_apart(layer, inputs, backend)
    # The query stream at every position (no target mapping).
    full = dict(inputs, target_mapping=None,
                query_stream=np.random.default_rng(4).normal(size=(BATCH, LENGTH, HIDDEN)).astype("float32"))
    content, query = _forward(layer, backend, **full, training=False)
    results.update(full_content=ops.convert_to_numpy(content), full_query=ops.convert_to_numpy(query))
    return results


def probe_layers_block(workdir, backend):
    """XLNetBlock's two streams (stacked and apart), outputs and gradients."""
    return _stacked_and_apart(_block(), _inputs(backend=backend), backend)


def probe_layers_components(workdir, backend):
    """Position encoding (bi_data, clamp, uni), masks (uni, same_length, memory padding), rel_shift."""
    encoding = RelativePositionEncoding(HIDDEN, bi_data=True, clamp_length=3)
    uni = RelativePositionEncoding(HIDDEN, attention_type="uni")
    rng = np.random.default_rng(5)
    padding = np.array([[1, 1, 1, 0], [0, 1, 1, 1]])
    perm_mask = rng.random((2, 4, 4)) > 0.5
    scores = rng.normal(size=(2, 2, 4, 10)).astype("float32")

    def components():
        content, query = xlnet_attention_masks(padding, perm_mask, memory_length=2, attention_type="uni",
                                               same_length=True, memory_padding_mask=np.array([[1, 0], [1, 1]]))
        return dict(encoding_bi=encoding(query_length=4, key_length=6, batch_size=4),
                    encoding_uni=uni(query_length=4, key_length=6),
                    content_mask=content, query_mask=query, rel_shift=rel_shift(scores, 6))

    return {key: ops.convert_to_numpy(value) for key, value in _run(backend, components).items()}


def probe_layers_dropped_attention(workdir, backend):
    """dropped_attention's heads and gradients (TensorFlow: its custom gradient; elsewhere autodiff)."""
    rng = np.random.default_rng(6)
    scores = (rng.normal(size=(2, 3, 5, 7)) * 3).astype("float32")
    scores[..., 5:] = -1e30  # masked keys
    keep = rng.random((2, 3, 5, 7)) > 0.3
    values = rng.normal(size=(2, 3, 7, 4)).astype("float32")
    upstream = rng.normal(size=(2, 3, 5, 4)).astype("float32")

    def total(scores, values):
        return ops.sum(dropped_attention(scores, ops.convert_to_tensor(keep), values)
                       * ops.convert_to_tensor(upstream))

    if backend == "tensorflow":
        import tensorflow as tf

        scores_t, values_t = tf.constant(scores), tf.constant(values)
        with tf.GradientTape() as tape:
            tape.watch([scores_t, values_t])
            loss = total(scores_t, values_t)
        gradients = tape.gradient(loss, [scores_t, values_t])
    elif backend == "jax":
        import jax

        loss, gradients = jax.value_and_grad(total, argnums=(0, 1))(ops.convert_to_tensor(scores),
                                                                     ops.convert_to_tensor(values))
    else:
        scores_t = ops.convert_to_tensor(scores).requires_grad_(True)
        values_t = ops.convert_to_tensor(values).requires_grad_(True)
        loss = total(scores_t, values_t)
        loss.backward()
        gradients = [scores_t.grad, values_t.grad]
    heads = dropped_attention(scores, keep, values)
    return dict(heads=ops.convert_to_numpy(heads), loss=np.asarray(ops.convert_to_numpy(loss)),
                grad_scores=ops.convert_to_numpy(gradients[0]), grad_values=ops.convert_to_numpy(gradients[1]))


def _mask(layer, shape, seed, site=0):
    return ops.convert_to_numpy(seeded_dropout.apply_dropout(layer, np.ones(shape, "float32"), True, seed, site)) != 0


def probe_layers_dropout(workdir, backend):
    """Seeded masks on this backend: repeatable, apart per step and site, at the right rate, under jit."""
    layer = keras.layers.Dropout(0.3)
    shape = (8, 64, 33)  # an odd last axis: the spare half-draw is dropped
    step_3 = seeded_dropout.step_dropout_seed(1234, 3)
    results = dict(
        same_a=_mask(layer, shape, step_3, site=2),
        same_b=_mask(layer, shape, seeded_dropout.step_dropout_seed(1234, 3), site=2),
        other_step=_mask(layer, shape, seeded_dropout.step_dropout_seed(1234, 4), site=2),
        other_site=_mask(layer, shape, step_3, site=5),
        other_run=_mask(layer, shape, seeded_dropout.step_dropout_seed(99, 3), site=2),
        scaled=ops.convert_to_numpy(seeded_dropout.apply_dropout(layer, np.ones(shape, "float32"), True, step_3)),
        bits_a=ops.convert_to_numpy(seeded_dropout.stateless_random_bits([4, 50], [1, 2])).astype("int64"),
        bits_b=ops.convert_to_numpy(seeded_dropout.stateless_random_bits([4, 50], [1, 2])).astype("int64"),
        bits_folded=ops.convert_to_numpy(seeded_dropout.stateless_random_bits(
            [4, 50], seeded_dropout.sub_seed([1, 2], 1))).astype("int64"),
    )
    # Streams stacked along axis 1 drop each part as alone.
    content, query = np.ones((2, 5, 7), "float32"), np.ones((2, 3, 7), "float32")
    stacked = seeded_dropout.apply_stacked_dropout(layer, np.concatenate([content, query], 1), [5, 3], True,
                                                   step_3, (4, 6))
    results["stacked"] = ops.convert_to_numpy(stacked)
    results["stacked_alone"] = np.concatenate(
        [ops.convert_to_numpy(seeded_dropout.apply_dropout(layer, content, True, step_3, 4)),
         ops.convert_to_numpy(seeded_dropout.apply_dropout(layer, query, True, step_3, 6))], axis=1)
    if backend == "jax":
        import jax

        @jax.jit
        def jitted(step):
            seed = seeded_dropout.step_dropout_seed(1234, step)
            return seeded_dropout.apply_dropout(layer, ops.ones(shape), True, seed, 2)

        results["jit_step_3"] = ops.convert_to_numpy(jitted(3)) != 0
        results["jit_step_4"] = ops.convert_to_numpy(jitted(4)) != 0
    return results


class _Model:
    """What `training_dropout_seed` reads of a task model: an optimizer and a backbone's run seed."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.backbone = self
        self.dropout_run_seed = 77


def probe_layers_traced_step(workdir, backend):
    """`traced_step` sets the step `training_dropout_seed` folds in; the optimizer counter otherwise."""
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build([keras.Variable(np.zeros(2, "float32"))])
    seeded_dropout.micro_batch_counter(optimizer).assign(2)
    model = _Model(optimizer)
    seed_of = seeded_dropout.training_dropout_seed
    with seeded_dropout.traced_step(5):
        traced = seed_of(model, True)
        with seeded_dropout.traced_step(6):
            inner = seed_of(model, True)
        after_inner = seed_of(model, True)
        not_training = seed_of(model, False)
    results = dict(
        counter=ops.convert_to_numpy(seed_of(model, True)),
        counter_expected=ops.convert_to_numpy(seeded_dropout.step_dropout_seed(77, 2)),
        traced=ops.convert_to_numpy(traced),
        traced_expected=ops.convert_to_numpy(seeded_dropout.step_dropout_seed(77, 5)),
        inner=ops.convert_to_numpy(inner),
        after_inner=ops.convert_to_numpy(after_inner),
        not_training_is_none=np.array(not_training is None),
        without_optimizer_is_none=np.array(seed_of(_Model(None), True) is None),
    )
    # The counter's value in a stateless step's optimizer state.
    values = [variable.value for variable in optimizer.variables]
    results["counter_value"] = ops.convert_to_numpy(seeded_dropout.micro_batch_counter_value(optimizer, values))
    if backend == "jax":
        import jax

        layer = keras.layers.Dropout(0.5)

        @jax.jit
        def masks(step):
            # The counter variable is a trace-time constant here; the traced step is not.
            with seeded_dropout.traced_step(step):
                seed = seed_of(model, True)
            return seeded_dropout.apply_dropout(layer, ops.ones((4, 64)), True, seed, 0)

        results["jit_traced_5"] = ops.convert_to_numpy(masks(5)) != 0
        results["jit_traced_6"] = ops.convert_to_numpy(masks(6)) != 0
        results["eager_traced_5"] = _mask(layer, (4, 64), seeded_dropout.step_dropout_seed(77, 5))
    return results


def probe_layers_block_dropout(workdir, backend):
    """XLNetBlock in seeded training: the same seed drops the same units, another seed others (jitted on JAX)."""
    inputs = _inputs(backend=backend)
    layer = _block()

    def train(step):
        seed = seeded_dropout.step_dropout_seed(5, step)
        if backend != "jax":
            return layer(**inputs, training=True, dropout_seed=seed)
        return layer.stateless_call(trainable, non_trainable, **inputs, training=True, dropout_seed=seed)[0]

    if backend == "jax":
        import jax

        trainable = [variable.value for variable in layer.trainable_variables]
        non_trainable = [variable.value for variable in layer.non_trainable_variables]
        train = jax.jit(train)  # one compilation for every step

    def run(step):
        return tuple(ops.convert_to_numpy(output) for output in train(step))

    first, again, other = run(1), run(1), run(2)
    inference = _forward(layer, backend, **inputs, training=False)
    return dict(content=first[0], query=first[1], content_again=again[0], query_again=again[1],
                content_other=other[0], query_other=other[1], content_inference=ops.convert_to_numpy(inference[0]))


def _fit_seeds(backend, override_train_step):
    """The dropout seeds a 3-step `fit` drew (one per step), read out of the step as it ran."""
    seen = []

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(4)
            self.dropout = keras.layers.Dropout(0.5)
            self.dropout_run_seed = 77

        def call(self, x, training=False):
            seed = seeded_dropout.training_dropout_seed(self, training)
            if seed is not None:
                if backend == "jax":
                    import jax

                    jax.debug.callback(lambda value: seen.append(np.asarray(value)), seed)
                else:
                    seen.append(ops.convert_to_numpy(seed))
            return seeded_dropout.apply_dropout(self.dropout, self.dense(x), training, seed)

    class TracedNet(Net):
        def train_step(self, state, data):
            # The contract of `traced_step` for the JAX trainer.
            step = seeded_dropout.micro_batch_counter_value(self.optimizer, state[2])
            with seeded_dropout.traced_step(step):
                return super().train_step(state, data)

    model = TracedNet() if override_train_step else Net()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", run_eagerly=backend == "tensorflow")
    model.fit(np.ones((12, 3), "float32"), np.ones((12, 4), "float32"), batch_size=4, epochs=1, verbose=0)
    return np.stack(seen)


def probe_layers_fit_seeds(workdir, backend):
    """`fit` folds each step's counter into the dropout seed: JAX through `traced_step`, the others directly."""
    results = dict(
        seeds=_fit_seeds(backend, override_train_step=backend == "jax"),
        expected=np.stack([ops.convert_to_numpy(seeded_dropout.step_dropout_seed(77, step)) for step in range(3)]),
    )
    if backend == "jax":
        # Without it, the counter variable holds no value inside the step: a clear error, not step 0's masks.
        try:
            _fit_seeds(backend, override_train_step=False)
            results["untraced_error"] = np.array("")
        except RuntimeError as error:
            results["untraced_error"] = np.array(str(error))
    return results
