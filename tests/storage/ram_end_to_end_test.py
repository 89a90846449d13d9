"""Runs whose every file lives on TensorFlow's in-memory `ram://` filesystem, end to end.

`ram://` stands in for any non-local `tf.io.gfile` filesystem (`gs://`, ...): a
path that reaches `open`/`os.path` anywhere fails here. The filesystem lives
inside one process, so a run on it cannot be SIGKILLed and resumed by a second
process (the second process would see an empty filesystem). The kill is
simulated instead: a callback raises right after the backup of an epoch is
complete, the in-memory model is dropped, and the same run function is called
again on the same work directory, in this process. That leaves the work
directory as a kill at that moment would (the run lock aside: here it is
released on the way out, after a real kill `RunLock` takes over the dead
holder's lock). `tests/training/resume_test.py` covers the real SIGKILL of
`xlnet-tf pretrain` on a local disk with the same run code; the storage layer
differs only in `atomic_files` using `os` for local paths.
"""

import gc
import io
import json
import os
import uuid

import h5py
import numpy as np
import pytest
import tensorflow as tf

from tests.training.helpers import (TINY_RUN, SimulatedKill, cyclic_tokens, kill_after_backup,
                                    sentiment_jsonl, write_records)
from tests.training.subprocess_runs import assert_same_weights
from xlnet_tf.storage import atomic_files

VOCABULARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "tiny_spiece.model")


def _ram(name):
    return f"ram://{name}-{uuid.uuid4().hex}"


def _copy_tree(local_dir, target):
    for name in os.listdir(local_dir):
        atomic_files.copy_file(os.path.join(local_dir, name), os.path.join(target, name))
    return target


def _h5_arrays(path):
    """Every dataset of an HDF5 file on any filesystem, by path."""
    with tf.io.gfile.GFile(path, "rb") as raw, h5py.File(io.BytesIO(raw.read()), "r") as f:
        arrays = {}
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


def _jsonl(path):
    with tf.io.gfile.GFile(path) as f:
        return [json.loads(line) for line in f.read().splitlines() if line.strip()]


class _KillAfterEpoch:
    """A Keras callback (built lazily: keras imported by the run) raising after epoch `epoch` (1-based)."""

    def __new__(cls, epoch):
        import keras

        class Kill(keras.callbacks.Callback):
            def on_epoch_end(self, index, logs=None):
                if index + 1 == epoch:
                    raise SimulatedKill(f"killed after epoch {epoch}")

        return Kill()


@pytest.mark.large
@pytest.mark.slow
def test_pretraining_killed_and_resumed_on_ram_ends_with_the_uninterrupted_weights(tmp_path):
    from xlnet_tf.pretraining.pretraining_run import run_pretraining
    from xlnet_tf.pretraining.pretraining_config import load_run_config

    # The records are read from ram:// too (manifest and shards through gfile).
    local = write_records(str(tmp_path / "records"), cyclic_tokens(3000, period=11), vocabulary_size=40)
    records = _copy_tree(local, _ram("records"))
    config_file = _ram("configs") + "/run.yaml"  # load_run_config reads ram:// YAML too
    atomic_files.write_text(config_file, "training:\n  train_steps: 12\n  steps_per_epoch: 2\n")
    # Dropout on: the resumed run must draw the masks of the uninterrupted one (seeded_dropout).
    tiny = [s for s in TINY_RUN if not s.startswith(("training.train_steps", "training.steps_per_epoch"))]
    overrides = tiny + [f"data.train_files={records}", "training.log_every_steps=1",
                                  "model.dropout=0.1", "model.attention_dropout=0.1"]
    config = load_run_config([config_file], overrides=overrides)
    assert config.training.train_steps == 12

    reference, resumed = _ram("reference"), _ram("resumed")
    run_pretraining(config, reference)
    with pytest.raises(SimulatedKill):
        run_pretraining(config, resumed, extra_callbacks=[_KillAfterEpoch(3)])
    backup = os.path.join(resumed, "backup", "latest.weights.h5")
    assert atomic_files.weights_file_attributes(backup)["xlnet_backup_epoch"] == 3
    gc.collect()  # Nothing of the first attempt's model survives into the second.

    summary = run_pretraining(config, resumed)
    from xlnet_tf.serving.export_pretrained import export_pretrainer

    export_pretrainer(summary["pretrainer"], os.path.join(resumed, "export"),
                      vocabulary=summary["vocabulary"])
    assert summary["first_step"] == 6
    assert [m["step"] for m in _jsonl(os.path.join(resumed, "metrics.jsonl"))] == list(range(1, 13))
    checkpoint = "checkpoints/ckpt-00000012.weights.h5"
    assert_same_weights(_h5_arrays(os.path.join(resumed, checkpoint)),
                        _h5_arrays(os.path.join(reference, checkpoint)))
    # The export of the run's model went to ram:// as well, and loads back from there.
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    preset = os.path.join(resumed, "export", "preset")
    assert tf.io.gfile.exists(os.path.join(resumed, "export", "saved_model", "saved_model.pb"))
    restored = XLNetPretrainer.from_preset(preset)
    bias = _h5_arrays(os.path.join(preset, "lm_head.weights.h5"))["lm_bias"]
    np.testing.assert_array_equal(np.asarray(restored.lm_bias), bias)
    assert np.any(bias != 0)  # trained, so the LM head file was really read




