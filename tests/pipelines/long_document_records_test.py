"""`xlnet-tf prepare-finetuning --max-segments`: long-document records equal the in-memory pipeline."""

import json
import os

import numpy as np
import pytest

from xlnet_tf.cli import prepare_finetuning
from xlnet_tf.cli.prepare_finetuning import main
from xlnet_tf.data import finetuning as data
from xlnet_tf.data.finetuning_record_dataset import finetuning_record_dataset
from xlnet_tf.finetuning.finetuning_config import load_finetune_config
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
LENGTH, SEGMENTS = 8, 3
MEDIUM = "the old mill by a quiet river"  # 15 pieces
# A pair task (the first row has text_pair); the others pack with an empty second text.
ROWS = [{"text": "the old mill", "text_pair": "by the river", "label": "neg"},
        {"text": "a quiet river", "label": "pos"}, {"text": MEDIUM, "label": "neg"},
        {"text": " ".join([MEDIUM] * 4), "label": "pos"}]  # 60 pieces: cut at 3 x 8


def run(argv):
    # The runner is named, so a new default of Beam's DirectRunner (Prism) cannot change what is tested.
    return prepare_finetuning.run(list(argv) + ["--runner=FnApiRunner"])


@pytest.fixture(scope="module")
def long_job(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    (root / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    manifest = run(["--task-type", "classification", "--input", f"train={root / 'docs.jsonl'}",
                    "--input", f"validation={root / 'docs.jsonl'}", "--vocab", SPIECE,
                    "--sequence-length", str(LENGTH), "--max-segments", str(SEGMENTS), "--num-shards", "2",
                    "--label-names", "neg,pos", "--output-dir", str(root / "out")])
    return root, manifest


def _task(*overrides):
    return load_finetune_config([], ["training.global_batch_size=4", "task.num_classes=2",
                                     f"task.sequence_length={LENGTH}", *overrides]).task


def test_manifest_records_max_segments_and_the_features_are_flattened(long_job):
    root, manifest = long_job
    assert manifest["max_segments"] == SEGMENTS and manifest["sequence_length"] == LENGTH
    assert manifest["settings"]["max_segments"] == SEGMENTS
    records = list(finetuning_record_dataset(str(root / "out"), "train", with_example_id=True))
    assert len(records) == len(ROWS)
    for features, _ in records:
        assert features["token_ids"].shape == (SEGMENTS, LENGTH)
        assert features["token_ids"][-1, -1] == 3


def test_records_equal_the_in_memory_pipeline_with_the_truncation_flags(long_job, tmp_path):
    root, _ = long_job
    tokenizer = XLNetTokenizer(SPIECE)
    from_records = _task(f"task.records_dir={root / 'out'}", f"task.max_segments={SEGMENTS}")
    from_file = _task(f"task.train_file={root / 'docs.jsonl'}", f"task.eval_file={root / 'docs.jsonl'}",
                      "task.label_names=[neg, pos]", f"task.max_segments={SEGMENTS}")

    def by_row(task):
        rows = []
        for features, labels, truncated in data.finetuning_dataset(task, tokenizer, "eval", 8,
                                                                   with_truncation=True):
            for i in range(labels.shape[0]):
                rows.append(({k: v[i].numpy() for k, v in features.items()}, int(labels[i]), int(truncated[i])))
        return rows

    # Records come back in shard order: match them by their token ids.
    records = sorted(by_row(from_records), key=lambda r: r[0]["token_ids"].tobytes())
    memory = sorted(by_row(from_file), key=lambda r: r[0]["token_ids"].tobytes())
    assert len(records) == len(memory) == len(ROWS)
    for (got, label, cut), (want, want_label, want_cut) in zip(records, memory):
        assert got.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
        assert (label, cut) == (want_label, want_cut)
    assert sum(cut for _, _, cut in memory) == 1  # only the 60-piece document


def test_reader_refuses_records_of_another_max_segments(long_job):
    root, _ = long_job
    tokenizer = XLNetTokenizer(SPIECE)
    task = _task(f"task.records_dir={root / 'out'}", "task.max_segments=2")
    with pytest.raises(ValueError, match=r"max_segments 3 but the config says task.max_segments 2"):
        data.finetuning_dataset(task, tokenizer, "train", 2)
    with pytest.raises(ValueError, match=r"max_segments 3 but the config says task.max_segments 1"):
        data.finetuning_dataset(_task(f"task.records_dir={root / 'out'}"), tokenizer, "train", 2)


@pytest.mark.parametrize("args, message", [
    (["--task-type", "classification", "--max-segments", "0"], "--max-segments must be >= 1, got 0"),
    (["--task-type", "token_classification", "--max-segments", "2"],
     "--max-segments 2 is only for --task-type classification or regression"),
])
def test_bad_max_segments_is_a_clear_error(tmp_path, capsys, args, message):
    (tmp_path / "t.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    argv = args + ["--input", f"train={tmp_path / 't.jsonl'}", "--vocab", SPIECE, "--output-dir", str(tmp_path / "o")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
