"""Probes of xlnet_tf.optimizers on each backend: three updates of fixed gradients, and `fit` steps.

Every optimizer `build_optimizer` can return is applied to a tiny model whose
weights come from a fixed numpy generator: AdamW with layer-wise decay on the
warmup-decay schedule (clipped, LayerNorm and biases excluded from the decay),
Muon on the blocks' 2-D and 3-D kernels, the unclipped constant-after-warmup
recipe, the all-reduced variant, gradient accumulation, loss scaling and Keras'
own (unfused) update. The gradients are fixed numpy arrays, so the variables
after each update depend on the optimizer's arithmetic alone. On JAX the same
updates also run through `stateless_apply` under `jax.jit`, as Keras' JAX
trainer runs them. `fit` probes train the tiny model (and a plain Dense model)
for two steps with the optimizer compiled in, on each backend's own autodiff.
"""

import keras
import numpy as np

from xlnet_tf.optimizers import build_optimizer

HIDDEN, HEADS, HEAD_DIM, BATCH, STEPS = 4, 2, 3, 4, 3

# build_optimizer's settings per case, over a peak rate of 0.2, no warmup, weight decay 0.1 and a clip
# at 1 (the gradients' global norm is about 20, so the clip acts). At that rate Keras' own Adam
# arithmetic (`1 - beta` from the Python float) ends about 2e-6 from the fused kernel's, so a
# comparison within 1e-6 tells the kernel's arithmetic from Keras'.
CASES = {
    # A square decay from the peak to 1e-3 by update 4.
    "layerwise": dict(layer_decay=0.75, train_steps=4, decay_power=2.0, end_learning_rate=1e-3),
    "muon": dict(algorithm="muon", layer_decay=0.75, train_steps=4, decay_power=2.0, end_learning_rate=1e-3),
    # No clip, no train_steps: the rate holds after a one-update warmup (whose first rate is 0).
    "unclipped": dict(clip_norm=0.0, weight_decay=0.01, warmup_steps=1),
    "all_reduced": dict(all_reduces_gradients=True, train_steps=6, algorithm="muon"),
    "accumulation": dict(gradient_accumulation_steps=2, train_steps=6),
    "loss_scaling": dict(loss_scaling=True, train_steps=6),
    "unfused": dict(fused=False, layer_decay=0.5, train_steps=6),
}
# On JAX every case runs through stateless_apply (the trainer's path); `apply` runs the same
# code op by op, slowly, so two cases show it. (Keras' LossScaleOptimizer updates under a
# traced cond, which on JAX only its stateless_apply supports, whatever the inner optimizer.)
JAX_EAGER_CASES = ("layerwise", "muon")


class TinyBlock(keras.layers.Layer):
    """A block with XLNet's kernel shapes: a 3-D attention kernel, a feed-forward kernel, a LayerNorm."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.attention = keras.layers.EinsumDense("bh,hnd->bnd", (HEADS, HEAD_DIM), bias_axes="nd",
                                                  name="attention")
        self.feedforward = keras.layers.Dense(HIDDEN, activation="tanh", name="feedforward")
        self.layer_norm = keras.layers.LayerNormalization(name="layer_norm")

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.feedforward.build((input_shape[0], HEADS * HEAD_DIM))
        self.layer_norm.build(input_shape)

    def call(self, inputs):
        heads = self.attention(inputs)  # [B, heads, head_dim]
        flat = keras.ops.reshape(heads, (-1, HEADS * HEAD_DIM))  # [B, heads * head_dim]
        return self.layer_norm(inputs + self.feedforward(flat))


class TinyBackbone(keras.layers.Layer):
    """Two `TinyBlock`s under `blocks`, where `build_optimizer` finds them."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.blocks = [TinyBlock(name=f"block_{i}") for i in range(2)]

    def build(self, input_shape):
        for block in self.blocks:
            block.build(input_shape)

    def call(self, inputs):
        for block in self.blocks:
            inputs = block(inputs)
        return inputs


class TinyTask(keras.Model):
    """A backbone and a Dense head: the layout `build_optimizer`'s layer-wise decay and Muon read."""

    def __init__(self, all_reduces_gradients=False, **kwargs):
        super().__init__(**kwargs)
        self.all_reduces_gradients = all_reduces_gradients
        self.backbone = TinyBackbone(name="backbone")
        self.head = keras.layers.Dense(2, name="head")

    def call(self, inputs):
        return self.head(self.backbone(inputs))


