"""Text generation with XLNet: keras-hub's `CausalLM.generate()` in two modes, `exact` and `cached`."""

import os

import keras
import numpy as np
import tensorflow as tf
from keras import ops
from keras_hub.models import CausalLM

from xlnet_tf.formats.preset_files import PREPROCESSING_FILE
from xlnet_tf.formats.special_tokens import EOD_TOKEN_ID, EOP_TOKEN_ID
from xlnet_tf.storage import preset_io
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer, tied_lm_logits
from xlnet_tf.samplers.seeded_sampler import SEEDED, seeded_sampler
from xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor import XLNetCausalLMPreprocessor

MODES = ("exact", "cached")
# XLNet's own end markers: end of document and end of paragraph.
DEFAULT_STOP_TOKEN_IDS = (EOD_TOKEN_ID, EOP_TOKEN_ID)
GENERATION_TASK_TYPE = "generation"
# A generation preset's `preprocessing.json` keys (besides `task_type`); `max_new_tokens` is the
# largest request of an exported `generate` signature.
GENERATION_SETTINGS = ("mode", "recompute_window", "sequence_length", "max_new_tokens")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetCausalLM(CausalLM):
    """XLNet generating text left to right, with keras-hub's samplers.

    XLNet is not a causal model: in its bidirectional attention every token
    sees every other real token, so an earlier token's states change when a
    later token arrives. Each step predicts the next token through the query
    stream: a placeholder position right after the text, hidden from every
    token, is picked by `target_mapping` (Hugging Face's
    `prepare_inputs_for_generation`). Two modes, named in the API:

    - `mode="exact"`: every step recomputes the whole sequence, so each token
      is drawn from the model's true conditional given all tokens before it.
      Equals Hugging Face's `generate(use_mems=False)`.
    - `mode="cached"`: tokens before the last `recompute_window` ones come
      from memory, kept as each layer's keys and values (projected from the
      layer's input as computed when they were last in the window: they never
      change after, so they are projected once); only the window and the
      placeholder are recomputed. An approximation, cheaper per step, whose
      step costs the same at any memory length but for the attention itself.
      `recompute_window=2` is Hugging Face's `offset = 2` (its default mems
      path, which keeps layer inputs and projects them again every step), which
      it equals.

    Prompts of different lengths are laid out left-padded inside the loop, and
    padding is closed to every query, so each prompt gets the tokens it gets
    alone (Hugging Face drops the attention mask, so its batches of unequal
    prompts are wrong). XLNet's positions are relative: the padding changes
    nothing but the work.

    The whole loop is one `tf.function` (XLA when `causal_lm.jit_compile =
    True`; Keras leaves it off on CPU) with a `tf.while_loop` over the static
    `max_length`, no host round trip per token; it ends when every row has
    produced a stop token (`<eod>`, `<eop>`, or the ids given), and each row's
    output stops at its first one: what a row samples after its stop token is
    discarded, so its output is fixed from then on. A row that stopped still
    runs with the others until the last one stops: every step's shapes are
    static, the batch axis included, so a finished row's share of each matmul
    is computed and thrown away. Skipping it would need a batch that shrinks
    as rows finish (a dynamic shape: XLA compiles once per size) or the
    running rows gathered into smaller static slices each step (in `cached`
    mode, a copy of every layer's memory of the batch per step); neither is
    done. A batch of one, or of prompts expected to end together, wastes
    nothing.

    Args:
        backbone: an `XLNetBackbone` without `bi_data`.
        preprocessor: an `XLNetCausalLMPreprocessor` (strings in and out), or
            None (ids in and out).
        mode: `"exact"` or `"cached"`.
        recompute_window: tokens recomputed each step in `cached` mode (>= 1).
        **kwargs: `name`, `dtype`, `trainable`, `compile` of keras-hub's `Task`.

    Call arguments:
        inputs: the backbone's input dict; `target_mapping` `[B, P, L]` picks
            the predicted positions (query stream), otherwise every position
            of the content stream is scored.

    Returns:
        `call`: the logits, float32 `[B, P, V]` (or `[B, L, V]`).
        `generate(inputs, max_length=None, stop_token_ids="auto", strip_prompt=False, sampler=None, mode=None)`:
        strings for strings; for ids (`{"token_ids", "padding_mask"}` `[B, T]`,
        the prompt being each row's tokens under `padding_mask`, on any side),
        the same dict with every row's prompt from column 0, its continuation
        after it, and `padding_mask` covering both (up to and with its first
        stop token).

    Example:
    >>> from xlnet_tf.models.xlnet_config import XLNetConfig
    >>> config = XLNetConfig(vocabulary_size=50, num_layers=2, num_heads=2, head_dim=4,
    ...                      hidden_dim=8, intermediate_dim=16)
    >>> causal_lm = XLNetCausalLM(XLNetBackbone(config), mode="cached")
    >>> out = causal_lm.generate({"token_ids": np.array([[11, 12, 13, 0, 0, 0]]),
    ...                           "padding_mask": np.array([[1, 1, 1, 0, 0, 0]])},
    ...                          stop_token_ids=None, sampler="greedy")
    >>> out["token_ids"].shape, int(out["padding_mask"].sum())
    ((1, 6), 6)
    """

    def __init__(self, backbone, preprocessor=None, mode="exact", recompute_window=2, **kwargs):
        if not isinstance(backbone, XLNetBackbone):
            raise TypeError(f"XLNetCausalLM expects an XLNetBackbone, got {type(backbone).__name__}.")
        if backbone.config.bi_data:
            raise ValueError("XLNetCausalLM: the backbone has bi_data=True (a pretraining augmentation that "
                             "needs an even batch); build it with bi_data=False, as from_preset does.")
        kwargs.setdefault("name", "xlnet_causal_lm")
        compile_now = kwargs.pop("compile", True)
        super().__init__(compile=False, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.mode = _checked_mode(mode)
        self.recompute_window = _checked_window(recompute_window)
        self.lm_bias = self.add_weight(name="lm_bias", shape=(backbone.config.vocabulary_size,),
                                       initializer="zeros")
        self.built = True
        self.generate_function = None
        if compile_now:
            self.compile(sampler="greedy")

    # ------------------------------------------------------------------ the model
    def call(self, inputs, training=None):
        outputs = self.backbone(inputs, training=training)
        return self._logits(outputs.get("query_output", outputs["sequence_output"]))

    def _logits(self, hidden):
        return tied_lm_logits(hidden, self.backbone.token_embedding.embeddings, self.lm_bias)

    # ------------------------------------------------------------------ generation
    def build_cache(self, token_ids, padding_mask):
        """The prompts laid out for the loop, and the loop's first cache.

        Each row's prompt (its tokens under `padding_mask`, in order, on either
        side) is moved to end at column `P - 1`, P being the longest prompt of
        the batch: the loop then writes column `P`, `P + 1`, ... for every row.

        Args:
            token_ids: int `[B, T]`.
            padding_mask: int/bool `[B, T]`, 1 = a prompt token.

        Returns:
            `(token_ids, cache, index)`: the left-padded `[B, T]` ids, the cache
            that `call_with_cache` reads (a dict whose tensors all have the
            batch first: `first` `[B]`; in `cached` mode also `memory_keys` and
            `memory_values`, per layer `[B, num_heads, T, head_dim]`, and
            `memory_mask` `[B, T]`), and `P`, the first column to generate
            (int32 scalar).
        """
        token_ids = ops.cast(token_ids, "int32")
        real = ops.cast(padding_mask, "int32")
        lengths = ops.sum(real, axis=1)  # [B]
        start = ops.max(lengths)
        first = start - lengths  # [B], each row's first prompt column
        token_ids = _move_real_tokens(token_ids, real, first)  # [B, T]
        cache = {"first": first}
        if self.mode == "cached":
            cache.update(self._prefill_memory(token_ids, first, start))
        return token_ids, cache, start

    def call_with_cache(self, token_ids, cache, index):
        """The logits of column `index` given the columns before it: one step of the loop.

        Args:
            token_ids: int32 `[B, T]`, laid out by `build_cache` (columns
                `>= index` are not read).
            cache: what `build_cache` (or the previous step) returned.
            index: int32 scalar, the column predicted.

        Returns:
            `(logits, hidden, cache)`: float32 `[B, V]`, the query stream `[B, H]`
            and the cache for column `index + 1`.
        """
        if self.mode == "exact":
            hidden = self._exact_step(token_ids, cache["first"], index)
        else:
            hidden, cache = self._cached_step(token_ids, cache, index)
        return self._logits(hidden[:, None])[:, 0], hidden, cache

    def _exact_step(self, token_ids, first, index):
        length = ops.shape(token_ids)[1]
        columns = ops.arange(length, dtype="int32")[None, :]  # [1, T]
        # The placeholder at `index` is padding: closed to every query, its own query stream included.
        real = ops.logical_and(columns >= first[:, None], columns < index)  # [B, T]
        target = ops.one_hot(ops.broadcast_to(index, ops.shape(first))[:, None], length,
                             dtype=self.backbone.compute_dtype)  # [B, 1, T]
        outputs = self.backbone({"token_ids": token_ids, "segment_ids": ops.zeros_like(token_ids),
                                 "padding_mask": ops.cast(real, "int32"), "target_mapping": target},
                                training=False)
        return outputs["query_output"][:, 0]  # [B, H]

    def _prefill_memory(self, token_ids, first, start):
        """Each layer's keys and values of the columns before `start - window`, as the first step's memory.

        One backbone pass over the prompt gives every layer's keys and values
        of every column. The memory is right-aligned in `T` slots: its last
        slot holds the column just before the recompute window. The first step
        then recomputes the window over this memory, which gives the states the
        full prompt gives.
        """
        length = token_ids.shape[1] or ops.shape(token_ids)[1]
        columns = ops.arange(length, dtype="int32")[None, :]
        real = ops.logical_and(columns >= first[:, None], columns < start)  # [B, T]
        batch = ops.shape(token_ids)[0]
        # Only the keys and values are kept: the last layer's output is not, so it runs at one column.
        outputs = self.backbone({"token_ids": token_ids, "segment_ids": ops.zeros_like(token_ids),
                                 "padding_mask": ops.cast(real, "int32")},
                                training=False, output_key_value_heads=True,
                                output_positions=ops.zeros((batch, 1), "int32"))
        # Slot s holds column s - T + start - window: T + window zeros in front keep the start >= 0.
        pad = length + self.recompute_window

        def right_aligned(heads):  # [B, N, T, D] -> [B, N, T, D], column start - window in the last slot
            num_heads, head_dim = heads.shape[1], heads.shape[3]
            padded = ops.concatenate([ops.zeros((batch, num_heads, pad, head_dim), heads.dtype), heads],
                                     axis=2)  # [B, N, 2T + w, D]
            return ops.slice(padded, (0, 0, start, 0), (batch, num_heads, length, head_dim))

        memory_keys, memory_values = zip(*[(right_aligned(keys), right_aligned(values))
                                           for keys, values in outputs["key_value_heads"]])
        padded_real = ops.concatenate([ops.zeros((batch, pad), "int32"), ops.cast(real, "int32")], axis=1)
        memory_mask = ops.slice(padded_real, (0, start), (batch, length))  # [B, T]
        return {"memory_keys": memory_keys, "memory_values": memory_values, "memory_mask": memory_mask}

    def _cached_step(self, token_ids, cache, index):
        window = self.recompute_window
        columns = index - window + ops.arange(window + 1, dtype="int32")  # [w+1], the placeholder last
        first = cache["first"]
        real = ops.logical_and(columns[None] >= first[:, None], columns[None] < index)  # [B, w+1]
        ids = ops.take(token_ids, ops.clip(columns, 0, ops.shape(token_ids)[1] - 1), axis=1)  # [B, w+1]
        batch = ops.shape(token_ids)[0]
        target = ops.broadcast_to(ops.one_hot(window, window + 1, dtype=self.backbone.compute_dtype),
                                  (batch, 1, window + 1))  # [B, 1, w+1]
        outputs = self.backbone({"token_ids": ids, "segment_ids": ops.zeros_like(ids),
                                 "padding_mask": ops.cast(real, "int32"), "target_mapping": target,
                                 "memory_padding_mask": cache["memory_mask"]},
                                training=False, memory_heads=tuple(zip(cache["memory_keys"], cache["memory_values"])),
                                output_key_value_heads=True)
        # The window's first column leaves it now: its keys and values, projected this step from its layer
        # inputs as they would be as memory, join the memory for good. The attention read `[memory | window]`
        # already joined: the next memory is one slice of it (one copy of the memory per step, not two).
        cache = dict(cache)
        length = cache["memory_mask"].shape[1] or ops.shape(cache["memory_mask"])[1]
        for name, part in (("memory_keys", 0), ("memory_values", 1)):
            cache[name] = tuple(heads[part][:, :, 1:length + 1]  # [B, N, T, D]
                                for heads in outputs["key_value_heads"])
        cache["memory_mask"] = ops.concatenate(
            [cache["memory_mask"][:, 1:], ops.cast(real[:, :1], "int32")], axis=1)
        return outputs["query_output"][:, 0], cache

    def generate_step(self, inputs, stop_token_ids=None):
        """The compilable generation loop for one batch (what `generate` runs, once per batch).

        Args:
            inputs: a dict with `token_ids` and `padding_mask` `[B, T]` (T, the
                static `max_length`), and optionally `max_new_tokens` (int
                scalar): columns after the prompt's `P + max_new_tokens` are not
                generated.
            stop_token_ids: ids that end a row, or None.

        Returns:
            A dict: `token_ids` `[B, T]`, each row's prompt from column 0 and its
            continuation after it; `padding_mask` `[B, T]` over both, up to
            and with its first stop token.
        """
        # Every step's calls have the same shapes, so each layer's projected relative positions are the
        # same each step: projected once here, before the loop, rather than once per step (in `cached` mode
        # that projection of the window's distances over the whole memory was most of a step's work).
        with self.backbone.lend_position_heads(self._position_heads(inputs["token_ids"].shape[1])):
            return self._generate_step(inputs, stop_token_ids)

    def _position_heads(self, length):
        """Each layer's projected relative positions for every call of the loop over `length` columns."""
        if length is None or not self.backbone.projects_positions_ahead:
            return None
        # `cached` calls the longest: `length` memory slots and the window with its placeholder.
        return self.backbone.project_positions(length + self.recompute_window + 1)

    def _generate_step(self, inputs, stop_token_ids):
        token_ids, cache, start = self.build_cache(inputs["token_ids"], inputs["padding_mask"])
        length = ops.shape(token_ids)[1]
        end = length
        limited = inputs.get("max_new_tokens") is not None
        if limited:
            end = ops.minimum(start + ops.cast(inputs["max_new_tokens"], "int32"), length)
        forced_stop = None if not stop_token_ids else int(stop_token_ids[0])

        def next(prompt, cache, index):
            logits, hidden, cache = self.call_with_cache(prompt, cache, index)
            if forced_stop is not None and limited:
                # Past `max_new_tokens`: every row stops, so the loop ends after this step.
                stop = ops.one_hot(ops.full((ops.shape(logits)[0],), forced_stop, "int32"),
                                   ops.shape(logits)[1], dtype="float32") * 1e9 - 1e9
                logits = ops.where(index >= end, stop, logits)
            return logits, hidden, cache

        columns = ops.arange(length, dtype="int32")[None, :]
        prompt_columns = ops.broadcast_to(columns < start, ops.shape(token_ids))
        token_ids = self.sampler(next=next, prompt=token_ids, cache=cache, index=start, mask=prompt_columns,
                                 stop_token_ids=stop_token_ids, model=self)
        generated = ops.logical_and(columns >= start, columns < end)
        keep = ops.logical_or(ops.logical_and(prompt_columns, columns >= cache["first"][:, None]), generated)
        if stop_token_ids is not None:
            is_stop = ops.logical_and(_any_equal(token_ids, stop_token_ids), generated)
            stops_before = ops.cumsum(ops.cast(is_stop, "int32"), axis=1) - ops.cast(is_stop, "int32")
            keep = ops.logical_and(keep, stops_before == 0)
        return _to_front(token_ids, keep, cache["first"])

    def make_generate_function(self):
        """keras-hub's compiled loop, rebuilt when `jit_compile`, `run_eagerly` or the mode changed."""
        key = (self.jit_compile, self.run_eagerly, self.mode)
        if getattr(self, "_generate_function_key", None) != key:
            self.generate_function = None
            self._generate_function_key = key
        return super().make_generate_function()

    def generate(self, inputs, max_length=None, stop_token_ids="auto", strip_prompt=False, sampler=None,
                 mode=None):
        """Continues the prompts (keras-hub's `CausalLM.generate`, plus `sampler` and `mode`).

        Args:
            inputs: a string or strings (with a preprocessor), or a dict of
                `token_ids` and `padding_mask` `[B, T]` (T is then the length).
            max_length: prompt plus continuation, in tokens (default: the
                preprocessor's `sequence_length`).
            stop_token_ids: `"auto"` (`<eod>`, `<eop>`), ids, or None (always
                run to `max_length`).
            strip_prompt: return the continuation only.
            sampler: a keras-hub sampler or its name (`"greedy"`, `"top_k"`,
                `"top_p"`, `"random"`, `"beam"`, ...); default: the compiled one
                (greedy). Top-k, top-p and random draw with `seeded_sampler`'s
                samplers: a seed gives the same tokens with and without XLA.
            mode: `"exact"` or `"cached"` for this call and after (default: as built).

        Returns:
            Strings for strings; a dict of numpy ids for ids.
        """
        if sampler is not None:
            self.sampler = seeded_sampler(sampler)
            self.generate_function = None
        elif type(self.sampler) in SEEDED:  # keras-hub's, from `compile(sampler=...)` or set by hand.
            self.sampler = seeded_sampler(self.sampler)
            self.generate_function = None
        if mode is not None and _checked_mode(mode) != self.mode:
            self.mode = mode
            self.generate_function = None
        if stop_token_ids == "auto":
            stop_token_ids = DEFAULT_STOP_TOKEN_IDS
        _check_prompts(self, inputs, max_length)
        if isinstance(inputs, dict) and "padding_mask" in inputs:
            inputs = _right_padded(inputs)
        return super().generate(inputs, max_length=max_length, stop_token_ids=stop_token_ids,
                                strip_prompt=strip_prompt)

    # ------------------------------------------------------------------ config and presets
    def get_config(self):
        return {"backbone": keras.saving.serialize_keras_object(self.backbone),
                "preprocessor": (None if self.preprocessor is None
                                 else keras.saving.serialize_keras_object(self.preprocessor)),
                "mode": self.mode, "recompute_window": self.recompute_window,
                "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

    @classmethod
    def from_preset(cls, preset, load_weights=True, dtype=None, mode=None, recompute_window=None,
                    sequence_length=None, preprocessor="auto", **config_overrides):
        """A generator from any backbone, pretraining or generation preset.

        The backbone and the LM bias load as `XLNetPretrainer.from_preset` loads
        them (a preset without the bias gets zeros), for inference: no
        `bi_data`, no training memory, no dropout. A generation preset
        (`save_to_preset`) also gives its `mode`, `recompute_window` and
        `sequence_length`; the arguments override them.

        Args:
            preset: a preset name, a directory (local, `gs://`, `ram://`) or a hub handle.
            load_weights: False builds fresh weights.
            dtype: a dtype policy.
            mode: `"exact"` (default) or `"cached"`.
            recompute_window: the `cached` mode's window (default 2).
            sequence_length: the preprocessor's default `max_length` (default 128).
            preprocessor: `"auto"` (the preset's vocabulary, when it has one), an
                `XLNetCausalLMPreprocessor`, or None.
            **config_overrides: `XLNetConfig` fields to change.

        Returns:
            An `XLNetCausalLM`.

        Example:
        >>> causal_lm = XLNetCausalLM.from_preset("xlnet_base_cased", mode="cached")
        >>> text = causal_lm.generate("The river", max_length=32)
        """
        preset = preset_io.resolve(preset)
        settings = generation_settings(preset)
        mode = _checked_mode(settings.get("mode", "exact") if mode is None else mode)
        recompute_window = _checked_window(settings.get("recompute_window", 2) if recompute_window is None
                                           else recompute_window)
        overrides = {"bi_data": False, "memory_length": 0, "reuse_length": 0, "dropout": 0.0,
                     "attention_dropout": 0.0, **config_overrides}
        pretrainer = XLNetPretrainer.from_preset(preset, dtype=dtype, load_weights=load_weights, **overrides)
        if preprocessor == "auto":
            preprocessor = None
            if preset_io.vocabulary_path(preset, required=False):
                preprocessor = XLNetCausalLMPreprocessor.from_preset(
                    preset, sequence_length=(settings.get("sequence_length", 128) if sequence_length is None
                                             else sequence_length))
        model = cls(pretrainer.backbone, preprocessor=preprocessor, mode=mode, recompute_window=recompute_window)
        model.lm_bias.assign(pretrainer.lm_bias)
        return model

    def save_to_preset(self, preset_dir, vocabulary_file=None, max_shard_size=None):
        """A generation preset: the pretraining layout plus the generation settings.

        The backbone preset and `lm_head.weights.h5` (so every backbone or
        pretrainer `from_preset` reads it), the vocabulary when known, and
        `preprocessing.json` with `task_type: "generation"`, `mode`,
        `recompute_window`, `sequence_length`, which `from_preset` and
        `xlnet-tf export` read.

        Example:
        >>> causal_lm.save_to_preset("my_generator")
        """
        tokenizer = None if self.preprocessor is None else self.preprocessor.tokenizer
        if vocabulary_file is None and tokenizer is not None:
            vocabulary_file = tokenizer.proto
        pretrainer = XLNetPretrainer(self.backbone)
        pretrainer.lm_bias.assign(self.lm_bias)
        pretrainer.save_to_preset(preset_dir, vocabulary_file, max_shard_size, tokenizer=tokenizer)
        info = {"task_type": GENERATION_TASK_TYPE, "mode": self.mode, "recompute_window": self.recompute_window}
        if self.preprocessor is not None:
            info["sequence_length"] = int(self.preprocessor.sequence_length)
        preset_io.write_json(os.path.join(preset_dir, PREPROCESSING_FILE), info)


def generation_settings(preset):
    """The `GENERATION_SETTINGS` of a generation preset; `{}` for other presets."""
    path = preset_io.fetch(preset, PREPROCESSING_FILE, required=False)
    if path is None:
        return {}
    info = preset_io.read_json(path)
    if info.get("task_type") != GENERATION_TASK_TYPE:
        return {}
    return {k: info[k] for k in GENERATION_SETTINGS if k in info}


def _checked_mode(mode):
    if mode not in MODES:
        raise ValueError(f"XLNetCausalLM: mode must be one of {list(MODES)}, got {mode!r}.")
    return mode


def _checked_window(window):
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"XLNetCausalLM: recompute_window must be an int >= 1, got {window!r}.")
    return window


def _any_equal(token_ids, stop_token_ids):
    return ops.any(ops.stack([ops.equal(token_ids, int(i)) for i in stop_token_ids]), axis=0)


def _move_real_tokens(token_ids, real, first):
    """Row b's real tokens, in order, moved to the columns `first[b], first[b] + 1, ...`; zeros elsewhere."""
    length = ops.shape(token_ids)[1]
    # A stable sort puts each row's real columns first, in order.
    order = tf.argsort(1 - real, axis=1, stable=True)  # [B, T]
    rank = ops.arange(length, dtype="int32")[None, :] - first[:, None]  # [B, T]
    valid = ops.logical_and(rank >= 0, rank < ops.sum(real, axis=1)[:, None])
    source = ops.take_along_axis(order, ops.clip(rank, 0, length - 1), axis=1)
    return ops.where(valid, ops.take_along_axis(token_ids, ops.cast(source, "int32"), axis=1), 0)


def _to_front(token_ids, keep, first):
    """Shifts each row left by `first` columns: its prompt then starts at column 0."""
    length = ops.shape(token_ids)[1]
    source = ops.arange(length, dtype="int32")[None, :] + first[:, None]  # [B, T]
    inside = source < length
    source = ops.minimum(source, length - 1)
    keep = ops.logical_and(ops.take_along_axis(keep, source, axis=1), inside)
    ids = ops.where(keep, ops.take_along_axis(token_ids, source, axis=1), 0)
    return {"token_ids": ids, "padding_mask": keep}


def _right_padded(inputs):
    """Id prompts with each row's tokens from column 0 (keras-hub's layout, which `strip_prompt` assumes)."""
    ids = np.asarray(keras.ops.convert_to_numpy(inputs["token_ids"]))
    mask = np.asarray(keras.ops.convert_to_numpy(inputs["padding_mask"])).astype(bool)
    ids, mask = np.atleast_2d(ids), np.atleast_2d(mask)
    out_ids, out_mask = np.zeros_like(ids, dtype=np.int32), np.zeros_like(mask)
    for row in range(ids.shape[0]):
        tokens = ids[row][mask[row]]
        out_ids[row, :len(tokens)] = tokens
        out_mask[row, :len(tokens)] = True
    return dict(inputs, token_ids=out_ids, padding_mask=out_mask)


def _check_prompts(model, inputs, max_length):
    """Refuses empty prompts and prompts that leave no column to generate, naming the row."""
    if isinstance(inputs, dict) and "padding_mask" in inputs:
        mask = np.asarray(keras.ops.convert_to_numpy(inputs["padding_mask"]))
        if mask.ndim == 1:
            mask = mask[None]
        lengths, total = mask.astype(bool).sum(axis=-1), mask.shape[-1]
    elif model.preprocessor is not None and not hasattr(inputs, "element_spec"):
        texts = [inputs] if isinstance(inputs, str) else list(np.asarray(inputs).reshape(-1))
        texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in texts]
        lengths = np.array([len(model.preprocessor.tokenizer.tokenize(t)) for t in texts])
        total = max_length or model.preprocessor.sequence_length
    else:
        return
    for row, length in enumerate(lengths):
        if length == 0:
            raise ValueError(f"XLNetCausalLM.generate: prompt {row} is empty (no tokens); XLNet needs at "
                             "least one token to condition on.")
        if length >= total:
            raise ValueError(f"XLNetCausalLM.generate: prompt {row} has {int(length)} tokens, which leaves no "
                             f"room to generate within max_length {int(total)}; raise max_length.")
