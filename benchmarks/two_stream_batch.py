"""`two_stream_batch`: the pretraining-style batch that the backbone and pretraining benchmarks feed both sides."""

PREDICTIONS_PER_512 = 85  # num_predict of the released XLNet models at seq 512.


def two_stream_batch(batch, length, vocabulary_size, seed=0):
    """Identical numpy inputs for our model and PyTorch's: a random factorization order per row.

    `round(85 * length / 512)` distinct target positions per row (the released
    models' ratio), a random permutation over all positions: targets see the
    context and the targets before them in the permutation, context never sees
    a target. Segment 0 for the first half, 1 for the second; no padding.

    Args:
        batch: rows.
        length: sequence length `L`.
        vocabulary_size: token ids are drawn from `[10, vocabulary_size)` (no special ids).
        seed: seed of numpy's generator; the same seed gives the same batch.

    Returns:
        A dict of numpy arrays: `token_ids`, `segment_ids`, `padding_mask` int32 `[B, L]`,
        `perm_mask` float32 `[B, L, L]` (1 = row i may not see j), `target_mapping`
        float32 `[B, P, L]` and `targets` int32 `[B, P]` (the target tokens).

    Example:
    >>> data = two_stream_batch(2, 128, 32000)
    >>> data["target_mapping"].shape
    (2, 21, 128)
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    num_predict = max(1, round(PREDICTIONS_PER_512 * length / 512))
    token_ids = rng.integers(10, vocabulary_size, size=(batch, length)).astype(np.int32)
    segment_ids = np.zeros((batch, length), np.int32)
    segment_ids[:, length // 2:] = 1
    perm_mask = np.zeros((batch, length, length), np.float32)
    target_mapping = np.zeros((batch, num_predict, length), np.float32)
    targets = np.zeros((batch, num_predict), np.int32)
    for b in range(batch):
        positions = rng.choice(length, num_predict, replace=False)
        rank = np.empty(length, np.int64)
        rank[rng.permutation(length)] = np.arange(length)
        is_target = np.zeros(length, bool)
        is_target[positions] = True
        # Targets see context and earlier targets; context never sees targets.
        perm_mask[b] = is_target[None, :] & (~is_target[:, None] | (rank[None, :] >= rank[:, None]))
        target_mapping[b, np.arange(num_predict), positions] = 1.0
        targets[b] = token_ids[b, positions]
    return dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=np.ones((batch, length), np.int32),
                perm_mask=perm_mask, target_mapping=target_mapping, targets=targets)
