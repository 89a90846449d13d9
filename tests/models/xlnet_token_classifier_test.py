import keras
import numpy as np

from tests.harness import run_layer_test, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

CONFIG = tiny_config()


def test_per_token_logits_do_not_depend_on_padding():
    keras.utils.set_random_seed(0)
    model = XLNetTokenClassifier(XLNetBackbone(CONFIG), num_classes=5)
    ids = np.array([[11, 12, 13, 14]], "int32")
    short = {k: v.numpy() for k, v in XLNetPacker(8)(ids).items()}
    long = {k: v.numpy() for k, v in XLNetPacker(11)(ids).items()}
    a = model(short).numpy()
    b = model(long).numpy()
    assert a.shape == (1, 8, 5) and b.shape == (1, 11, 5)
    np.testing.assert_allclose(a[:, -6:], b[:, -6:], atol=1e-5)


def test_config_round_trip():
    features = {k: v.numpy() for k, v in XLNetPacker(8)(np.array([[11, 12, 13]], "int32")).items()}
    model = run_layer_test(XLNetTokenClassifier, dict(backbone=XLNetBackbone(CONFIG), num_classes=7), features,
                           (1, 8, 7), output_dtype="float32")
    clone = XLNetTokenClassifier.from_config(model.get_config())
    assert clone.get_config() == model.get_config() and clone.num_classes == 7
