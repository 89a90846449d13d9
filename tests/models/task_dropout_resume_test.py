"""Fine-tuning with dropout resumes exactly: every task model's masks follow the optimizer step."""

import keras
import numpy as np
import pytest

from tests.harness import tiny_config
from xlnet_tf.layers.seeded_dropout import micro_batch_counter
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier

CONFIG = tiny_config(dropout=0.1, attention_dropout=0.1)
BATCH, LENGTH, STEPS = 2, 6, 4


def _data(seed=0, examples=BATCH * STEPS):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(9, 40, (examples, LENGTH)).astype("int32")
    token_ids[:, -1] = 3  # <cls> last, as packed
    features = {"token_ids": token_ids,
                "segment_ids": np.repeat([[0, 0, 0, 1, 1, 2]], examples, 0).astype("int32"),
                "padding_mask": np.ones((examples, LENGTH), "int32")}
    return features, rng.integers(0, 2, (examples,)).astype("int32")


def _classifier(run_seed=None):
    keras.utils.set_random_seed(0)
    model = XLNetClassifier(XLNetBackbone(CONFIG), num_classes=2, dropout=0.1)
    if run_seed is not None:
        model.backbone.dropout_run_seed = run_seed
    model.compile(optimizer=keras.optimizers.AdamW(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.build_with_dummy_inputs()
    model.optimizer.build(model.trainable_variables)
    return model


def _fit(model, features, labels):
    model.fit(features, labels, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)


@pytest.mark.large
def test_classifier_saved_and_restored_midway_ends_like_the_uninterrupted_run(tmp_path):
    features, labels = _data()
    reference = _classifier()
    _fit(reference, features, labels)

    half = BATCH * STEPS // 2
    first = _classifier()
    _fit(first, {k: v[:half] for k, v in features.items()}, labels[:half])
    path = str(tmp_path / "midway.weights.h5")
    first.save_weights(path)  # weights and optimizer state, as BackupAndRestore
    resumed = _classifier()
    resumed.load_weights(path)
    assert int(micro_batch_counter(resumed.optimizer).numpy()) == STEPS // 2
    _fit(resumed, {k: v[half:] for k, v in features.items()}, labels[half:])
    for a, b in zip(reference.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    # Dropout does act here: another run seed from the same midway state ends elsewhere.
    other = _classifier(run_seed=99)
    other.load_weights(path)
    _fit(other, {k: v[half:] for k, v in features.items()}, labels[half:])
    assert max(float(np.abs(a - b).max())
               for a, b in zip(reference.get_weights(), other.get_weights())) > 1e-5


def _task_inputs(name):
    features, _ = _data(examples=BATCH)
    if name == "multiple_choice":
        return {k: np.stack([v, v[::-1]], axis=1) for k, v in features.items()}  # [B, 2, L]
    if name == "span_labeler":
        return {**features, "start_positions": np.array([1, 2], "int32")}
    return features


TASKS = {
    "classifier": lambda b: XLNetClassifier(b, num_classes=2, dropout=0.5),
    "token_classifier": lambda b: XLNetTokenClassifier(b, num_classes=3, dropout=0.5),
    "multiple_choice": lambda b: XLNetMultipleChoice(b, dropout=0.5),
    "span_labeler": lambda b: XLNetSpanLabeler(b, dropout=0.5),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_models_draw_their_masks_from_the_optimizer_step(name):
    keras.utils.set_random_seed(0)
    model = TASKS[name](XLNetBackbone(CONFIG))
    inputs = _task_inputs(name)
    inference = keras.tree.map_structure(np.asarray, model(inputs, training=False))
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    model.optimizer.build(model.trainable_variables)

    def outputs():
        return [np.asarray(v) for v in keras.tree.flatten(model(inputs, training=True))]

    step_0 = outputs()
    for a, b in zip(step_0, outputs()):
        np.testing.assert_array_equal(a, b)
    micro_batch_counter(model.optimizer).assign(1)
    step_1 = outputs()
    assert max(float(np.abs(a - b).max()) for a, b in zip(step_0, step_1)) > 1e-4
    # Inference never drops anything, optimizer or not.
    for a, b in zip(keras.tree.flatten(inference),
                    keras.tree.flatten(model(inputs, training=False))):
        np.testing.assert_array_equal(a, np.asarray(b))
