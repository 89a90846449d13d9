"""The XLNet network: embeddings, relative position encoding and a stack of two-stream blocks."""

import contextlib
import os

import keras
from keras import ops
from keras_hub.models import Backbone

from xlnet_tf.formats.preset_files import CONFIG_FILE
from xlnet_tf.formats.preset_files import MODEL_WEIGHTS_FILE
from xlnet_tf.models.token_id_checks import REQUIRED_INPUTS, check_token_id_inputs, concrete_values
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.layers import seeded_dropout
from xlnet_tf.layers.attention_masks import xlnet_attention_masks
from xlnet_tf.layers.relative_position_encoding import RelativePositionEncoding
from xlnet_tf.layers.embedding import Embedding
from xlnet_tf.layers.xlnet_block import XLNetBlock
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io

# The `XLNetConfig` fields that set weight shapes: a preset's weights load only into its own values.
WEIGHT_SHAPE_FIELDS = ("vocabulary_size", "num_layers", "num_heads", "head_dim", "hidden_dim", "intermediate_dim",
                       "untie_relative_bias")
OPTIONAL_INPUTS = ("perm_mask", "target_mapping", "mems", "memory_padding_mask")
# The XLNetBlock arguments that are XLNetConfig fields of the same name.
BLOCK_CONFIG_FIELDS = ("hidden_dim", "num_heads", "head_dim", "intermediate_dim", "activation", "dropout",
                       "attention_dropout", "layer_norm_epsilon")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetBackbone(Backbone):
    """XLNet (Yang et al. 2019): a Transformer-XL with two-stream attention.

    Batch-major everywhere. The content stream `h` starts from the word
    embeddings; when `target_mapping` is given, a query stream `g` starts from
    a learned `mask_embedding` at each prediction and shares every weight of
    the content stream. Recurrence memory (`memory_length > 0`) caches each
    layer's input for the next segment.

    Runs on TensorFlow, JAX and PyTorch with the same outputs (float rounding
    apart); presets and `.keras` files saved on one backend load on the others.

    Args:
        config: an `XLNetConfig`.
        dtype: a dtype policy, e.g. `"mixed_bfloat16"`.
        rematerialize: in training, keep only each block's input streams for the
            backward pass and run the block's forward again there (gradient
            checkpointing): activation memory drops from every intermediate of
            every layer to two streams per layer, for about one more forward
            pass of compute. Dropout masks are drawn from one explicit seed per
            block, so both runs drop the same units. Not part of the weights;
            it can be switched on a loaded model by setting the attribute.

    Attributes:
        dropout_run_seed: Python int, the run seed of the step-seeded dropout
            (`xlnet_tf.layers.seeded_dropout`); by default fixed by
            `keras.utils.set_random_seed` before construction. Not saved.
        precomputed_position_heads: None, or what `project_positions(N)` returned
            for the current weights: inference calls whose memory and tokens
            together are at most N keys then read each layer's projected
            relative positions from it instead of projecting them (a
            `[M + 2L, H] x [H, H]` matmul per layer: a noticeable share of a
            short forward pass, and most of a generation step's work, which
            projects them for 3 tokens over a long memory). Lent with
            `lend_position_heads` only while a function is traced (the serving
            module's, `XLNetCausalLM`'s loop), so the cache lives in the traced
            function and never goes stale in Python. Not saved.

    Call arguments:
        inputs: a dict with
            `token_ids` int `[B, L]`, `segment_ids` int `[B, L]`,
            `padding_mask` int/bool `[B, L]` (1 = real token), and optionally
            `perm_mask` float `[B, L, L]` (1 = position i may NOT attend to j),
            `target_mapping` float `[B, P, L]` (one-hot row per prediction),
            `mems` float `[B, num_layers, M, H]` (the previous segment's `new_mems`),
            `memory_padding_mask` int/bool `[B, M]`, only with `mems` or
            `memory_heads`: 1 = a real memory position, 0 = one cached from
            padding, closed to both streams (absent: every memory position is
            real). A long document read segment by segment
            (`xlnet_tf.models.segment_recurrence`) carries it next to `mems`.
        training: Python bool.
        output_hidden_states: also return every layer's streams (for tests,
            probing and parity checks).
        dropout_seed: optional int `[2]` (a train step's seed): every dropout
            mask is then a pure function of it, so a resumed run and a
            rematerialized pass draw the same masks. None: Keras' own dropout.
        output_positions: optional int `[B, Q]`: run the last layer's content
            stream at these positions only (earlier layers and the memory are
            unchanged); `sequence_output` is then `[B, Q, H]`. A task that reads
            one `<cls>` per row skips most of the last layer. Not with
            `output_hidden_states`.
        memory_heads: optional, inference only, instead of `mems`: per layer,
            the memory already through that layer's key and value projections,
            `(keys, values)` each `[B, num_heads, M, head_dim]` (columns of a
            previous call's `key_value_heads`). The memory columns' keys and
            values are then not projected again (generation's `cached` mode
            keeps them so, where each step would otherwise project its whole
            memory in every layer). No `new_mems` is returned: the memory's
            layer inputs are not there.
        output_key_value_heads: also return `key_value_heads`, per layer the
            keys and values the attention read, `(keys, values)` each
            `[B, num_heads, M + L, head_dim]`: the memory's, then this call's
            tokens' as projected. Inference only.

    Returns:
        A dict: `sequence_output` `[B, L, H]` (content stream; `[B, Q, H]` with
        `output_positions`),
        `query_output` `[B, P, H]` when `target_mapping` is given, and
        `new_mems` `[B, num_layers, min(M + C, memory_length), H]` when
        `memory_length > 0`, where C is `reuse_length` or L. With
        `output_hidden_states`, also `hidden_states` `[B, num_layers + 1, L, H]`
        (the content stream entering each layer, then the last layer's output)
        and, with `target_mapping`, `query_hidden_states` `[B, num_layers + 1, P, H]`.
        With `output_key_value_heads`, `key_value_heads`: a tuple of `num_layers`
        `(keys, values)` pairs.

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetConfig
    >>> config = XLNetConfig(vocabulary_size=50, num_layers=2, num_heads=2, head_dim=4,
    ...                      hidden_dim=8, intermediate_dim=16)
    >>> backbone = XLNetBackbone(config)
    >>> outputs = backbone({"token_ids": np.ones((2, 5), "int32"),
    ...                     "segment_ids": np.zeros((2, 5), "int32"),
    ...                     "padding_mask": np.ones((2, 5), "int32")})
    >>> outputs["sequence_output"].shape
    TensorShape([2, 5, 8])
    """

    def __init__(self, config, dtype=None, rematerialize=False, **kwargs):
        if isinstance(config, dict):
            config = XLNetConfig.from_dict(config)
        if not isinstance(config, XLNetConfig):
            raise TypeError(f"XLNetBackbone expects an XLNetConfig, got {type(config).__name__}.")
        kwargs.setdefault("name", "xlnet_backbone")
        super().__init__(dtype=dtype, **kwargs)
        self.config = config
        self.rematerialize = bool(rematerialize)
        self.dropout_run_seed = seeded_dropout.default_run_seed()
        self.precomputed_position_heads = None
        initializer = keras.initializers.RandomNormal(stddev=config.initializer_range)
        # keras-hub's `token_embedding` property: weights files still name it `token_embedding/`
        # (Keras' saver visits public names before the `_token_embedding` it stores it under).
        self.token_embedding = Embedding(
            config.vocabulary_size, config.hidden_dim,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=config.initializer_range),
            dtype=self.dtype_policy, name="token_embedding")
        self.position_encoding = RelativePositionEncoding(
            config.hidden_dim, attention_type=config.attention_type, bi_data=config.bi_data,
            clamp_length=config.clamp_length, dtype=self.dtype_policy, name="position_encoding")
        self.embedding_dropout = keras.layers.Dropout(config.dropout, dtype=self.dtype_policy)
        block_arguments = {field: getattr(config, field) for field in BLOCK_CONFIG_FIELDS}
        self.blocks = [
            XLNetBlock(**block_arguments, kernel_initializer=keras.initializers.serialize(initializer),
                       dtype=self.dtype_policy, name=f"block_{i}")
            for i in range(config.num_layers)
        ]
        self.build()

    def build(self, input_shape=None):
        config = self.config
        heads = (config.num_heads, config.head_dim)
        bias_shape = heads if not config.untie_relative_bias else (config.num_layers,) + heads

        def weight(name, shape):
            return self.add_weight(
                name=name, shape=shape,
                initializer=keras.initializers.RandomNormal(stddev=config.initializer_range))

        self.token_embedding.build((None, None))
        self.mask_embedding = weight("mask_embedding", (1, 1, config.hidden_dim))
        self.content_attention_bias = weight("content_attention_bias", bias_shape)
        self.positional_attention_bias = weight("positional_attention_bias", bias_shape)
        self.segment_attention_bias = weight("segment_attention_bias", bias_shape)
        self.segment_embedding = weight("segment_embedding", (config.num_layers, 2) + heads)
        for block in self.blocks:
            block.build((None, None, config.hidden_dim))
        # Weightless; marking it built keeps fit() from re-tracing the model symbolically.
        self.position_encoding.built = True
        self.built = True

    # ------------------------------------------------------------------ inputs
    def _validate_inputs(self, inputs, memory_heads=None):
        """The inputs as tensors, checked; returns `(tensors, memory length M)` (0 without memory)."""
        if not isinstance(inputs, dict):
            raise TypeError(
                f"XLNetBackbone expects a dict of inputs with keys {REQUIRED_INPUTS} (and optionally "
                f"{OPTIONAL_INPUTS}); got {type(inputs).__name__}.")
        missing = [k for k in REQUIRED_INPUTS if k not in inputs or inputs[k] is None]
        if missing:
            raise ValueError(f"XLNetBackbone: missing input(s) {missing}; required: {list(REQUIRED_INPUTS)}.")
        unknown = sorted(set(inputs) - set(REQUIRED_INPUTS) - set(OPTIONAL_INPUTS))
        if unknown:
            raise ValueError(f"XLNetBackbone: unknown input key(s) {unknown}; allowed: "
                             f"{list(REQUIRED_INPUTS + OPTIONAL_INPUTS)}.")
        tensors = {k: ops.convert_to_tensor(v) for k, v in inputs.items() if v is not None}
        expected_rank = {"token_ids": 2, "segment_ids": 2, "padding_mask": 2, "perm_mask": 3,
                         "target_mapping": 3, "mems": 4, "memory_padding_mask": 2}
        for key, tensor in tensors.items():
            if len(tensor.shape) != expected_rank[key]:
                raise ValueError(f"XLNetBackbone: input {key!r} must have rank {expected_rank[key]}, "
                                 f"got shape {tuple(tensor.shape)}.")
            dtype = keras.backend.standardize_dtype(tensor.dtype)
            if key in ("token_ids", "segment_ids") and "int" not in dtype:
                raise TypeError(f"XLNetBackbone: input {key!r} must be an integer tensor, got {dtype}.")
            if key in ("padding_mask", "memory_padding_mask") and "int" not in dtype and dtype != "bool":
                raise TypeError(f"XLNetBackbone: input {key!r} must be int or bool, got {dtype}.")
            if key in ("perm_mask", "target_mapping", "mems") and "float" not in dtype:
                raise TypeError(f"XLNetBackbone: input {key!r} must be a float tensor, got {dtype}.")
        batch, length = tensors["token_ids"].shape
        for key in ("segment_ids", "padding_mask"):
            _check_dims(key, tensors[key].shape, (batch, length))
        if "perm_mask" in tensors:
            _check_dims("perm_mask", tensors["perm_mask"].shape, (batch, length, length))
        if "target_mapping" in tensors:
            _check_dims("target_mapping", tensors["target_mapping"].shape, (batch, None, length))
        if "mems" in tensors:
            _check_dims("mems", tensors["mems"].shape,
                        (batch, self.config.num_layers, None, self.config.hidden_dim))
            if tensors["mems"].shape[2] is None:
                raise ValueError("XLNetBackbone: the memory length (axis 2 of 'mems') must be static.")
        memory_length = 0
        if "mems" in tensors:
            memory_length = tensors["mems"].shape[2]
        if memory_heads is not None:
            memory_length = self._check_memory_heads(memory_heads, batch, "mems" in tensors)
        if "memory_padding_mask" in tensors:
            if "mems" not in tensors and memory_heads is None:
                raise ValueError("XLNetBackbone: input 'memory_padding_mask' is only allowed with 'mems' "
                                 "or memory_heads.")
            _check_dims("memory_padding_mask", tensors["memory_padding_mask"].shape, (batch, memory_length))
        if self.config.bi_data and batch is not None and batch % 2:
            raise ValueError(
                f"XLNetBackbone: bi_data needs an even (per-replica) batch, got batch size {batch}.")
        # The values, when eager (an id outside the table would be read as another row or fail inside the
        # lookup); `predict` checks its host data before tracing.
        check_token_id_inputs({k: tensors[k] for k in REQUIRED_INPUTS}, vocabulary_size=self.config.vocabulary_size,
                              caller="XLNetBackbone")
        return tensors, memory_length

    def _check_memory_heads(self, memory_heads, batch, has_mems):
        """Refuses `memory_heads` that do not fit this backbone; returns the memory length M."""
        config = self.config
        if has_mems:
            raise ValueError("XLNetBackbone: pass the memory as 'mems' (layer inputs) or as memory_heads "
                             "(projected keys and values), not both.")
        if not isinstance(memory_heads, (list, tuple)) or len(memory_heads) != config.num_layers or any(
                not isinstance(pair, (list, tuple)) or len(pair) != 2 for pair in memory_heads):
            raise ValueError(f"XLNetBackbone: memory_heads must be {config.num_layers} (keys, values) pairs, "
                             "one per layer.")
        memory_length = memory_heads[0][0].shape[2]
        if memory_length is None:
            raise ValueError("XLNetBackbone: the memory length (axis 2 of memory_heads) must be static.")
        for index, pair in enumerate(memory_heads):
            for name, heads in zip(("keys", "values"), pair):
                if len(heads.shape) != 4:
                    raise ValueError(f"XLNetBackbone: memory_heads[{index}] {name} must have rank 4 "
                                     f"[batch, heads, memory, head_dim], got shape {tuple(heads.shape)}.")
                _check_dims(f"memory_heads[{index}] {name}", tuple(heads.shape),
                            (batch, config.num_heads, memory_length, config.head_dim))
        return memory_length

    # ------------------------------------------------------------------ forward
    def _layer_bias(self, bias, index):
        bias = ops.cast(bias, self.compute_dtype)
        return bias[index] if self.config.untie_relative_bias else bias

    def _cache_memory(self, layer_input, previous_memory):
        """This layer's input kept for the next segment, without gradient."""
        config = self.config
        current = layer_input
        if config.reuse_length > 0:
            current = current[:, : config.reuse_length]  # [B, C, H]
        if previous_memory is not None:
            current = ops.concatenate([ops.cast(previous_memory, current.dtype), current], axis=1)
        return ops.stop_gradient(current[:, -config.memory_length:])  # [B, memory_length, H]

    @property
    def projects_positions_ahead(self):
        """Whether `project_positions` applies: 'bi' attention without `bi_data` (a fine-tuning configuration)."""
        return self.config.attention_type == "bi" and not self.config.bi_data

    def project_positions(self, length):
        """Each layer's projected relative positions for calls of up to `length` keys.

        What every inference call computes first in each layer; see
        `precomputed_position_heads`. A call of L tokens over M memory
        positions (M + L <= `length`) reads rows `[length - M - L, length + L)`:
        its distances `M + L, ..., -L + 1` are a run of `length, ..., -length + 1`.

        Args:
            length: Python int, the longest block.

        Returns:
            A list of `num_layers` tensors `[1, num_heads, 2 * length, head_dim]`
            in the compute dtype.
        """
        if not self.projects_positions_ahead:
            raise ValueError("project_positions needs attention_type 'bi' without bi_data (a fine-tuning "
                             f"configuration); this backbone has attention_type "
                             f"{self.config.attention_type!r}, bi_data {self.config.bi_data}.")
        encoding = self.position_encoding(query_length=length, key_length=length)  # [1, 2L, H]
        return [block.attention.project_positions(encoding) for block in self.blocks]

    @contextlib.contextmanager
    def lend_position_heads(self, position_heads):
        """Sets `precomputed_position_heads` inside the `with` block (None: leaves it as it is).

        Example:
        >>> from xlnet_tf import XLNetBackbone, XLNetConfig
        >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=20, num_layers=1, num_heads=1, head_dim=2,
        ...                                      hidden_dim=2, intermediate_dim=4))
        >>> with backbone.lend_position_heads(backbone.project_positions(8)):
        ...     backbone.precomputed_position_heads[0].shape
        TensorShape([1, 1, 16, 2])
        >>> backbone.precomputed_position_heads is None
        True
        """
        if position_heads is None:
            yield
            return
        previous = self.precomputed_position_heads
        self.precomputed_position_heads = position_heads
        try:
            yield
        finally:
            self.precomputed_position_heads = previous

    def _cached_position_heads(self, query_length, memory_length, training):
        """Slices of `precomputed_position_heads` for this call, or None to project as usual."""
        cache = self.precomputed_position_heads
        if cache is None or training:
            return None
        cached_length = cache[0].shape[2] // 2
        key_length = memory_length + query_length
        if isinstance(key_length, int) and key_length > cached_length:
            raise ValueError(f"XLNetBackbone: precomputed_position_heads cover calls of up to "
                             f"{cached_length} keys (memory and tokens); this call has {key_length}.")
        start = cached_length - key_length
        return [ops.slice(heads, (0, 0, start, 0),
                          (1, heads.shape[1], key_length + query_length, heads.shape[3]))  # [1, N, M + 2L, D]
                for heads in cache]

    def predict(self, x=None, batch_size=None, **kwargs):
        """Keras' `predict`; a dict of arrays is checked first (`check_token_id_inputs`), values included.

        Inside the traced step only structure and shapes can be checked, so ids
        outside the vocabulary are refused here, before tracing, by name.
        """
        if isinstance(x, dict):
            check_token_id_inputs(x, vocabulary_size=self.config.vocabulary_size, caller="XLNetBackbone")
        return super().predict(x, batch_size=batch_size, **kwargs)

    def call(self, inputs, training=None, output_hidden_states=False, dropout_seed=None,
             output_positions=None, memory_heads=None, output_key_value_heads=False):
        if output_positions is not None and output_hidden_states:
            raise ValueError("XLNetBackbone: output_positions and output_hidden_states can't be combined "
                             "(the last layer then runs at the output positions only).")
        if training and (memory_heads is not None or output_key_value_heads):
            raise ValueError("XLNetBackbone: memory_heads and output_key_value_heads are for inference "
                             "(training=False).")
        tensors, memory_length = self._validate_inputs(inputs, memory_heads)
        if output_positions is not None:
            output_positions = ops.convert_to_tensor(output_positions)
            dtype = keras.backend.standardize_dtype(output_positions.dtype)
            if len(output_positions.shape) != 2 or "int" not in dtype:
                raise ValueError("XLNetBackbone: output_positions must be an int tensor [batch, positions], "
                                 f"got {dtype} of shape {tuple(output_positions.shape)}.")
            _check_dims("output_positions", output_positions.shape, (tensors["token_ids"].shape[0], None))
            _check_positions_in_range(output_positions, tensors["token_ids"].shape[1])
        config = self.config
        token_ids = ops.cast(tensors["token_ids"], "int32")
        segment_ids = ops.cast(tensors["segment_ids"], "int32")
        perm_mask = tensors.get("perm_mask")
        target_mapping = tensors.get("target_mapping")
        mems = tensors.get("mems")

        batch_size = token_ids.shape[0] if token_ids.shape[0] is not None else ops.shape(token_ids)[0]
        query_length = token_ids.shape[1] if token_ids.shape[1] is not None else ops.shape(token_ids)[1]

        content_mask, query_mask = xlnet_attention_masks(
            tensors["padding_mask"], perm_mask, memory_length=memory_length,
            attention_type=config.attention_type, same_length=config.same_length,
            memory_padding_mask=tensors.get("memory_padding_mask"))
        # Memory positions count as segment 0 in the same/different comparison.
        key_segments = segment_ids
        if memory_length:
            key_segments = ops.concatenate(
                [ops.zeros((batch_size, memory_length), "int32"), segment_ids], axis=1)  # [B, M+L]
        segment_different = ops.not_equal(segment_ids[:, :, None], key_segments[:, None, :])  # [B, L, M+L]

        # Blocks draw from fold_in(seed, index); the embedding dropouts from the next index.
        embedding_seed = seeded_dropout.sub_seed(dropout_seed, len(self.blocks))

        def embedding_dropout(tensor, site):
            return seeded_dropout.apply_dropout(self.embedding_dropout, tensor, training,
                                                embedding_seed, site)

        content_stream = embedding_dropout(self.token_embedding(token_ids), 0)
        query_stream = None
        if target_mapping is not None:
            num_predictions = target_mapping.shape[1] or ops.shape(target_mapping)[1]
            mask_embedding = ops.cast(self.mask_embedding, self.compute_dtype)
            query_stream = ops.broadcast_to(
                mask_embedding, (batch_size, num_predictions, config.hidden_dim))  # [B, P, H]
            query_stream = embedding_dropout(query_stream, 1)
        position_encoding = self.position_encoding(
            query_length=query_length, key_length=memory_length + query_length,
            batch_size=batch_size)  # [B|1, R, H]
        position_encoding = embedding_dropout(position_encoding, 2)
        cached_position_heads = self._cached_position_heads(query_length, memory_length, training)

        rematerialize = bool(self.rematerialize and training)
        call_seed = dropout_seed
        if call_seed is None and rematerialize:
            call_seed = self._draw_dropout_seed()
        new_mems, key_value_heads = [], []
        content_states, query_states = [content_stream], [query_stream]
        for index, block in enumerate(self.blocks):
            layer_memory = None if mems is None else mems[:, index]  # [B, M, H]
            if config.memory_length > 0 and memory_heads is None:
                new_mems.append(self._cache_memory(content_stream, layer_memory))

            last = index == len(self.blocks) - 1

            def run_block(content, query, index=index, block=block, layer_memory=layer_memory,
                          dropout_seed=None, last=last,
                          layer_heads=None if memory_heads is None else memory_heads[index]):
                # The biases are read inside, so a rematerialized run re-reads the variables
                # and the recomputing wrapper (`_recompute_grad`) hands their gradients back.
                return block(
                    content, position_encoding, segment_different, content_mask,
                    self._layer_bias(self.content_attention_bias, index),
                    self._layer_bias(self.positional_attention_bias, index),
                    self._layer_bias(self.segment_attention_bias, index),
                    ops.cast(self.segment_embedding[index], self.compute_dtype),
                    memory=layer_memory, query_stream=query, query_mask=query_mask,
                    target_mapping=target_mapping,
                    content_positions=output_positions if last else None,
                    position_heads=None if cached_position_heads is None else cached_position_heads[index],
                    training=training, dropout_seed=dropout_seed,
                    # The last layer's streams run apart: the pretraining loss reads only its query
                    # stream, and a traced step then prunes that layer's content attention and
                    # feed-forward, work that stacking would keep.
                    stack_streams=not last, memory_heads=layer_heads, output_key_value_heads=output_key_value_heads)

            block_seed = seeded_dropout.sub_seed(call_seed, index)
            if rematerialize:
                content_stream, query_stream = _rematerialized(
                    run_block, content_stream, query_stream, block_seed)
            else:
                content_stream, query_stream, *heads = run_block(content_stream, query_stream,
                                                                 dropout_seed=block_seed)
                key_value_heads.extend(heads)
            content_states.append(content_stream)
            query_states.append(query_stream)

        outputs = {"sequence_output": embedding_dropout(content_stream, 3)}
        if output_hidden_states:
            outputs["hidden_states"] = ops.stack(content_states, axis=1)  # [B, layers+1, L, H]
            if query_stream is not None:
                outputs["query_hidden_states"] = ops.stack(query_states, axis=1)  # [B, layers+1, P, H]
        if query_stream is not None:
            outputs["query_output"] = embedding_dropout(query_stream, 4)
        if new_mems:
            outputs["new_mems"] = ops.stack(new_mems, axis=1)  # [B, num_layers, memory_length, H]
        if output_key_value_heads:
            outputs["key_value_heads"] = tuple(key_value_heads)
        return outputs

    def _draw_dropout_seed(self):
        """One stateless `[2]` seed per call from an existing dropout generator, or None.

        Only for a rematerialized training call without a step seed (a call
        outside `fit`); under `fit` the train step's seed is used. Reusing a
        generator the model already has keeps the saved variables the same with
        and without rematerialization.
        """
        dropouts = [self.embedding_dropout]
        if self.blocks:
            block = self.blocks[0]
            dropouts += [block.feedforward_dropout, block.attention.output_dropout,
                         block.attention.probability_dropout]
        for dropout in dropouts:
            if dropout.rate > 0 and getattr(dropout, "seed_generator", None) is not None:
                seed = dropout.seed_generator.next()  # [2]
                if keras.config.backend() == "tensorflow":
                    import tensorflow as tf

                    # int64: TensorFlow's stateless fold draws in its seed's dtype, and saved runs drew these.
                    return tf.cast(seed, tf.int64)  # [2]
                return seed
        return None

    # ------------------------------------------------------------------ presets and config
    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
                "rematerialize": self.rematerialize}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        model_config = XLNetConfig.from_dict(config.pop("config"))
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(model_config, **config)

    # keras-hub's saver writes files in place (an interrupted save leaves them cut short); this one writes
    # each atomically through `tf.io.gfile` (`gs://`, `ram://`) and adds the `spiece.model` tools read.
    def save_to_preset(self, preset_dir, vocabulary_file=None, max_shard_size=None, *, tokenizer=None):
        """Writes a preset in keras-hub's layout, each file atomically.

        `config.json` (this backbone serialized), `model.weights.h5` and
        `metadata.json`; with a vocabulary also `tokenizer.json`,
        `assets/tokenizer/vocabulary.spm` and `spiece.model` (layout in
        `xlnet_tf.storage.preset_io`). `keras_hub.upload_preset` and every
        `from_preset` here and in keras-hub read it.

        Args:
            preset_dir: the directory (local, `gs://`, `ram://`; created).
            vocabulary_file: `spiece.model` path, its bytes, or a directory holding one.
            max_shard_size: accepted for keras-hub's signature; weights are one file.
            tokenizer: an `XLNetTokenizer` whose settings (and, without
                `vocabulary_file`, vocabulary) go into `tokenizer.json`.

        Example:
        >>> import os, tempfile
        >>> from xlnet_tf import XLNetBackbone, XLNetConfig
        >>> backbone = XLNetBackbone(XLNetConfig(vocabulary_size=32, num_layers=2, num_heads=2,
        ...                                      head_dim=4, hidden_dim=8, intermediate_dim=16))
        >>> preset = os.path.join(tempfile.mkdtemp(), "my_preset")
        >>> backbone.save_to_preset(preset)  # vocabulary_file="spiece.model" adds the tokenizer
        >>> sorted(os.listdir(preset))
        ['config.json', 'metadata.json', 'model.weights.h5']
        >>> XLNetBackbone.from_preset(preset).config.hidden_dim
        8
        """
        del max_shard_size  # One weights file: XLNet-large is 1.4 GB.
        preset_io.make_preset_dir(preset_dir)
        preset_io.write_serialized(preset_dir, CONFIG_FILE, self)
        atomic_files.save_weights(self, os.path.join(preset_dir, MODEL_WEIGHTS_FILE))
        preset_io.write_metadata(preset_dir, self)
        proto = preset_io.vocabulary_bytes(vocabulary_file)
        if proto is None and tokenizer is not None and tokenizer.proto:
            proto = tokenizer.proto
        if proto is not None:
            preset_io.write_tokenizer(preset_dir, proto, tokenizer=tokenizer or _settings_only_tokenizer())

    # keras-hub's loader knows neither our preset names nor the `XLNetConfig` nested in `config.json`
    # (where `config_overrides` go), and copies `gs://` / `ram://` presets into a cache instead of reading them.
    @classmethod
    def from_preset(cls, preset, dtype=None, load_weights=True, *, config=None, **config_overrides):
        """Builds a backbone from a preset.

        Args:
            preset: a preset name (`xlnet-tf presets`, downloaded on first use),
                a directory (local, `gs://`, `ram://`) or a `hf://` / `kaggle://`
                handle, holding `config.json` and `model.weights.h5` in
                keras-hub's layout (`config.json` = a serialized `XLNetBackbone`,
                what `save_to_preset` writes); or its `PresetContents`, already
                read (`xlnet_tf.storage.preset_io.read_preset`).
            dtype: a dtype policy for the new model.
            load_weights: False builds the architecture with fresh weights.
            config: the `XLNetConfig` to build instead of the preset's (a fine-tuning
                run's, say, with its `model.*` settings and `finetuning_adjustments`).
            **config_overrides: `XLNetConfig` fields to change (e.g. `memory_length`,
                `dropout`).

        Raises:
            ValueError: loading weights into a config whose weight shapes differ from
                the preset's (`vocabulary_size`, `num_layers`, `hidden_dim`, ...).

        Returns:
            An `XLNetBackbone`.

        Example:
        >>> from xlnet_tf import XLNetBackbone
        >>> backbone = XLNetBackbone.from_preset("xlnet_base_cased")  # or a directory save_to_preset wrote
        """
        if isinstance(preset, preset_io.PresetContents):
            location, preset_values = preset.preset, preset.backbone_config
        else:
            location = preset_io.resolve(preset)
            preset_values = preset_io.read_backbone_config(location)
        preset_config = XLNetConfig.from_dict(preset_values)
        built = (config or preset_config).replace(**config_overrides)
        if load_weights:
            changed = sorted(field for field in WEIGHT_SHAPE_FIELDS
                             if field in config_overrides or getattr(built, field) != getattr(preset_config, field))
            if changed:
                raise ValueError(f"from_preset: cannot override {changed} when loading weights "
                                 "(they change weight shapes).")
        backbone = cls(built, dtype=dtype)
        if load_weights:
            preset_io.load_weights(backbone, preset_io.fetch(location, MODEL_WEIGHTS_FILE))
        return backbone