@pytest.fixture(scope="module")
def ram_preset():
    """A tiny backbone preset (with `spiece.model`) written straight to ram://."""
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8,
                                         hidden_dim=16, intermediate_dim=32))
    ones = np.ones((1, 4), "int32")
    backbone({"token_ids": ones, "segment_ids": ones * 0, "padding_mask": ones})
    path = _ram("preset")
    backbone.save_to_preset(path, vocabulary_file=VOCABULARY)
    assert sorted(tf.io.gfile.listdir(path)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                                 "spiece.model", "tokenizer.json"]
    return path


@pytest.mark.large
@pytest.mark.slow
def test_finetuning_killed_and_resumed_on_ram_then_exported_to_ram(ram_preset, monkeypatch):
    import tensorflow_text  # noqa: F401  (SentencePiece ops of the strings-in signature)

    from xlnet_tf.finetuning.finetuning_config import load_finetune_config
    from xlnet_tf.finetuning.finetuning_run import run_finetuning
    from xlnet_tf.models.xlnet_task import load_task_preset
    from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
    from xlnet_tf.serving.export_task_workdir import export_task_workdir
    from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    data = _ram("data")
    atomic_files.write_text(f"{data}/train.jsonl", sentiment_jsonl(48, 0))
    atomic_files.write_text(f"{data}/eval.jsonl", sentiment_jsonl(16, 1))
    # Dropout off: the task head's dropout is not step-seeded, a resumed run would draw other masks.
    settings = [
        f"training.init_from={ram_preset}", f"task.train_file={data}/train.jsonl",
        f"task.eval_file={data}/eval.jsonl",
        "task.sequence_length=16", "task.label_names=[neg, pos]",
        "training.global_batch_size=8", "training.train_steps=8", "training.steps_per_epoch=2",
        "optimizer.learning_rate=0.002", "optimizer.warmup_steps=2", "training.verbose=0",
        "model.dropout=0.0", "model.attention_dropout=0.0", "task.head_dropout=0.0"]
    config = load_finetune_config([], overrides=settings)
    reference, resumed = _ram("ft-reference"), _ram("ft-resumed")
    expected = run_finetuning(config, reference)

    restore = kill_after_backup(monkeypatch, 2)
    with pytest.raises(SimulatedKill):
        run_finetuning(config, resumed)
    restore()
    assert not tf.io.gfile.exists(os.path.join(resumed, "final"))
    gc.collect()
    summary = run_finetuning(config, resumed)
    assert summary["first_step"] == 4
    # The evaluation file on ram://: read, scored the same, results written next to the run.
    assert summary["eval"] == pytest.approx(expected["eval"], rel=1e-5, abs=1e-6)
    results = json.loads(atomic_files.read_text(os.path.join(resumed, "eval_results.json")))
    assert results["step"] == 8 and results["accuracy"] == summary["eval"]["accuracy"]

    final = os.path.join(resumed, "final")
    assert sorted(tf.io.gfile.listdir(final)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                                  "preprocessing.json", "preprocessor.json", "spiece.model",
                                                  "task.json", "task.weights.h5", "tokenizer.json"]
    model = load_task_preset(final)
    # keras-hub's layout: the backbone in model.weights.h5, the head in task.weights.h5.
    assert_same_weights(_h5_arrays(os.path.join(final, "model.weights.h5")),
                        _h5_arrays(os.path.join(reference, "final", "model.weights.h5")))
    head = _h5_arrays(os.path.join(final, "task.weights.h5"))
    reference_head = _h5_arrays(os.path.join(reference, "final", "task.weights.h5"))
    assert sorted(head) == sorted(reference_head) and head
    for key in head:
        np.testing.assert_allclose(head[key], reference_head[key], rtol=1e-5, atol=1e-6)
    # The tokenizer reads its SentencePiece proto from ram:// (as bytes).
    tokenizer = XLNetTokenizer(os.path.join(final, "spiece.model"))
    texts = ["a good day by the river", "the old house was awful"]
    features = TextPreprocessor(tokenizer, XLNetPacker(16))(tf.constant(texts))
    logits = model(features, training=False).numpy()
    reference_logits = load_task_preset(os.path.join(reference, "final"))(features, training=False)
    np.testing.assert_allclose(logits, reference_logits.numpy(), rtol=1e-5, atol=1e-6)

    output = _ram("export") + "/1"
    assert export_task_workdir(resumed, output) == output
    loaded = tf.saved_model.load(output)
    served = loaded.signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["logits"].numpy(), logits, atol=1e-5, rtol=0)
    ids_in = loaded.signatures["serve_token_ids"](**features)
    np.testing.assert_allclose(ids_in["logits"].numpy(), logits, atol=1e-5, rtol=0)

    # Per-epoch evaluation lines in metrics.jsonl on ram://.
    evaluated = _ram("ft-evaluated")
    config = load_finetune_config([], overrides=settings + ["training.train_steps=2"])
    summary = run_finetuning(config, evaluated)
    results = json.loads(atomic_files.read_text(os.path.join(evaluated, "eval_results.json")))
    assert results["step"] == 2 and results["accuracy"] == summary["eval"]["accuracy"]
    assert [m["step"] for m in _jsonl(os.path.join(evaluated, "metrics.jsonl"))
            if m.get("split") == "eval"] == [2]


