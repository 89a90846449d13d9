"""XLNet's word embedding: a table read in its own dtype, with one gradient on every backend."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="xlnet_tf")
class Embedding(keras.layers.Embedding):
    """Keras' `Embedding` whose table is never autocast and whose gradient is the same on every backend.

    The table is a variable with `autocast=False`: wherever it is read (the
    lookup, and the LM head tied to it: `tied_lm_logits`) it keeps its own
    dtype, float32 under `mixed_bfloat16`, also inside a bfloat16 layer's call.
    Casting the `[V, H]` table to bfloat16 and its `[V, H]` gradient back costs
    more than the P prediction rows' bfloat16 matmul saves, and the logits over
    the vocabulary are more accurate. The lookup's output is in the compute dtype.

    TensorFlow differentiates a lookup into `IndexedSlices`, one row per token,
    the rows of a repeated token unsummed, and Keras' TensorFlow optimizers take
    the rows as they come: Adam's second moment sums the squares of a token's
    rows where it should square their sum (a token seen 3 times can move by
    sqrt(3) times the learning rate on the first step), and a global-norm clip
    and the sum over replicas (which gathers the rows) see them apart too. JAX
    and PyTorch hand the optimizer the dense `[V, H]` sum. On TensorFlow the
    lookup's gradient here is that dense sum as well, so an optimizer step is
    the same on every backend. `sparse_gradient = True` keeps TensorFlow's rows
    for a caller that sums them itself (the pretrainer's train step adds them
    in place into its own dense gradient of the tied table).

    Named `Embedding` as Keras' class is: a model's weights file names each layer
    it lists by its class name (`layers/embedding/vars/0`), so files saved with
    `keras.layers.Embedding` load into this layer and back.

    Args:
        input_dim: vocabulary size V.
        output_dim: hidden size H.
        **kwargs: the other arguments of `keras.layers.Embedding`.

    Call arguments:
        inputs: int token ids, any shape.

    Returns:
        `inputs.shape + [H]`, in the compute dtype.

    Example:
    >>> import numpy as np
    >>> embedding = Embedding(10, 4, dtype="mixed_bfloat16")
    >>> vectors = embedding(np.array([[1, 1, 2]], "int32"))
    >>> table = ops.convert_to_tensor(embedding.embeddings)  # in a bfloat16 layer's call too
    >>> dtype = keras.backend.standardize_dtype
    >>> tuple(vectors.shape), dtype(vectors.dtype), dtype(table.dtype)
    ((1, 3, 4), 'bfloat16', 'float32')
    """

    def __init__(self, input_dim, output_dim, **kwargs):
        super().__init__(input_dim, output_dim, **kwargs)
        self.sparse_gradient = False

    def add_weight(self, *args, **kwargs):
        # Every weight of the layer (the table; LoRA's factors) is read in its own dtype.
        kwargs.setdefault("autocast", False)
        return super().add_weight(*args, **kwargs)

    def call(self, inputs):
        if keras.config.backend() != "tensorflow" or self.sparse_gradient:
            return super().call(inputs)
        token_ids = ops.cast(inputs, "int32")
        vectors = _take_with_dense_gradient(ops.convert_to_tensor(self.embeddings), token_ids)  # [..., H]
        return ops.cast(vectors, self.compute_dtype)


def _take_with_dense_gradient(table, token_ids):
    """`table[token_ids]` on TensorFlow, whose gradient to `table` is the dense `[V, H]` sum of the rows."""
    import tensorflow as tf  # TensorFlow's branch: its gradient representation

    table = tf.convert_to_tensor(table)  # the read, outside the function: a variable there needs `variables`

    @tf.custom_gradient
    def take(table):
        def gradient(upstream):  # [..., H] -> [V, H]
            return tf.math.unsorted_segment_sum(upstream, token_ids, tf.shape(table)[0])

        return tf.gather(table, token_ids), gradient  # [..., H]

    return take(table)
