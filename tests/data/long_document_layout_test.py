"""The long-document layout of the fine-tuning data (`task.max_segments` > 1).

One example is packed like a single window at S*L pieces and cut into S
segments of L: a short document is S - 1 padding segments and today's window,
a long one reads back in order, cut documents are counted.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.data import finetuning as data
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.preprocessing.segment_layout import to_segments, truncated_rows
from xlnet_tf.preprocessing.xlnet_classifier_preprocessor import XLNetClassifierPreprocessor
from xlnet_tf.preprocessing.xlnet_multiple_choice_preprocessor import XLNetMultipleChoicePreprocessor
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

LENGTH, SEGMENTS = 8, 3
SHORT = "a quiet river"
MEDIUM = "the old mill by a quiet river"  # 15 pieces: more than one segment, fits 3
LONG = " ".join([MEDIUM] * 8)  # 120 pieces


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer("tests/testdata/tiny_spiece.model")


def _task(path, *overrides):
    return load_finetune_config([], ["training.global_batch_size=4", f"task.train_file={path}",
                                     f"task.eval_file={path}", "task.num_classes=2",
                                     f"task.sequence_length={LENGTH}", *overrides]).task


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _eval_batch(task, tokenizer):
    ds = data.finetuning_dataset(task, tokenizer, "eval", 16, with_truncation=True)
    features, labels, truncated = next(iter(ds))
    return {k: v.numpy() for k, v in features.items()}, labels.numpy(), truncated.numpy()


def _pieces(tokenizer, text):
    return list(np.asarray(tokenizer(text)))


def test_short_document_is_padding_segments_then_todays_window(tokenizer, tmp_path):
    path = _write(tmp_path / "d.jsonl", [{"text": SHORT, "label": 1}])
    today, _, _ = _eval_batch(_task(path), tokenizer)
    long, _, truncated = _eval_batch(_task(path, f"task.max_segments={SEGMENTS}"), tokenizer)
    assert len(_pieces(tokenizer, SHORT)) <= LENGTH - 2
    for key, pad in (("token_ids", 5), ("segment_ids", 4), ("padding_mask", 0)):
        assert today[key].shape == (1, LENGTH) and long[key].shape == (1, SEGMENTS, LENGTH)
        np.testing.assert_array_equal(long[key][0, -1], today[key][0])
        assert (long[key][0, :-1] == pad).all(), key
    assert truncated.tolist() == [0]


def test_long_document_segments_concatenate_to_the_packed_pieces(tokenizer, tmp_path):
    pieces = _pieces(tokenizer, MEDIUM)
    budget = SEGMENTS * LENGTH - 2
    assert LENGTH < len(pieces) <= budget  # spans several segments, fits the window
    path = _write(tmp_path / "d.jsonl", [{"text": MEDIUM, "label": 0}])
    features, _, truncated = _eval_batch(_task(path, f"task.max_segments={SEGMENTS}"), tokenizer)
    flat = {k: v.reshape(-1) for k, v in features.items()}  # [S*L]
    pad = budget - len(pieces)
    assert flat["token_ids"].tolist() == [5] * pad + pieces + [4, 3]
    assert flat["segment_ids"].tolist() == [4] * pad + [0] * (len(pieces) + 1) + [2]
    assert flat["padding_mask"].tolist() == [0] * pad + [1] * (len(pieces) + 2)
    # The same as packing the window at S*L in one go.
    window = XLNetPacker(SEGMENTS * LENGTH)(tf.ragged.constant([pieces]))
    for key in flat:
        np.testing.assert_array_equal(flat[key], window[key].numpy()[0])
    assert features["token_ids"][0, -1, -1] == 3 and truncated.tolist() == [0]


def test_truncation_keeps_the_first_pieces_and_is_counted(tokenizer, tmp_path):
    pieces = _pieces(tokenizer, LONG)
    segments = 2  # a window of 16 pieces: LONG does not fit
    assert len(pieces) > segments * LENGTH - 2
    fits = "the old mill by the river"
    assert len(_pieces(tokenizer, fits)) == segments * LENGTH - 2  # exactly the budget
    rows = [{"text": LONG, "label": 0}, {"text": fits, "label": 1}, {"text": SHORT, "label": 0},
            {"text": MEDIUM, "label": 1}]  # MEDIUM: one piece over
    path = _write(tmp_path / "d.jsonl", rows)
    features, _, truncated = _eval_batch(_task(path, f"task.max_segments={segments}"), tokenizer)
    assert truncated.tolist() == [1, 0, 0, 1]
    kept = features["token_ids"][0].reshape(-1)
    assert kept.tolist() == pieces[:segments * LENGTH - 2] + [4, 3]  # longest_first: the first pieces
    # max_segments 1 counts today's windows the same way.
    _, _, single = _eval_batch(_task(path), tokenizer)
    assert single.tolist() == [1, 1, 0, 1]


def test_empty_document_packs_to_sep_cls_in_the_last_segment(tokenizer, tmp_path):
    path = _write(tmp_path / "d.jsonl", [{"text": "", "label": 0}])
    features, _, truncated = _eval_batch(_task(path, f"task.max_segments={SEGMENTS}"), tokenizer)
    tokens = features["token_ids"][0]
    assert (tokens[:-1] == 5).all() and tokens[-1].tolist() == [5] * (LENGTH - 2) + [4, 3]
    assert features["padding_mask"][0].sum() == 2 and truncated.tolist() == [0]


def test_pairs_pack_longest_first_across_the_window(tokenizer, tmp_path):
    path = _write(tmp_path / "d.jsonl", [{"text": LONG, "text_pair": SHORT, "label": 0}])
    features, _, truncated = _eval_batch(_task(path, f"task.max_segments={SEGMENTS}"), tokenizer)
    a, b = _pieces(tokenizer, LONG), _pieces(tokenizer, SHORT)
    expected = XLNetPacker(SEGMENTS * LENGTH)((tf.ragged.constant([a]), tf.ragged.constant([b])))
    for key, value in features.items():
        np.testing.assert_array_equal(value.reshape(1, -1), expected[key].numpy())
    assert features["segment_ids"][0, -1, -1] == 2
    assert truncated.tolist() == [int(len(a) + len(b) + 3 > SEGMENTS * LENGTH)]


def test_training_batches_have_static_segment_shapes_and_one_segment_keeps_rank_2(tokenizer, tmp_path):
    path = _write(tmp_path / "d.jsonl", [{"text": SHORT, "label": 0}, {"text": LONG, "label": 1}])
    long = data.finetuning_dataset(_task(path, f"task.max_segments={SEGMENTS}"), tokenizer, "train", 2)
    assert long.element_spec[0]["token_ids"].shape.as_list() == [2, SEGMENTS, LENGTH]
    single = data.finetuning_dataset(_task(path), tokenizer, "train", 2)
    assert single.element_spec[0]["token_ids"].shape.as_list() == [2, LENGTH]
    assert len(single.element_spec) == 2  # (features, labels): training carries no truncation flag
    # max_segments 1 is today's packing, value for value.
    features, _ = next(iter(data.finetuning_dataset(_task(path), tokenizer, "eval", 2)))
    today = XLNetPacker(LENGTH)(tokenizer(tf.constant([SHORT, LONG])))
    for key, value in features.items():
        np.testing.assert_array_equal(value.numpy(), today[key].numpy())


def test_multiple_choice_is_choices_by_segments(tokenizer, tmp_path):
    rows = [{"context": LONG, "question": "where is the mill?", "options": ["river", "hill"], "label": 0}]
    path = _write(tmp_path / "race.jsonl", rows)
    task = _task(path, "task.task_type=multiple_choice", "task.max_qa_length=4", "task.num_classes=0",
                 f"task.max_segments={SEGMENTS}")
    features, labels, truncated = _eval_batch(task, tokenizer)
    assert features["token_ids"].shape == (1, 2, SEGMENTS, LENGTH) and labels.tolist() == [0]
    assert (features["token_ids"][0, :, -1, -1] == 3).all()
    # The question + option keeps its last 4 pieces (max_qa_length): the question is cut.
    assert truncated.tolist() == [1]


def test_classifier_preprocessor_gives_the_pipelines_layout(tokenizer, tmp_path):
    path = _write(tmp_path / "d.jsonl", [{"text": SHORT, "label": 0}, {"text": LONG, "label": 1}])
    features, _, _ = _eval_batch(_task(path, f"task.max_segments={SEGMENTS}"), tokenizer)
    preprocessor = XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH, max_segments=SEGMENTS)
    packed = preprocessor(tf.constant([SHORT, LONG]))
    for key, value in features.items():
        np.testing.assert_array_equal(packed[key].numpy(), value)
    config = preprocessor.get_config()
    assert config["max_segments"] == SEGMENTS and config["sequence_length"] == LENGTH
    restored = XLNetClassifierPreprocessor.from_config({**config, "tokenizer": tokenizer})
    assert restored.max_segments == SEGMENTS
    np.testing.assert_array_equal(restored(tf.constant([LONG]))["token_ids"].numpy(), features["token_ids"][1:])
    assert XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH)(
        tf.constant([SHORT]))["token_ids"].shape == (1, LENGTH)
    assert XLNetClassifierPreprocessor.preset_settings({"max_segments": 4})["max_segments"] == 4
    with pytest.raises(ValueError, match="max_segments must be an int >= 1"):
        XLNetClassifierPreprocessor(tokenizer, sequence_length=LENGTH, max_segments=0)


def test_multiple_choice_preprocessor_gives_the_pipelines_layout(tokenizer, tmp_path):
    rows = [{"context": LONG, "question": "where?", "options": ["river", "hill", "town"], "label": 2}]
    path = _write(tmp_path / "race.jsonl", rows)
    task = _task(path, "task.task_type=multiple_choice", "task.max_qa_length=6", "task.num_classes=0",
                 f"task.max_segments={SEGMENTS}")
    features, _, _ = _eval_batch(task, tokenizer)
    preprocessor = XLNetMultipleChoicePreprocessor(tokenizer, sequence_length=LENGTH, second_max_length=6,
                                                   max_segments=SEGMENTS)
    packed = preprocessor({"context": [LONG], "question": ["where?"], "choices": [["river", "hill", "town"]]})
    assert packed["token_ids"].shape == (1, 3, SEGMENTS, LENGTH)
    for key, value in features.items():
        np.testing.assert_array_equal(packed[key].numpy(), value)
    config = preprocessor.get_config()
    assert config["max_segments"] == SEGMENTS and "truncate" not in config
    assert XLNetMultipleChoicePreprocessor.from_config({**config, "tokenizer": tokenizer}).max_segments == SEGMENTS


def test_segment_layout_helpers():
    packed = XLNetPacker(6)(tf.ragged.constant([[10, 11, 12], [10, 11, 12, 13, 14]]))
    segments = to_segments(packed, max_segments=2, sequence_length=3)
    assert segments["token_ids"].numpy().tolist() == [[[5, 10, 11], [12, 4, 3]], [[10, 11, 12], [13, 4, 3]]]
    assert to_segments(packed, 1, 6) is packed
    pieces = tf.ragged.constant([[10, 11, 12], [10, 11, 12, 13, 14]])
    assert truncated_rows(packed["padding_mask"], [pieces]).numpy().tolist() == [False, True]
    assert truncated_rows(packed["padding_mask"], [tf.constant([3, 5])]).numpy().tolist() == [False, True]