def test_beam_jobs_write_records_and_manifests_to_ram():
    """Beam's DirectRunner runs in this process by default (in_memory, one worker), so its
    DoFns see the same ram:// filesystem. With `--direct_num_workers N
    --direct_running_mode multi_processing` (or a distributed runner) every worker is its
    own process with its own empty ram://: there, use `gs://` (a real bucket) or a shared disk."""
    from xlnet_tf.cli import prepare_finetuning, prepare_pretraining
    from xlnet_tf.data.finetuning_record_dataset import finetuning_record_dataset, read_finetuning_manifest
    from xlnet_tf.data.pretraining_records import PretrainingRecords

    inputs, vocabulary = _ram("inputs"), _ram("vocab") + "/spiece.model"
    atomic_files.copy_file(VOCABULARY, vocabulary)
    corpus = "\n\n".join(f"the old house {i} was by the river.\nit was a fine day." for i in range(30))
    atomic_files.write_text(f"{inputs}/corpus.txt", corpus + "\n")
    output = _ram("pretraining-records")
    result = prepare_pretraining.run(["--input", f"{inputs}/*.txt", "--vocab", vocabulary,
                                   "--output-dir", output, "--num-shards", "2", "--chunk-length", "16"])
    assert sorted(tf.io.gfile.listdir(output)) == [
        "manifest.json", "pretrain-00000-of-00002.tfrecord", "pretrain-00001-of-00002.tfrecord"]
    assert result.manifest["documents"]["written"] == 30
    records = PretrainingRecords(output)
    assert records.num_tokens == result.manifest["num_tokens"] > 0
    assert records.vocabulary["file"] == vocabulary  # a ram:// path is kept as given
    assert sum(1 for _ in tf.data.TFRecordDataset([s.path for s in records.shards])) == sum(
        s.num_records for s in records.shards)

    atomic_files.write_text(f"{inputs}/train.jsonl", sentiment_jsonl(10, 2))
    output = _ram("finetuning-records")
    manifest = prepare_finetuning.run(["--task-type", "classification", "--input",
                                       f"train={inputs}/train.jsonl", "--vocab", vocabulary,
                                       "--sequence-length", "16", "--num-shards", "2",
                                       "--output-dir", output])
    # The per-shard counts went through gfile (Beam's WriteToText knows no ram://) and are gone.
    assert sorted(tf.io.gfile.listdir(output)) == [
        "manifest.json", "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert manifest["vocabulary"]["file"] == vocabulary
    assert read_finetuning_manifest(output) == manifest
    assert manifest["splits"]["train"]["num_records"] == 10
    assert sum(1 for _ in finetuning_record_dataset(output, "train")) == 10


def test_predict_reads_model_and_inputs_from_ram(ram_preset, capsys):
    """`xlnet-tf predict` with the SavedModel and the --jsonl input both on ram://."""
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.cli.predict import main
    from xlnet_tf.serving.export_task_workdir import export_task_workdir

    task = _ram("task-preset")
    model = XLNetClassifier(XLNetBackbone.from_preset(ram_preset), num_classes=2, dropout=0.0)
    model.build_with_dummy_inputs()
    model.save_to_preset(task, vocabulary_file=os.path.join(ram_preset, "spiece.model"),
                         preprocessing={"task_type": "classification", "sequence_length": 16,
                                        "text_fields": ["text"], "label_names": ["neg", "pos"]})
    exported = export_task_workdir(task, _ram("predict-export"))
    inputs = _ram("predict-inputs") + "/in.jsonl"
    atomic_files.write_text(inputs, '{"text": "a fine day"}\n{"text": "an awful day"}\n')
    predictions = inputs + ".predictions"
    assert main(["--model", exported, "--jsonl", inputs, "--output", predictions]) == 0
    lines = _jsonl(predictions)
    assert [line["text"] for line in lines] == ["a fine day", "an awful day"]
    assert all(line["label_name"] in ("neg", "pos") for line in lines)
    assert main(["--model", exported, "--jsonl", inputs + ".missing"]) == 2
    assert "--jsonl file not found: " + inputs + ".missing" in capsys.readouterr().err


def test_task_preset_errors_name_the_ram_path():
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.models.xlnet_task import load_task_preset

    empty = _ram("empty")
    tf.io.gfile.makedirs(empty)
    with pytest.raises(FileNotFoundError, match=f"No task.json in {empty}"):
        load_task_preset(empty)
    with pytest.raises(FileNotFoundError, match=f"{empty} has no config.json"):
        XLNetClassifier.from_preset(empty, num_classes=2)
    atomic_files.write_text(f"{empty}/task.json", "{not json")
    with pytest.raises(ValueError, match=f"{empty}/task.json is not valid JSON"):
        load_task_preset(empty)
