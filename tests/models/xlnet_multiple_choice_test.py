import keras
import numpy as np

from tests.harness import run_layer_test, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

CONFIG = tiny_config()


def _choices(length=12):
    packer = XLNetPacker(length, truncate="keep_second", second_max_length=4)
    context = [11, 12, 13]
    options = [[20, 21], [22], [23, 24, 25], [26]]
    rows = [packer((np.array([context], "int32"), np.array([o], "int32"))) for o in options]
    return {k: np.stack([r[k].numpy()[0] for r in rows])[None] for k in rows[0]}  # [1, 4, L]


def test_one_logit_per_choice_and_permutation_equivariance():
    keras.utils.set_random_seed(0)
    model = XLNetMultipleChoice(XLNetBackbone(CONFIG))
    features = _choices()
    logits = model(features).numpy()
    assert logits.shape == (1, 4)
    order = [2, 0, 3, 1]
    permuted = model({k: v[:, order] for k, v in features.items()}).numpy()
    np.testing.assert_allclose(permuted, logits[:, order], atol=1e-5)
    # Each choice is scored independently of the others in the batch.
    single = model({k: v[:, :1].repeat(2, axis=1) for k, v in features.items()}).numpy()
    np.testing.assert_allclose(single[0, 0], logits[0, 0], atol=1e-5)


def test_config_round_trip():
    model = run_layer_test(XLNetMultipleChoice, dict(backbone=XLNetBackbone(CONFIG), dropout=0.3), _choices(),
                           (1, 4), output_dtype="float32")
    clone = XLNetMultipleChoice.from_config(model.get_config())
    assert clone.get_config() == model.get_config() and clone.dropout == 0.3
