"""The keras-hub user's path on every task: named preset -> fit on raw text -> predict -> `.keras` -> reload.

The named preset `xlnet_base_cased` is served by a local server as a tiny release archive
(tests/presets): 2 layers, hidden 16, vocabulary 50 (the first 50 pieces of the tiny
SentencePiece model), so the generated text only uses words whose pieces are all below id 50.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.presets.conftest import RELEASE_ARCHIVE, release_zip_bytes
from tests.presets.preset_server import PresetServer
from xlnet_tf import (XLNetClassifier, XLNetClassifierPreprocessor, XLNetMultipleChoice,
                      XLNetMultipleChoicePreprocessor, XLNetSpanLabeler, XLNetSpanLabelerPreprocessor,
                      XLNetTokenClassifier, XLNetTokenClassifierPreprocessor, XLNetTokenizer)
from xlnet_tf.presets import PresetError

PRESET = "xlnet_base_cased"
# Words whose pieces all have ids < 50 (the tiny model's vocabulary), with or without a leading space.
WORDS = ["the", "a", "and", "to", "me", "all", "sent", "rest", "test", "stem", "time", "tile",
         "mess", "less", "tell", "went", "tent", "mend", "lend", "ten", "men", "met", "main"]
KEYWORD = "rain"
LENGTH = 16


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """Serves the tiny release archive and resolves the name once (downloaded, converted, cached)."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XLNET_TF_HOME", str(tmp_path_factory.mktemp("home")))
    with PresetServer() as server:
        monkeypatch.setenv("XLNET_TF_RELEASE_BASE_URL", server.url("/xlnet/released_models"))
        server.add_gcs_object("/xlnet/released_models/" + RELEASE_ARCHIVE, release_zip_bytes())
        keras.utils.set_random_seed(0)
        XLNetTokenizer.from_preset(PRESET)  # First use: download and conversion.
        yield PRESET
    monkeypatch.undo()


def sentences(rng, count, words=6, keyword_rate=0.5, keyword=KEYWORD):
    texts, labels, positions = [], [], []
    pool = [w for w in WORDS if w != keyword]
    for _ in range(count):
        row = list(rng.choice(pool, size=words))
        has = rng.random() < keyword_rate
        position = int(rng.integers(words)) if has else -1
        if has:
            row[position] = keyword
        texts.append(" ".join(row))
        labels.append(int(has))
        positions.append(position)
    return texts, np.array(labels, "int32"), positions


def test_tokenizer_of_the_named_preset_stays_inside_the_tiny_vocabulary(preset):
    ids = XLNetTokenizer.from_preset(preset)([" ".join(WORDS + [KEYWORD])])
    assert max(max(row) for row in ids) < 50


def test_classifier_from_a_preset_name_learns_from_strings(preset, tmp_path):
    rng = np.random.default_rng(0)
    texts, labels, _ = sentences(rng, 128)
    classifier = XLNetClassifier.from_preset(
        preset, num_classes=2,
        preprocessor=XLNetClassifierPreprocessor.from_preset(preset, sequence_length=LENGTH))
    # compile() is already done with the defaults; only a faster rate for the tiny model.
    classifier.compile(learning_rate=3e-3, warmup_steps=4)
    assert isinstance(classifier.optimizer, keras.optimizers.AdamW)
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).shuffle(128, seed=0).batch(16)
    classifier.fit(dataset, epochs=6, verbose=0)
    test_texts, test_labels, _ = sentences(np.random.default_rng(1), 64)
    _, accuracy = classifier.evaluate(test_texts, test_labels, batch_size=16, verbose=0)
    assert accuracy >= 0.8
    logits = classifier.predict([f"the {KEYWORD} went", "the men went"], verbose=0)
    assert logits.shape == (2, 2) and logits[0].argmax() == 1 and logits[1].argmax() == 0

    # The project's preset layout round trips with its preprocessor.
    classifier.save_to_preset(str(tmp_path / "fine_tuned"))
    reloaded = XLNetClassifier.from_preset(str(tmp_path / "fine_tuned"))
    assert reloaded.preprocessor.sequence_length == LENGTH
    np.testing.assert_allclose(reloaded.predict(test_texts[:8], verbose=0),
                               classifier.predict(test_texts[:8], verbose=0), atol=1e-5)


