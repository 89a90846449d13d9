import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from xlnet_tf.data import finetuning as data
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer("tests/testdata/tiny_spiece.model")


def _task(*overrides):
    return load_finetune_config([], ["training.global_batch_size=4", *overrides]).task


def test_tfds_glue_pair_task_with_mock_data(tokenizer):
    task = _task("task.dataset=glue/mrpc", "task.sequence_length=16")
    with tfds.testing.mock_data(num_examples=10):
        ds = data.finetuning_dataset(task, tokenizer, "train", 4)
        features, labels = next(iter(ds))
    assert features["token_ids"].shape == (4, 16) and labels.shape == (4,)
    ids = features["token_ids"].numpy()
    assert (ids[:, -1] == 3).all()  # <cls> last
    assert ((ids == 4).sum(axis=1) == 2).all()  # two <sep>: a pair task
    assert set(np.unique(labels.numpy())) <= {0, 1}


@pytest.mark.slow
def test_tfds_squad_and_race_with_mock_data(tokenizer):
    squad = _task("task.dataset=squad/v2.0", "task.sequence_length=32", "task.max_query_length=8",
                  "task.doc_stride=8")
    assert squad.version_2 and squad.null_score_threshold == 0.0
    race = _task("task.dataset=race/middle", "task.sequence_length=24", "task.max_qa_length=8")
    with tfds.testing.mock_data(num_examples=3):
        features, labels = next(iter(data.finetuning_dataset(squad, tokenizer, "train", 2)))
        assert features["answer_mask"].shape == (2, 32)
        assert set(labels) == {"start_logits", "end_logits", "cls_logits"}
        choices, answer = next(iter(data.finetuning_dataset(race, tokenizer, "train", 2)))
    assert choices["token_ids"].shape[0] == 2 and choices["token_ids"].shape[2] == 24
    assert answer.shape == (2,)


def test_local_jsonl_csv_and_label_errors(tokenizer, tmp_path):
    (tmp_path / "a.csv").write_text("text,text_pair,label\nhello there,general,1\nold house,,0\n")
    task = _task(f"task.train_file={tmp_path / 'a.csv'}", "task.num_classes=2",
                 "task.sequence_length=12")
    features, labels = next(iter(data.finetuning_dataset(task, tokenizer, "train", 2, training=False)))
    assert labels.numpy().tolist() == [1, 0]
    row_b = features["segment_ids"].numpy()[1]
    assert (row_b == 1).sum() == 1  # the empty text_pair packs to its <sep> alone

    (tmp_path / "bad.jsonl").write_text(json.dumps({"text": "x", "label": "maybe"}) + "\n")
    bad = _task(f"task.train_file={tmp_path / 'bad.jsonl'}", "task.label_names=[neg, pos]")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: label 'maybe' is not one of"):
        data.raw_dataset(bad, "train")
    (tmp_path / "missing.jsonl").write_text(json.dumps({"txt": "x", "label": 0}) + "\n")
    missing = _task(f"task.train_file={tmp_path / 'missing.jsonl'}", "task.num_classes=2")
    with pytest.raises(ValueError, match="missing field 'text'"):
        data.raw_dataset(missing, "train")


def test_token_classification_labels_first_pieces_only(tokenizer, tmp_path):
    rows = [{"tokens": ["Anna", "lives", "here"], "tags": [1, 0, 0]}, {"tokens": ["river"], "tags": [2]}]
    (tmp_path / "ner.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    task = _task(f"task.train_file={tmp_path / 'ner.jsonl'}", "task.task_type=token_classification",
                 "task.num_classes=3", "task.sequence_length=16")
    features, labels = next(iter(data.finetuning_dataset(task, tokenizer, "train", 2, training=False)))
    labels = labels.numpy()
    ids = features["token_ids"].numpy()
    for row, words in enumerate(rows):
        pieces = [tokenizer(w) for w in words["tokens"]]
        expected = sum(([tag] + [-100] * (len(p) - 1) for tag, p in zip(words["tags"], pieces)), [])
        n = len(expected)
        assert labels[row, -2 - n:-2].tolist() == expected
        assert ids[row, -2 - n:-2].tolist() == sum((list(p) for p in pieces), [])
        assert (labels[row, :-2 - n] == -100).all() and (labels[row, -2:] == -100).all()


def test_config_defaults_and_strictness():
    task = _task("task.dataset=glue/stsb")
    assert (task.task_type, task.num_classes, task.metrics) == ("regression", 1, ["pearson_spearman"])
    from xlnet_tf.models.xlnet_config import ConfigError

    with pytest.raises(ConfigError, match="Unknown fine-tuning dataset|Known TFDS"):
        _task("task.dataset=glue/nope")
    with pytest.raises(ConfigError, match="task.sequence_length must be int"):
        _task("task.dataset=glue/sst2", "task.sequence_length=long")
    with pytest.raises(ConfigError, match="does not match"):
        _task("task.dataset=glue/sst2", "task.task_type=span")


def _write_records(directory, kind, rows, length=8):
    directory.mkdir()
    path = directory / "train-00000-of-00001.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, (ids, label) in enumerate(rows):
            ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
            feature = {"token_ids": ints(ids), "segment_ids": ints([0] * length),
                       "padding_mask": ints([1] * length),
                       "example_id": tf.train.Feature(bytes_list=tf.train.BytesList(
                           value=[f"train-{i:09d}".encode()]))}
            if kind == "span":
                feature.update({"start_position": ints([label]), "end_position": ints([label]),
                                "is_impossible": ints([0]), "window_index": ints([0])})
            else:
                feature["label"] = ints([label])
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    manifest = {"format": "xlnet_tf.finetuning.v1", "sequence_length": length,
                "task": {"task_type": kind, "num_classes": 2, "label_names": ["a", "b"], "has_text_pair": False},
                "splits": {"train": {"files": [{"file": path.name, "num_records": len(rows)}],
                                     "num_records": len(rows)}}}
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_prepared_records_feed_training_batches(tokenizer, tmp_path):
    rows = [([5, 5, 10, 11, 12, 13, 4, 3], i % 2) for i in range(6)]
    _write_records(tmp_path / "cls", "classification", rows)
    task = _task(f"task.records_dir={tmp_path / 'cls'}", "task.sequence_length=8", "task.num_classes=2")
    features, labels = next(iter(data.finetuning_dataset(task, tokenizer, "train", 4)))
    assert features["token_ids"].shape == (4, 8) and labels.shape == (4,)
    _write_records(tmp_path / "span", "span", [([10, 11, 12, 13, 4, 20, 4, 3], 2)] * 4)
    span = _task(f"task.records_dir={tmp_path / 'span'}", "task.task_type=span", "task.sequence_length=8",
                 "task.max_query_length=2")
    features, labels = next(iter(data.finetuning_dataset(span, tokenizer, "train", 2)))
    assert features["start_positions"].numpy().tolist() == [2, 2]
    assert set(labels) == {"start_logits", "end_logits", "cls_logits"}
    with pytest.raises(ValueError, match="sequence length 8"):
        next(iter(data.finetuning_dataset(_task(f"task.records_dir={tmp_path / 'cls'}",
                                                "task.num_classes=2"), tokenizer, "train", 2)))
