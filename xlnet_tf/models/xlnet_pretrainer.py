"""XLNet with its language-model head, for permutation-LM pretraining."""

import os
import warnings

import keras
import numpy as np
from keras import ops

from xlnet_tf.layers.seeded_dropout import training_dropout_seed
from xlnet_tf.formats.preset_files import LM_HEAD_FILE
from xlnet_tf.storage import preset_io
from xlnet_tf.models.xlnet_backbone import OPTIONAL_INPUTS, REQUIRED_INPUTS, XLNetBackbone
from xlnet_tf.models.recurrence_memory import RecurrenceMemory
from xlnet_tf.models.token_id_checks import check_token_id_inputs
from xlnet_tf.models.first_replica_build import FirstReplicaBuild
from xlnet_tf.models.traced_dropout_step import TracedDropoutStep

BACKBONE_INPUTS = REQUIRED_INPUTS + OPTIONAL_INPUTS
TARGET_KEYS = ("target_ids", "target_mask")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetPretrainer(FirstReplicaBuild, TracedDropoutStep, keras.Model):
    """`XLNetBackbone` plus the LM head: logits tied to the word embedding, plus an output bias.

    The logits come from the query stream when `target_mapping` is given
    (`[B, P, V]`, one row per prediction), otherwise from the content stream
    (`[B, L, V]`). They are float32 under any dtype policy.

    Training: `fit` takes the batches of `xlnet_tf.data.pretraining_dataset`
    (dicts that also carry `target_ids [B, P]` and `target_mask [B, P]`); the
    loss is the cross-entropy averaged over the real targets (`target_mask`) of
    the whole global batch: each replica divides its sum by the target count
    summed over all replicas, so one device and N replicas give the same loss
    and the same update. `accuracy` is the fraction of real targets predicted
    right. With `memory_length > 0`, call `enable_recurrence_memory(per_replica_batch)`
    before `fit`: each replica then feeds its previous step's `new_mems` back as
    `mems` (see `xlnet_tf.training.RecurrenceMemory`).

    On TensorFlow, `train_step` is this class's own (replica-context
    all-reduces, the deferred tied-embedding gradient). On JAX and PyTorch,
    Keras' trainer runs the step through `compute_loss` (the same masked mean:
    one jitted JAX step sees the whole global batch) and `compute_metrics`; the
    memory is then read and written in `call`, a non-trainable variable the JAX
    trainer carries from step to step in its state.

    With an optimizer from `xlnet_tf.optimizers.build_optimizer` (an `AllReducedAdamW`,
    chosen by `all_reduces_gradients`) the train step sums gradients over replicas
    itself before global-norm clipping, so the clip sees the true global gradient
    (Keras would clip per replica).

    Args:
        backbone: an `XLNetBackbone`.

    Call arguments:
        inputs: the backbone's input dict; `target_ids`/`target_mask` are accepted and ignored.
        training: Python bool.
        output_hidden_states: passed to the backbone.
        dropout_seed: optional int `[2]` seed of every dropout mask. None in
            training after `compile`: the step's seed (run seed, the optimizer's
            micro-batch counter, replica id; see `xlnet_tf.layers.seeded_dropout`),
            so a resumed run draws the same masks; without an optimizer, Keras' dropout.

    Returns:
        The backbone's output dict plus `logits`.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetConfig, XLNetPretrainer
    >>> config = XLNetConfig(vocabulary_size=50, num_layers=2, num_heads=2, head_dim=4,
    ...                      hidden_dim=8, intermediate_dim=16)
    >>> pretrainer = XLNetPretrainer(XLNetBackbone(config))
    >>> batch = {"token_ids": np.ones((2, 5), "int32"), "segment_ids": np.zeros((2, 5), "int32"),
    ...          "padding_mask": np.ones((2, 5), "int32"),
    ...          "target_mapping": np.eye(5, dtype="float32")[None, :3].repeat(2, 0)}
    >>> pretrainer(batch)["logits"].shape
    TensorShape([2, 3, 50])
    """

    # `train_step` sums the gradients over replicas before the optimizer sees them.
    all_reduces_gradients = True

    def __init__(self, backbone, **kwargs):
        if "dtype" not in kwargs:
            kwargs["dtype"] = backbone.dtype_policy
        kwargs.setdefault("name", "xlnet_pretrainer")
        super().__init__(**kwargs)
        self.backbone = backbone
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.accuracy_tracker = keras.metrics.Mean(name="accuracy")
        self._recurrence_memory = None
        self._static_batch_size = None
        self._warned_no_memory = False
        # Set by train_step only: the head's share of the tied embedding's gradient is then
        # computed by `_tied_embedding_gradient`, after every other gradient.
        self._defer_head_table_gradient = False
        # Keras variables of the recurrence memory tracked as this model's state (JAX, PyTorch).
        self._memory_variables = []
        self.build()

    def build(self, input_shape=None):
        self.lm_bias = self.add_weight(
            name="lm_bias", shape=(self.backbone.config.vocabulary_size,), initializer="zeros")
        self.built = True

    def predict(self, x=None, batch_size=None, **kwargs):
        """Keras' `predict`; a dict of arrays is checked first (`check_token_id_inputs`), values included.

        Inside the traced step only structure and shapes can be checked, so ids
        outside the vocabulary are refused here, before tracing, by name.
        """
        if isinstance(x, dict):
            check_token_id_inputs(x, vocabulary_size=self.backbone.config.vocabulary_size, caller="XLNetPretrainer")
        return super().predict(x, batch_size=batch_size, **kwargs)

    def call(self, inputs, training=None, output_hidden_states=False, dropout_seed=None):
        if not isinstance(inputs, dict):
            raise TypeError(f"XLNetPretrainer expects a dict of inputs, got {type(inputs).__name__}.")
        unknown = sorted(set(inputs) - set(BACKBONE_INPUTS) - set(TARGET_KEYS))
        if unknown:
            raise ValueError(f"XLNetPretrainer: unknown input key(s) {unknown}; allowed: "
                             f"{list(BACKBONE_INPUTS + TARGET_KEYS)}.")
        if dropout_seed is None:
            dropout_seed = training_dropout_seed(self, training)
        features = {k: v for k, v in inputs.items() if k in BACKBONE_INPUTS}
        # TensorFlow's train_step feeds the memory itself; Keras' trainer of the other backends calls the model.
        carry_memory = (training and self._recurrence_memory is not None and "mems" not in features
                        and keras.config.backend() != "tensorflow")
        if carry_memory:
            features["mems"] = self._recurrence_memory.read()  # [B, num_layers, M, H]
        outputs = dict(self.backbone(features, training=training, output_hidden_states=output_hidden_states,
                                     dropout_seed=dropout_seed))
        if carry_memory:
            self._recurrence_memory.write(outputs["new_mems"])
        outputs["logits"] = tied_lm_logits(_head_input(outputs), self.backbone.token_embedding.embeddings,
                                           self.lm_bias, stop_table_gradient=self._defer_head_table_gradient)
        return outputs

    # ------------------------------------------------------------------ training

    @property
    def metrics(self):
        return [self.loss_tracker, self.accuracy_tracker]

    @property
    def recurrence_memory(self):
        """The `RecurrenceMemory` fed back between train steps, or None."""
        return self._recurrence_memory

    def enable_recurrence_memory(self, per_replica_batch_size, strategy=None, reset_every_steps=0):
        """Creates the per-replica memory buffers; call before `fit` (under no other scope).

        Args:
            per_replica_batch_size: rows each replica sees per step.
            strategy: the strategy the model trains under (default: its own).
            reset_every_steps: when > 0, the memory is zeroed (inside the step) before
                every step whose index is a multiple of it: set it to the data
                epoch length, where every row stream starts over.

        Returns:
            The `RecurrenceMemory`.
        """
        config = self.backbone.config
        if config.memory_length <= 0:
            raise ValueError("enable_recurrence_memory: the backbone has memory_length 0.")
        if self.train_function is not None:
            raise ValueError("enable_recurrence_memory must be called before the first fit.")
        self.set_static_batch_size(per_replica_batch_size)
        if keras.config.backend() == "tensorflow":
            strategy = strategy or self.distribute_strategy
        self._recurrence_memory = RecurrenceMemory(
            per_replica_batch_size=per_replica_batch_size, num_layers=config.num_layers,
            memory_length=config.memory_length, hidden_dim=config.hidden_dim,
            dtype=self.backbone.compute_dtype, strategy=strategy,
            reset_every_steps=reset_every_steps)
        if keras.config.backend() != "tensorflow":
            self._track_memory_variables(self._recurrence_memory)
        return self._recurrence_memory

    def _track_memory_variables(self, memory):
        """Makes the memory's Keras variables part of this model's non-trainable state.

        Keras' JAX trainer carries only the model's variables from one step to
        the next (a variable assigned in `call` is written back through that
        state), so the memory must be one of them. The weights files leave it out
        (`save_own_variables`): it depends on the batch size, and a run's backup
        keeps it apart (`RecurrenceMemory.save`).
        """
        variables = [v for v in (getattr(memory, "variable", None), getattr(memory, "step", None))
                     if isinstance(v, keras.Variable)]
        locked = self._tracker.locked
        self._tracker.unlock()
        try:
            for variable in variables:
                self._track_variable(variable)
        finally:
            if locked:
                self._tracker.lock()
        self._memory_variables = variables

    def _weight_variables(self):
        """This model's own variables in a weights file: the LM bias, not the recurrence memory."""
        memory = {id(v) for v in self._memory_variables}
        return [v for v in self._trainable_variables + self._non_trainable_variables if id(v) not in memory]

    def save_own_variables(self, store):
        for i, variable in enumerate(self._weight_variables()):
            store[f"{i}"] = variable

    def load_own_variables(self, store):
        variables = self._weight_variables()
        if len(store.keys()) != len(variables):
            raise ValueError(f"XLNetPretrainer: the weights file holds {len(store.keys())} variable(s) of the "
                             f"model itself, the model has {len(variables)} (the LM bias).")
        for i, variable in enumerate(variables):
            variable.assign(store[f"{i}"])

    def set_static_batch_size(self, per_replica_batch_size):
        """Pins the per-replica batch size of training batches.

        Keras' `steps_per_execution` loop hands the step batches whose batch
        dimension is unknown; XLA/TPU and `bi_data` need it static, so the train
        step re-asserts it.
        """
        self._static_batch_size = int(per_replica_batch_size)

    def reset_recurrence_memory(self, step=None):
        """Zeros every replica's memory (a no-op without memory); `step` resets its step counter."""
        if self._recurrence_memory is not None:
            self._recurrence_memory.reset(step=step)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # All weights exist after __init__, so Keras' symbolic build has nothing to do; it
        # would still pull a batch and, under MultiWorkerMirroredStrategy, fail reducing the
        # dict batch across workers (keras 3.15 backend/tensorflow/trainer.py:731).
        if all(layer.built for layer in self._flatten_layers()) and (
                self.optimizer is None or self.optimizer.built):
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def _features(self, data, with_memory):
        inputs = data[0] if isinstance(data, (tuple, list)) else data
        if not isinstance(inputs, dict):
            raise TypeError(f"XLNetPretrainer.fit expects dict batches, got {type(inputs).__name__}.")
        missing = [k for k in TARGET_KEYS if k not in inputs]
        if missing:
            raise ValueError(f"XLNetPretrainer: batch lacks {missing} (needed for the loss).")
        features = {k: inputs[k] for k in BACKBONE_INPUTS + TARGET_KEYS if k in inputs}
        if self._static_batch_size is not None:
            features = {k: self._with_static_batch(k, v) for k, v in features.items()}
        targets = features.pop("target_ids"), features.pop("target_mask")
        if with_memory:
            features["mems"] = self._recurrence_memory.read()  # [B, num_layers, M, H]
        return (features,) + targets

    def _with_static_batch(self, key, tensor):
        """`tensor` with its batch dimension pinned to the per-replica batch size.

        A batch dimension that is already static is checked here, at trace time.
        An unknown one gets a run-time `EnsureShape` check, except in an
        XLA-compiled step, where that op made the whole step several times
        slower on CPU: there the size is a shape annotation, and a batch of
        another size fails at run time in the first operation that meets it.
        """
        batch = tensor.shape[0]
        if batch is not None:
            if batch != self._static_batch_size:
                raise ValueError(
                    f"XLNetPretrainer: batch input {key!r} has per-replica batch size {batch}, "
                    f"the model was set up for {self._static_batch_size} (recurrence memory rows or "
                    "set_static_batch_size); check global_batch_size / number of replicas.")
            return tensor
        import tensorflow as tf  # only TensorFlow's train_step pins the batch

        static_shape = (self._static_batch_size,) + tuple(tensor.shape[1:])
        compiled_by_xla = self.jit_compile or isinstance(tf.distribute.get_strategy(),
                                                         tf.distribute.TPUStrategy)
        if not compiled_by_xla:
            return tf.ensure_shape(tensor, static_shape)
        tensor = tf.identity(tensor)
        tensor.set_shape(static_shape)
        return tensor

    def _masked_sums(self, target_ids, target_mask, logits):
        """Per-target cross-entropy and correctness with the float mask, all `[B, P]`."""
        target_ids = ops.cast(target_ids, "int32")
        per_token = keras.losses.sparse_categorical_crossentropy(
            target_ids, ops.cast(logits, "float32"), from_logits=True)  # [B, P]
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), target_ids),
                           "float32")  # [B, P]
        return per_token, correct, ops.cast(target_mask, "float32")

    def _global_results(self, context):
        """Running loss/accuracy over all replicas, computed inside the replica context."""
        import tensorflow as tf  # TensorFlow's train and test steps only

        local = ops.stack([ops.cast(v, "float32") for v in (
            self.loss_tracker.total, self.loss_tracker.count,
            self.accuracy_tracker.total, self.accuracy_tracker.count)])
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
        results = {"loss": total[0] / ops.maximum(total[1], 1.0),
                   "accuracy": total[2] / ops.maximum(total[3], 1.0)}
        strategy = tf.distribute.get_strategy()
        if (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
                and strategy.extended._in_multi_worker_mode()):
            # Keras 3.15 reduces step outputs across workers with `reduce("MEAN", v, axis=0)`
            # (backend/tensorflow/trainer.py:841), which rejects scalars; a [1] vector
            # reduces to the same (already global) scalar.
            results = {k: ops.reshape(v, (1,)) for k, v in results.items()}
        return results

    def train_step(self, *args):
        """TensorFlow: the step below. JAX (`train_step(state, data)`) and PyTorch: Keras' own."""
        if keras.config.backend() != "tensorflow":
            self._warn_without_memory()
            return super().train_step(*args)
        return self._tensorflow_train_step(*args)

    def _warn_without_memory(self):
        if (self._recurrence_memory is None and self.backbone.config.memory_length > 0
                and not self._warned_no_memory):
            self._warned_no_memory = True
            warnings.warn("XLNetPretrainer: memory_length > 0 but enable_recurrence_memory() was "
                          "not called; training without recurrence memory.", stacklevel=4)

    def _tensorflow_train_step(self, data):
        # tf.distribute's replica context: the global target count and the gradient sum over replicas,
        # and the tied embedding's [V, H] gradient formed after every other one.
        import tensorflow as tf

        with_memory = self._recurrence_memory is not None
        if not with_memory and self.backbone.config.memory_length > 0 and not self._warned_no_memory:
            self._warned_no_memory = True
            warnings.warn("XLNetPretrainer: memory_length > 0 but enable_recurrence_memory() was "
                          "not called; training without recurrence memory.", stacklevel=3)
        features, target_ids, target_mask = self._features(data, with_memory)
        context = tf.distribute.get_replica_context()
        num_replicas = context.num_replicas_in_sync
        # Masks from (run seed, micro-batch counter, replica): a resumed run, whose
        # optimizer counter is restored, drops the units the uninterrupted run dropped.
        dropout_seed = training_dropout_seed(self, True)
        variables = self.trainable_variables
        table = self.backbone.token_embedding.embeddings
        table_index = next((i for i, v in enumerate(variables) if v is table), None)
        self._defer_head_table_gradient = table_index is not None
        # The lookup's rows stay `IndexedSlices`: `_tied_embedding_gradient` adds them in place.
        self.backbone.token_embedding.sparse_gradient = self._defer_head_table_gradient
        try:
            with tf.GradientTape() as tape:
                outputs = self(features, training=True, dropout_seed=dropout_seed)
                per_token, correct, mask = self._masked_sums(target_ids, target_mask, outputs["logits"])
                global_count = context.all_reduce(tf.distribute.ReduceOp.SUM, ops.sum(mask))
                # This replica's share of the global mean: summing over replicas gives the mean.
                loss = ops.sum(per_token * mask) / ops.maximum(global_count, 1.0)
                if self.losses:
                    extra = [ops.cast(term, "float32") for term in self.losses]
                    loss = loss + ops.sum(ops.stack(extra)) / num_replicas
                scaled_loss = self.optimizer.scale_loss(loss)
        finally:
            self._defer_head_table_gradient = False
            self.backbone.token_embedding.sparse_gradient = False
        if table_index is None:
            gradients = tape.gradient(scaled_loss, variables)
        else:
            *gradients, logits_gradient = tape.gradient(scaled_loss, variables + [outputs["logits"]])
            gradients[table_index] = _tied_embedding_gradient(
                gradients[table_index], logits_gradient, ops.cast(_head_input(outputs), table.dtype),
                [g for i, g in enumerate(gradients) if i != table_index])
        optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        if num_replicas > 1 and getattr(optimizer, "expects_all_reduced_gradients", False):
            present = [i for i, g in enumerate(gradients) if g is not None]
            reduced = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                         [tf.convert_to_tensor(gradients[i]) for i in present])
            for i, g in zip(present, reduced):
                gradients[i] = g
        self.optimizer.apply(gradients, variables)
        if with_memory:
            self._recurrence_memory.write(outputs["new_mems"])
        self.loss_tracker.update_state(per_token, sample_weight=mask)
        self.accuracy_tracker.update_state(correct, sample_weight=mask)
        return self._global_results(context)

    def test_step(self, *args):
        if keras.config.backend() != "tensorflow":
            return super().test_step(*args)
        import tensorflow as tf  # the replica context reduces the running sums

        (data,) = args
        features, target_ids, target_mask = self._features(data, with_memory=False)
        outputs = self(features, training=False)
        per_token, correct, mask = self._masked_sums(target_ids, target_mask, outputs["logits"])
        self.loss_tracker.update_state(per_token, sample_weight=mask)
        self.accuracy_tracker.update_state(correct, sample_weight=mask)
        return self._global_results(tf.distribute.get_replica_context())

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Running loss and accuracy over the real targets (JAX and PyTorch; TensorFlow's steps do their own).

        As TensorFlow's step: the loss tracker weighs each target's cross-entropy by
        `target_mask`, so the running loss is the mean over all real targets so far.
        """
        del sample_weight
        target_ids, target_mask = self._targets(x, y)
        if target_mask is None:
            target_mask = ops.ones(ops.shape(target_ids), "float32")  # [B, P]: every target is real
        per_token, correct, mask = self._masked_sums(target_ids, target_mask, y_pred["logits"])
        self.loss_tracker.update_state(per_token, sample_weight=mask)
        self.accuracy_tracker.update_state(correct, sample_weight=mask)
        return {"loss": self.loss_tracker.result(), "accuracy": self.accuracy_tracker.result()}

    @staticmethod
    def _targets(x, y):
        """`(target_ids, target_mask)` of a batch: from `y`, or from the input dict."""
        if y is None:
            y = {k: x[k] for k in TARGET_KEYS if k in x}
        if isinstance(y, dict):
            if "target_ids" not in y:
                raise ValueError(f"XLNetPretrainer: batch lacks 'target_ids' (needed for the loss); "
                                 f"got keys {sorted(y)}.")
            return y["target_ids"], y.get("target_mask")
        return y, None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Masked cross-entropy over predicted tokens, averaged over real targets."""
        if y is None:
            y = {k: x[k] for k in TARGET_KEYS if k in x}
        if isinstance(y, dict):
            target_ids, target_mask = y["target_ids"], y.get("target_mask")
        else:
            target_ids, target_mask = y, sample_weight
        logits = y_pred["logits"]
        per_token = keras.losses.sparse_categorical_crossentropy(
            ops.cast(target_ids, "int32"), logits, from_logits=True)  # [B, P]
        if target_mask is None:
            target_mask = ops.ones_like(per_token)
        target_mask = ops.cast(target_mask, "float32")
        loss = ops.sum(per_token * target_mask) / ops.maximum(ops.sum(target_mask), 1.0)
        losses = self.losses
        if losses:
            loss = loss + ops.sum(ops.stack([ops.cast(term, "float32") for term in losses]))
        return loss

    def get_config(self):
        return {"backbone": keras.saving.serialize_keras_object(self.backbone),
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        backbone = keras.saving.deserialize_keras_object(
            config.pop("backbone"), custom_objects={"XLNetBackbone": XLNetBackbone})
        return cls(backbone, **config)

    # A `keras.Model`, not a keras-hub `Task`: no base class saves it, and its LM bias is a file keras-hub ignores.
    def save_to_preset(self, preset_dir, vocabulary_file=None, max_shard_size=None, *, tokenizer=None):
        """Writes the backbone preset (keras-hub's layout) plus `lm_head.weights.h5` with the output bias.

        The bias is an extra file keras-hub ignores, so the directory is at the
        same time a backbone preset for every task's `from_preset`, for
        `keras_hub.upload_preset` and for keras-hub's loaders.

        Args:
            preset_dir: the directory (local, `gs://`, `ram://`; created).
            vocabulary_file: `spiece.model` path, its bytes, or a directory holding one.
            max_shard_size: accepted for keras-hub's signature; weights are one file.
            tokenizer: optional `XLNetTokenizer` whose settings are saved.

        Example:
        >>> import os, tempfile
        >>> from xlnet_tf import XLNetBackbone, XLNetConfig, XLNetPretrainer
        >>> pretrainer = XLNetPretrainer(XLNetBackbone(XLNetConfig(
        ...     vocabulary_size=32, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8, intermediate_dim=16)))
        >>> preset = os.path.join(tempfile.mkdtemp(), "my_preset")
        >>> pretrainer.save_to_preset(preset)  # vocabulary_file="spiece.model" adds the tokenizer
        >>> sorted(os.listdir(preset))
        ['config.json', 'lm_head.weights.h5', 'metadata.json', 'model.weights.h5']
        >>> XLNetPretrainer.from_preset(preset).backbone.config.vocabulary_size
        32
        """
        self.backbone.save_to_preset(preset_dir, vocabulary_file, max_shard_size, tokenizer=tokenizer)
        preset_io.write_arrays(os.path.join(preset_dir, LM_HEAD_FILE),
                               {"lm_bias": np.asarray(keras.ops.convert_to_numpy(self.lm_bias))})

    # A `keras.Model`, not a keras-hub `Task`: no base class loads it, and its LM bias is an extra file.
    @classmethod
    def from_preset(cls, preset, dtype=None, load_weights=True, **config_overrides):
        """Loads backbone and LM bias from a preset (name, directory or `hf://` / `kaggle://` handle).

        A preset without `lm_head.weights.h5` (e.g. a backbone saved alone) gets a zero bias.

        Args:
            preset: a preset name (`xlnet-tf presets`), a directory (local,
                `gs://`, `ram://`) or a hub handle; either preset layout.
            dtype: a dtype policy.
            load_weights: False builds the architecture with fresh weights.
            **config_overrides: `XLNetConfig` fields to change (see `XLNetBackbone.from_preset`).

        Returns:
            An `XLNetPretrainer`.

        Example:
        >>> from xlnet_tf import XLNetPretrainer
        >>> pretrainer = XLNetPretrainer.from_preset("xlnet_base_cased")  # or a directory save_to_preset wrote
        """
        preset = preset_io.resolve(preset)
        backbone = XLNetBackbone.from_preset(
            preset, dtype=dtype, load_weights=load_weights, **config_overrides)
        pretrainer = cls(backbone)
        head_path = preset_io.fetch(preset, LM_HEAD_FILE, required=False) if load_weights else None
        if head_path is not None:
            arrays = preset_io.read_arrays(head_path)  # through gfile: the preset may be on gs:// or ram://
            if "lm_bias" not in arrays:
                raise ValueError(f"{head_path} has no 'lm_bias' dataset (found {sorted(arrays)}).")
            bias = arrays["lm_bias"]
            if bias.shape != tuple(pretrainer.lm_bias.shape):
                raise ValueError(f"{head_path}: lm_bias has shape {bias.shape}, the model expects "
                                 f"{tuple(pretrainer.lm_bias.shape)}.")
            pretrainer.lm_bias.assign(bias)
        return pretrainer


def tied_lm_logits(hidden, embedding_variable, bias, stop_table_gradient=False):
    """XLNet's LM head: `hidden` times the word-embedding table, plus the output bias.

    Args:
        hidden: `[B, P, H]`, the stream the head reads.
        embedding_variable: the `[V, H]` word-embedding variable (the tied weights): the
            table of `xlnet_tf.layers.embedding.Embedding`, never autocast, so read in its own dtype.
        bias: the `[V]` output bias.
        stop_table_gradient: no gradient to the table through the head (the
            pretrainer's train step forms that share itself).

    Returns:
        float32 logits `[B, P, V]`.
    """
    # The head runs in the embedding variable's own dtype (float32 under mixed_bfloat16):
    # casting the [V, H] table to bfloat16 and its [V, H] gradient back costs more than the
    # P prediction rows' bfloat16 matmul saves, and the logits over the vocabulary are more
    # accurate. In JAX's stateless step the read gives the step's value, not the variable's.
    embeddings = ops.convert_to_tensor(embedding_variable)  # [V, H]
    if stop_table_gradient:
        embeddings = ops.stop_gradient(embeddings)
    hidden = ops.cast(hidden, embeddings.dtype)
    # One 2-D matmul: a batched [B, P, H] x [V, H] einsum lowers to a broadcast
    # BatchMatMul whose embedding gradient is B [V, H] products summed (and transposed).
    batch, predictions = ops.shape(hidden)[0], ops.shape(hidden)[1]
    hidden = ops.reshape(hidden, (-1, ops.shape(hidden)[2]))  # [B*P, H]
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf  # transpose_b folds the [V, H] transpose into the matmul kernel

        logits = tf.linalg.matmul(hidden, embeddings, transpose_b=True)  # [B*P, V]
    else:
        logits = ops.matmul(hidden, ops.transpose(embeddings))  # [B*P, V]
    logits = ops.reshape(logits, (batch, predictions, -1))  # [B, P, V]
    return ops.cast(logits, "float32") + ops.cast(bias, "float32")


def _head_input(outputs):
    """The stream the LM head reads: the query stream with `target_mapping`, else the content stream."""
    return outputs.get("query_output", outputs["sequence_output"])


def _tied_embedding_gradient(lookup_gradient, logits_gradient, head_input, other_gradients):
    """The tied `[V, H]` embedding's gradient: the LM head's share plus the input lookup's.

    Left to the tape, the head's `[V, H]` share is formed at the start of the
    backward step (the head is the last op of the forward one) and is held
    through all of it, and the lookup's `IndexedSlices` become a second dense
    `[V, H]` tensor to be added to it. Here the head's share is formed after
    every other gradient, from the `[B, P, V]` logits' gradient, and the
    lookup's rows are added to it in place: 98 MB (XLNet-Base, float32) less
    at the backward step's peak, and no second `[V, H]` tensor.

    Args:
        lookup_gradient: the gradient through the token lookup (`IndexedSlices`,
            a dense `[V, H]` tensor, or None).
        logits_gradient: `[B, P, V]`, the gradient of the logits.
        head_input: `[B, P, H]`, the LM head's input, in the table's dtype.
        other_gradients: every other variable's gradient (computed first).

    Returns:
        `[V, H]`.
    """
    import tensorflow as tf  # TensorFlow's train step only (IndexedSlices, control dependencies)

    after = [g.values if isinstance(g, tf.IndexedSlices) else g for g in other_gradients if g is not None]
    with tf.control_dependencies(after):
        vocabulary_size = ops.shape(logits_gradient)[-1]
        logits_gradient = ops.reshape(logits_gradient, (-1, vocabulary_size))  # [B*P, V]
        head_input = ops.reshape(head_input, (-1, ops.shape(head_input)[-1]))  # [B*P, H]
        head_gradient = tf.matmul(ops.cast(logits_gradient, head_input.dtype), head_input,
                                  transpose_a=True)  # [V, H]
    if lookup_gradient is None:
        return head_gradient
    if isinstance(lookup_gradient, tf.IndexedSlices):
        return tf.tensor_scatter_nd_add(
            head_gradient, ops.cast(lookup_gradient.indices, "int32")[:, None],
            ops.cast(lookup_gradient.values, head_gradient.dtype))
    return head_gradient + ops.cast(lookup_gradient, head_gradient.dtype)
