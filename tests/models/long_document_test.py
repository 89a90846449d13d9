"""Task models on long documents `[B, S, L]` (multiple choice `[B, C, S, L]`) read with recurrence
memory: equivalences with the single window and with a Python loop, fit/predict/saving, and a
synthetic task that only memory reaching the first segment can solve."""

import keras
import numpy as np
import pytest

from tests.harness import FIRST_PLAIN_ID, run_model_saving_test, tiny_config
from xlnet_tf.models.segment_recurrence import split_into_segments
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

L = 8


def _packed(pieces_per_row, num_segments, seed=0):
    """Rows of random pieces packed as one window of S * L (`A <sep> <cls>`, left padding), as `[B, S, L]`."""
    rng = np.random.default_rng(seed)
    rows = [rng.integers(FIRST_PLAIN_ID, 40, n).astype("int32") for n in pieces_per_row]
    packer = XLNetPacker(num_segments * L)
    packed = [packer(np.array([row])) for row in rows]
    flat = {k: np.concatenate([p[k].numpy() for p in packed]) for k in packed[0]}
    return {k: v.numpy() for k, v in split_into_segments(flat, L).items()}


def _classifier(memory_length=3 * L, seed=0, **config):
    keras.utils.set_random_seed(seed)
    backbone = XLNetBackbone(tiny_config(memory_length=memory_length, **config))
    return XLNetClassifier(backbone, num_classes=3, compile=False)


def _loop_summary(model, features):
    """The reference: the backbone segment by segment with growing `mems`, then the summary
    projection of the last segment's `<cls>` (at L - 1)."""
    mems = None
    for index in range(features["token_ids"].shape[1]):
        segment = {k: v[:, index] for k, v in features.items()}
        outputs = model.backbone(segment if mems is None else dict(segment, mems=mems))
        mems = outputs.get("new_mems")
    return model.summary_projection(outputs["sequence_output"][:, -1])


def test_one_segment_is_the_single_window():
    model = _classifier()
    window = _packed([5, 6], 1)
    single = {k: v[:, 0] for k, v in window.items()}  # [B, L]
    expected = model(single).numpy()
    np.testing.assert_array_equal(model(window).numpy(), expected)  # S=1 rank 3: today's path
    padded = _packed([5, 6], 4)  # the same pieces under S=4: 3 padding segments first
    np.testing.assert_array_equal(padded["token_ids"][:, -1], single["token_ids"])
    np.testing.assert_allclose(model(padded).numpy(), expected, atol=1e-5)


def test_long_document_equals_a_python_loop_and_ignores_padding_segments():
    model = _classifier(reuse_length=0)
    full = _packed([30, 30], 4, seed=1)  # no padding: the loop needs no memory mask
    expected = model.logits_dense(_loop_summary(model, full)).numpy()
    np.testing.assert_allclose(model(full).numpy(), expected, atol=1e-5)
    features = _packed([29, 17, 9], 4, seed=1)  # 4, 3 and 2 real segments
    logits = model(features).numpy()
    more_padding = _packed([29, 17, 9], 6, seed=1)
    np.testing.assert_allclose(model(more_padding).numpy(), logits, atol=1e-5)
    # Memory off: only the last segment counts.
    no_memory = _classifier(memory_length=0)
    last = {k: v[:, -1] for k, v in features.items()}
    np.testing.assert_allclose(no_memory(features).numpy(), no_memory(last).numpy(), atol=1e-6)


def test_wrong_rank_is_a_clear_error():
    model = _classifier()
    features = _packed([5], 2)
    with pytest.raises(ValueError, match=r"\[batch, segments, length\]"):
        model({k: v[:, :, None] for k, v in features.items()})
    choices = XLNetMultipleChoice(model.backbone, compile=False)
    with pytest.raises(ValueError, match=r"\[batch, choices, segments, length\]"):
        choices({k: v[:, 0] for k, v in features.items()})


