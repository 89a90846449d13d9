"""`pretraining_dataset` argument checks: clear errors naming the argument, before any file is read."""

import pytest

from xlnet_tf.data.pretraining import pretraining_dataset, pretraining_steps_per_epoch
from xlnet_tf.data.check_pretraining_sizes import check_pretraining_sizes

GOOD = dict(sequence_length=16, reuse_length=8, num_predict=4, perm_size=8, batch_size=2, bi_data=False, seed=0)


@pytest.mark.parametrize("overrides, message", [
    ({"num_predict": None}, "num_predict must be an int >= 1, got NoneType None"),
    ({"sequence_length": "512"}, "sequence_length must be an int >= 1, got str '512'"),
    ({"perm_size": 0}, "perm_size must be an int >= 1, got 0"),
    ({"reuse_length": -1}, "reuse_length must be an int >= 0, got -1"),
    ({"batch_size": True}, "batch_size must be an int >= 1, got bool True"),
    ({"perm_size": 3}, "perm_size=3 must divide reuse_length=8"),
    ({"reuse_length": 12}, "sequence_length=16 must exceed reuse_length=12 by at least 5"),
    ({"num_predict": 17}, "num_predict=17 must be in [1, sequence_length=16]"),
    ({"reuse_length": 0, "num_predict": 4, "perm_size": 16, "sequence_length": 16, "bi_data": True,
      "batch_size": 3}, "bi_data needs an even per-replica batch"),
    ({"seed": None}, "seed must be an int, got NoneType None"),
    ({"num_epochs": 0}, "num_epochs must be None (repeat forever) or an int >= 1, got 0"),
])
def test_bad_arguments_are_named_before_the_files_are_opened(overrides, message):
    with pytest.raises(ValueError) as error:
        pretraining_dataset("/nonexistent/records", **{**GOOD, **overrides})
    assert message in str(error.value)


def test_steps_per_epoch_checks_its_arguments_too():
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got NoneType None"):
        pretraining_steps_per_epoch("/nonexistent/records", sequence_length=16, reuse_length=8,
                                    batch_size=None, bi_data=False)


def test_names_are_those_of_the_caller():
    with pytest.raises(ValueError, match=r"data.perm_size=3 must divide model.reuse_length=8"):
        check_pretraining_sizes(sequence_length=16, reuse_length=8, num_predict=4, perm_size=3,
                                names={"perm_size": "data.perm_size", "reuse_length": "model.reuse_length"})
    # The paper's sizes pass.
    check_pretraining_sizes(sequence_length=512, reuse_length=256, num_predict=85, perm_size=256,
                            batch_size=16, bi_data=True)
