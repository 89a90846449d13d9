"""`check_pretraining_sizes`: the size rules of the pretraining reader, without TensorFlow.

One function shared by `pretraining_dataset` and the run config, so a config the
reader would refuse is refused before a run writes anything.
"""

import numbers

_NOT_GIVEN = object()

DEFAULT_NAMES = {"sequence_length": "sequence_length", "reuse_length": "reuse_length",
                 "num_predict": "num_predict", "perm_size": "perm_size",
                 "batch_size": "batch_size", "bi_data": "bi_data"}


def _integer(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int >= {minimum}, got {type(value).__name__} {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}.")
    return int(value)


def check_pretraining_sizes(*, sequence_length, reuse_length, num_predict, perm_size,
                            batch_size=_NOT_GIVEN, bi_data=False, names=None):
    """Raises `ValueError` naming the argument when the reader cannot use these sizes.

    Rules: every size is an int (not None or bool); `sequence_length` exceeds
    `reuse_length` by at least 5 (A and B of one token each, two `<sep>`, one
    `<cls>`); `perm_size` divides both `reuse_length` (when > 0) and
    `sequence_length - reuse_length`; `1 <= num_predict <= sequence_length` and the share
    of `num_predict` placed in the reuse part fits in it; with `bi_data` the
    batch (when given) is even.

    Args:
        sequence_length, reuse_length, num_predict, perm_size: as `pretraining_dataset`.
        batch_size: optional int, the (per-replica or global) batch to check
            against `bi_data`; not checked when left out (None is an error).
        bi_data: bool.
        names: optional dict mapping each argument name to the name used in
            messages (e.g. `{"sequence_length": "data.sequence_length"}`).

    Returns:
        None.

    Example:
    >>> from xlnet_tf.data.check_pretraining_sizes import check_pretraining_sizes
    >>> check_pretraining_sizes(sequence_length=512, reuse_length=256, num_predict=85, perm_size=256)
    """
    n = {**DEFAULT_NAMES, **(names or {})}
    sequence_length = _integer(n["sequence_length"], sequence_length, 1)
    reuse_length = _integer(n["reuse_length"], reuse_length, 0)
    num_predict = _integer(n["num_predict"], num_predict, 1)
    perm_size = _integer(n["perm_size"], perm_size, 1)
    if not isinstance(bi_data, (bool, numbers.Integral)):
        raise ValueError(f"{n['bi_data']} must be a bool, got {type(bi_data).__name__} {bi_data!r}.")
    if sequence_length - reuse_length - 3 < 2:
        raise ValueError(
            f"{n['sequence_length']}={sequence_length} must exceed {n['reuse_length']}={reuse_length} by at "
            f"least 5 (A and B of at least one token each, two <sep> and one <cls>).")
    for label, part in ((n["reuse_length"], reuse_length),
                        (f"{n['sequence_length']} - {n['reuse_length']}", sequence_length - reuse_length)):
        if part and part % perm_size:
            raise ValueError(f"{n['perm_size']}={perm_size} must divide {label}={part} "
                             f"(the permutation is sampled in blocks of perm_size).")
    if num_predict > sequence_length:
        raise ValueError(f"{n['num_predict']}={num_predict} must be in [1, {n['sequence_length']}="
                         f"{sequence_length}].")
    predict_reuse = num_predict - num_predict * (sequence_length - reuse_length) // sequence_length
    if predict_reuse > reuse_length:
        raise ValueError(f"{n['num_predict']}={num_predict} puts {predict_reuse} targets in a reuse "
                         f"part of {reuse_length} tokens ({n['reuse_length']}).")
    if batch_size is not _NOT_GIVEN:
        batch_size = _integer(n["batch_size"], batch_size, 1)
        if bi_data and batch_size % 2:
            raise ValueError(f"{n['bi_data']} needs an even per-replica batch (forward half, backward half), "
                             f"got {n['batch_size']}={batch_size}.")
