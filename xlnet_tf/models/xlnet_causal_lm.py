"""Text generation with XLNet: keras-hub's `CausalLM.generate()` in two modes, `exact` and `cached`."""

import os
import sys

import keras
import keras_hub
import numpy as np
from keras import ops
from keras_hub.models import CausalLM

from xlnet_tf.formats.preset_files import PREPROCESSING_FILE
from xlnet_tf.formats.special_tokens import EOD_TOKEN_ID, EOP_TOKEN_ID
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage import preset_io
from xlnet_tf.tensorflow_required import tensorflow_available
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.token_id_checks import check_token_id_inputs
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer, tied_lm_logits
from xlnet_tf.samplers.seeded_sampler import seeded_sampler

MODES = ("exact", "cached")
# XLNet's own end markers: end of document and end of paragraph.
DEFAULT_STOP_TOKEN_IDS = (EOD_TOKEN_ID, EOP_TOKEN_ID)
GENERATION_TASK_TYPE = "generation"
# The inputs of an id prompt (generation sets segments and positions itself).
PROMPT_INPUTS = ("token_ids", "padding_mask")
# A generation preset's `preprocessing.json` keys (besides `task_type`); `max_new_tokens` is the
# largest request of an exported `generate` signature.
GENERATION_SETTINGS = ("mode", "recompute_window", "sequence_length", "max_new_tokens")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetCausalLM(CausalLM):
    """XLNet generating text left to right, with keras-hub's samplers.

    `generate()` continues each prompt token by token: give it strings (with a
    preprocessor) or ids (`{"token_ids", "padding_mask"}`), a budget
    (`max_length`, or `max_new_tokens`) and a sampler. Each step predicts the
    next token through the query stream at a placeholder right after the text
    (Hugging Face's scheme), because XLNet's attention is bidirectional: every
    new token changes the states of the tokens before it.

    - `mode="exact"` recomputes the whole sequence every step, so each token
      comes from the model's true conditional (Hugging Face's `use_mems=False`).
    - `mode="cached"` keeps the keys and values of the tokens before the last
      `recompute_window` in memory and recomputes only the window: cheaper per
      step, an approximation of `exact` (Hugging Face's default mems path).

    Each prompt of a batch gets the tokens and the budget it would get alone,
    because padding is closed to every query. The loop is compiled once per
    batch shape on every backend (no host round trip per token); a row stops
    at its first stop token (`<eod>`, `<eop>`, or the ids given), and the batch
    runs until every row has stopped.

    Args:
        backbone: an `XLNetBackbone` without `bi_data`.
        preprocessor: an `XLNetCausalLMPreprocessor` (strings in and out; it
            tokenizes with TensorFlow Text on the CPU on every backend and
            hands the loop backend tensors), or None (ids in and out: no
            TensorFlow needed).
        mode: `"exact"` or `"cached"`.
        recompute_window: tokens recomputed each step in `cached` mode (>= 1).
        **kwargs: `name`, `dtype`, `trainable`, `compile` of keras-hub's `Task`.

    Call arguments:
        inputs: the backbone's input dict; `target_mapping` `[B, P, L]` picks
            the predicted positions (query stream), otherwise every position
            of the content stream is scored.

    Returns:
        `call`: the logits, float32 `[B, P, V]` (or `[B, L, V]`).
        `generate(inputs, max_length=None, stop_token_ids="auto", strip_prompt=False, sampler=None, mode=None,
        max_new_tokens=None)`: strings for strings; for ids (`{"token_ids", "padding_mask"}` `[B, T]`,
        the prompt being each row's tokens under `padding_mask`, on any side),
        the same dict with every row's prompt from column 0, its continuation
        after it, and `padding_mask` covering both (up to and with its first
        stop token).

    Example:
    >>> import numpy as np
    >>> from xlnet_tf import XLNetBackbone, XLNetCausalLM, XLNetConfig
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
        # Why string prompts cannot be tokenized, when a preset had a vocabulary but no tokenizer could load.
        self._untokenized = None
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
        side) is moved to start at column 0, keras-hub's layout: row b's
        continuation is then written from column `lengths[b]` on. The loop's
        first column is the shortest prompt's length; a longer prompt's columns
        are kept as they are until the loop reaches its end, so every row is
        predicted from its own prompt alone, however long the others are.

        Args:
            token_ids: int `[B, T]`.
            padding_mask: int/bool `[B, T]`, 1 = a prompt token.

        Returns:
            `(token_ids, cache, index)`: the right-padded `[B, T]` ids, the cache
            that `call_with_cache` reads (a dict whose tensors all have the
            batch first: `lengths` `[B]`, each row's prompt length; in `cached`
            mode also `memory_keys` and `memory_values`, per layer
            `[B, num_heads, T, head_dim]`, `memory_mask` `[B, T]`, and the
            prompt pass's keys and values of every column, `prompt_keys` and
            `prompt_values`, per layer `[B, num_heads, T, head_dim]`), and the
            first column to generate (int32 scalar).
        """
        token_ids = ops.cast(token_ids, "int32")
        real = ops.cast(padding_mask, "int32")
        lengths = ops.sum(real, axis=1)  # [B]
        start = ops.min(lengths)
        token_ids = _move_real_tokens(token_ids, real)  # [B, T]
        cache = {"lengths": lengths}
        if self.mode == "cached":
            cache.update(self._prefill_memory(token_ids, lengths, start))
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
            hidden = self._exact_step(token_ids, index)
        else:
            hidden, cache = self._cached_step(token_ids, cache, index)
        return self._logits(hidden[:, None])[:, 0], hidden, cache

    def _exact_step(self, token_ids, index):
        batch, length = ops.shape(token_ids)[0], ops.shape(token_ids)[1]
        columns = ops.arange(length, dtype="int32")[None, :]  # [1, T]
        # The placeholder at `index` is padding: closed to every query, its own query stream included.
        real = ops.broadcast_to(columns < index, (batch, length))  # [B, T]
        target = ops.one_hot(ops.full((batch, 1), index, "int32"), length,
                             dtype=self.backbone.compute_dtype)  # [B, 1, T]
        outputs = self.backbone({"token_ids": token_ids, "segment_ids": ops.zeros_like(token_ids),
                                 "padding_mask": ops.cast(real, "int32"), "target_mapping": target},
                                training=False)
        return outputs["query_output"][:, 0]  # [B, H]

    def _prefill_memory(self, token_ids, lengths, start):
        """Each layer's keys and values of the prompts: the first step's memory, and every prompt column.

        One backbone pass over the prompts gives every layer's keys and values
        of every column. The memory is right-aligned in `T` slots: its last
        slot holds the column just before the first step's recompute window,
        `start - window - 1`. The first step then recomputes the window over
        this memory, which gives the states the full prompt gives. A row whose
        prompt is longer than `start` takes the columns that leave the window
        before its prompt ends from this pass (`prompt_keys`, `prompt_values`),
        as it would alone.
        """
        length = token_ids.shape[1] or ops.shape(token_ids)[1]
        columns = ops.arange(length, dtype="int32")[None, :]
        real = columns < lengths[:, None]  # [B, T]
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

        heads = outputs["key_value_heads"]
        memory_keys, memory_values = zip(*[(right_aligned(keys), right_aligned(values)) for keys, values in heads])
        padded_real = ops.concatenate([ops.zeros((batch, pad), "int32"), ops.cast(real, "int32")], axis=1)
        memory_mask = ops.slice(padded_real, (0, start), (batch, length))  # [B, T]
        return {"memory_keys": memory_keys, "memory_values": memory_values, "memory_mask": memory_mask,
                "prompt_keys": tuple(keys for keys, _ in heads),
                "prompt_values": tuple(values for _, values in heads)}

    def _cached_step(self, token_ids, cache, index):
        window = self.recompute_window
        columns = index - window + ops.arange(window + 1, dtype="int32")  # [w+1], the placeholder last
        real = ops.logical_and(columns >= 0, columns < index)[None]  # [1, w+1]
        length = ops.shape(token_ids)[1]
        ids = ops.take(token_ids, ops.clip(columns, 0, length - 1), axis=1)  # [B, w+1]
        batch = ops.shape(token_ids)[0]
        target = ops.broadcast_to(ops.one_hot(window, window + 1, dtype=self.backbone.compute_dtype),
                                  (batch, 1, window + 1))  # [B, 1, w+1]
        outputs = self.backbone({"token_ids": ids, "segment_ids": ops.zeros_like(ids),
                                 "padding_mask": ops.cast(ops.broadcast_to(real, ops.shape(ids)), "int32"),
                                 "target_mapping": target, "memory_padding_mask": cache["memory_mask"]},
                                training=False, memory_heads=tuple(zip(cache["memory_keys"], cache["memory_values"])),
                                output_key_value_heads=True)
        # The window's first column leaves it now: its keys and values, projected this step from its layer
        # inputs as they would be as memory, join the memory for good. The attention read `[memory | window]`
        # already joined: the next memory is one slice of it (one copy of the memory per step, not two). A row
        # still inside its prompt takes the column from the prompt pass instead, as its memory alone holds it.
        cache = dict(cache)
        slots = cache["memory_mask"].shape[1] or ops.shape(cache["memory_mask"])[1]
        in_prompt = (index < cache["lengths"])[:, None, None, None]  # [B, 1, 1, 1]
        leaving = ops.reshape(ops.maximum(index - window, 0), (1,))  # [1], the column leaving the window
        for name, prompt_name, part in (("memory_keys", "prompt_keys", 0), ("memory_values", "prompt_values", 1)):
            cache[name] = tuple(
                ops.concatenate([heads[part][:, :, 1:slots],
                                 ops.where(in_prompt, ops.take(prompt, leaving, axis=2),
                                           heads[part][:, :, slots:slots + 1])], axis=2)  # [B, N, T, D]
                for heads, prompt in zip(outputs["key_value_heads"], cache[prompt_name]))
        cache["memory_mask"] = ops.concatenate(
            [cache["memory_mask"][:, 1:], ops.cast(ops.broadcast_to(real[:, :1], (batch, 1)), "int32")], axis=1)
        return outputs["query_output"][:, 0], cache

    def generate_step(self, inputs, stop_token_ids=None):
        """The compilable generation loop for one batch (what `generate` runs, once per batch).

        Args:
            inputs: a dict with `token_ids` and `padding_mask` `[B, T]` (T, the
                static number of columns: a row's prompt and continuation
                together fill at most T), and optionally `max_new_tokens` (int
                scalar or `[B]`): row b generates at most that many tokens after
                its own prompt (default: up to column T).
            stop_token_ids: ids that end a row, or None (an empty list too).

        Returns:
            A dict: `token_ids` `[B, T]`, each row's prompt from column 0 and its
            continuation after it; `padding_mask` `[B, T]` over both, up to
            and with its first stop token.
        """
        stop_token_ids = tuple(int(i) for i in stop_token_ids or ()) or None
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
        lengths = cache["lengths"]
        length = ops.shape(token_ids)[1]
        columns = ops.arange(length, dtype="int32")[None, :]
        prompt_columns = columns < lengths[:, None]  # [B, T]
        end = ops.broadcast_to(length, ops.shape(lengths))  # [B], each row's first column not generated
        limited = inputs.get("max_new_tokens") is not None
        if limited:
            end = ops.minimum(lengths + ops.cast(inputs["max_new_tokens"], "int32"), length)
        # In the cache, so that samplers that widen the batch (beams) widen it too.
        cache = dict(cache, end=end)
        # The columns not yet generated hold an id that is no stop token: the samplers' end test reads them.
        token_ids = ops.where(prompt_columns, token_ids, _first_id_outside(stop_token_ids))
        forced_stop = None if stop_token_ids is None or not limited else stop_token_ids[0]

        def next(prompt, cache, index):
            logits, hidden, cache = self.call_with_cache(prompt, cache, index)
            # A row still inside its prompt is given its own next prompt token, so samplers that score
            # sequences (beams) see its prompt as it is, not what the model would have drawn.
            in_prompt = (index < cache["lengths"])[:, None]  # [B, 1]
            logits = ops.where(in_prompt, _forced(prompt[:, index], logits), logits)
            if forced_stop is not None:
                # Past its `max_new_tokens` a row stops, so the loop ends once every row is past.
                past = (index >= cache["end"])[:, None]  # [B, 1]
                logits = ops.where(past, _forced(ops.full(ops.shape(in_prompt)[:1], forced_stop, "int32"),
                                                 logits), logits)
            return logits, hidden, cache

        token_ids = self.sampler(next=next, prompt=token_ids, cache=cache, index=start, mask=prompt_columns,
                                 stop_token_ids=stop_token_ids, model=self)
        generated = ops.logical_and(ops.logical_not(prompt_columns), columns < end[:, None])
        if stop_token_ids is not None:
            is_stop = ops.logical_and(_any_equal(token_ids, stop_token_ids), generated)
            stops_before = ops.cumsum(ops.cast(is_stop, "int32"), axis=1) - ops.cast(is_stop, "int32")
            generated = ops.logical_and(generated, stops_before == 0)
        keep = ops.logical_or(prompt_columns, generated)
        return {"token_ids": ops.where(keep, token_ids, 0), "padding_mask": keep}

    def make_generate_function(self):
        """keras-hub's compiled loop, rebuilt when `jit_compile`, `run_eagerly`, the mode or the sampler changed.

        keras-hub's `CausalLM.make_generate_function` picks the backend's way:
        `tf.function` on TensorFlow, `jax.jit` with the weights and the
        sampler's seed state passed as stateless values on JAX (the new seed
        state is assigned back after each call), `torch.no_grad()` on PyTorch.
        """
        # The sampler itself, not its `id`: a new sampler may get the `id` of a freed one.
        key = (self.jit_compile, self.run_eagerly, self.mode, self.sampler)
        if getattr(self, "_generate_function_key", None) != key:
            self.generate_function = None
            self._generate_function_key = key
        return super().make_generate_function()

    def generate(self, inputs, max_length=None, stop_token_ids="auto", strip_prompt=False, sampler=None,
                 mode=None, max_new_tokens=None):
        """Continues the prompts (keras-hub's `CausalLM.generate`, plus `sampler`, `mode` and `max_new_tokens`).

        Every prompt gets the tokens it gets alone, whatever else is in its
        batch: the same continuation (greedy) and the same budget of new
        tokens. Each batch (one for direct input, each element of a
        `tf.data.Dataset`) is checked before it runs, and a prompt that cannot
        be continued is refused naming its number (counted across the batches
        of a dataset): an empty one, one that leaves no room under
        `max_length` (a string prompt is never cut short silently), an id
        outside the vocabulary.

        Args:
            inputs: a string or strings (with a preprocessor), a dict of
                `token_ids` and `padding_mask` `[B, T]` or `[T]` (the prompt
                being each row's tokens under `padding_mask`, on any side; with
                or without a preprocessor), or a `tf.data.Dataset` of either,
                batched.
            max_length: the most tokens of each row, its own prompt plus its
                continuation (default: the preprocessor's `sequence_length` for
                strings, T for ids). A prompt must be shorter.
            stop_token_ids: `"auto"` (`<eod>`, `<eop>`), a list of ids in the
                vocabulary, or None or `[]` (always run to the budget).
            strip_prompt: return the continuation only.
            sampler: a keras-hub sampler or its name (`"greedy"`, `"top_k"`,
                `"top_p"`, `"random"`, `"beam"`, ...); default: the compiled one
                (greedy). Top-k, top-p and random draw with `seeded_sampler`'s
                samplers: a seed gives the same tokens with and without XLA
                (on each backend: their random bits differ between backends).
                The same sampler object again keeps the compiled loop and
                carries its seed state on.
            mode: `"exact"` or `"cached"` for this call and after (default: as built).
            max_new_tokens: the most tokens generated after each prompt,
                instead of `max_length`. String prompts may then have up to the
                preprocessor's `sequence_length` tokens, and the loop runs over
                the batch's longest prompt plus `max_new_tokens` columns (traced
                once per such width); id prompts get `max_new_tokens` more
                columns than `token_ids` has.

        Returns:
            Strings for strings; for ids, a dict of numpy `token_ids` and
            `padding_mask` (`[B, max_length]`, or `[B, T + max_new_tokens]`):
            every row's prompt from column 0, its continuation after it, and
            `padding_mask` covering both, up to and with its first stop token.
        """
        max_length, max_new_tokens = _checked_budget(max_length, max_new_tokens)
        stop_token_ids = self._checked_stop_token_ids(stop_token_ids)
        self.sampler = self._seeded(self.sampler if sampler is None else sampler)
        if mode is not None:
            self.mode = _checked_mode(mode)
        generate_function = self.make_generate_function()
        batches, input_is_scalar = _prompt_batches(inputs)
        outputs, first_row = [], 0
        for batch in batches:
            prompts, as_text = self._packed_prompts(batch, max_length, max_new_tokens, first_row)
            lengths = prompts["padding_mask"].sum(axis=1)
            out = generate_function(prompts, stop_token_ids=stop_token_ids)
            out = {key: np.asarray(ops.convert_to_numpy(out[key])) for key in ("token_ids", "padding_mask")}
            if strip_prompt:
                out = _after_prompt(out, lengths)
            outputs.append(self.preprocessor.generate_postprocess(out) if as_text else out)
            first_row += len(lengths)
        if not outputs:
            raise ValueError("XLNetCausalLM.generate: the dataset holds no prompts.")
        return self._normalize_generate_outputs(_one_width(outputs), input_is_scalar)

    def _seeded(self, sampler):
        """`seeded_sampler(sampler)`; the same object again for the same sampler object, so the loop is not rebuilt.

        A name or a config gives a new sampler on each call, as in keras-hub.
        """
        given, seeded = getattr(self, "_seeded_from", (None, None))
        if sampler is not given or not isinstance(sampler, keras_hub.samplers.Sampler):
            seeded = seeded_sampler(sampler)
            self._seeded_from = (sampler, seeded)
        return seeded

    def _checked_stop_token_ids(self, stop_token_ids):
        """`stop_token_ids` as a tuple of ids in the vocabulary, or None; `"auto"` is XLNet's end markers."""
        if isinstance(stop_token_ids, str) and stop_token_ids == "auto":
            return DEFAULT_STOP_TOKEN_IDS
        if stop_token_ids is None:
            return None
        if isinstance(stop_token_ids, (str, bytes, dict)) or not hasattr(stop_token_ids, "__iter__"):
            raise ValueError(f"XLNetCausalLM.generate: stop_token_ids must be 'auto', None or a list of ids, got "
                             f"{stop_token_ids!r}; for one id, pass a list of it.")
        vocabulary_size = self.backbone.config.vocabulary_size
        for token in stop_token_ids:
            if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
                raise ValueError(f"XLNetCausalLM.generate: stop_token_ids must be ids (ints), got {token!r} in "
                                 f"{stop_token_ids!r}.")
            if not 0 <= token < vocabulary_size:
                raise ValueError(f"XLNetCausalLM.generate: stop token id {int(token)} is outside the vocabulary "
                                 f"[0, {vocabulary_size}).")
        return tuple(int(token) for token in stop_token_ids) or None

    def _packed_prompts(self, batch, max_length, max_new_tokens, first_row):
        """One batch of prompts as the loop's input, checked (`_check_prompts`); and whether they are text.

        Returns the dict `generate_step` takes: right-padded int32 `token_ids`
        and `padding_mask` at the loop's width (`max_new_tokens` included when
        given).
        """
        as_text = not isinstance(batch, dict)
        check = self._checked_texts if as_text else self._checked_ids
        token_ids, padding_mask, width = check(batch, max_length, max_new_tokens, first_row)
        token_ids, padding_mask = _right_padded(token_ids, padding_mask, width)
        prompts = {"token_ids": token_ids, "padding_mask": padding_mask}
        if max_new_tokens is not None:
            prompts["max_new_tokens"] = np.array(max_new_tokens, np.int32)
        return prompts, as_text

    def _checked_ids(self, batch, max_length, max_new_tokens, first_row):
        """An id prompt dict's `(token_ids, padding_mask, width)`, checked; width: `max_length`, T or T + new."""
        token_ids, padding_mask = _id_prompts(batch)
        columns = token_ids.shape[1]
        if max_new_tokens is not None:
            _check_prompts(token_ids, padding_mask, self.backbone.config.vocabulary_size, columns, "", first_row)
            return token_ids, padding_mask, columns + max_new_tokens
        width = max_length or columns
        limit = f"max_length {width}" if max_length else f"the {width} columns of token_ids"
        _check_prompts(token_ids, padding_mask, self.backbone.config.vocabulary_size, width - 1,
                       f", which leaves no room to generate within {limit}; pass a larger max_length, or "
                       "max_new_tokens.", first_row)
        return token_ids, padding_mask, width

    def _checked_texts(self, batch, max_length, max_new_tokens, first_row):
        """String prompts packed by the preprocessor, `(token_ids, padding_mask, width)`, checked.

        Each batch is packed one column wider than a prompt may be, so that a
        prompt the packer cut short shows as one too long and is refused.
        """
        if self.preprocessor is None:
            raise ValueError("XLNetCausalLM.generate: this model has no preprocessor, so prompts are ids: a dict "
                             f"of 'token_ids' and 'padding_mask' [batch, length]; got {type(batch).__name__}. "
                             "Attach an XLNetCausalLMPreprocessor for strings"
                             f"{self._untokenized or ''}.")
        texts = _text_prompts(batch, first_row)
        window = self.preprocessor.sequence_length
        if window is None and not max_length:
            raise ValueError("XLNetCausalLM.generate: the preprocessor's sequence_length is None, so string prompts "
                             "have no length limit to pack at; give it a sequence_length, or pass max_length.")
        if max_new_tokens is None:
            packed_width = max_length or window
            source = "" if max_length else " (the preprocessor's sequence_length)"
            too_long = (f", which leaves no room to generate within max_length {packed_width}{source}; pass a "
                        "larger max_length, or max_new_tokens.")
            longest = packed_width - 1
        else:
            packed_width, longest = window + 1, window
            too_long = (f", more than the {window} that the preprocessor's sequence_length allows a prompt; "
                        "shorten it or raise the preprocessor's sequence_length.")
        packed = self.preprocessor.generate_preprocess(texts, sequence_length=packed_width)
        token_ids = np.asarray(ops.convert_to_numpy(packed["token_ids"]))
        padding_mask = np.asarray(ops.convert_to_numpy(packed["padding_mask"])).astype(bool)
        lengths = _check_prompts(token_ids, padding_mask, self.backbone.config.vocabulary_size, longest, too_long,
                                 first_row, packed_width=packed_width)
        width = packed_width if max_new_tokens is None else int(lengths.max()) + max_new_tokens
        return token_ids, padding_mask, width

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

    # keras-hub's `CausalLM.from_preset` needs a `task.json`; a generator is built from any backbone or
    # pretraining preset, with its LM bias and the generation settings of `preprocessing.json`.
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
            preprocessor: `"auto"` (the preset's vocabulary, when it has one
                and TensorFlow, which tokenizes, is installed: without it the
                model takes ids, and string prompts are refused naming
                TensorFlow), an `XLNetCausalLMPreprocessor`, or None.
            **config_overrides: `XLNetConfig` fields to change.

        Returns:
            An `XLNetCausalLM`.

        Example:
        >>> from xlnet_tf import XLNetCausalLM
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
        untokenized = None
        if preprocessor == "auto":
            preprocessor = None
            if preset_io.vocabulary_path(preset, required=False) and not tensorflow_available():
                untokenized = ("; this preset's vocabulary is tokenized by TensorFlow Text, which is not installed "
                               "(pip install tensorflow tensorflow-text)")
            elif preset_io.vocabulary_path(preset, required=False):
                # optional dependency: the data side (tensorflow-text), only for a preset with a vocabulary.
                from xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor import XLNetCausalLMPreprocessor

                preprocessor = XLNetCausalLMPreprocessor.from_preset(
                    preset, sequence_length=(settings.get("sequence_length", 128) if sequence_length is None
                                             else sequence_length))
        model = cls(pretrainer.backbone, preprocessor=preprocessor, mode=mode, recompute_window=recompute_window)
        model.lm_bias.assign(pretrainer.lm_bias)
        model._untokenized = untokenized
        return model

    # Writes the pretraining layout (which every backbone reader takes) plus the generation settings,
    # not the `task.json` of keras-hub's saver.
    def save_to_preset(self, preset_dir, vocabulary_file=None, max_shard_size=None):
        """A generation preset: the pretraining layout plus the generation settings.

        The backbone preset and `lm_head.weights.h5` (so every backbone or
        pretrainer `from_preset` reads it), the vocabulary when known, and
        `preprocessing.json` with `task_type: "generation"`, `mode`,
        `recompute_window`, `sequence_length`, which `from_preset` and
        `xlnet-tf export` read.

        Example:
        >>> import os, tempfile
        >>> from xlnet_tf import XLNetBackbone, XLNetCausalLM, XLNetConfig
        >>> causal_lm = XLNetCausalLM(XLNetBackbone(XLNetConfig(
        ...     vocabulary_size=32, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8, intermediate_dim=16)),
        ...     mode="cached")
        >>> preset = os.path.join(tempfile.mkdtemp(), "my_generator")
        >>> causal_lm.save_to_preset(preset)
        >>> XLNetCausalLM.from_preset(preset).mode  # the generation settings travel with the weights
        'cached'
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
        atomic_files.write_json(os.path.join(preset_dir, PREPROCESSING_FILE), info)


def generation_settings(preset):
    """The `GENERATION_SETTINGS` of a generation preset; `{}` for other presets."""
    path = preset_io.fetch(preset, PREPROCESSING_FILE, required=False)
    if path is None:
        return {}
    info = atomic_files.read_json(path)
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


def _move_real_tokens(token_ids, real):
    """Each row's real tokens, in order, moved to the columns `0, 1, ...`; zeros elsewhere."""
    length = ops.shape(token_ids)[1]
    columns = ops.arange(length, dtype="int32")[None, :]  # [1, T]
    # Distinct keys (a pad column sorts after every real one, each in column order) make the order the
    # same under any sort, stable or not: `ops.argsort` is stable on no backend by contract.
    order = ops.argsort(columns + length * (1 - real), axis=1)  # [B, T]
    valid = columns < ops.sum(real, axis=1)[:, None]  # [B, T]
    return ops.where(valid, ops.take_along_axis(token_ids, ops.cast(order, "int32"), axis=1), 0)


