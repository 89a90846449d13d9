"""Per-example sampling for the permutation language model (PLM) objective.

Pure TensorFlow functions on one example of static length, usable inside `tf.data.map`
and easy to test on hand-worked inputs. Randomness comes only from stateless ops, so an
example is a function of its seed.

Vocabulary used throughout:
- *masked*: chosen by span sampling for prediction.
- *target*: a masked position that is not a function token (`<sep>`, `<cls>`); it gets a
  loss, a row in `target_mapping`, and is hidden from the positions before it in the
  factorization order.
- *context*: every other position (unmasked tokens and all function tokens); visible to
  every position of its part and blind to every target.
- *order index*: a position's step in the sampled factorization order.
"""

import numpy as np
import tensorflow as tf


def _static_length(tensor, name):
    length = tensor.shape[0]
    if length is None:
        raise ValueError(f"{name} needs a static length, got shape {tensor.shape}.")
    return int(length)


def sample_spans(num_words, num_groups, seed, *, max_span=5, mask_ratio=6):
    """Samples candidate spans of whole words, one per group of `mask_ratio * n` words.

    Span length n (in words) is drawn from 1..max_span with p(n) proportional to 1/n; the
    span sits at a uniform offset inside a group of `mask_ratio * n` words, so about one
    word in `mask_ratio` is covered. Groups are laid end to end from word 0.

    Args:
        num_words: int32 scalar, words in the sequence.
        num_groups: Python int, candidate spans to draw (enough to cover the sequence).
        seed: int32/int64 `[2]` stateless seed.
        max_span: longest span in words.
        mask_ratio: K; a span of n words takes a group of K * n words.

    Returns:
        `(begin, length, valid)`: int32 `[num_groups]` first word and length in words of
        each span, and bool `[num_groups]`, True when the span ends inside the sequence.
    """
    seeds = tf.random.experimental.stateless_split(seed, 2)
    logits = tf.math.log(1.0 / tf.range(1, max_span + 1, dtype=tf.float32))[None, :]  # [1, S]
    length = tf.random.stateless_categorical(logits, num_groups, seeds[0], dtype=tf.int32)[0] + 1
    group = mask_ratio * length
    group_start = tf.cumsum(group, exclusive=True)
    offset = tf.random.stateless_uniform([num_groups], seeds[1])
    offset = tf.cast(tf.floor(offset * tf.cast(group - length + 1, tf.float32)), tf.int32)
    begin = group_start + tf.minimum(offset, group - length)
    valid = begin + length <= num_words
    return begin, length, valid


