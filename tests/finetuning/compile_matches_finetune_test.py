"""`classifier.compile(**settings)` + `fit` trains as `xlnet-tf finetune` does with the same config values.

Both paths start from one task preset (dropout 0), see the same five batches (the run's own
training stream, rebuilt with its seed) and must end with the same weights. The settings
exercise every part of the recipe: warmup and polynomial decay to a floor, layer-wise decay,
a global-norm clip, weight decay with its LayerNorm/bias exemptions, Adam's betas and epsilon.
"""

import os

import keras
import numpy as np
import pytest
import yaml

from tests.training.helpers import sentiment_jsonl
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_config import XLNetConfig

VOCABULARY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "tiny_spiece.model")
STEPS, BATCH = 5, 4
OPTIMIZER = {"learning_rate": 0.01, "warmup_steps": 2, "end_learning_rate": 0.001, "decay_power": 2.0,
             "weight_decay": 0.1, "adam_epsilon": 1e-7, "beta_1": 0.8, "beta_2": 0.99, "clip_norm": 0.5,
             "layer_decay": 0.5}


def _task_preset(path):
    keras.utils.set_random_seed(5)
    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8,
                                         hidden_dim=16, intermediate_dim=32, dropout=0.0,
                                         attention_dropout=0.0, memory_length=0))
    classifier = XLNetClassifier(backbone, num_classes=2, dropout=0.0)
    classifier.save_to_preset(path, vocabulary_file=VOCABULARY)
    return path


@pytest.mark.slow
def test_compile_defaults_and_finetune_run_end_with_the_same_weights(tmp_path):
    from xlnet_tf.data.finetuning import finetuning_dataset
    from xlnet_tf.finetuning.finetuning_config import finetune_config_from_dict, load_finetune_config
    from xlnet_tf.finetuning.finetuning_run import run_finetuning
    from xlnet_tf.models.xlnet_task import load_task_preset
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
    from xlnet_tf.training.run_sections import optimizer_arguments

    init = _task_preset(str(tmp_path / "init"))
    (tmp_path / "train.jsonl").write_text(sentiment_jsonl(STEPS * BATCH, 0))
    config = load_finetune_config([], [
        f"task.train_file={tmp_path / 'train.jsonl'}", "task.sequence_length=16",
        f"training.init_from={init}", f"training.global_batch_size={BATCH}",
        f"training.train_steps={STEPS}", f"training.steps_per_epoch={STEPS}", "training.verbose=0",
        *(f"optimizer.{key}={value}" for key, value in OPTIMIZER.items())])
    workdir = str(tmp_path / "run")
    run_finetuning(config, workdir)
    finetuned = load_task_preset(os.path.join(workdir, "final"), preprocessor=None)

    # The run's resolved config (label names read from the file), its batches, the compile() path.
    with open(os.path.join(workdir, "config.yaml")) as f:
        resolved = finetune_config_from_dict(yaml.safe_load(f))
    task = resolved.task
    batches = finetuning_dataset(task, XLNetTokenizer(VOCABULARY, lowercase=task.lowercase), "train",
                                 BATCH, training=True, seed=resolved.training.seed).take(STEPS)
    classifier = load_task_preset(init, preprocessor=None)
    initial = [w.copy() for w in classifier.get_weights()]
    classifier.compile(**optimizer_arguments(resolved.optimizer, resolved.training))
    classifier.fit(batches, epochs=1, verbose=0)

    assert int(classifier.optimizer.iterations) == STEPS
    names = [v.path for v in classifier.weights]
    still = [n for n, a, b in zip(names, initial, classifier.get_weights()) if np.allclose(a, b)]
    assert still == ["xlnet_backbone/mask_embedding"]  # Only pretraining's query stream uses it.
    for name, expected, actual in zip(names, finetuned.get_weights(), classifier.get_weights()):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=name)
