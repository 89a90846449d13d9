import keras
import numpy as np

from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

CONFIG = XLNetConfig(vocabulary_size=40, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8,
                     intermediate_dim=16, dropout=0.0, attention_dropout=0.0)


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
    model = XLNetTokenClassifier(XLNetBackbone(CONFIG), num_classes=7)
    clone = XLNetTokenClassifier.from_config(model.get_config())
    assert clone.get_config() == model.get_config() and clone.num_classes == 7