def _forced(token, logits):
    """Logits `[B, V]` that every sampler turns into `token` `[B]`: 0 there, -1e9 elsewhere."""
    return ops.one_hot(token, ops.shape(logits)[1], dtype=logits.dtype) * 1e9 - 1e9


def _first_id_outside(stop_token_ids):
    """The smallest id that is not a stop token."""
    taken = set(stop_token_ids or ())
    return next(i for i in range(len(taken) + 1) if i not in taken)


def _checked_budget(max_length, max_new_tokens):
    """`(max_length, max_new_tokens)` as ints >= 1 or None, at most one of them given."""
    for name, value in (("max_length", max_length), ("max_new_tokens", max_new_tokens)):
        if value is not None and (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
                                  or value < 1):
            raise ValueError(f"XLNetCausalLM.generate: {name} must be an int >= 1 (or None), got {value!r}.")
    if max_length is not None and max_new_tokens is not None:
        raise ValueError(f"XLNetCausalLM.generate: give max_length ({max_length}, each prompt plus its "
                         f"continuation) or max_new_tokens ({max_new_tokens}, the continuation alone), not both.")
    return (None if max_length is None else int(max_length)), (None if max_new_tokens is None
                                                                 else int(max_new_tokens))


def _prompt_batches(inputs):
    """`(batches, input_is_scalar)`: a dataset's elements, or the input as one batch (a lone string as a list)."""
    # A dataset or a TensorFlow string exists only where TensorFlow is already imported: ids never need it.
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(inputs, tf.data.Dataset):
        return inputs.as_numpy_iterator(), False
    if isinstance(inputs, (str, bytes)):
        return [[inputs]], True
    if tf is not None and isinstance(inputs, tf.Tensor) and inputs.dtype == tf.string and inputs.shape.rank == 0:
        return [[inputs.numpy()]], True
    return [inputs], False


