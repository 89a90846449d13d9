"""`XLNetBackbone.from_preset` from a preset already read, and with a whole `config` to build."""

import numpy as np
import pytest

from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.storage import preset_io

TINY = XLNetConfig(vocabulary_size=40, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8, intermediate_dim=16,
                   memory_length=6, reuse_length=3, bi_data=True)
IDS = {"token_ids": np.array([[5, 6, 7, 3], [8, 9, 10, 3]], "int32"), "segment_ids": np.zeros((2, 4), "int32"),
       "padding_mask": np.ones((2, 4), "int32")}  # a batch of two: bi_data splits it


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("backbone"))
    backbone = XLNetBackbone(TINY)
    backbone(IDS)
    backbone.save_to_preset(path)
    return path, backbone


def test_contents_and_a_whole_config_build_the_preset_weights_with_those_settings(saved):
    path, original = saved
    contents = preset_io.read_preset(path)
    config, adjustments = XLNetConfig.from_dict(contents.backbone_config).for_finetuning({"dropout": 0.0})
    backbone = XLNetBackbone.from_preset(contents, config=config)
    assert backbone.config == config
    assert (backbone.config.dropout, backbone.config.memory_length, backbone.config.bi_data) == (0.0, 0, False)
    assert adjustments == {"bi_data": {"preset": True, "finetune": False},
                           "memory_length": {"preset": 6, "finetune": 0},
                           "reuse_length": {"preset": 3, "finetune": 0}}
    for expected, actual in zip(original.get_weights(), backbone.get_weights()):
        np.testing.assert_array_equal(actual, expected)
    # The same as from the directory with the same fields as overrides.
    again = XLNetBackbone.from_preset(path, dropout=0.0, memory_length=0, reuse_length=0, bi_data=False)
    assert again.config == config
    np.testing.assert_array_equal(again(IDS)["sequence_output"], backbone(IDS)["sequence_output"])


def test_a_config_of_other_weight_shapes_is_refused_only_when_loading_weights(saved):
    path, _ = saved
    wider = TINY.replace(hidden_dim=12, intermediate_dim=24)
    with pytest.raises(ValueError, match=r"cannot override \['hidden_dim', 'intermediate_dim'\]"):
        XLNetBackbone.from_preset(path, config=wider)
    fresh = XLNetBackbone.from_preset(path, config=wider, load_weights=False)
    assert fresh.config.hidden_dim == 12


def test_preset_contents_reads_once_and_hands_read_contents_back(saved):
    path, _ = saved
    contents = preset_io.preset_contents(path)
    assert preset_io.preset_contents(contents) is contents
    assert not contents.is_task_preset and contents.backbone_config["hidden_dim"] == 8
    with pytest.raises(FileNotFoundError, match="not a task preset"):
        preset_io.preset_contents(contents, require_task=True)
