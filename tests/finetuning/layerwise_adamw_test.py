import keras
import numpy as np

from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.optimizers.layerwise_adamw import LayerwiseAdamW, layer_decay_multipliers
from xlnet_tf.models.xlnet_backbone import XLNetBackbone


def test_block_updates_shrink_by_the_decay_per_layer_below_the_top():
    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=20, num_layers=3, num_heads=2, head_dim=4,
                                         hidden_dim=8, intermediate_dim=16))
    ones = np.ones((1, 4), "int32")
    backbone({"token_ids": ones, "segment_ids": ones * 0, "padding_mask": ones})
    optimizer = LayerwiseAdamW(layer_decay_multipliers(backbone, 0.5), learning_rate=1e-2,
                               epsilon=1e-12, weight_decay=0.0)
    variables = backbone.trainable_variables
    before = [v.numpy().copy() for v in variables]
    # Adam's first step moves every weight by lr * sign(gradient), times its multiplier.
    optimizer.apply([keras.ops.ones_like(v) for v in variables], variables)
    steps = {v.path: float(np.abs(v.numpy() - b).max()) for v, b in zip(variables, before)}
    for i, block in enumerate(backbone.blocks):
        for variable in block.trainable_variables:
            np.testing.assert_allclose(steps[variable.path], 1e-2 * 0.5 ** (2 - i), rtol=1e-4)
            assert optimizer.learning_rate_multiplier(variable) == 0.5 ** (2 - i)
    np.testing.assert_allclose(steps[backbone.token_embedding.embeddings.path], 1e-2, rtol=1e-4)
    assert layer_decay_multipliers(backbone, 1.0) == []


def _traced_apply(optimizer, variables):
    """`optimizer.apply` on `variables` as one traced function, the way `fit` runs it."""
    import tensorflow as tf

    return tf.function(lambda gradients: optimizer.apply(gradients, variables))


def _dense_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Embedding(10, 4),
                              keras.layers.Flatten(), keras.layers.Dense(2)])
    return model


def test_fused_update_equals_keras_update_with_multipliers_and_decay():
    import tensorflow as tf

    results = []
    for fused in (True, False):
        model = _dense_model()
        dense = model.layers[-1]
        optimizer = LayerwiseAdamW([(dense.trainable_variables, 0.25)], fused=fused,
                                   learning_rate=0.05, weight_decay=0.1, global_clipnorm=0.5)
        optimizer.exclude_from_weight_decay(var_list=[dense.bias])
        variables = model.trainable_variables
        optimizer.build(variables)
        rng = np.random.default_rng(0)
        step = _traced_apply(optimizer, variables)
        for _ in range(3):
            step([tf.constant(rng.standard_normal(v.shape).astype("float32") * 3) for v in variables])
        results.append([v.numpy() for v in variables])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_keras_file_keeps_the_layer_wise_decay(tmp_path):
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier

    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=20, num_layers=2, num_heads=2, head_dim=4,
                                         hidden_dim=8, intermediate_dim=16))
    model = XLNetClassifier(backbone, num_classes=2)
    optimizer = LayerwiseAdamW(layer_decay_multipliers(model.backbone, 0.5), learning_rate=1e-3)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    optimizer.build(model.trainable_variables)
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    restored = keras.saving.load_model(path)  # No custom_objects: the class is registered.
    assert isinstance(restored.optimizer, LayerwiseAdamW)
    for block, restored_block in zip(model.backbone.blocks, restored.backbone.blocks):
        for variable, restored_variable in zip(block.trainable_variables,
                                               restored_block.trainable_variables):
            assert (restored.optimizer.learning_rate_multiplier(restored_variable)
                    == optimizer.learning_rate_multiplier(variable))
    embedding = restored.backbone.token_embedding.embeddings
    assert restored.optimizer.learning_rate_multiplier(embedding) == 1.0
    assert {0.5, 1.0} == set(restored.optimizer.get_config()["multipliers_by_path"].values())
