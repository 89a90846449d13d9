"""Long documents at serving: both signatures take any length and loop over segments in the graph.

A tiny classifier with recurrence memory (`memory_length` 3 L) fine-tuned with
`max_segments` 4 is exported through `export_task_workdir`; its answer on a long
document must be the same (1e-5) from the SavedModel's strings-in and ids-in
signatures, from the in-memory model on `[1, S, L]` features packed by
`XLNetPacker` at S * L, and from a Python loop calling the backbone segment by
segment with `mems` then the head.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_config
from tests.serving.conftest import SPIECE, no_question
from xlnet_tf.formats.serving_metadata import METADATA_FILE
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.serving.export_task_model import export_task_model
from xlnet_tf.serving.export_task_workdir import export_task_workdir
from xlnet_tf.serving.long_document_packer import LongDocumentPacker
from xlnet_tf.serving.saved_model_predictor import SavedModelPredictor

L = 8
MAX_SEGMENTS = 4
# A large initializer makes the logits depend clearly on the input (and on the memory).
CONFIG = dict(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8, hidden_dim=16,
              intermediate_dim=32, memory_length=3 * L, reuse_length=0, initializer_range=0.3)
WORDS = ("the quick brown fox jumps over the lazy dog near the river bank in the morning while "
         "birds sing and the farmer walks to the old mill with his two dogs").split()
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer(SPIECE)


def _packed_length(tokenizer, text):
    return len(tokenizer.tokenize(text)) + 2  # A <sep> <cls>


def document(tokenizer, segments, offset=0):
    """A text whose packed length needs exactly `segments` windows of L, its first one partly padding."""
    for count in range(1, 400):
        text = " ".join(WORDS[(offset + i) % len(WORDS)] for i in range(count))
        length = _packed_length(tokenizer, text)
        if length > (segments - 1) * L + 1:
            assert length < segments * L, (segments, length)
            return text
    raise AssertionError(f"no document of {segments} segments")


def contract_features(tokenizer, texts, segments):
    """The fine-tuning layout of `segments` windows: `XLNetPacker` at S * L, reshaped to `[B, S, L]`."""
    packed = TextPreprocessor(tokenizer, XLNetPacker(segments * L))(tf.constant(texts))
    return {k: tf.reshape(v, [len(texts), segments, L]).numpy() for k, v in packed.items()}  # [B, S, L]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """(model, long export path, long export, today's export (max_segments 1)) of one tiny classifier.

    The model is trained 0 steps: its large initializer already makes every input count.
    """
    root = tmp_path_factory.mktemp("long")
    model = XLNetClassifier(XLNetBackbone(tiny_config(**CONFIG)), num_classes=3, dropout=0.0)
    model.build_with_dummy_inputs()
    # The long export goes the way of `xlnet-tf export --workdir`: max_segments from preprocessing.json.
    workdir = root / "workdir"
    model.save_to_preset(str(workdir / "final"), vocabulary_file=SPIECE, preprocessing={
        "task_type": "classification", "sequence_length": L, "max_segments": MAX_SEGMENTS,
        "text_fields": ["text"], "truncate": "longest_first", "label_names": ["a", "b", "c"]})
    long_path = export_task_workdir(str(workdir), str(root / "long"))
    # Today's export of the same model: one window of L, strings-in.
    short_path = export_task_model(
        model, str(root / "short"), task="classification", sequence_length=L, verify=False,
        preprocessor=TextPreprocessor(XLNetTokenizer(SPIECE), XLNetPacker(L)))
    return model, long_path, tf.saved_model.load(long_path), tf.saved_model.load(short_path)


def _strings(loaded, texts):
    return loaded.signatures["serving_default"](text=tf.constant(texts))["logits"].numpy()


def _ids(loaded, features):
    feed = {k: tf.constant(v, tf.int32) for k, v in features.items()}
    outputs = loaded.signatures["serve_token_ids"](**feed)
    return outputs["logits"].numpy()


def python_loop_logits(model, features):
    """The reference: the backbone called segment by segment, each time with the memory of the ones before."""
    backbone = model.backbone
    mems = memory_mask = None
    for index in range(features["token_ids"].shape[1]):
        segment = {k: tf.constant(v[:, index]) for k, v in features.items()}  # [B, L]
        inputs = dict(segment)
        if mems is not None:
            inputs.update(mems=mems, memory_padding_mask=memory_mask)
        outputs = backbone(inputs, training=False)
        mems = outputs["new_mems"]  # [B, num_layers, M, H]
        # The memory holds the last memory_length positions read; its padding stays closed.
        mask = segment["padding_mask"].numpy()
        memory_mask = mask if memory_mask is None else np.concatenate([memory_mask, mask], axis=1)
        memory_mask = memory_mask[:, -backbone.config.memory_length:]  # [B, M]
    summary = outputs["sequence_output"][:, -1]  # [B, H], <cls> ends the last segment
    return model.logits_dense(model.summary_projection(summary)).numpy()


def test_metadata_and_signatures(exports):
    _, long_path, long_loaded, short_loaded = exports
    info = json.load(open(os.path.join(long_path, METADATA_FILE)))
    assert info["max_segments"] == MAX_SEGMENTS and info["long_documents"] is True
    assert info["sequence_length"] == L
    ids_spec = long_loaded.signatures["serve_token_ids"].structured_input_signature[1]["token_ids"]
    assert ids_spec.shape.as_list() == [None, None]
    # max_segments 1 keeps today's static-length signature.
    short_spec = short_loaded.signatures["serve_token_ids"].structured_input_signature[1]["token_ids"]
    assert short_spec.shape.as_list() == [None, L]


def test_one_segment_document_equals_todays_export(exports, tokenizer):
    model, _, long_loaded, short_loaded = exports
    texts = [document(tokenizer, 1), "fox", document(tokenizer, 1, offset=5)]
    today = _strings(short_loaded, texts)
    np.testing.assert_allclose(_strings(long_loaded, texts), today, atol=TOLERANCE, rtol=0)
    # Ids of length L, and of less than L (the leading padding cut off), give today's answer too.
    window = contract_features(tokenizer, texts, 1)
    flat = {k: v[:, 0] for k, v in window.items()}  # [B, L]
    np.testing.assert_allclose(_ids(long_loaded, flat), _ids(short_loaded, flat), atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(_ids(long_loaded, flat), today, atol=TOLERANCE, rtol=0)
    shortest = int(window["padding_mask"].sum(axis=-1).min())
    cut = {k: v[:, L - shortest:] for k, v in flat.items()}  # [B, T < L]
    np.testing.assert_allclose(_ids(long_loaded, cut), today, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(model(flat, training=False).numpy(), today, atol=TOLERANCE, rtol=0)


def test_four_segment_document_same_through_every_path(exports, tokenizer):
    model, _, long_loaded, _ = exports
    text = document(tokenizer, 4)
    features = contract_features(tokenizer, [text], 4)  # [1, 4, L]
    assert features["padding_mask"][0, 0].min() == 0 and features["padding_mask"][0, 0].max() == 1
    reference = python_loop_logits(model, features)
    strings = _strings(long_loaded, [text])
    ids = _ids(long_loaded, {k: v.reshape(1, 4 * L) for k, v in features.items()})  # [1, T]
    in_memory = model(features, training=False).numpy()
    predicted = model.predict(features, verbose=0)
    for got in (strings, ids, in_memory, predicted):
        np.testing.assert_allclose(got, reference, atol=TOLERANCE, rtol=0)
    # The earlier segments matter: the last window alone answers differently.
    alone = model({k: v[:, -1] for k, v in features.items()}, training=False).numpy()
    assert np.max(np.abs(alone - reference)) > 1e-3


def test_batch_rows_answer_as_alone(exports, tokenizer):
    _, _, long_loaded, _ = exports
    texts = [document(tokenizer, 4), "", document(tokenizer, 2, offset=3), document(tokenizer, 1, offset=7),
             document(tokenizer, 3, offset=11)]
    batch = _strings(long_loaded, texts)
    for row, text in enumerate(texts):
        np.testing.assert_allclose(batch[row], _strings(long_loaded, [text])[0], atol=TOLERANCE, rtol=0)
    # The ids signature on the same rows, packed at the batch's longest length.
    packed = LongDocumentPacker(L)([TextPreprocessor(tokenizer, XLNetPacker(L)).tokenize(tf.constant(texts))])
    assert packed["token_ids"].shape == (len(texts), 4 * L)
    np.testing.assert_allclose(_ids(long_loaded, {k: v.numpy() for k, v in packed.items()}), batch,
                               atol=TOLERANCE, rtol=0)


def test_nine_segments_run_untruncated(exports, tokenizer):
    model, long_path, long_loaded, _ = exports
    text = document(tokenizer, 9)
    whole = contract_features(tokenizer, [text], 9)  # [1, 9, L]
    assert whole["padding_mask"][0, 0].max() == 1  # the first piece is in the first window
    got = _strings(long_loaded, [text])
    np.testing.assert_allclose(got, python_loop_logits(model, whole), atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(got, _ids(long_loaded, {k: v.reshape(1, -1) for k, v in whole.items()}),
                               atol=TOLERANCE, rtol=0)
    # Cut to max_segments (what training would have kept), the document answers differently.
    truncated = model(contract_features(tokenizer, [text], MAX_SEGMENTS), training=False).numpy()
    assert np.max(np.abs(truncated - got)) > 1e-3
    # `xlnet-tf predict` (the predictor it runs) cuts nothing on the Python side either.
    record, = SavedModelPredictor(long_path).predict([(text, None)])
    np.testing.assert_allclose(record["probabilities"], tf.nn.softmax(got[0]).numpy(), atol=TOLERANCE, rtol=0)


def test_empty_document_is_the_sep_cls_window(exports, tokenizer):
    model, _, long_loaded, short_loaded = exports
    got = _strings(long_loaded, [""])
    window = XLNetPacker(L)(tf.ragged.constant([[]], dtype=tf.int32))  # [1, L]: <sep> <cls>
    assert window["token_ids"].numpy()[0, -2:].tolist() == [4, 3]
    np.testing.assert_allclose(got, model(window, training=False).numpy(), atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(got, _strings(short_loaded, [""]), atol=TOLERANCE, rtol=0)
    assert np.all(np.isfinite(got))
    # An empty batch gives empty outputs.
    assert _strings(long_loaded, tf.constant([], tf.string)).shape == (0, 3)


def test_bad_ids_are_refused(exports):
    _, _, long_loaded, _ = exports
    rng = np.random.default_rng(0)
    valid = {"token_ids": rng.integers(9, 200, (2, 3 * L)), "segment_ids": np.zeros((2, 3 * L), np.int64),
             "padding_mask": np.ones((2, 3 * L), np.int64)}
    valid["token_ids"][:, -1] = 3
    valid["segment_ids"][:, -1] = 2
    assert np.all(np.isfinite(_ids(long_loaded, valid)))
    negative = valid["token_ids"].copy()
    negative[0, 2] = -1
    cases = [
        ({"token_ids": negative}, r"token_ids values must be in \[0, 200\).*-1"),
        ({k: v[0] for k, v in valid.items()}, r"token_ids must have rank 2"),
        ({"segment_ids": valid["segment_ids"][:, 1:]}, r"segment_ids must have the shape of token_ids"),
        ({k: v[:, :0] for k, v in valid.items()}, r"length \(last axis\) >= 1"),
    ]
    for overrides, pattern in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
            _ids(long_loaded, {**valid, **overrides})


@pytest.mark.parametrize("truncate, second_max_length", [("longest_first", None), ("keep_second", 3)])
def test_long_packer_is_xlnet_packer_at_the_rounded_up_length(truncate, second_max_length):
    rng = np.random.default_rng(1)
    first = tf.ragged.constant([rng.integers(9, 50, n).tolist() for n in (0, 5, 37, 2)], dtype=tf.int32)
    second = tf.ragged.constant([rng.integers(9, 50, n).tolist() for n in (7, 0, 1, 4)], dtype=tf.int32)
    # The longest rows: 37 + <sep> <cls> = 39 pieces -> 40; 37 + 1 + two <sep> + <cls> = 41 -> 48.
    for segments, length in (([first], 40), ([first, second], 48)):
        packed = LongDocumentPacker(L, truncate=truncate, second_max_length=second_max_length)(segments)
        assert packed["token_ids"].shape == (4, length)
        expected = XLNetPacker(length, truncate=truncate,
                               second_max_length=second_max_length)(tuple(segments))
        for key in expected:
            np.testing.assert_array_equal(packed[key].numpy(), expected[key].numpy())


def test_multiple_choice_long_contexts(tmp_path, tokenizer):
    from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice

    model = XLNetMultipleChoice(XLNetBackbone(tiny_config(**CONFIG)), dropout=0.0)
    model.build_with_dummy_inputs()
    path = export_task_model(
        model, str(tmp_path / "choice"), task="multiple_choice", sequence_length=L, num_choices=2,
        max_segments=3, verify=False, preprocessor=TextPreprocessor(
            tokenizer, XLNetPacker(L, truncate="keep_second", second_max_length=3)))
    assert json.load(open(os.path.join(path, METADATA_FILE)))["long_documents"] is True
    loaded = tf.saved_model.load(path)
    contexts = [document(tokenizer, 3), "a fox"]
    choices = [["the dog", "birds sing in the morning"], ["", "mill"]]
    # The fine-tuning packing at 3 L (keep_second: each choice keeps its last 3 pieces).
    packer = XLNetPacker(3 * L, truncate="keep_second", second_max_length=3)
    rows = [packer((tf.ragged.constant([tokenizer.tokenize(c)] * 2, dtype=tf.int32),
                    tf.ragged.constant([tokenizer.tokenize(o) for o in options], dtype=tf.int32,
                                       ragged_rank=1)))
            for c, options in zip(contexts, choices)]
    features = {k: tf.stack([r[k] for r in rows]).numpy() for k in rows[0]}  # [B, C, 3L]
    expected = model({k: v.reshape(2, 2, 3, L) for k, v in features.items()}, training=False).numpy()
    got = loaded.signatures["serving_default"](context=tf.constant(contexts),
                                               question=no_question(tf.constant(contexts)),
                                               choices=tf.constant(choices))
    np.testing.assert_allclose(got["logits"].numpy(), expected, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(_ids(loaded, features), expected, atol=TOLERANCE, rtol=0)
    # The long context's answer needs its first segments: the last window alone differs.
    last = model({k: v[:, :, -L:] for k, v in features.items()}, training=False).numpy()
    assert np.max(np.abs(last[0] - expected[0])) > 1e-3


def test_span_models_keep_todays_signatures_and_memory_off_reads_the_last_segment():
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
    from xlnet_tf.serving.task_serving_module import TaskServingModule

    span = XLNetSpanLabeler(XLNetBackbone(tiny_config(**CONFIG)))
    module = TaskServingModule(span, task="span", sequence_length=L, max_segments=MAX_SEGMENTS)
    assert not module.long_documents
    assert module.serve_token_ids.input_signature[0].shape.as_list() == [None, L]
    # Fine-tuned on segments without memory, a model reads only the last segment: so does serving.
    no_memory = XLNetClassifier(XLNetBackbone(tiny_config(**{**CONFIG, "memory_length": 0})), num_classes=3)
    module = TaskServingModule(no_memory, task="classification", sequence_length=L,
                               max_segments=MAX_SEGMENTS)
    assert module.long_documents
    length = 3 * L - 2  # three segments, the first partly padding
    token_ids = np.append(10 + np.arange(length - 2) % 20, [4, 3])[None].astype("int32")  # [1, T]
    features = {"token_ids": token_ids, "segment_ids": np.where(token_ids == 3, 2, 0).astype("int32"),
                "padding_mask": np.ones_like(token_ids)}
    got = module.serve_token_ids(**{k: tf.constant(v) for k, v in features.items()})["logits"]
    last = no_memory({k: v[:, -L:] for k, v in features.items()}, training=False).numpy()
    np.testing.assert_allclose(got.numpy(), last, atol=TOLERANCE, rtol=0)
    with pytest.raises(ValueError, match="max_segments must be an int >= 1"):
        TaskServingModule(no_memory, task="classification", sequence_length=L, max_segments=0)