@pytest.mark.large
def test_span_labeler_points_at_the_keyword(preset):
    rng = np.random.default_rng(2)
    texts, _, positions = sentences(rng, 96, keyword_rate=1.0)
    starts = [len(" ".join(t.split()[:p])) + (1 if p else 0) for t, p in zip(texts, positions)]
    labeler = XLNetSpanLabeler.from_preset(
        preset, preprocessor=XLNetSpanLabelerPreprocessor.from_preset(
            preset, sequence_length=LENGTH + 4, max_query_length=4))
    labeler.compile(learning_rate=3e-3, warmup_steps=4)
    x = {"context": texts, "question": ["rain ?"] * len(texts)}
    y = {"answer_start": np.array(starts, "int32"), "answer_text": [KEYWORD] * len(texts)}
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    labeler.fit(dataset, epochs=6, verbose=0)

    test_texts, _, test_positions = sentences(np.random.default_rng(3), 32, keyword_rate=1.0)
    packed, labels = labeler.preprocessor(
        {"context": test_texts, "question": ["rain ?"] * 32},
        {"answer_start": np.zeros(32, "int32"), "answer_text": [""] * 32})[:2]
    outputs = labeler.predict({"context": test_texts, "question": ["rain ?"] * 32}, verbose=0)
    token_ids = np.asarray(packed["token_ids"])
    best = outputs["start_top_index"][:, 0]
    picked = token_ids[np.arange(32), best]
    keyword_ids = set(np.asarray(XLNetTokenizer.from_preset(preset)(" " + KEYWORD)).tolist()) - {17}
    # Chance is about 1 in 8 positions; the keyword's first piece wins far more often.
    assert np.mean([p in keyword_ids for p in picked]) >= 0.6


@pytest.mark.large
def test_multiple_choice_learns_which_choice_is_right(preset):
    rng = np.random.default_rng(4)

    def examples(count):
        # The right choice is the one that holds the keyword (a light, learnable rule).
        x = {"context": [], "question": [], "choices": []}
        labels = []
        for _ in range(count):
            wrong = rng.choice(WORDS[5:])
            x["context"].append(" ".join(rng.choice(WORDS, size=4)))
            x["question"].append("the")
            label = int(rng.integers(2))
            x["choices"].append([KEYWORD, wrong] if label == 0 else [wrong, KEYWORD])
            labels.append(label)
        return x, np.array(labels, "int32")

    model = XLNetMultipleChoice.from_preset(
        preset, preprocessor=XLNetMultipleChoicePreprocessor.from_preset(preset, sequence_length=LENGTH))
    model.compile(learning_rate=3e-3, warmup_steps=4)
    x, y = examples(128)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=5, verbose=0)
    test_x, test_y = examples(64)
    _, accuracy = model.evaluate(test_x, test_y, batch_size=16, verbose=0)
    assert accuracy >= 0.7  # chance 0.5
    assert model.predict(test_x, verbose=0).shape == (64, 2)


@pytest.mark.large
def test_token_classifier_tags_the_keyword_from_word_labels(preset):
    rng = np.random.default_rng(5)

    def examples(count):
        # "went" starts with a piece no other word starts with ("rain" starts with a bare "▁").
        texts, _, positions = sentences(rng, count, keyword_rate=0.7, keyword="went")
        words = [t.split() for t in texts]
        labels = [[int(w == "went") for w in row] for row in words]
        return tf.ragged.constant(words), tf.ragged.constant(labels, dtype=tf.int32)

    model = XLNetTokenClassifier.from_preset(
        preset, num_classes=2,
        preprocessor=XLNetTokenClassifierPreprocessor.from_preset(preset, sequence_length=LENGTH))
    model.compile(learning_rate=3e-3, warmup_steps=4)
    words, labels = examples(96)
    model.fit(tf.data.Dataset.from_tensor_slices((words, labels)).batch(16), epochs=6, verbose=0)
    test_words, test_labels = examples(32)
    _, piece_labels = model.preprocessor(test_words, test_labels)
    piece_labels = np.asarray(piece_labels)
    predicted = model.predict(test_words, verbose=0).argmax(-1)
    scored = piece_labels != -100
    assert (piece_labels[scored] == 1).any()
    keyword = scored & (piece_labels == 1)
    assert np.mean(predicted[keyword] == 1) >= 0.8
    assert np.mean(predicted[scored] == piece_labels[scored]) >= 0.9