def _array(value, what):
    """`value` as a numpy array; a ragged nesting is refused naming `what`."""
    try:
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    except ValueError as error:
        raise ValueError(f"XLNetCausalLM.generate: {what} must be a [batch, length] array with rows of one "
                         f"length: {error}") from None


def _id_prompts(inputs):
    """The `token_ids` (int64) and `padding_mask` (bool) `[B, T]` of an id prompt dict; its structure checked."""
    for key in PROMPT_INPUTS:
        if key not in inputs:
            raise ValueError(f"XLNetCausalLM.generate: an id prompt dict needs 'token_ids' and 'padding_mask' "
                             f"[batch, length] (1 under each prompt token); {key!r} is missing (got keys "
                             f"{sorted(inputs)}).")
    extra = sorted(set(inputs) - set(PROMPT_INPUTS))
    if extra:
        raise ValueError(f"XLNetCausalLM.generate: an id prompt dict has only 'token_ids' and 'padding_mask'; "
                         f"got {extra[0]!r} too (generation sets the segments and positions itself).")
    token_ids, padding_mask = _array(inputs["token_ids"], "token_ids"), _array(inputs["padding_mask"], "padding_mask")
    if token_ids.ndim == 1:  # One prompt.
        token_ids, padding_mask = token_ids[None], padding_mask[None]
    if token_ids.ndim != 2 or padding_mask.shape != token_ids.shape:
        raise ValueError(f"XLNetCausalLM.generate: token_ids and padding_mask must both be [batch, length], got "
                         f"shapes {token_ids.shape} and {padding_mask.shape}.")
    if token_ids.dtype.kind not in "iu":
        raise ValueError(f"XLNetCausalLM.generate: token_ids must be integer ids, got dtype {token_ids.dtype}.")
    if padding_mask.dtype.kind not in "biu" or not np.isin(padding_mask, (0, 1)).all():
        raise ValueError(f"XLNetCausalLM.generate: padding_mask must hold 0 and 1 (or booleans), got dtype "
                         f"{padding_mask.dtype} with values {np.unique(padding_mask)[:5].tolist()}.")
    return token_ids.astype(np.int64), padding_mask.astype(bool)


