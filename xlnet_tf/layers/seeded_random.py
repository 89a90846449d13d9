"""Counter-based random bits of an explicit `[2]` seed, per Keras backend: `fold_in` and `random_bits`.

Both are pure functions of the seed (no generator state), so a mask drawn
twice from one seed (a resumed run, a rematerialized block, a jitted step
traced once) is the same mask. Each backend uses its own counter-based
generator, so the bits differ between backends; on one backend they are the
same in every run, compiled or not:

- TensorFlow: Philox (`tf.random.stateless_uniform`, `stateless_fold_in`),
  the same bits with and without XLA (`auto_select` on TPUs only).
- JAX: `jax.random` with a threefry key made from the seed; jit-safe.
- PyTorch: a keyed integer hash of the element index (three xorshift-multiply
  rounds with the seed words between them), computed with
  int64 tensor ops on the seed's device: no host round trip, no generator
  object, traceable by `torch.compile`.

Example:
>>> seed = fold_in([1, 2], 7)
>>> bits = random_bits((2, 3), seed)
>>> keras.ops.convert_to_numpy(bits).shape
(2, 3)
"""

import keras
from keras import ops

_MASK32 = 0xFFFFFFFF
# Odd constants that keep the hash's uses apart: the two words of a folded seed, and the bits.
_FOLD_WORDS = (0x9E3779B9, 0x7F4A7C15)
_BITS_DOMAIN = 0x632BE5AB


def fold_in(seed, data):
    """A new `[2]` seed from `seed` and the integer `data`: different data, independent draws.

    On TensorFlow this is `tf.random.experimental.stateless_fold_in`, whose
    result has `data`'s dtype (a Python int folds as int32, an int64 tensor as
    int64) and whose draw depends on it: callers keep the dtypes they fold.

    Args:
        seed: int `[2]` (a tensor, array or list).
        data: an int scalar (Python int or tensor, traced values included).

    Returns:
        int `[2]`: int32/int64 on TensorFlow, uint32 on JAX, int64 holding
        32-bit words on PyTorch.

    Example:
    >>> a, b = fold_in([1, 2], 3), fold_in([1, 2], 4)
    >>> bool((keras.ops.convert_to_numpy(a) != keras.ops.convert_to_numpy(b)).any())
    True
    """
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), data)  # [2]
    if backend == "jax":
        import jax

        key = jax.random.fold_in(_jax_key(seed), _jax_uint32(data))
        return jax.random.key_data(key)  # [2] uint32
    if backend == "torch":
        import torch

        seed = _torch_seed(seed)
        if not isinstance(data, torch.Tensor):
            data = ops.convert_to_tensor(data)
        data = data.to(device=seed.device, dtype=torch.int64) & _MASK32
        words = [_torch_hash(seed[0] ^ word, seed[1], data) for word in _FOLD_WORDS]
        return torch.stack(words)  # [2]
    raise NotImplementedError(f"seeded_random.fold_in: backend {backend!r} is not supported.")


def random_bits(shape, seed):
    """uint32 random bits of `shape`, a pure function of `seed`.

    Args:
        shape: the output shape: a list or tuple (of ints; on TensorFlow also
            scalar tensors) or, on TensorFlow, an int vector.
        seed: int `[2]`.

    Returns:
        uint32, of `shape`.

    Example:
    >>> a = random_bits([4], [5, 6])
    >>> b = random_bits([4], [5, 6])
    >>> bool((keras.ops.convert_to_numpy(a) == keras.ops.convert_to_numpy(b)).all())
    True
    """
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        # Philox is counter-based and TensorFlow's kernel and XLA's expansion of it give the same
        # bits; `auto_select` (which may pick another generator under XLA) is kept on TPUs, where
        # the native generator is the fast one.
        on_tpu = isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy)
        return tf.random.stateless_uniform(shape, seed=seed, minval=None, maxval=None, dtype=tf.uint32,
                                           alg="auto_select" if on_tpu else "philox")
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        return jax.random.bits(_jax_key(seed), _static_shape(shape), jnp.uint32)
    if backend == "torch":
        import torch

        return _torch_random_words(shape, seed).to(torch.uint32)
    raise NotImplementedError(f"seeded_random.random_bits: backend {backend!r} is not supported.")


def random_words(shape, seed):
    """`random_bits` as a tensor that compares and shifts on this backend: uint32, or int64 on PyTorch.

    PyTorch's uint32 tensors have no comparisons or shifts; there the same
    32-bit words are returned as int64 (values in `[0, 2**32)`).

    Args:
        shape, seed: as `random_bits`.

    Returns:
        `[shape]` words equal to `random_bits(shape, seed)`'s.
    """
    if keras.config.backend() == "torch":
        return _torch_random_words(shape, seed)
    return random_bits(shape, seed)


def _static_shape(shape):
    try:
        return tuple(int(size) for size in shape)
    except TypeError as error:
        raise ValueError(f"seeded_random: shape {shape!r} must be known ints on this backend.") from error


def _jax_uint32(value):
    import jax.numpy as jnp

    return jnp.asarray(value).astype(jnp.uint32)


def _jax_key(seed):
    import jax

    seed = _jax_uint32(seed)
    if seed.shape != (2,):
        raise ValueError(f"seeded_random: the seed must have shape [2], got {seed.shape}.")
    return jax.random.wrap_key_data(seed, impl="threefry2x32")


def _torch_seed(seed):
    import torch

    if not isinstance(seed, torch.Tensor):
        seed = ops.convert_to_tensor(seed, "int64")
    if tuple(seed.shape) != (2,):
        raise ValueError(f"seeded_random: the seed must have shape [2], got {tuple(seed.shape)}.")
    return seed.to(torch.int64) & _MASK32  # [2]


def _torch_mix(x):
    """An xorshift-multiply hash of words: a bijection that spreads every input bit over the output.

    The multipliers are odd and below 2**31, so a word times one stays below
    2**63: int64 arithmetic never overflows. Updates are in place (`x` is a
    fresh tensor of the caller's): each op is one pass over the words.
    """
    x ^= x >> 16
    x *= 0x7FEB352D
    x &= _MASK32
    x ^= x >> 15
    x *= 0x2C1B3C6D
    x &= _MASK32
    x ^= x >> 16
    return x


def _torch_hash(key_0, key_1, counter):
    """A word per `counter` word under the key `(key_0, key_1)`: three mixing rounds, the key between them."""
    x = _torch_mix(counter ^ key_0)
    x += key_1
    x &= _MASK32
    x = _torch_mix(x)
    x ^= key_0 ^ _BITS_DOMAIN
    return _torch_mix(x)


def _torch_random_words(shape, seed):
    import torch

    seed = _torch_seed(seed)
    shape = _static_shape(shape)
    size = 1
    for dim in shape:
        size *= dim
    if size > 2 ** 32:
        raise ValueError(f"seeded_random.random_bits: {size} words in shape {shape} exceed the 2**32 counters.")
    counter = torch.arange(size, dtype=torch.int64, device=seed.device)  # [size]
    words = _torch_hash(seed[0], seed[1] ^ _BITS_DOMAIN, counter)  # [size]
    return words.reshape(shape)