def _recompute_grad(function):
    """`function`, its intermediates recomputed in the backward pass instead of kept.

    `keras.remat`: `tf.recompute_grad` on TensorFlow, `jax.checkpoint` on JAX,
    `torch.utils.checkpoint` on PyTorch. Module-level so tests can swap it for
    the identity and compare against one forward run.
    """
    return keras.remat(function)


def _rematerialized(run_block, content_stream, query_stream, dropout_seed):
    """`run_block(content, query)` under `_recompute_grad`: only the streams are kept."""
    if query_stream is None:
        def forward(content):
            return run_block(content, None, dropout_seed=dropout_seed)[0]

        return _recompute_grad(forward)(content_stream), None

    def forward_two_streams(content, query):
        return tuple(run_block(content, query, dropout_seed=dropout_seed))

    content_stream, query_stream = _recompute_grad(forward_two_streams)(content_stream, query_stream)
    return content_stream, query_stream


def _check_dims(key, shape, expected):
    shape = tuple(shape)
    for actual, wanted in zip(shape, expected):
        if wanted is not None and actual is not None and actual != wanted:
            pretty = tuple("?" if w is None else w for w in expected)
            raise ValueError(f"XLNetBackbone: input {key!r} has shape {shape}, expected {pretty}.")


def _check_positions_in_range(positions, length):
    """Refuses concrete `output_positions` outside `[0, length)` (a GPU gather would read zeros there).

    Traced positions (the task heads' `<cls>` indices in a compiled step) are not
    checked: an assert op cannot run inside an XLA computation, and a JAX tracer
    has no value to raise on.
    """
    values = None if length is None else concrete_values(positions)
    if values is None:
        return
    bad = values[(values < 0) | (values >= length)]
    if bad.size:
        raise ValueError(f"XLNetBackbone: output_positions must be in [0, {length}) (the block length); "
                         f"got {int(bad[0])}.")


def _settings_only_tokenizer():
    """An `XLNetTokenizer` with the default settings and no vocabulary, for `tokenizer.json`."""
    # optional dependency: the tokenizer needs TensorFlow Text, which the model path does not import
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    return XLNetTokenizer(proto=None)