def test_preprocessors_map_over_tf_data_and_pass_packed_ids_through(preset):
    preprocessor = XLNetClassifierPreprocessor.from_preset(preset, sequence_length=LENGTH)
    dataset = tf.data.Dataset.from_tensor_slices((["the rain", "a test"], ["me", "all"])).batch(2)
    # A lone tuple argument reads as (x, y) (keras-hub's convention): pairs go in as `x=`.
    packed = next(iter(dataset.map(lambda a, b: preprocessor(x=(a, b)))))
    assert packed["token_ids"].shape == (2, LENGTH)
    assert packed["token_ids"].numpy()[:, -1].tolist() == [3, 3]  # <cls> last
    assert sorted(set(packed["segment_ids"].numpy()[0].tolist())) == [0, 1, 2, 4]
    again = preprocessor(packed)
    assert again is packed or all(np.array_equal(again[k], packed[k]) for k in packed)


@pytest.mark.large
@pytest.mark.subprocess
def test_every_task_with_its_preprocessor_round_trips_through_keras_file_in_a_fresh_process(
        preset, tmp_path):
    texts = ["the rain went", "a test", "all men met ten"]
    cases = {
        "classifier": (XLNetClassifier, XLNetClassifierPreprocessor, {"num_classes": 3}, texts),
        "span": (XLNetSpanLabeler, XLNetSpanLabelerPreprocessor, {"start_n_top": 2, "end_n_top": 2},
                 {"context": texts, "question": ["rain"] * 3}),
        "choice": (XLNetMultipleChoice, XLNetMultipleChoicePreprocessor, {},
                   {"context": texts, "question": ["the"] * 3, "choices": [["a", "me"]] * 3}),
        "tokens": (XLNetTokenClassifier, XLNetTokenClassifierPreprocessor, {"num_classes": 4},
                   tf.ragged.constant([t.split() for t in texts])),
    }
    expected = {}
    for name, (task, preprocessor_class, kwargs, x) in cases.items():
        model = task.from_preset(preset, preprocessor=preprocessor_class.from_preset(
            preset, sequence_length=LENGTH), **kwargs)
        outputs = model.predict(x, verbose=0)
        expected[name] = {k: np.asarray(v).tolist() for k, v in outputs.items()} \
            if isinstance(outputs, dict) else np.asarray(outputs).tolist()
        model.save(str(tmp_path / f"{name}.keras"))
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    script = f"""
import json, sys
import numpy as np, tensorflow as tf
import xlnet_tf, keras
texts = {texts!r}
inputs = {{"classifier": texts, "span": {{"context": texts, "question": ["rain"] * 3}},
          "choice": {{"context": texts, "question": ["the"] * 3, "choices": [["a", "me"]] * 3}},
          "tokens": tf.ragged.constant([t.split() for t in texts])}}
expected = json.load(open("expected.json"))
for name, x in inputs.items():
    model = keras.saving.load_model(name + ".keras", safe_mode=True)
    assert type(model).__name__.startswith("XLNet") and model.preprocessor is not None, name
    outputs = model.predict(x, verbose=0)
    if isinstance(outputs, dict):
        for key, value in outputs.items():
            np.testing.assert_allclose(value, expected[name][key], atol=1e-5, err_msg=name + key)
    else:
        np.testing.assert_allclose(outputs, expected[name], atol=1e-5, err_msg=name)
    # The preprocessor alone: config round trip gives the same packing.
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model.preprocessor))
    first = clone(x)
    first = first[0] if isinstance(first, tuple) else first
    second = model.preprocessor(x)
    second = second[0] if isinstance(second, tuple) else second
    np.testing.assert_array_equal(first["token_ids"], second["token_ids"])
print("ROUND TRIP OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            cwd=str(tmp_path), env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ROUND TRIP OK" in result.stdout


def test_unknown_preset_name_lists_the_known_names(preset):
    with pytest.raises(PresetError, match="xlnet_base_cased"):
        XLNetClassifier.from_preset("xlnet_no_such_model", num_classes=2)


def test_a_preset_of_another_task_is_refused_with_its_class_named(preset, tmp_path):
    classifier = XLNetClassifier.from_preset(preset, num_classes=2)
    classifier.save_to_preset(str(tmp_path / "classifier"))
    with pytest.raises(ValueError, match=r"holds a XLNetClassifier.*not a XLNetSpanLabeler"):
        XLNetSpanLabeler.from_preset(str(tmp_path / "classifier"))


def test_strings_to_a_model_without_preprocessor_name_the_fix(preset):
    classifier = XLNetClassifier.from_preset(preset, num_classes=2, preprocessor=None)
    with pytest.raises(ValueError, match="without a preprocessor.*preprocessor=XLNetClassifierPreprocessor"):
        classifier.predict(["the rain"], verbose=0)
    with pytest.raises(ValueError, match="without a preprocessor"):
        classifier(tf.constant(["the rain"]))
