"""A fine-tuning run with an evaluation file and dropout, killed after an epoch's backup and resumed.

The kill is simulated (as in `tests/storage/ram_end_to_end_test.py`): `RunBackup.on_epoch_end`
raises right after the backup of epoch 2 is written, then `run_finetuning` is called again on
the same work directory. The resumed run must train on the uninterrupted run's batches (the
training stream's shuffle order must not depend on anything read before `fit`) with the same
dropout masks, so it ends with the same weights and evaluation.
"""

import json
import os

import h5py
import numpy as np
import pytest

from tests.training.helpers import SimulatedKill, kill_after_backup, sentiment_jsonl

VOCABULARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "tiny_spiece.model")


def _h5_arrays(path):
    with h5py.File(path, "r") as f:
        arrays = {}
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


def _final_weights(workdir):
    """The final preset's arrays: the head's `task.weights.h5` and, in keras-hub's layout, the
    backbone's `model.weights.h5`, keyed `file/array`."""
    final = os.path.join(workdir, "final")
    return {f"{name}/{key}": value for name in ("task.weights.h5", "model.weights.h5")
            if os.path.exists(os.path.join(final, name))
            for key, value in _h5_arrays(os.path.join(final, name)).items()}


def _eval_lines(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [record for record in map(json.loads, filter(str.strip, f))
                if record.get("split") == "eval"]


def _assert_same_results(a, b):
    assert sorted(a) == sorted(b)
    for key, value in a.items():
        if isinstance(value, float):
            np.testing.assert_allclose(value, b[key], rtol=1e-5, atol=1e-6, err_msg=key)
        else:
            assert value == b[key], key


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    import keras

    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    keras.utils.set_random_seed(3)
    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8,
                                         hidden_dim=16, intermediate_dim=32))
    ones = np.ones((1, 4), "int32")
    backbone({"token_ids": ones, "segment_ids": ones * 0, "padding_mask": ones})
    path = str(tmp_path_factory.mktemp("preset"))
    backbone.save_to_preset(path, vocabulary_file=VOCABULARY)
    return path


@pytest.mark.large
@pytest.mark.slow
def test_resumed_run_with_eval_file_and_dropout_ends_with_the_uninterrupted_weights(
        preset, tmp_path, monkeypatch):
    from xlnet_tf.finetuning.finetuning_config import load_finetune_config
    from xlnet_tf.finetuning.finetuning_run import run_finetuning

    # 32 examples: 4 batches a pass, so the resume at step 4 starts the second shuffle pass. A
    # batch read from the training dataset before `fit` (the bug) then always draws that pass's
    # seed from the generator the dataset's iterators share, and `fit` trains on the third pass.
    (tmp_path / "train.jsonl").write_text(sentiment_jsonl(32, 0))
    (tmp_path / "eval.jsonl").write_text(sentiment_jsonl(16, 1))
    config = load_finetune_config([], overrides=[
        f"training.init_from={preset}", f"task.train_file={tmp_path / 'train.jsonl'}",
        f"task.eval_file={tmp_path / 'eval.jsonl'}", "task.sequence_length=16",
        "training.global_batch_size=8", "training.train_steps=8", "training.steps_per_epoch=2",
        "optimizer.learning_rate=0.002", "optimizer.warmup_steps=2", "training.verbose=0",
        "model.dropout=0.1", "model.attention_dropout=0.1", "task.head_dropout=0.1"])
    reference, resumed = str(tmp_path / "reference"), str(tmp_path / "resumed")
    expected = run_finetuning(config, reference)

    restore = kill_after_backup(monkeypatch, 2)
    with pytest.raises(SimulatedKill):
        run_finetuning(config, resumed)
    restore()
    assert not os.path.exists(os.path.join(resumed, "final"))
    summary = run_finetuning(config, resumed)

    assert summary["first_step"] == 4
    with open(os.path.join(resumed, "final", "config.json")) as f:
        backbone_config = json.load(f)["config"]["config"]  # the XLNetConfig inside the serialized backbone
    assert backbone_config["dropout"] == backbone_config["attention_dropout"] == 0.1
    weights, reference_weights = _final_weights(resumed), _final_weights(reference)
    assert sorted(weights) == sorted(reference_weights) and len(weights) > 20
    for name, value in weights.items():
        np.testing.assert_allclose(value, reference_weights[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # The training moved the weights: equal weights are not two untouched copies of the preset.
    assert summary["final"]["loss"] == pytest.approx(expected["final"]["loss"], rel=1e-5)

    _assert_same_results(summary["eval"], expected["eval"])
    with open(os.path.join(resumed, "eval_results.json")) as f:
        results = json.load(f)
    with open(os.path.join(reference, "eval_results.json")) as f:
        reference_results = json.load(f)
    _assert_same_results(results, reference_results)
    # Per-epoch evaluations: the resumed run's (steps 6, 8) are the uninterrupted run's.
    lines = {line["step"]: line for line in _eval_lines(reference)}
    resumed_lines = {line["step"]: line for line in _eval_lines(resumed)}
    # (The kill lands before epoch 2's own evaluation: the resumed work directory has no step 4.)
    assert sorted(lines) == [2, 4, 6, 8] and sorted(resumed_lines) == [2, 6, 8]
    for step in (6, 8):
        _assert_same_results(resumed_lines[step], lines[step])