def _text_prompts(inputs, first_row):
    """The prompts of a batch of strings as a list of `str`/`bytes`; anything else is refused naming the prompt."""
    if isinstance(inputs, (list, tuple)):
        texts = list(inputs)
    else:
        array = _array(inputs, "prompts")
        if array.ndim > 1:
            raise ValueError(f"XLNetCausalLM.generate: string prompts must be a string or a list of strings, got "
                             f"shape {array.shape}.")
        texts = array.reshape(-1).tolist()
    if not texts:
        raise ValueError("XLNetCausalLM.generate: no prompts (an empty batch).")
    for row, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise ValueError(f"XLNetCausalLM.generate: prompt {first_row + row} is of type {type(text).__name__} "
                             f"({text!r:.60}), not a string; with a preprocessor, prompts are strings (ids go in a "
                             "dict of 'token_ids' and 'padding_mask').")
    return texts


def _right_padded(token_ids, padding_mask, width):
    """Each row's prompt tokens from column 0 (keras-hub's layout), int32 `[B, width]`; every prompt fits."""
    out_ids = np.zeros((token_ids.shape[0], width), np.int32)
    out_mask = np.zeros((token_ids.shape[0], width), np.int32)
    for row in range(token_ids.shape[0]):
        tokens = token_ids[row][padding_mask[row]]
        out_ids[row, :len(tokens)] = tokens
        out_mask[row, :len(tokens)] = 1
    return out_ids, out_mask


