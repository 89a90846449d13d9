"""The bytes the preprocessing jobs write, pinned: every record file of `prepare-finetuning` (each task
type, a long-document layout) and `prepare-pretraining` on fixed inputs hashes to the recorded sha256.

A change that alters one byte of a record (a field, its order, a packing rule, the shard an example goes
to) fails here; a change meant to alter the records updates the hashes in the same commit, saying why.
"""

import hashlib
import json
import os

import pytest

from xlnet_tf.cli import prepare_finetuning
from xlnet_tf.cli import prepare_pretraining

pytestmark = pytest.mark.slow

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "testdata")
SPIECE = os.path.join(TESTDATA, "tiny_spiece.model")
CORPUS = os.path.join(TESTDATA, "tiny_corpus.txt")


def _jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


def _inputs(root):
    """`(name, task-type arguments)` of each job: fixed text, every task type."""
    words = "a quiet river runs past the old mill while the miller sings to his dog".split()
    text = [" ".join(words[i % 7:i % 7 + 5 + i % 4]) for i in range(12)]
    squad = {"data": [{"paragraphs": [{"context": " ".join(words * 2), "qas": [
        {"id": "q1", "question": "What runs past?", "answers": [{"text": "quiet river", "answer_start": 2}]},
        {"id": "q2", "question": "Why?", "answers": [], "is_impossible": True},
    ]}]}]}
    (root / "squad.json").write_text(json.dumps(squad), encoding="utf-8")
    (root / "sts.csv").write_text("text,text_pair,label\n" + "".join(
        f'"{t}",{text[-1 - i]},{i / 4}\n' for i, t in enumerate(text)), encoding="utf-8")
    return {
        "classification": ["--task-type", "classification", "--input", "train=" + _jsonl(root / "cls.jsonl", [
            {"text": t, "text_pair": text[-1 - i], "label": ["neg", "pos"][i % 2]} for i, t in enumerate(text)]),
            "--num-shards", "3"],
        "long_documents": ["--task-type", "classification", "--input", "train=" + _jsonl(root / "long.jsonl", [
            {"text": " ".join(text[i:] + text[:i]), "label": i % 3} for i in range(6)]),
            "--label-names", "a,b,c", "--max-segments", "3", "--num-shards", "2"],
        "regression": ["--task-type", "regression", "--input", f"train={root / 'sts.csv'}", "--num-shards", "2"],
        "multiple_choice": ["--task-type", "multiple_choice", "--input", "train=" + _jsonl(root / "mc.jsonl", [
            {"context": t, "question": text[-1 - i], "options": text[i % 3:i % 3 + 4], "label": i % 4}
            for i, t in enumerate(text)]), "--num-shards", "2"],
        "token_classification": ["--task-type", "token_classification", "--label-names", "O,B,I", "--input",
                                 "train=" + _jsonl(root / "ner.jsonl", [
                                     {"tokens": t.split(), "tags": ["B", "I", "O", "O", "I", "O", "B", "O", "O"][
                                         :len(t.split())]} for t in text]), "--num-shards", "2"],
        "span": ["--task-type", "span", "--input", f"train={root / 'squad.json'}", "--max-query-length", "6",
                 "--doc-stride", "6", "--num-shards", "2"],
    }


def _record_hashes(directory):
    """`{file name: sha256}` of the record files (the manifest holds this machine's paths)."""
    return {name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(directory)) if not name.endswith(".json")}


def test_records_are_unchanged(tmp_path):
    found = {}
    for name, argv in _inputs(tmp_path).items():
        out = tmp_path / f"out_{name}"
        length = "24" if name in ("span", "long_documents") else "16"
        manifest = prepare_finetuning.run(argv + ["--vocab", SPIECE, "--sequence-length", length,
                                                  "--output-dir", str(out), "--runner=FnApiRunner"])
        found[name] = {**_record_hashes(out), "task": manifest["task"], "examples": manifest["examples"]}
    out = tmp_path / "out_pretraining"
    prepare_pretraining.run(["--input", CORPUS, "--vocab", SPIECE, "--output-dir", str(out), "--num-shards", "2",
                             "--chunk-length", "64", "--seed", "7", "--runner=FnApiRunner"])
    found["pretraining"] = _record_hashes(out)
    assert found == EXPECTED


