"""Multiple-choice (RACE-style) SavedModel export: both signatures, fine-tuning packing, bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import LENGTH, export_task, no_question, tiny_backbone
from xlnet_tf.serving.export_task_model import METADATA_FILE, export_task_model
from xlnet_tf.serving.signature_custom_ops import signature_custom_ops

NUM_CHOICES = 3
SECOND_MAX_LENGTH = 8
CONTEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank in the morning while birds sing "
    "and the farmer walks to the old mill with his two dogs and a basket of fresh bread.",
    "Short one.",
    "",
]
CHOICES = [
    ["Who jumps? the fox", "Who jumps? the dog", "Who jumps? a very long answer about birds and mills"],
    ["a", "", "b c"],
    ["", "nothing", "still nothing here"],
]


@pytest.fixture(scope="module")
def choice_export(tmp_path_factory):
    from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice

    # What `preprocessing_info` writes for a RACE-style fine-tuning run.
    return export_task(tmp_path_factory.mktemp("choice"), XLNetMultipleChoice(tiny_backbone(), dropout=0.0), {
        "task_type": "multiple_choice", "sequence_length": LENGTH, "num_classes": NUM_CHOICES,
        "truncate": "keep_second", "second_max_length": SECOND_MAX_LENGTH,
        "text_fields": ["context", "question", "options"], "label_names": None})


def _training_features(tokenizer, contexts, choices):
    """Packs like `xlnet_tf.data.finetuning._choice_encoder` (keep_second, context as A)."""
    from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

    packer = XLNetPacker(LENGTH, truncate="keep_second", second_max_length=SECOND_MAX_LENGTH)
    rows = []
    for context, options in zip(contexts, choices):
        context_ids = tf.ragged.constant([tokenizer.tokenize(context)] * len(options), dtype=tf.int32)
        option_ids = tf.ragged.constant([tokenizer.tokenize(o) for o in options], dtype=tf.int32,
                                        ragged_rank=1)
        rows.append(packer((context_ids, option_ids)))
    return {k: tf.stack([r[k] for r in rows]) for k in rows[0]}  # each [B, C, L]


def _np(outputs):
    return {k: v.numpy() for k, v in outputs.items()}


def test_token_ids_signature_matches_in_memory_model(choice_export, tokenizer):
    model, _, loaded = choice_export
    features = _training_features(tokenizer, CONTEXTS, CHOICES)
    assert features["token_ids"].shape == (3, NUM_CHOICES, LENGTH)
    expected = model(features, training=False).numpy()  # [B, C]
    got = _np(loaded.signatures["serve_token_ids"](**features))
    np.testing.assert_allclose(got["logits"], expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["probabilities"], tf.nn.softmax(expected).numpy(), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(got["label"], expected.argmax(-1))
    assert got["label"].dtype == np.int32


def test_text_signature_packs_like_fine_tuning(choice_export, tokenizer):
    # Mixed lengths (one context longer than L, empty contexts and choices) in one batch.
    model, _, loaded = choice_export
    expected = model(_training_features(tokenizer, CONTEXTS, CHOICES), training=False).numpy()
    got = _np(loaded.signatures["serving_default"](context=tf.constant(CONTEXTS),
                                                   question=no_question(tf.constant(CONTEXTS)),
                                                   choices=tf.constant(CHOICES)))
    assert got["logits"].shape == (3, NUM_CHOICES) and got["label"].shape == (3,)
    assert np.all(np.isfinite(got["logits"]))
    np.testing.assert_allclose(got["logits"], expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["probabilities"].sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(got["label"], expected.argmax(-1))


def test_rows_do_not_depend_on_the_batch(choice_export):
    _, _, loaded = choice_export
    serve = loaded.signatures["serving_default"]
    batch = serve(context=tf.constant(CONTEXTS),
                  question=no_question(tf.constant(CONTEXTS)),
                  choices=tf.constant(CHOICES))["logits"].numpy()
    for row in range(len(CONTEXTS)):
        alone = serve(context=tf.constant(CONTEXTS[row:row + 1]),
                      question=no_question(tf.constant(CONTEXTS[row:row + 1])),
                      choices=tf.constant(CHOICES[row:row + 1]))["logits"].numpy()
        np.testing.assert_allclose(alone[0], batch[row], atol=1e-5, rtol=0)


def test_bad_input_gives_defined_results(choice_export):
    _, _, loaded = choice_export
    serve = loaded.signatures["serving_default"]
    # All-empty strings and invalid UTF-8 still give one prediction per example.
    got = _np(serve(context=tf.constant(["", b"caf\xe9 \xff"]),
                    question=no_question(tf.constant(["", b"caf\xe9 \xff"])),
                    choices=tf.constant([["", "", ""], [b"\xfe", "ok", ""]])))
    assert np.all(np.isfinite(got["logits"])) and got["logits"].shape == (2, NUM_CHOICES)
    assert set(got["label"].tolist()) <= set(range(NUM_CHOICES))
    empty = _np(serve(context=tf.zeros([0], tf.string),
                      question=no_question(tf.zeros([0], tf.string)),
                      choices=tf.zeros([0, NUM_CHOICES], tf.string)))
    assert empty["logits"].shape == (0, NUM_CHOICES) and empty["label"].shape == (0,)
    with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
        serve(context=tf.constant(["a", "b"]),
              question=no_question(tf.constant(["a", "b"])),
              choices=tf.constant([["x", "y", "z"]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="choices must have 3 columns"):
        serve(context=tf.constant(["a"]),
              question=no_question(tf.constant(["a"])),
              choices=tf.constant([["x", "y"]]))  # wrong number of choices


def test_metadata_and_core_ops_only_ids_signature(choice_export):
    _, path, _ = choice_export
    with open(os.path.join(path, METADATA_FILE)) as f:
        info = json.load(f)
    assert info["task_type"] == "multiple_choice" and info["num_choices"] == NUM_CHOICES
    assert info["signatures"]["serving_default"]["inputs"] == ["choices", "context", "question"]
    assert info["signatures"]["serving_default"]["outputs"] == ["label", "logits", "probabilities"]
    assert signature_custom_ops(path)["serve_token_ids"] == []


def test_export_task_model_ids_only_and_argument_errors(choice_export, tmp_path):
    model, _, _ = choice_export
    with pytest.raises(ValueError, match="num_choices"):
        export_task_model(model, str(tmp_path / "bad"), task="multiple_choice", sequence_length=LENGTH)
    path = export_task_model(model, str(tmp_path / "ids"), task="multiple_choice",
                             sequence_length=LENGTH, num_choices=2, vocabulary=[""] * 200)
    loaded = tf.saved_model.load(path)
    spec = loaded.signatures["serving_default"].structured_input_signature[1]["token_ids"]
    assert spec.shape.as_list() == [None, 2, LENGTH]


def test_text_signature_matches_the_fine_tuning_encoder(choice_export, tokenizer):
    # The signature takes the fields of training (context, question, choices) and packs them with the
    # fine-tuning data path's encoder: the option fills a cloze blank or follows the question.
    from types import SimpleNamespace

    from xlnet_tf.data.finetuning import _choice_encoder

    model, _, loaded = choice_export
    task = SimpleNamespace(sequence_length=LENGTH, truncate="longest_first", max_qa_length=SECOND_MAX_LENGTH,
                           max_segments=1)
    encode = _choice_encoder(task, tokenizer)
    examples = [(CONTEXTS[0], "Who jumps?", ["the fox", "the dog", "nobody at all today"]),
                (CONTEXTS[1], "The _ is red.", ["sky", "apple", "sea"])]
    # The encoder runs in tf.data (graph mode), as in fine-tuning.
    features = [next(iter(tf.data.Dataset.from_tensors(
        {"context": c, "question": q, "options": o, "label": 0}).map(encode)))[0] for c, q, o in examples]
    features = {k: tf.stack([f[k] for f in features]) for k in features[0]}  # [B, C, L]
    got = loaded.signatures["serving_default"](context=tf.constant([c for c, _, _ in examples]),
                                               question=tf.constant([q for _, q, _ in examples]),
                                               choices=tf.constant([o for _, _, o in examples]))["logits"].numpy()
    np.testing.assert_allclose(got, model(features, training=False).numpy(), atol=1e-5, rtol=0)


def test_predict_cli_answers_multiple_choice(choice_export, tmp_path, capsys):
    import json

    from xlnet_tf.cli.predict import main

    model, path, loaded = choice_export
    options = [f"option {k}" for k in range(NUM_CHOICES)]
    assert main(["--model", path, "the river flows north", "--question", "",
                 *sum((["--choice", o] for o in options), [])]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[0])
    expected = loaded.signatures["serving_default"](
        context=tf.constant(["the river flows north"]),
        question=no_question(tf.constant(["the river flows north"])),
        choices=tf.constant([options]))
    assert record["choices"] == options
    assert record["label"] == int(expected["label"][0])
    np.testing.assert_allclose(record["probabilities"], expected["probabilities"][0].numpy(), atol=1e-6)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"context": "a", "question": "", "choices": options[:1]}) + "\n")
    assert main(["--model", path, "--jsonl", str(rows)]) == 2
    assert f"exactly {NUM_CHOICES} choices" in capsys.readouterr().err
