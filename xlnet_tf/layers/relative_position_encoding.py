"""Sinusoidal relative position encoding of Transformer-XL / XLNet."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="xlnet_tf")
class RelativePositionEncoding(keras.layers.Layer):
    """Sinusoid embeddings of the relative distances between queries and keys.

    For `attention_type="bi"` the distances run `K, K-1, ..., -L+1` (`K = M + L`
    keys, `L` queries); for `"uni"` they run `K, ..., 0`. With `bi_data`, the
    first half of the batch gets those forward distances and the second half
    their negation (a backward stream). Distances are clamped to
    `+-clamp_length` when it is positive. The embedding of distance `p` is
    `concat(sin(p * inv_freq), cos(p * inv_freq))` with
    `inv_freq[k] = 10000^(-2k / hidden_dim)`, computed in float32.

    Args:
        hidden_dim: size of each embedding (must be even).
        attention_type: `"bi"` or `"uni"`.
        bi_data: use forward distances for the first half of the batch and
            backward for the second half.
        clamp_length: clamp distances to `+-clamp_length`; -1 disables it.

    Call arguments:
        query_length: L (int or scalar tensor).
        key_length: K = M + L.
        batch_size: B; needed (and must be even) only with `bi_data`.

    Returns:
        `[B, R, hidden_dim]` with `bi_data`, else `[1, R, hidden_dim]`, where
        R = K + L for `"bi"` and K + 1 for `"uni"`; in the layer's compute dtype.

    Example:
    >>> layer = RelativePositionEncoding(hidden_dim=4)
    >>> tuple(layer(query_length=2, key_length=3).shape)
    (1, 5, 4)
    """

    def __init__(self, hidden_dim, attention_type="bi", bi_data=False, clamp_length=-1, **kwargs):
        super().__init__(**kwargs)
        if hidden_dim % 2:
            raise ValueError(f"RelativePositionEncoding needs an even hidden_dim, got {hidden_dim}.")
        if attention_type not in ("bi", "uni"):
            raise ValueError(f"attention_type must be 'bi' or 'uni', got {attention_type!r}.")
        self.hidden_dim = hidden_dim
        self.attention_type = attention_type
        self.bi_data = bi_data
        self.clamp_length = clamp_length

    def distances(self, query_length, key_length, backward=False):
        """The relative distances, float32 `[R]`; backward ones are negated."""
        if self.attention_type == "bi":
            end = -query_length
        else:
            end = -1
        forward = ops.arange(key_length, end, -1, dtype="float32")
        positions = -forward if backward else forward
        if self.clamp_length > 0:
            positions = ops.clip(positions, -float(self.clamp_length), float(self.clamp_length))
        return positions

    def _sinusoid(self, positions):
        frequency_index = ops.arange(0, self.hidden_dim, 2, dtype="float32")
        inverse_frequency = 1.0 / ops.power(10000.0, frequency_index / self.hidden_dim)
        angles = positions[:, None] * inverse_frequency[None, :]  # [R, H/2]
        return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)  # [R, H]

    def call(self, query_length, key_length, batch_size=None):
        forward = self._sinusoid(self.distances(query_length, key_length))[None]  # [1, R, H]
        if self.bi_data:
            if batch_size is None:
                raise ValueError("RelativePositionEncoding with bi_data needs batch_size.")
            if isinstance(batch_size, int) and batch_size % 2:
                raise ValueError(
                    f"bi_data needs an even (per-replica) batch size, got {batch_size}: the first half "
                    "of the batch reads the forward stream and the second half the backward one.")
            backward = self._sinusoid(self.distances(query_length, key_length, backward=True))[None]
            half = batch_size // 2
            encoding = ops.concatenate(
                [ops.repeat(forward, half, axis=0), ops.repeat(backward, half, axis=0)], axis=0
            )  # [B, R, H]
        else:
            encoding = forward
        return ops.cast(encoding, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_dim=self.hidden_dim, attention_type=self.attention_type,
                      bi_data=self.bi_data, clamp_length=self.clamp_length)
        return config
