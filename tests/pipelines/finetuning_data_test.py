"""`xlnet-tf prepare-finetuning` (Beam, the in-process FnApiRunner) and the records reader."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.pipelines.no_metrics import NoMetrics
from xlnet_tf.formats import finetuning_records
from xlnet_tf.cli import prepare_finetuning
from xlnet_tf.cli.prepare_finetuning import main
from xlnet_tf.beam import finetuning_data
from xlnet_tf.beam.finetuning_job_settings import FinetuningJobSettings
from xlnet_tf.tasks.task_spec import TaskSpec
from xlnet_tf.data.finetuning_record_dataset import finetuning_record_dataset, read_finetuning_manifest
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor
from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

def run(argv):
    # The runner is named, so a new default of Beam's DirectRunner (Prism) cannot change what is tested.
    return prepare_finetuning.run(list(argv) + ["--runner=FnApiRunner"])


SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
LENGTH = 16


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer(SPIECE)


def _records(directory, split, **kwargs):
    return [(
        {k: v.numpy() for k, v in f.items()},
        {k: v.numpy() for k, v in y.items()} if isinstance(y, dict) else y.numpy(),
    ) for f, y in finetuning_record_dataset(directory, split, with_example_id=True, **kwargs)]


def _write_jsonl(path, lines):
    with open(path, "wb") as f:
        for line in lines:
            f.write(line if isinstance(line, bytes) else json.dumps(line).encode("utf-8"))
            f.write(b"\n")


@pytest.fixture(scope="module")
def classification_job(tmp_path_factory):
    root = tmp_path_factory.mktemp("cls")
    good = [{"text": f"a quiet river number {i}", "text_pair": "the old mill", "label": ["neg", "pos"][i % 2]}
            for i in range(6)]
    _write_jsonl(root / "train.jsonl", good[:4] + [
        b"{not json",                                            # undecodable
        b'{"text": "caf\xe9", "label": "pos"}',                  # not UTF-8
        {"text": "no label here"},                               # missing_field
        {"text": "a quiet river", "label": "maybe"},             # bad_label
        {"text": "   ", "text_pair": "", "label": "pos"},        # empty: an example like any other
    ] + good[4:])
    _write_jsonl(root / "dev.jsonl", good[:3])
    argv = ["--task-type", "classification", "--input", f"train={root / 'train.jsonl'}",
            "--input", f"validation={root / 'dev.jsonl'}", "--vocab", SPIECE, "--sequence-length", str(LENGTH),
            "--label-names", "neg,pos", "--num-shards", "3", "--output-dir", str(root / "out")]
    return root, argv, run(argv), good


def test_counters_and_manifest(classification_job):
    root, _, manifest, _ = classification_job
    assert manifest == read_finetuning_manifest(str(root / "out"))
    assert sorted(manifest) == sorted(finetuning_records.MANIFEST_KEYS)
    assert sorted(manifest["task"]) == sorted(finetuning_records.TASK_ENTRY_KEYS)
    assert manifest["examples"]["read"] == 11 + 3
    # An empty text is packed (`<sep> <sep> <cls>`), as the tf.data reader and the preprocessors pack it.
    assert manifest["examples"]["skipped"] == {"undecodable": 2, "missing_field": 1, "empty": 0, "bad_label": 1}
    assert manifest["examples"]["written"] == 7 + 3
    assert manifest["task"] == {"task_type": "classification", "num_classes": 2, "label_names": ["neg", "pos"],
                                "has_text_pair": True}
    assert manifest["splits"]["train"]["num_records"] == 7 and len(manifest["splits"]["train"]["files"]) == 3
    assert sorted(os.listdir(root / "out")) == sorted(
        [f"{s}-{i:05d}-of-00003.tfrecord" for s in ("train", "validation") for i in range(3)] + ["manifest.json"])


def test_records_equal_in_graph_packing(classification_job, tokenizer):
    root, _, _, good = classification_job
    records = sorted(_records(str(root / "out"), "train"), key=lambda r: r[0]["example_id"])
    # Ids keep the position in the input file (skipped lines included).
    assert [r[0]["example_id"].decode() for r in records] == [f"train-{i:09d}" for i in (0, 1, 2, 3, 8, 9, 10)]
    good = good[:4] + [{"text": "   ", "text_pair": "", "label": "pos"}] + good[4:]
    expected = TextPreprocessor(tokenizer, XLNetPacker(LENGTH))(
        tf.constant([g["text"] for g in good]), tf.constant([g["text_pair"] for g in good]))
    for row, (features, label) in enumerate(records):
        for key in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(features[key], expected[key][row].numpy())
            assert features[key].dtype == np.int32
        assert label == ["neg", "pos"].index(good[row]["label"])


def test_job_is_deterministic(classification_job, tmp_path):
    root, argv, _, _ = classification_job
    argv = list(argv)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "again")
    run(argv)
    for name in sorted(os.listdir(root / "out")):
        if name.endswith(".tfrecord"):
            assert (root / "out" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name


def test_existing_output_needs_overwrite(classification_job, capsys):
    _, argv, _, _ = classification_job
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_csv_regression(tmp_path):
    (tmp_path / "sts.csv").write_text('text,text_pair,label\n"one, two",three,1.5\nfour,five,x\nsix,seven,4\n')
    manifest = run(["--task-type", "regression", "--input", f"train={tmp_path / 'sts.csv'}", "--vocab", SPIECE,
                    "--sequence-length", str(LENGTH), "--num-shards", "1", "--output-dir", str(tmp_path / "out")])
    assert manifest["examples"]["skipped"]["bad_label"] == 1 and manifest["examples"]["written"] == 2
    records = sorted(_records(str(tmp_path / "out"), "train"), key=lambda r: r[0]["example_id"])
    assert [r[1] for r in records] == [1.5, 4.0] and records[0][1].dtype == np.float32


def test_squad_windows(tmp_path, tokenizer):
    context = "The quick brown fox jumps over the lazy dog near the river bank in the early morning."
    squad = {"data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "Who jumps?", "answers": [{"text": "brown fox", "answer_start": 10}]},
        {"id": "q2", "question": "Why?", "answers": [], "is_impossible": True},
    ]}]}]}
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    manifest = run(["--task-type", "span", "--input", f"train={tmp_path / 'squad.json'}", "--vocab", SPIECE,
                    "--sequence-length", "24", "--max-query-length", "6", "--doc-stride", "6",
                    "--num-shards", "2", "--output-dir", str(tmp_path / "out")])
    records = sorted(_records(str(tmp_path / "out"), "train"),
                     key=lambda r: (r[0]["example_id"], r[0]["window_index"]))
    expected = XLNetSquadPreprocessor(tokenizer, 24, 6, 6)(
        tf.constant(context), tf.constant("Who jumps?"), tf.constant(10), tf.constant("brown fox"), tf.constant(False))
    first = [r for r in records if r[0]["example_id"] == b"train-000000000"]
    assert len(first) == expected["token_ids"].shape[0] > 1 and manifest["examples"]["written"] == 2
    for w, (features, label) in enumerate(first):
        np.testing.assert_array_equal(features["token_ids"], expected["token_ids"][w].numpy())
        assert label["start_position"] == expected["start_positions"][w].numpy()
        assert label["end_position"] == expected["end_positions"][w].numpy()
    answered = [r for r in first if not r[1]["is_impossible"]]
    assert answered, "some window holds the answer"
    ids = answered[0][0]["token_ids"][answered[0][1]["start_position"]:answered[0][1]["end_position"] + 1]
    assert tokenizer.detokenize(ids.tolist()).strip() == "brown fox"
    assert all(r[1]["is_impossible"] == 1 and r[1]["start_position"] == 23
               for r in records if r[0]["example_id"] == b"train-000000001")


def test_token_classification(tmp_path):
    _write_jsonl(tmp_path / "ner.jsonl", [{"tokens": ["Anna", "lives", "here"], "tags": ["B-PER", "O", "O"]},
                                          {"tokens": ["x"], "tags": ["O", "O"]}])
    manifest = run(["--task-type", "token_classification", "--input", f"train={tmp_path / 'ner.jsonl'}",
                    "--label-names", "O,B-PER", "--vocab", SPIECE, "--sequence-length", str(LENGTH),
                    "--num-shards", "1", "--output-dir", str(tmp_path / "out")])
    assert manifest["examples"]["skipped"]["bad_label"] == 1  # tags and tokens differ in length
    (features, labels), = _records(str(tmp_path / "out"), "train")
    real = labels[labels != -100]
    assert real.tolist() == [1, 0, 0] and labels.shape == (LENGTH,)
    assert labels[-1] == -100 and labels[-2] == -100  # <sep> <cls> carry no label
    assert np.all(labels[features["padding_mask"] == 0] == -100)


def test_tfds_mock_data(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=5):
        manifest = run(["--task-type", "classification", "--tfds", "glue/mrpc", "--tfds-splits", "train",
                        "--vocab", SPIECE, "--sequence-length", str(LENGTH), "--num-shards", "2",
                        "--output-dir", str(tmp_path / "out")])
    assert manifest["examples"]["read"] == 5 and manifest["splits"]["train"]["num_records"] <= 5
    assert manifest["task"]["label_names"] == ["not_equivalent", "equivalent"] and manifest["task"]["has_text_pair"]
    records = _records(str(tmp_path / "out"), "train")
    assert len(records) == manifest["examples"]["written"]
    for features, label in records:
        assert features["token_ids"][-1] == 3 and features["segment_ids"][-1] == 2 and label in (0, 1)
        assert (features["segment_ids"] == 1).any()  # the second sentence is packed as segment B


def test_tfds_sub_splits_give_the_same_ids_and_records(monkeypatch, tmp_path):
    # A real (tiny, local) TFDS dataset, since mock data ignores sub-split slicing. Every 7th example is
    # unlabeled (-1, dropped by the reader as GLUE test rows are), so a sub-split's size in TFDS's metadata
    # is not the number of examples it numbers: the ids must still be those of reading the split whole.
    import tensorflow_datasets as tfds

    from xlnet_tf.data import finetuning_tasks

    class TinyReviews(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"text": tfds.features.Text(), "label": tfds.features.Scalar(dtype=np.int64)}))

        def _split_generators(self, dl_manager):
            del dl_manager
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for index in range(23):
                yield index, {"text": f"review number {index} says the film was {'good' if index % 2 else 'dull'}",
                              "label": -1 if index % 7 == 3 else index % 2}

    data_dir = str(tmp_path / "tfds")
    TinyReviews(data_dir=data_dir).download_and_prepare()
    monkeypatch.setitem(finetuning_tasks.DATASETS, "tiny_reviews", finetuning_tasks.DATASETS["imdb_reviews"])
    argv = ["--task-type", "classification", "--tfds", "tiny_reviews", "--tfds-splits", "train",
            "--tfds-data-dir", data_dir, "--vocab", SPIECE, "--sequence-length", str(LENGTH), "--num-shards", "2"]
    whole = run(argv + ["--output-dir", str(tmp_path / "whole")])
    parts = run(argv + ["--output-dir", str(tmp_path / "parts"), "--tfds-read-shards", "4"])
    assert whole["examples"]["read"] == parts["examples"]["read"] == 23 - 3
    assert parts["settings"]["tfds_read_shards"] == 4
    job = FinetuningJobSettings(output_dir=str(tmp_path / "parts"),
                                tfds_read_shards=parts["settings"]["tfds_read_shards"])
    units, _ = finetuning_data.read_units([("train", "tfds", ("tiny_reviews", "train"))],
                                          TaskSpec(task_type="classification"), job)
    assert [unit[:3] for unit in units] == [("train", order, "tfds") for order in range(4)]
    assert _shard_files(tmp_path / "parts") == _shard_files(tmp_path / "whole")
    ids = sorted(features[finetuning_records.EXAMPLE_ID_KEY] for features, _ in _records(str(tmp_path / "parts"),
                                                                                          "train"))
    assert ids == [f"train-{i:09d}".encode() for i in range(20)]
    assert main(argv + ["--output-dir", str(tmp_path / "bad"), "--tfds-read-shards", "0"]) == 2


def test_reader_errors(tmp_path, classification_job):
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        finetuning_record_dataset(str(tmp_path), "train")
    root, _, _, _ = classification_job
    with pytest.raises(ValueError, match="no split 'test'"):
        finetuning_record_dataset(str(root / "out"), "test")


@pytest.mark.parametrize("args, message", [
    (["--input", "train=/no/such.jsonl"], "does not exist"),
    (["--input", "oops"], "expected SPLIT=FILE"),
    ([], "give either --input"),
    (["--tfds", "glue/nope"], "Unknown fine-tuning dataset"),
])
def test_bad_settings_are_clear_errors(tmp_path, capsys, args, message):
    argv = ["--task-type", "classification", "--vocab", SPIECE, "--output-dir", str(tmp_path / "o")] + args
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_pair_task_is_detected_past_the_first_row(tmp_path, tokenizer):
    # A first JSONL row without "text_pair" must not make every later row lose its second text.
    rows = [{"text": "a quiet river", "label": 1},
            {"text": "the old mill", "text_pair": "a quiet river", "label": 0}]
    _write_jsonl(tmp_path / "train.jsonl", rows[:1])
    _write_jsonl(tmp_path / "dev.jsonl", rows[1:])
    manifest = run(["--task-type", "classification", "--input", f"train={tmp_path / 'train.jsonl'}",
                    "--input", f"dev={tmp_path / 'dev.jsonl'}", "--vocab", SPIECE, "--sequence-length",
                    str(LENGTH), "--num-shards", "1", "--output-dir", str(tmp_path / "out")])
    assert manifest["task"]["has_text_pair"] and manifest["settings"]["text_fields"] == ["text", "text_pair"]
    (features, label), = _records(str(tmp_path / "out"), "dev")
    expected = TextPreprocessor(tokenizer, XLNetPacker(LENGTH))(
        tf.constant(["the old mill"]), tf.constant(["a quiet river"]))
    np.testing.assert_array_equal(features["token_ids"], expected["token_ids"][0].numpy())
    assert set(features["segment_ids"][features["padding_mask"] == 1]) >= {0, 1} and label == 0
    # "text_pair": null everywhere is a single-text task.
    _write_jsonl(tmp_path / "single.jsonl", [{"text": "a quiet river", "text_pair": None, "label": 1}])
    manifest = run(["--task-type", "classification", "--input", f"train={tmp_path / 'single.jsonl'}",
                    "--vocab", SPIECE, "--sequence-length", str(LENGTH), "--num-shards", "1",
                    "--output-dir", str(tmp_path / "single")])
    assert not manifest["task"]["has_text_pair"]


def _shard_files(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))
            if name.endswith(".tfrecord")}


def test_jsonl_byte_ranges_give_the_same_records(classification_job, tmp_path):
    # train.jsonl (about 700 bytes) read as ranges of 50 bytes: the same example ids, records and counts.
    root, argv, manifest, _ = classification_job
    argv = list(argv)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "ranged")
    ranged = run(argv + ["--read-range-bytes", "50"])
    assert _shard_files(tmp_path / "ranged") == _shard_files(root / "out")
    assert ranged["examples"] == manifest["examples"]
    size = os.path.getsize(root / "train.jsonl")
    assert ranged["inputs"] == [
        {"split": "train", "file": str(root / "train.jsonl"), "ranges": -(-size // 50), "read_whole": None},
        {"split": "validation", "file": str(root / "dev.jsonl"), "ranges": -(-os.path.getsize(root / "dev.jsonl")
                                                                              // 50), "read_whole": None},
    ]


def test_strict_error_names_the_line_in_a_later_range(classification_job, tmp_path):
    _, argv, _, _ = classification_job
    argv = list(argv)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "strict")
    with pytest.raises(Exception, match=r"train\.jsonl:5: undecodable"):
        run(argv + ["--read-range-bytes", "50", "--strict"])


def test_csv_with_quoted_newlines_is_read_whole(tmp_path):
    (tmp_path / "quoted.csv").write_text('text,label\n' + '"first line\nsecond line",1\n"plain",0\n' * 40)
    manifest = run(["--task-type", "classification", "--input", f"train={tmp_path / 'quoted.csv'}",
                    "--vocab", SPIECE, "--sequence-length", str(LENGTH), "--num-shards", "1",
                    "--read-range-bytes", "16", "--output-dir", str(tmp_path / "out")])
    (entry,) = manifest["inputs"]
    assert tuple(entry) == finetuning_records.INPUT_ENTRY_KEYS
    assert entry["ranges"] == 1 and "quoted newlines" in entry["read_whole"]
    assert manifest["examples"]["read"] == manifest["examples"]["written"] == 80


def test_manifest_counts_hold_without_metrics(classification_job, monkeypatch, tmp_path):
    _, argv, manifest, _ = classification_job
    argv = list(argv)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "nometrics")
    monkeypatch.setattr(finetuning_data, "Metrics", NoMetrics)
    again = run(argv + ["--read-range-bytes", "100"])
    assert again["examples"] == manifest["examples"]
    assert again["examples"]["read"] == 14 and again["examples"]["skipped"]["undecodable"] == 2


def test_job_fails_when_examples_do_not_add_up(classification_job, monkeypatch, tmp_path):
    from xlnet_tf.beam import finetuning_data

    process = finetuning_data.ReadSource.process

    def losing(self, unit, unit_sizes):
        outputs = list(process(self, unit, unit_sizes))
        return outputs[1:] if unit[0] == "validation" else outputs

    monkeypatch.setattr(finetuning_data.ReadSource, "process", losing)
    _, argv, _, _ = classification_job
    argv = list(argv)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "lost")
    with pytest.raises(Exception, match=r"Example accounting does not add up: read 14, written 9"):
        run(argv)
    assert not os.path.exists(tmp_path / "lost" / "manifest.json")
