import keras
import numpy as np
import pytest

from tests.harness import run_layer_test, run_preset_test, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_task import cls_positions, load_task_preset
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

CONFIG = tiny_config()


def _features(length, pieces=((11, 12, 13), (21, 22))):
    packed = XLNetPacker(length)(tuple(np.array([p], "int32") for p in pieces))
    return {k: v.numpy() for k, v in packed.items()}


def test_cls_positions_follow_the_cls_token_not_the_padding_side():
    token_ids = np.array([[5, 5, 11, 4, 3],    # left padded
                          [11, 4, 3, 5, 5],    # right padded
                          [11, 12, 13, 4, 9]], "int32")  # no <cls>: last real token
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], "int32")
    assert cls_positions(token_ids, mask).numpy().tolist() == [4, 2, 3]


def test_output_shape_and_regression_head():
    features = _features(8)
    assert tuple(XLNetClassifier(XLNetBackbone(CONFIG), num_classes=3)(features).shape) == (1, 3)
    regression = XLNetClassifier(XLNetBackbone(CONFIG), num_classes=1)(features)
    assert tuple(regression.shape) == (1, 1) and regression.dtype == "float32"


def test_padding_length_and_side_do_not_change_the_prediction():
    keras.utils.set_random_seed(0)
    model = XLNetClassifier(XLNetBackbone(CONFIG), num_classes=3)
    short = model(_features(8)).numpy()
    long = model(_features(14)).numpy()
    np.testing.assert_allclose(short, long, atol=1e-5)
    # The same row right-padded: <cls> is found where it is.
    features = _features(14)
    real = features["padding_mask"][0].astype(bool)
    right = {k: np.concatenate([v[:, real], v[:, ~real]], axis=1) for k, v in features.items()}
    np.testing.assert_allclose(model(right).numpy(), short, atol=1e-5)


def test_get_config_round_trip_and_task_preset(tmp_path):
    keras.utils.set_random_seed(1)
    features = _features(8)
    # Logits stay float32 under mixed precision.
    model = run_layer_test(XLNetClassifier, dict(backbone=XLNetBackbone(CONFIG), num_classes=2, dropout=0.2),
                           features, (1, 2), output_dtype="float32")
    expected = model(features).numpy()

    run_preset_test(XLNetClassifier, str(tmp_path / "task"), features, model=model)
    restored = load_task_preset(str(tmp_path / "task"))
    assert isinstance(restored, XLNetClassifier) and restored.dropout == 0.2
    np.testing.assert_allclose(restored(features).numpy(), expected, atol=1e-6)
    assert XLNetClassifier.from_preset(str(tmp_path / "task")).num_classes == 2


def test_from_backbone_preset_loads_backbone_weights(tmp_path):
    backbone = XLNetBackbone(CONFIG)
    backbone(_features(8))
    backbone.save_to_preset(str(tmp_path / "bb"))
    model = XLNetClassifier.from_preset(str(tmp_path / "bb"), num_classes=4)
    np.testing.assert_array_equal(model.backbone.token_embedding.embeddings.numpy(),
                                  backbone.token_embedding.embeddings.numpy())
    assert tuple(model(_features(8)).shape) == (1, 4)
    with pytest.raises(FileNotFoundError, match="not a preset"):
        XLNetClassifier.from_preset(str(tmp_path))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_classes"):
        XLNetClassifier(XLNetBackbone(CONFIG), num_classes=0)
    with pytest.raises(ValueError, match="padding_mask"):
        XLNetClassifier(XLNetBackbone(CONFIG))({"token_ids": np.ones((1, 4), "int32"),
                                                "segment_ids": np.ones((1, 4), "int32")})