def _after_prompt(outputs, lengths):
    """The outputs with each row's prompt removed: its continuation from column 0."""
    width = outputs["token_ids"].shape[1]
    source = np.arange(width)[None, :] + np.asarray(lengths)[:, None]  # [B, T]
    inside = source < width
    source = np.minimum(source, width - 1)
    mask = np.take_along_axis(outputs["padding_mask"], source, axis=1) & inside
    return {"token_ids": np.where(mask, np.take_along_axis(outputs["token_ids"], source, axis=1), 0),
            "padding_mask": mask}


def _one_width(outputs):
    """Id outputs of several batches padded to the widest, so that they stack; strings as they are."""
    if not isinstance(outputs[0], dict):
        return outputs
    width = max(out["token_ids"].shape[1] for out in outputs)
    return [{key: np.pad(value, ((0, 0), (0, width - value.shape[1]))) for key, value in out.items()}
            for out in outputs]


def _check_prompts(token_ids, padding_mask, vocabulary_size, longest, too_long, first_row=0, packed_width=None):
    """Refuses a batch of prompts that cannot be continued, naming the prompt; returns each one's length.

    The one check of every prompt `generate` takes (strings once packed, ids,
    each batch of a dataset): a prompt must have a token, at most `longest` of
    them, and only ids in the vocabulary.

    Args:
        token_ids: int `[B, T]`.
        padding_mask: bool `[B, T]`, True under each prompt token.
        vocabulary_size: ids must be in `[0, vocabulary_size)`.
        longest: the most tokens a prompt may have.
        too_long: the end of the message for a longer prompt (what limits it, how to fix it).
        first_row: the number of the batch's first prompt.
        packed_width: the width strings were packed (cut) at: a prompt filling it may have had more tokens.

    Returns:
        int `[B]`, each prompt's number of tokens.
    """
    lengths = padding_mask.sum(axis=1)
    for row, length in enumerate(lengths.tolist()):
        if length == 0:
            raise ValueError(f"XLNetCausalLM.generate: prompt {first_row + row} is empty (no tokens); XLNet needs "
                             "at least one token to condition on.")
        if length > longest:
            count = f"at least {length}" if length == packed_width else str(length)
            raise ValueError(f"XLNetCausalLM.generate: prompt {first_row + row} has {count} tokens{too_long}")
    # Only prompt tokens are read: ids under padding are never looked up, whatever they hold.
    check_token_id_inputs({"token_ids": np.where(padding_mask, token_ids, 0), "padding_mask": padding_mask},
                          vocabulary_size=vocabulary_size, caller="XLNetCausalLM.generate", keys=PROMPT_INPUTS,
                          first_row=first_row)
    return lengths
