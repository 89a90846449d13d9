"""Muon's update of a weight matrix: momentum, orthogonalised by a Newton-Schulz iteration.

Muon (Jordan et al. 2024; Liu et al. 2025, "Muon is scalable for LLM training") replaces
Adam's per-coordinate step on a weight matrix by the nearest semi-orthogonal matrix to
its (Nesterov) momentum: every direction of the matrix moves by the same amount, so
rare directions (a two-word context of a small table, a head's rarely used subspace)
learn as fast as common ones. The step is scaled by `0.2 * sqrt(max(rows, columns))`,
which gives it about the root-mean-square size of an AdamW step, so AdamW's learning
rate and weight decay carry over (Liu et al.'s rule).

XLNet's attention kernels are `[hidden, heads, head_dim]`; they are orthogonalised as the
`[hidden, heads * head_dim]` matrix they multiply by. Written in `keras.ops`: the same
numbers on TensorFlow, JAX and PyTorch.
"""

import math

import keras
from keras import ops

# The quintic iteration's coefficients (Jordan et al.): the steepest slope at 0 whose
# iterates keep every singular value in about [0.7, 1.2] after 5 steps.
NEWTON_SCHULZ_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NEWTON_SCHULZ_STEPS = 5
# The step's root-mean-square over sqrt(max(rows, columns)): AdamW's typical 0.2-0.4 RMS (Liu et al.).
MATCHED_RMS = 0.2


def orthogonalize(matrix, steps=NEWTON_SCHULZ_STEPS):
    """About `U @ V^T` of `matrix = U S V^T`: every singular value pushed towards 1.

    Args:
        matrix: a float 2-D tensor `[rows, columns]` (any backend's tensor, or NumPy).
        steps: Newton-Schulz iterations.

    Returns:
        A tensor of `matrix`'s shape and dtype.

    Example:
    >>> import numpy as np
    >>> matrix = np.random.default_rng(0).standard_normal((6, 3)).astype("float32")
    >>> values = np.linalg.svd(keras.ops.convert_to_numpy(orthogonalize(matrix)), compute_uv=False)
    >>> bool(((values > 0.6) & (values < 1.3)).all())
    True
    """
    a, b, c = NEWTON_SCHULZ_COEFFICIENTS
    matrix = ops.convert_to_tensor(matrix)
    tall = matrix.shape[0] > matrix.shape[1]
    x = ops.transpose(matrix) if tall else matrix  # [short, long]: the Gram matrix is the small one
    # The Frobenius norm bounds the spectral one: every singular value starts in [0, 1].
    x = x / (ops.sqrt(ops.sum(ops.square(x))) + 1e-7)
    for _ in range(steps):
        gram = _gram(x)  # [short, short]
        x = a * x + ops.matmul(b * gram + c * ops.matmul(gram, gram), x)
    return ops.transpose(x) if tall else x


def _gram(x):
    """`x @ x^T`."""
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        # The transposed-operand kernel: TensorFlow's numbers stay those it has always given.
        return tf.matmul(x, x, transpose_b=True)
    return ops.matmul(x, ops.transpose(x))


def muon_update(gradient, momentum, momentum_decay):
    """One Muon step's new momentum and its update (before the learning rate).

    `momentum <- momentum_decay * momentum + gradient`; the update orthogonalises
    the Nesterov direction `gradient + momentum_decay * momentum` as a matrix of
    `[shape[0], rest]` and scales it by `MATCHED_RMS * sqrt(max(rows, columns))`.

    Args:
        gradient: the variable's gradient (2-D, or an attention kernel's 3-D).
        momentum: the current momentum, of the gradient's shape.
        momentum_decay: Muon's momentum coefficient (0.95).

    Returns:
        `(new_momentum, update)`, both of the gradient's shape; the variable then
        moves by `-learning_rate * update`.

    Example:
    >>> gradient = keras.ops.convert_to_tensor([[3.0, 0.0], [0.0, 0.5]])
    >>> _, update = muon_update(gradient, keras.ops.zeros_like(gradient), 0.95)
    >>> # Directions 6x apart in the gradient move alike (RMS-matched: 0.2 * sqrt(2) each).
    >>> [round(float(x), 1) for x in keras.ops.diagonal(update) / 0.2 / 2 ** 0.5]
    [0.7, 1.0]
    """
    new_momentum = momentum_decay * momentum + gradient
    direction = gradient + momentum_decay * new_momentum
    shape = tuple(gradient.shape)
    rows, columns = shape[0], math.prod(shape[1:])
    matrix = ops.reshape(direction, (rows, columns))  # [rows, columns]
    update = orthogonalize(matrix) * (MATCHED_RMS * math.sqrt(max(rows, columns)))
    return new_momentum, ops.reshape(update, shape)  # the gradient's rank again
