"""The `generate` serving signature: prompts (strings) in, continuations (strings) out.

`xlnet-tf export` adds it to the SavedModel of a pretraining run or a preset
whenever the vocabulary is known (`export_pretrained.export_pretrainer`);
`xlnet-tf generate --model EXPORT "prompt"` calls it.
"""

import tensorflow as tf

from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID, SPECIAL_PIECES
from xlnet_tf.models.xlnet_causal_lm import DEFAULT_STOP_TOKEN_IDS

# The prompt window and the longest continuation of an exported `generate` signature, unless a
# generation preset sets them (`sequence_length`, `max_new_tokens` in its `preprocessing.json`).
DEFAULT_PROMPT_LENGTH = 128
DEFAULT_MAX_NEW_TOKENS = 64
SIGNATURE_NAME = "generate"


class GenerationModule(tf.Module):
    """A `tf.Module` holding `XLNetCausalLM`'s loop and the tokenizer, for the `generate` signature.

    The loop runs at a static length, `prompt_length + max_new_tokens_limit`
    columns, and stops each row at `<eod>` / `<eop>` or after its
    `max_new_tokens`: the signature's outputs are those of
    `XLNetCausalLM.generate(prompts, max_new_tokens=max_new_tokens,
    strip_prompt=True)` in the same mode, each row as alone.

    Bad requests are refused with an `InvalidArgumentError` naming the input
    (and the first bad row, counted from 0): a `prompt` that is not a vector,
    an empty prompt (no tokens: an empty or blank string), a prompt of more
    than `prompt_length` tokens, `max_new_tokens` not a scalar, below 1 or
    above `max_new_tokens_limit`. Bytes that are not UTF-8 are replaced with
    U+FFFD by the tokenizer, as on every path.

    Args:
        causal_lm: an `XLNetCausalLM` (its mode and sampler are exported).
        tokenizer: its `XLNetTokenizer`.
        prompt_length: the longest prompt, in tokens.
        max_new_tokens_limit: the largest `max_new_tokens`.

    Call arguments:
        prompt: `tf.string` `[B]`.
        max_new_tokens: int32 scalar.

    Returns:
        `{"continuation": tf.string [B]}`.

    Example:

    ```python
    import tensorflow as tf
    from xlnet_tf.serving.generation_signature import GenerationModule
    module = GenerationModule(causal_lm, causal_lm.preprocessor.tokenizer)
    module.generate(tf.constant(["The river"]), tf.constant(8))["continuation"]
    ```
    """

    def __init__(self, causal_lm, tokenizer, prompt_length=DEFAULT_PROMPT_LENGTH,
                 max_new_tokens_limit=DEFAULT_MAX_NEW_TOKENS, name=None):
        super().__init__(name=name)
        self.causal_lm = causal_lm
        self.tokenizer = tokenizer
        self.prompt_length = int(prompt_length)
        self.max_new_tokens_limit = int(max_new_tokens_limit)
        self.generate = tf.function(self._generate, input_signature=[
            tf.TensorSpec([None], tf.string, name="prompt"),
            tf.TensorSpec([], tf.int32, name="max_new_tokens")])

    def _tokenize(self, prompt):
        ids = self.tokenizer.tokenize(prompt)  # [B, None]
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        return tf.cast(ids, tf.int32)

    def _prompt_checks(self, lengths):
        """Refuses an empty prompt and one longer than the window, naming the first such row (from 0)."""
        rows = tf.range(tf.size(lengths))

        def first(bad):  # the first bad row (any number when none is bad), and its length
            row = tf.cast(tf.reduce_min(tf.where(bad)[:, 0]), tf.int32)
            return row, tf.reduce_sum(tf.where(tf.equal(rows, row), lengths, 0))

        empty, _ = first(tf.equal(lengths, 0))
        long, long_length = first(lengths > self.prompt_length)
        return [
            tf.debugging.Assert(tf.reduce_all(lengths > 0), [
                "prompt must not be empty: prompt", empty, "has no tokens"]),
            tf.debugging.Assert(tf.reduce_all(lengths <= self.prompt_length), [
                f"prompt is longer than the window of {self.prompt_length} tokens: prompt", long, "has",
                long_length, "tokens"]),
        ]

    def _generate(self, prompt, max_new_tokens):
        limit = self.max_new_tokens_limit
        checks = [
            tf.debugging.assert_rank(prompt, 1, message="prompt must be a vector of strings [batch]"),
            tf.debugging.assert_rank(max_new_tokens, 0, message="max_new_tokens must be a scalar"),
            tf.debugging.Assert(tf.logical_and(max_new_tokens >= 1, max_new_tokens <= limit), [
                f"max_new_tokens must be in [1, {limit}] (the exported limit), got", max_new_tokens]),
        ]
        with tf.control_dependencies(checks):
            ids = self._tokenize(prompt)
        lengths = tf.cast(ids.row_lengths(), tf.int32)  # [B]
        with tf.control_dependencies(self._prompt_checks(lengths)):
            total = self.prompt_length + self.max_new_tokens_limit
            token_ids = ids.to_tensor(default_value=PAD_TOKEN_ID, shape=[None, total])  # [B, T]
        padding_mask = tf.sequence_mask(lengths, total, dtype=tf.int32)
        out = self.causal_lm.generate_step(
            {"token_ids": token_ids, "padding_mask": padding_mask, "max_new_tokens": max_new_tokens},
            stop_token_ids=DEFAULT_STOP_TOKEN_IDS)
        columns = tf.range(total)[None, :]
        continuation = tf.logical_and(tf.cast(out["padding_mask"], tf.bool), columns >= lengths[:, None])
        continuation = tf.logical_and(continuation, out["token_ids"] >= len(SPECIAL_PIECES))
        pieces = tf.ragged.boolean_mask(out["token_ids"], continuation)  # [B, None]
        text = self.tokenizer.detokenize(pieces)
        return {"continuation": tf.reshape(text, [-1])}