def _set_weights(model, seed):
    """Every weight from a fixed generator, in tracking order (the same on every backend)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32") * 0.5)


def tiny_task(all_reduces_gradients=False):
    """`TinyTask`, built, with its weights from a fixed generator."""
    model = TinyTask(all_reduces_gradients=all_reduces_gradients, name="tiny_task")
    model(np.zeros((BATCH, HIDDEN), "float32"))
    _set_weights(model, seed=7)
    return model


def gradients(variables, step):
    """Fixed numpy gradients of `variables`' shapes for update `step`."""
    rng = np.random.default_rng(100 + step)
    return [rng.normal(size=v.shape).astype("float32") * 2.0 for v in variables]


def _settings(case):
    settings = dict(learning_rate=0.2, warmup_steps=0, weight_decay=0.1, clip_norm=1.0)
    settings.update(CASES[case])
    settings.pop("all_reduces_gradients", None)
    return settings


def _flat(values):
    return np.concatenate([np.asarray(keras.ops.convert_to_numpy(v)).reshape(-1) for v in values])


def _micro_steps(case):
    return STEPS * CASES[case].get("gradient_accumulation_steps", 1)


def _scaled(case, grads):
    # A loss-scaled step's gradients arrive multiplied by the initial loss scale.
    return [g * 2.0 ** 15 for g in grads] if CASES[case].get("loss_scaling") else grads


def _apply_steps(case, backend):
    """The variables after each update of `case` through `optimizer.apply`: `[updates, all values]`."""
    model = tiny_task(CASES[case].get("all_reduces_gradients", False))
    optimizer = build_optimizer(model, **_settings(case))
    variables = model.trainable_variables
    optimizer.build(variables)

    def apply(grads):
        optimizer.apply(grads, variables)

    if backend == "tensorflow":
        import tensorflow as tf

        apply = tf.function(apply)  # one traced function, the way `fit` runs it
    after = []
    for step in range(_micro_steps(case)):
        apply([keras.ops.convert_to_tensor(g) for g in _scaled(case, gradients(variables, step))])
        if (step + 1) % CASES[case].get("gradient_accumulation_steps", 1) == 0:
            after.append(_flat(variables))
    return np.stack(after), optimizer


def _stateless_steps(case):
    """The same updates through `optimizer.stateless_apply` under `jax.jit` (JAX only)."""
    import jax

    model = tiny_task(CASES[case].get("all_reduces_gradients", False))
    optimizer = build_optimizer(model, **_settings(case))
    variables = model.trainable_variables
    optimizer.build(variables)
    step_fn = jax.jit(optimizer.stateless_apply)
    values = [v.value for v in variables]
    state = [v.value for v in optimizer.variables]
    after = []
    for step in range(_micro_steps(case)):
        grads = [keras.ops.convert_to_tensor(g) for g in _scaled(case, gradients(variables, step))]
        values, state = step_fn(state, grads, values)
        if (step + 1) % CASES[case].get("gradient_accumulation_steps", 1) == 0:
            after.append(_flat(values))
    return np.stack(after)


def probe_optimizer_updates(workdir, backend):
    """Per case: `<case>` the variables after each of 3 updates, `<case>_iterations` the optimizer's
    step count; on JAX `<case>_stateless` for every case, `<case>` for `JAX_EAGER_CASES`."""
    outputs = {}
    for case in CASES:
        if backend == "jax":
            outputs[f"{case}_stateless"] = _stateless_steps(case)
            if case not in JAX_EAGER_CASES:
                continue
        outputs[case], optimizer = _apply_steps(case, backend)
        outputs[f"{case}_iterations"] = np.asarray(keras.ops.convert_to_numpy(optimizer.iterations))
    return outputs


def _fit(model, optimizer, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2 * BATCH, HIDDEN)).astype("float32")
    y = rng.normal(size=(2 * BATCH, 2)).astype("float32")  # both models end in 2 outputs
    model.compile(optimizer=optimizer, loss="mean_squared_error")
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return _flat(model.trainable_variables), np.asarray(history.history["loss"], "float32")


def probe_optimizer_fit(workdir, backend):
    """Weights after two `fit` steps: the tiny task with Muon and layer-wise decay, and a Dense model."""
    task = tiny_task()
    task_weights, task_loss = _fit(task, build_optimizer(
        task, learning_rate=0.05, warmup_steps=1, train_steps=4, weight_decay=0.1, clip_norm=1.0,
        layer_decay=0.5, algorithm="muon"), seed=11)
    dense = keras.Sequential([keras.Input((HIDDEN,)), keras.layers.Dense(3, activation="tanh", name="hidden"),
                              keras.layers.Dense(2, name="out")], name="dense_model")
    _set_weights(dense, seed=9)
    dense_weights, dense_loss = _fit(dense, build_optimizer(
        dense, learning_rate=0.05, warmup_steps=1, train_steps=4, weight_decay=0.1, clip_norm=1.0), seed=12)
    return {"task_weights": task_weights, "task_loss": task_loss,
            "dense_weights": dense_weights, "dense_loss": dense_loss}
