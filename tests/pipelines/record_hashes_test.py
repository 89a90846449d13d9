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


def _records_sha256(directory):
    """One sha256 over the job's record files, name and bytes in name order (the manifest holds this
    machine's paths, so it is compared by its entries instead)."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            digest.update(name.encode("utf-8") + b"\0" + (directory / name).read_bytes())
    return digest.hexdigest()


def test_records_are_unchanged(tmp_path):
    found = {}
    for name, argv in _inputs(tmp_path).items():
        out = tmp_path / f"out_{name}"
        length = "24" if name in ("span", "long_documents") else "16"
        manifest = prepare_finetuning.run(argv + ["--vocab", SPIECE, "--sequence-length", length,
                                                  "--output-dir", str(out), "--runner=FnApiRunner"])
        assert not any(manifest["examples"]["skipped"].values()), name
        found[name] = (_records_sha256(out), manifest["examples"]["written"], manifest["task"])
    out = tmp_path / "out_pretraining"
    prepare_pretraining.run(["--input", CORPUS, "--vocab", SPIECE, "--output-dir", str(out), "--num-shards", "2",
                             "--chunk-length", "64", "--seed", "7", "--runner=FnApiRunner"])
    found["pretraining"] = _records_sha256(out)
    assert found == EXPECTED


# Recorded on the shipped tiny vocabulary and the inputs above: (records sha256, records written, the
# manifest's task entry) per job.
EXPECTED = {
    "classification": (
        "189f5e64742413a5365ca072f8f0dbacd99fec84197334a00b892037d7002409", 12,
        {"task_type": "classification", "num_classes": 2, "label_names": ["neg", "pos"], "has_text_pair": True}),
    "long_documents": (
        "0e24abc6e073b0ac9f669813781a340cf88e2d77d5014e94de8b2e84a22fe079", 6,
        {"task_type": "classification", "num_classes": 3, "label_names": ["a", "b", "c"], "has_text_pair": False}),
    "multiple_choice": (
        "bd158f062a866905507513cdd50cf36ed73eef821cd69c445d377da699f2bc3d", 12,
        {"task_type": "multiple_choice", "num_classes": 4, "label_names": None, "has_text_pair": True}),
    "pretraining": "2d67ea5fead79ed6045139092ccbc66407b0bb8d5a70818e5e890fa88300ba4c",
    "regression": (
        "37080ff7ac1cb0cb17b2b63b5d516a08c3398193b2b403c2d9bffb346011d4d2", 12,
        {"task_type": "regression", "num_classes": None, "label_names": None, "has_text_pair": True}),
    "span": (
        "25140b7892c2886c81e2a668c22d33e7261044c0b72957cbb0affe1ac251cab4", 2,
        {"task_type": "span", "num_classes": None, "label_names": None, "has_text_pair": True}),
    "token_classification": (
        "e6f5ae845d93eea3568dd05ad29a9957a1a325e9429922da8e33674ea0e6daed", 12,
        {"task_type": "token_classification", "num_classes": 3, "label_names": ["O", "B", "I"], "has_text_pair": True}),
}