# Recorded on the shipped tiny vocabulary and the inputs above.
EXPECTED = {
    "classification": {
        "examples": {
            "read": 12,
            "skipped": {
                "bad_label": 0,
                "empty": 0,
                "missing_field": 0,
                "undecodable": 0
            },
            "written": 12
        },
        "task": {
            "has_text_pair": True,
            "label_names": [
                "neg",
                "pos"
            ],
            "num_classes": 2,
            "task_type": "classification"
        },
        "train-00000-of-00003.tfrecord": "c9686dfdbe42488eba2bce4d7f3d2296c62c5a4ff26bb8900d55873098c2d2d2",
        "train-00001-of-00003.tfrecord": "fc78a413ba866cfc5c81b1054721ce7b5079b3f2f60356793adc6ac45a228663",
        "train-00002-of-00003.tfrecord": "600f4fe8b07fc0feb1bc23a7b00686c7b19b5f991b2cb64be7dc6e7dd6d29f96"
    },
    "long_documents": {
        "examples": {
            "read": 6,
            "skipped": {
                "bad_label": 0,
                "empty": 0,
                "missing_field": 0,
                "undecodable": 0
            },
            "written": 6
        },
        "task": {
            "has_text_pair": False,
            "label_names": [
                "a",
                "b",
                "c"
            ],
            "num_classes": 3,
            "task_type": "classification"
        },
        "train-00000-of-00002.tfrecord": "b2c9371db2d08aff4bf3d65bc3689bc23966a2e42ecfaa9920aa613835047272",
        "train-00001-of-00002.tfrecord": "0c72ca3042081cc9675ddf4ffa459394114ee95e59e7b781d6fe10d0f992867a"
    },
    "multiple_choice": {
        "examples": {
            "read": 12,
            "skipped": {
                "bad_label": 0,
                "empty": 0,
                "missing_field": 0,
                "undecodable": 0
            },
            "written": 12
        },
        "task": {
            "has_text_pair": True,
            "label_names": None,
            "num_classes": 4,
            "task_type": "multiple_choice"
        },
        "train-00000-of-00002.tfrecord": "b612e399ec109e85b1954a4585b37e99963b04e53a1e45a3cb1eac1ffc50f945",
        "train-00001-of-00002.tfrecord": "c2926a15b7a2b7f8b81f194a9f68ac17d9a1ba1b9e0120a050bbef3e42208ea5"
    },
    "pretraining": {
        "pretrain-00000-of-00002.tfrecord": "d081dd14f80d71e9a2e233fde5ff953bdce48334121d9e0f8869b845b0e0c136",
        "pretrain-00001-of-00002.tfrecord": "2459f14db75fd52ac9b080d75b1db48ec421ad0e667d922caf12b1b59bea5a74"
    },
    "regression": {
        "examples": {
            "read": 12,
            "skipped": {
                "bad_label": 0,
                "empty": 0,
                "missing_field": 0,
                "undecodable": 0
            },
            "written": 12
        },
        "task": {
            "has_text_pair": True,
            "label_names": None,
            "num_classes": None,
            "task_type": "regression"
        },
        "train-00000-of-00002.tfrecord": "f4194bb32b8d063cd327387d794f7952e733573f1fd2c08243217d418461c978",
        "train-00001-of-00002.tfrecord": "ba11a38c7a6fadb0807a1849ba3ebb12e358610f313e96a4019c24a791380227"
    },
    "span": {
        "examples": {
            "read": 2,
            "skipped": {
                "bad_label": 0,
                "empty": 0,
                "missing_field": 0,
                "undecodable": 0
            },
            "written": 2
        },
        "task": {
            "has_text_pair": True,
            "label_names": None,
            "num_classes": None,
            "task_type": "span"
        },
        "train-00000-of-00002.tfrecord": "79f8e841a6a1ccd60f236ef1705b670670016dd1af4ff22aa8720644cf17a16b",
        "train-00001-of-00002.tfrecord": "3d135a037f4d3e74799b37de1cb1a4a65cb9bb10645380139c6995cd0ec89bbd"
    },
    "token_classification": {
        "examples": {
            "read": 12,
            "skipped": {
                "bad_label": 0,
                "empty": 0,
                "missing_field": 0,
                "undecodable": 0
            },
            "written": 12
        },
        "task": {
            "has_text_pair": True,
            "label_names": [
                "O",
                "B",
                "I"
            ],
            "num_classes": 3,
            "task_type": "token_classification"
        },
        "train-00000-of-00002.tfrecord": "89f3417256dd844e2dc7dd56a52fb2db07ca4462e96541b77fe55bce586c1005",
        "train-00001-of-00002.tfrecord": "b038dea5cd15a0099e765276fa3e7a3b4787fa5324ca321b9fcce31e2c5be692"
    }
}