def span_mask(token_ids, num_predict, seed, *, word_start=None, reverse=False, max_span=5,
              mask_ratio=6, whole_words=False):
    """Chooses `num_predict` positions to predict, as spans of 1..max_span words.

    Spans come from `sample_spans` and are taken in order until `num_predict` tokens are
    covered; the span that crosses the goal is cut to fit (like the original's
    `n = min(n, goal - num_predict)`). If the spans end first, the remainder is topped up
    with single random positions (as the original XLNet topped up to its fixed
    `num_predict`). With `whole_words`, spans are taken in order only while they fit whole
    and nothing is topped up: every target is a piece of a word whose pieces are all
    targets, and `num_predict` is a cap (words of many pieces would otherwise leave many
    targets as single pieces of visible words, a different and easier task).

    Args:
        token_ids: int32 `[L]` with static L.
        num_predict: Python int, `0 <= num_predict <= L`.
        seed: `[2]` stateless seed.
        word_start: optional bool `[V]`, True for pieces that begin a word. None makes
            every token a word (spans of 1..max_span tokens).
        reverse: bool (Python or scalar tensor): the tokens are a reversed stream; words
            are found in reading order by sampling on the re-reversed tokens and flipping
            the mask back.
        max_span: longest span in words.
        mask_ratio: K, about one word in K is covered by spans.
        whole_words: only whole spans, no top-up (at most `num_predict` True).

    Returns:
        bool `[L]`, True at the positions to predict; exactly `num_predict` are True
        (at most, with `whole_words`).
    """
    length = _static_length(token_ids, "token_ids")
    if not 0 <= num_predict <= length:
        raise ValueError(f"num_predict={num_predict} must be in [0, {length}].")
    reverse = tf.convert_to_tensor(reverse, tf.bool)
    tokens = tf.where(reverse, tf.reverse(token_ids, [0]), token_ids)
    if word_start is None:
        starts = tf.ones([length], tf.bool)
    else:
        starts = tf.gather(word_start, tokens)
    starts = tf.concat([[True], starts[1:]], axis=0)
    word_id = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # [L]
    num_words = word_id[-1] + 1
    start_pos = tf.cast(tf.where(starts)[:, 0], tf.int32)
    # Position of word w's first token, with `L` for w == num_words (one past the end).
    start_pos = tf.concat([start_pos, tf.fill([length + 1], length)], axis=0)[: length + 1]

    seeds = tf.random.experimental.stateless_split(seed, 2)
    num_groups = length // mask_ratio + 1
    begin, span, valid = sample_spans(num_words, num_groups, seeds[0], max_span=max_span,
                                      mask_ratio=mask_ratio)
    end = tf.minimum(begin + span, num_words)
    token_begin = tf.gather(start_pos, tf.minimum(begin, num_words))
    token_end = tf.gather(start_pos, end)
    span_tokens = tf.where(valid, token_end - token_begin, 0)
    used_before = tf.cumsum(span_tokens, exclusive=True)
    if whole_words:
        # Spans in order while they fit whole; from the first that would cross the goal, none.
        valid = valid & (used_before + span_tokens <= num_predict)
    else:
        # Spans are taken in order until the goal; the one that crosses it is cut to fit.
        token_end = tf.minimum(token_end, token_begin + tf.maximum(num_predict - used_before, 0))
    position = tf.range(length, dtype=tf.int32)
    in_span = ((position[None, :] >= token_begin[:, None]) & (position[None, :] < token_end[:, None])
               & valid[:, None])  # [G, L]
    mask = tf.reduce_any(in_span, axis=0)

    if whole_words:
        return tf.where(reverse, tf.reverse(mask, [0]), mask)
    remaining = num_predict - tf.reduce_sum(tf.cast(mask, tf.int32))
    score = tf.where(mask, 2.0, tf.random.stateless_uniform([length], seeds[1]))
    rank = tf.argsort(tf.argsort(score, stable=True), stable=True)
    mask = mask | (rank < remaining)
    return tf.where(reverse, tf.reverse(mask, [0]), mask)


