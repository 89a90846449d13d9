"""Shared fixtures of the fine-tuning tests."""

import numpy as np
import pytest

from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_backbone import XLNetBackbone

TINY = XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8, hidden_dim=16,
                   intermediate_dim=32)


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A tiny backbone preset (built, with the test vocabulary) to fine-tune from."""
    path = str(tmp_path_factory.mktemp("preset"))
    backbone = XLNetBackbone(TINY)
    ones = np.ones((1, 4), "int32")
    backbone({"token_ids": ones, "segment_ids": ones * 0, "padding_mask": ones})
    backbone.save_to_preset(path, vocabulary_file="tests/testdata/tiny_spiece.model")
    return path
