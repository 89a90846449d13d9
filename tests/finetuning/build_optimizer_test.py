"""`build_optimizer`: the config keys one to one, every part of the recipe reachable from `compile()`."""

import dataclasses
import inspect

import keras
import numpy as np
import pytest

from xlnet_tf.finetuning.finetuning_config import FinetuneOptimizerSection, load_finetune_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.optimizers import AllReducedAdamW, LayerwiseAdamW, build_optimizer
from xlnet_tf.optimizers.build_optimizer import BUILD_OPTIMIZER_ARGUMENTS
from xlnet_tf.pretraining.pretraining_config import run_config_from_dict
from xlnet_tf.training.run_sections import optimizer_arguments

TINY = XLNetConfig(vocabulary_size=20, num_layers=3, num_heads=2, head_dim=4, hidden_dim=8, intermediate_dim=16)


def _classifier():
    return XLNetClassifier(XLNetBackbone(TINY), num_classes=2)


def test_arguments_are_the_finetune_optimizer_keys_with_their_defaults():
    defaults = {name: p.default for name, p in inspect.signature(build_optimizer).parameters.items()}
    section = {f.name: f.default for f in dataclasses.fields(FinetuneOptimizerSection)}
    assert {key: defaults[key] for key in section} == section
    config = load_finetune_config([], ["task.train_file=t.jsonl", "training.global_batch_size=2",
                                       "training.train_steps=300", "optimizer.layer_decay=0.75"])
    arguments = optimizer_arguments(config.optimizer, config.training)
    assert set(arguments) <= set(BUILD_OPTIMIZER_ARGUMENTS)
    assert arguments["train_steps"] == 300 and arguments["layer_decay"] == 0.75
    assert arguments["gradient_accumulation_steps"] == 1 and arguments["loss_scaling"] is False


def test_compile_reaches_schedule_clip_layer_decay_and_decay_exclusions():
    classifier = _classifier()
    classifier.compile(learning_rate=1e-3, warmup_steps=10, train_steps=110, end_learning_rate=1e-4,
                       decay_power=2.0, weight_decay=0.05, adam_epsilon=1e-8, beta_1=0.8, beta_2=0.98,
                       clip_norm=0.5, layer_decay=0.5)
    optimizer = classifier.optimizer
    assert type(optimizer) is LayerwiseAdamW
    schedule = optimizer._learning_rate
    # Halfway up the warmup, then halfway down a square decay from 1e-3 to 1e-4.
    np.testing.assert_allclose([float(schedule(5)), float(schedule(60))], [5e-4, 1e-4 + 9e-4 / 4], rtol=1e-6)
    assert (optimizer.global_clipnorm, optimizer.weight_decay, optimizer.epsilon) == (0.5, 0.05, 1e-8)
    assert (optimizer.beta_1, optimizer.beta_2) == (0.8, 0.98)
    blocks = classifier.backbone.blocks
    for i, block in enumerate(blocks):
        for variable in block.trainable_variables:
            assert optimizer.learning_rate_multiplier(variable) == 0.5 ** (len(blocks) - 1 - i)
    assert optimizer.learning_rate_multiplier(classifier.backbone.token_embedding.embeddings) == 1.0
    decayed = {v.path: optimizer._use_weight_decay(v) for v in classifier.trainable_variables}
    assert decayed["xlnet_backbone/token_embedding/embeddings"]
    assert not decayed["xlnet_backbone/content_attention_bias"]
    assert not any(decay for path, decay in decayed.items() if "layer_norm" in path or path.endswith("bias"))
    assert sum(decayed.values()) > len(decayed) // 2


def test_compile_defaults_are_the_builders():
    classifier = _classifier()
    classifier.compile()
    built = build_optimizer(classifier)
    compiled = classifier.optimizer.get_config()
    for key in ("learning_rate", "weight_decay", "epsilon", "beta_1", "beta_2", "global_clipnorm",
                "multipliers_by_path", "fused"):
        assert keras.saving.serialize_keras_object(compiled[key]) == \
            keras.saving.serialize_keras_object(built.get_config()[key]), key
    # Without train_steps the rate holds after the 100-step warmup.
    schedule = classifier.optimizer._learning_rate
    np.testing.assert_allclose([float(schedule(50)), float(schedule(100)), float(schedule(10 ** 6))],
                               [1e-5, 2e-5, 2e-5], rtol=1e-6)


def test_compile_refuses_optimizer_settings_with_another_optimizer():
    with pytest.raises(ValueError, match=r"\['layer_decay'\] set the default optimizer \(optimizer=\"auto\"\), "
                                         r"but optimizer='adam' was given: pass them to "
                                         r"xlnet_tf.optimizers.build_optimizer instead, or drop them."):
        _classifier().compile(optimizer="adam", layer_decay=0.5)


def test_pretrainer_gets_the_all_reduced_optimizer_from_its_config():
    config = run_config_from_dict({"model": {"vocabulary_size": 20, "num_layers": 2, "num_heads": 2,
                                             "head_dim": 4, "hidden_dim": 8, "intermediate_dim": 16},
                                   "data": {"train_files": "x"},
                                   "training": {"global_batch_size": 2, "train_steps": 200,
                                                "steps_per_epoch": 100, "gradient_accumulation_steps": 2,
                                                "mixed_precision": "mixed_float16"}})
    model = XLNetPretrainer(XLNetBackbone(config.model))
    optimizer = build_optimizer(model, **optimizer_arguments(config.optimizer, config.training))
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    inner = optimizer.inner_optimizer
    assert type(inner) is AllReducedAdamW and inner.gradient_accumulation_steps == 2
    assert inner._learning_rate.accumulation_steps == 2
    assert not inner._use_weight_decay(model.lm_bias)


def test_out_of_range_settings_name_the_argument():
    with pytest.raises(ValueError, match=r"warmup_steps \(100\) exceeds train_steps \(50\)\."):
        build_optimizer(_classifier(), train_steps=50)
    with pytest.raises(ValueError, match=r"layer_decay must be in \(0, 1\], got 1.5\."):
        build_optimizer(_classifier(), layer_decay=1.5)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match=r"layer_decay \(0.5\) needs a model with an XLNet backbone "
                                         r"\(`model.backbone.blocks`\); Sequential has none\."):
        build_optimizer(model, layer_decay=0.5)