def factorization_order(length, perm_size, seed):
    """Samples a factorization order made of consecutive blocks of `perm_size` positions.

    Blocks come one after another in the order; inside each block the positions are
    shuffled independently.

    Args:
        length: Python int, a multiple of `perm_size`.
        perm_size: Python int, block length.
        seed: `[2]` stateless seed.

    Returns:
        int32 `[length]`: the order index (step in the factorization order) of each position.
    """
    if perm_size <= 0 or length % perm_size:
        raise ValueError(f"length={length} must be a positive multiple of perm_size={perm_size}.")
    noise = tf.random.stateless_uniform([length // perm_size, perm_size], seed)
    within = tf.argsort(noise, axis=1, stable=True)  # [blocks, perm_size]
    base = tf.range(0, length, perm_size, dtype=tf.int32)[:, None]
    visit = tf.reshape(within + base, [length])  # position visited at each step
    return tf.argsort(visit, stable=True)  # inverse permutation: step of each position


def span_reading_order(order_index, is_masked, perm_size, reverse=False):
    """Reorders the factorization order inside each masked span so its tokens come in reading order.

    Each run of consecutive masked positions (cut at `perm_size` block boundaries) keeps the
    steps of the order it was given, but hands them out in reading order: its first token
    gets the earliest step, so it is predicted seeing none of its span and every later token
    sees the ones before it. That is the situation of left-to-right scoring and generation
    (a word's pieces by the chain rule); the spans themselves stay in random order and every
    other position keeps its step.

    Args:
        order_index: int32 `[L]`, each position's step (from `factorization_order`).
        is_masked: bool `[L]`, positions chosen for prediction.
        perm_size: Python int, the order's block length; runs never cross a block.
        reverse: bool (Python or scalar tensor): the tokens are a reversed stream, read from
            the last position to the first.

    Returns:
        int32 `[L]`: a permutation of `order_index`, equal to it outside masked runs.

    Example:
    >>> import tensorflow as tf
    >>> from xlnet_tf.data.plm_sampling import span_reading_order
    >>> order = tf.constant([3, 0, 2, 1])
    >>> span_reading_order(order, tf.constant([False, True, True, True]), 4).numpy().tolist()
    [3, 0, 1, 2]
    """
    length = _static_length(order_index, "order_index")
    position = tf.range(length, dtype=tf.int32)
    reverse = tf.convert_to_tensor(reverse, tf.bool)
    reading = tf.where(reverse, length - 1 - position, position)
    previous = tf.concat([[False], is_masked[:-1]], axis=0)
    starts = ~is_masked | ~previous | tf.equal(position % perm_size, 0)
    run = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # [L]: context positions are runs of one
    by_reading = tf.argsort(run * length + reading, stable=True)
    by_step = tf.argsort(run * length + tf.cast(order_index, tf.int32), stable=True)
    return tf.tensor_scatter_nd_update(tf.cast(order_index, tf.int32), by_reading[:, None],
                                       tf.gather(tf.cast(order_index, tf.int32), by_step))


def factorization_masks(token_ids, is_masked, order_index, *, sep_token_id, cls_token_id):
    """Builds the attention mask of one part (reuse part or new part) from an order.

    Args:
        token_ids: int32 `[L]`.
        is_masked: bool `[L]`, positions chosen for prediction.
        order_index: int32 `[L]`, each position's step in the factorization order.
        sep_token_id: id of `<sep>`.
        cls_token_id: id of `<cls>`.

    Returns:
        `(perm_mask, is_target)`: float32 `[L, L]` with 1 where position i may NOT attend
        to position j, and bool `[L]`. A target sees the context and the targets strictly
        before it in the order (not itself: its own token is what it predicts); context
        sees only context. Function tokens are context even when masked.
    """
    is_function = tf.equal(token_ids, sep_token_id) | tf.equal(token_ids, cls_token_id)
    is_target = is_masked & ~is_function
    # Context takes order index -1: before every target, so every position may see it
    # and it may see no target.
    key = tf.where(is_target, order_index, -1)
    # A target may see j only if j comes strictly before it: block j when key_i <= key_j.
    # Context (key -1) is blocked from every target (key >= 0): compare with key_i + 1 = 0.
    query_key = tf.where(is_target, key, key + 1)
    blocked = (query_key[:, None] <= key[None, :]) & is_target[None, :]  # [L, L]
    return tf.cast(blocked, tf.float32), is_target


def pack_targets(token_ids, is_target, num_predict):
    """Gathers the targets, in position order, into `num_predict` padded slots.

    Args:
        token_ids: int32 `[L]`.
        is_target: bool `[L]` with at most `num_predict` True values.
        num_predict: Python int, `num_predict <= L`.

    Returns:
        dict with `target_mapping` float32 `[num_predict, L]` (one-hot rows, zero rows for
        padding), `target_ids` int32 `[num_predict]` (0 for padding) and `target_mask`
        float32 `[num_predict]` (1 for real targets).
    """
    length = _static_length(token_ids, "token_ids")
    if num_predict > length:
        raise ValueError(f"num_predict={num_predict} exceeds the sequence length {length}.")
    count = tf.reduce_sum(tf.cast(is_target, tf.int32))
    check = tf.debugging.assert_less_equal(
        count, num_predict, message="More targets than num_predict slots.")
    with tf.control_dependencies([check]):
        position = tf.range(length, dtype=tf.int32)
        slot = tf.argsort(tf.where(is_target, position, length + position), stable=True)[:num_predict]
    valid = tf.range(num_predict) < count
    mapping = tf.one_hot(slot, length, dtype=tf.float32) * tf.cast(valid, tf.float32)[:, None]  # [P, L]
    return {
        "target_mapping": mapping,
        "target_ids": tf.where(valid, tf.gather(token_ids, slot), 0),
        "target_mask": tf.cast(valid, tf.float32),
    }


_PUNCTUATION = set('!"#$%&\'()*+,-./:;?@[\\]^_`{|}~')


def word_start_table(pieces):
    """Marks the SentencePiece pieces that begin a word: the original XLNet's rule, with the apostrophe.

    The original's `_is_start_piece` counts a piece as a word start when it begins with "\u2581" or "<", or
    is one punctuation character. Its punctuation set spells `\\"` where `'` was meant, so it lacks the
    apostrophe; this table includes it, so a lone `'` piece starts a word here (a deliberate difference,
    listed in `xlnet_tf/data/README.md`).

    Example:

    ```python
    from xlnet_tf.data.plm_sampling import word_start_table

    word_start_table(["\u2581the", "re", "'", "<sep>"])  # [True, False, True, True]
    ```

    Args:
        pieces: list of piece strings, indexed by id.

    Returns:
        numpy bool `[V]`: pieces starting with the word-boundary mark "\u2581", special and
        byte pieces ("<...>"), and single punctuation characters begin a word.
    """
    return np.array([p.startswith("\u2581") or p.startswith("<") or p in _PUNCTUATION
                     for p in pieces], dtype=bool)