@pytest.mark.large
def test_fit_predict_and_keras_saving_with_a_static_number_of_segments():
    model = _classifier(seed=3, dropout=0.1)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    features = _packed([29, 17, 9, 3, 20, 25], 4, seed=2)
    labels = np.array([0, 1, 2, 0, 1, 2])
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(features, labels, batch_size=3, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    changed = [not np.array_equal(b, a) for b, a in zip(before, model.get_weights())]
    assert sum(changed) > len(changed) // 2
    np.testing.assert_allclose(model.predict(features, batch_size=4, verbose=0),
                               model(features).numpy(), atol=1e-5)
    restored = run_model_saving_test(model, features, atol=1e-5)
    assert restored.backbone.config.memory_length == 3 * L


def test_predict_on_windows_then_segments():
    # predict() relaxes its trace to an unknown rank when the rank changes; windows then
    # go through the segment path as one segment each.
    model = _classifier()
    windows = {k: v[:, -1] for k, v in _packed([10, 5], 1).items()}  # [B, L]
    segments = _packed([3 * L - 4, 5], 3)  # [B, S, L]
    first = model.predict(windows, verbose=0)
    long = model.predict(segments, verbose=0)
    again = model.predict(windows, verbose=0)
    np.testing.assert_allclose(long, model(segments).numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(again, first, atol=1e-5, rtol=0)
    np.testing.assert_allclose(first, model(windows).numpy(), atol=1e-5, rtol=0)


def test_multiple_choice_reads_long_passages():
    keras.utils.set_random_seed(4)
    backbone = XLNetBackbone(tiny_config(memory_length=2 * L))
    model = XLNetMultipleChoice(backbone, compile=False)
    # 2 questions x 3 choices, each choice packed at S * L.
    flat = _packed([21, 12, 6, 19, 4, 15], 3, seed=5)
    choices = {k: v.reshape(2, 3, 3, L) for k, v in flat.items()}  # [B, C, S, L]
    scores = model(choices).numpy()
    expected = model.score_dense(_loop_summary(model, flat)).numpy().reshape(2, 3)
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    padded = {k: v.reshape(2, 3, 5, L) for k, v in _packed([21, 12, 6, 19, 4, 15], 5, seed=5).items()}
    np.testing.assert_allclose(model(padded).numpy(), scores, atol=1e-5)
    one = {k: v[:, :, -1:] for k, v in choices.items()}  # [B, C, 1, L]
    np.testing.assert_array_equal(model(one).numpy(),
                                  model({k: v[:, :, 0] for k, v in one.items()}).numpy())
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(choices, np.array([0, 2]), batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


# ---------------------------------------------------------------- the synthetic long-range task
CUE_IDS = (FIRST_PLAIN_ID, FIRST_PLAIN_ID + 1)
LONG_L, LONG_S = 16, 4


def _cue_documents(count, seed):
    """Documents of 4 full segments: a cue (its label) at a random place of the first, filler elsewhere."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, count)
    token_ids = rng.integers(CUE_IDS[1] + 1, 40, (count, LONG_S * LONG_L)).astype("int32")
    token_ids[np.arange(count), rng.integers(0, LONG_L, count)] = np.array(CUE_IDS)[labels]
    token_ids[:, -2:] = (4, 3)  # A <sep> <cls>, no padding: 62 pieces fill S * L
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, -1] = 2
    flat = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": np.ones_like(token_ids)}
    return {k: v.reshape(count, LONG_S, LONG_L) for k, v in flat.items()}, labels


def _train_and_score(memory_length):
    keras.utils.set_random_seed(0)
    config = tiny_config(num_layers=2, hidden_dim=32, num_heads=4, head_dim=8, intermediate_dim=64,
                         memory_length=memory_length, reuse_length=0)
    model = XLNetClassifier(XLNetBackbone(config), num_classes=2, dropout=0.0, compile=False)
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train, train_labels = _cue_documents(200 * 32, seed=1)  # 200 steps of 32
    model.fit(train, train_labels, batch_size=32, epochs=1, verbose=0)
    test, test_labels = _cue_documents(256, seed=2)
    predicted = np.argmax(model.predict(test, batch_size=128, verbose=0), axis=-1)
    return float(np.mean(predicted == test_labels))


@pytest.mark.large
@pytest.mark.slow
def test_memory_reaching_the_first_segment_solves_a_long_range_task():
    with_memory = _train_and_score(memory_length=3 * LONG_L)
    without_memory = _train_and_score(memory_length=0)
    print(f"long-range cue task, held-out accuracy: memory 3L {with_memory:.3f}, "
          f"memory off {without_memory:.3f}")
    assert with_memory >= 0.95
    assert without_memory <= 0.60
