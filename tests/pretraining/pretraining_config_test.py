"""Run config, schedule, optimizer split and batch arithmetic: fast unit tests."""

import os

import numpy as np
import pytest

from xlnet_tf.models.xlnet_config import ConfigError
from xlnet_tf.optimizers import WarmupDecaySchedule, build_optimizer, uses_weight_decay
from xlnet_tf.pretraining.pretraining_config import load_run_config, parse_override
from xlnet_tf.training.strategy import StrategyError, resolve_batch_sizes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_schedule_is_linear_warmup_then_linear_decay():
    schedule = WarmupDecaySchedule(1e-3, warmup_steps=10, decay_steps=110)
    values = [float(schedule(s)) for s in (0, 5, 10, 60, 110, 500)]
    np.testing.assert_allclose(values, [0, 5e-4, 1e-3, 5e-4, 0, 0], atol=1e-9)
    squared = WarmupDecaySchedule(1e-3, warmup_steps=0, decay_steps=100, power=2.0)
    np.testing.assert_allclose(float(squared(50)), 1e-3 * 0.25, rtol=1e-6)
    # With accumulation, Keras counts micro-batches; the schedule counts updates.
    accumulated = WarmupDecaySchedule(1e-3, warmup_steps=10, decay_steps=110, accumulation_steps=4)
    np.testing.assert_allclose(float(accumulated(20)), float(schedule(5)), rtol=1e-6)
    assert WarmupDecaySchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()


def test_weight_decay_skips_layer_norm_and_biases():
    from tests.training.helpers import tiny_config
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    model = XLNetPretrainer(XLNetBackbone(tiny_config()))
    decayed = {v.path for v in model.trainable_variables if uses_weight_decay(v)}
    skipped = {v.path for v in model.trainable_variables} - decayed
    assert any("token_embedding" in p for p in decayed)
    assert any("query_kernel" in p for p in decayed)
    assert any("feedforward_intermediate/kernel" in p for p in decayed)
    assert all(("norm" in p or "bias" in p) for p in skipped)
    for name in ("lm_bias", "content_attention_bias", "layer_norm/gamma", "feedforward_output/bias"):
        assert any(name in p for p in skipped), name
    optimizer = build_optimizer(model, learning_rate=1e-3, warmup_steps=1, train_steps=10)
    assert optimizer.epsilon == 1e-6 and optimizer.global_clipnorm == 1.0


def test_batch_sizes_are_named_and_must_divide():
    assert resolve_batch_sizes(global_batch_size=8, per_replica_batch_size_value=None,
                               num_replicas=2) == (8, 4)
    assert resolve_batch_sizes(global_batch_size=None, per_replica_batch_size_value=3,
                               num_replicas=4) == (12, 3)
    with pytest.raises(StrategyError, match="does not divide evenly over 4 replicas"):
        resolve_batch_sizes(global_batch_size=10, per_replica_batch_size_value=None, num_replicas=4)
    with pytest.raises(StrategyError, match="per_replica_batch_size 2 x 2 replicas"):
        resolve_batch_sizes(global_batch_size=8, per_replica_batch_size_value=2, num_replicas=2)


def test_overrides_are_strict_and_last():
    config = load_run_config([os.path.join(REPO, "configs", "pretrain", "tiny.yaml")],
                             ["training.train_steps=100", "optimizer.learning_rate=2e-3",
                              "optimizer.warmup_steps=10"])
    assert config.training.train_steps == 100 and config.optimizer.learning_rate == 2e-3
    assert parse_override("model.dropout=0") == {"model": {"dropout": 0}}
    with pytest.raises(ConfigError, match="section.key"):
        parse_override("dropout=0")
    with pytest.raises(ConfigError, match="optimizer.learning_rate must be float"):
        load_run_config([], ["optimizer.learning_rate=fast", "training.global_batch_size=2"])
    with pytest.raises(ConfigError, match="multiple of training.steps_per_epoch"):
        load_run_config([], ["training.train_steps=150", "training.global_batch_size=2"])
    with pytest.raises(ConfigError, match="data.mask_alpha must be >= 1, got 0"):
        load_run_config([], ["data.mask_alpha=0", "training.global_batch_size=2"])
    assert config.data.mask_alpha == 4  # the tiny config's: 32 of 128 tokens are targets
    with pytest.raises(ConfigError, match="data.max_span must be >= 1, got 0"):
        load_run_config([], ["data.max_span=0", "training.global_batch_size=2"])
    assert load_run_config([], ["training.global_batch_size=2"]).data.max_span == 5  # the original's
    assert load_run_config([], ["training.global_batch_size=2"]).data.mask_alpha == 6  # the original's
    # The original's targets: exactly num_predict, cut spans and single pieces included.
    assert load_run_config([], ["training.global_batch_size=2"]).data.whole_word_targets is False
    assert load_run_config([], ["data.whole_word_targets=true", "training.global_batch_size=2"]
                           ).data.whole_word_targets is True
    with pytest.raises(ConfigError, match="data.whole_word_targets must be bool"):
        load_run_config([], ["data.whole_word_targets=maybe", "training.global_batch_size=2"])
    # The original's order: every order of a span's tokens.
    assert load_run_config([], ["training.global_batch_size=2"]).data.spans_in_reading_order is False
    assert load_run_config([], ["data.spans_in_reading_order=true", "training.global_batch_size=2"]
                           ).data.spans_in_reading_order is True
    with pytest.raises(ConfigError, match="data.spans_in_reading_order must be bool"):
        load_run_config([], ["data.spans_in_reading_order=2", "training.global_batch_size=2"])


@pytest.mark.parametrize("name", ["tiny", "base", "large"])
def test_shipped_configs_load(name):
    config = load_run_config([os.path.join(REPO, "configs", "pretrain", f"{name}.yaml")])
    if name != "tiny":
        assert (config.data.sequence_length, config.model.reuse_length, config.model.memory_length,
                config.data.num_predict, config.data.perm_size, config.model.bi_data) == (
                    512, 256, 384, 85, 256, True)
        assert config.optimizer.adam_epsilon == 1e-6


def test_an_unknown_data_key_is_refused_naming_it(tmp_path):
    """`data.seq_length` is not a key (the length is `data.sequence_length`): refused, in a file or in --set."""
    old = tmp_path / "old.yaml"
    old.write_text("data:\n  seq_length: 64\n")
    tiny = os.path.join(REPO, "configs", "pretrain", "tiny.yaml")
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) \['data.seq_length'\]; known keys of .*sequence_length"):
        load_run_config([tiny, str(old)])
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) \['data.seq_length'\]"):
        load_run_config([tiny], ["data.seq_length=64"])
