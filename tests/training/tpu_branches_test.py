"""Every branch on TPUStrategy, forced on CPU.

`tf.distribute.TPUStrategy` is replaced by `FakeTPUStrategy`, a one-device CPU
strategy, so each `isinstance(strategy, tf.distribute.TPUStrategy)` in the
package takes its TPU branch. The branches (grep "TPU" xlnet_tf/):

- `training/strategy.py resolve_strategy`: "tpu" on this machine (no TPU) is a named
  error with TensorFlow's own cause; the TPU VM, named TPU and no-TPU cases are in
  `tpu_vm_strategy_test.py`.
- `optimizers/fused_adamw_muon.py FusedAdamWMuon._uses_fused_update`: Keras' own update under
  TPUStrategy (the step is XLA-compiled there), with the same numbers.
- `models/xlnet_pretrainer.py XLNetPretrainer._with_static_batch`: a shape annotation,
  not EnsureShape, for an unknown batch dimension.
- `training/pretraining_run.py` / `pretrain_cli.py`: `distribution.tpu` (`--tpu`)
  reaches the resolver; a TPU reached by name refuses local paths before connecting.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tests.training.helpers import (TINY_RUN, cyclic_tokens, synthetic_batches, tiny_config,
                                    write_records)
from tests.training.optimizer_test import _gradients, _variables
from xlnet_tf.optimizers.layerwise_adamw import LayerwiseAdamW
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.training import strategy as strategy_module
from xlnet_tf.optimizers.all_reduced_adamw import AllReducedAdamW
from xlnet_tf.optimizers.build_optimizer import build_optimizer
from xlnet_tf.pretraining.pretraining_config import run_config_from_dict
from xlnet_tf.training.xla_check import function_op_types, jit_compiled_functions, xla_step_report


class FakeTPUStrategy(tf.distribute.OneDeviceStrategy):
    """A one-device CPU strategy that passes `isinstance(s, tf.distribute.TPUStrategy)` once patched."""

    def __init__(self):
        super().__init__("/cpu:0")


@pytest.fixture
def fake_tpu(monkeypatch):
    monkeypatch.setattr(tf.distribute, "TPUStrategy", FakeTPUStrategy)
    return FakeTPUStrategy()


# ------------------------------------------------------------- strategy resolution


def test_tpu_requested_on_a_machine_without_one_is_a_named_error():
    with pytest.raises(strategy_module.StrategyError, match="--strategy tpu: no TPU found"):
        strategy_module.resolve_strategy("tpu")


def _tiny_config_values(**distribution):
    values = {}
    for item in TINY_RUN:
        key, value = item.split("=", 1)
        section, name = key.split(".")
        values.setdefault(section, {})[name] = yaml.safe_load(value)
    values.setdefault("distribution", {}).update(distribution)
    return values


def test_run_pretraining_hands_distribution_tpu_to_the_resolver(monkeypatch, tmp_path):
    from xlnet_tf.pretraining.pretraining_run import run_pretraining

    records = write_records(str(tmp_path / "records"), cyclic_tokens(600), vocabulary_size=40)
    values = _tiny_config_values(strategy="tpu", tpu="my-tpu-node")
    values["data"]["train_files"] = records
    seen = {}

    class Stop(Exception):
        pass

    def resolve(name, **kwargs):
        seen.update(kwargs, name=name)
        raise Stop

    monkeypatch.setattr(strategy_module, "resolve_strategy", resolve)
    # A TPU reached by name: the local records and work directory are refused before connecting.
    with pytest.raises(strategy_module.StrategyError,
                       match=r"TPU 'my-tpu-node' is reached by name .* must be on gs://"):
        run_pretraining(run_config_from_dict(values), str(tmp_path / "run"))
    assert seen == {} and not (tmp_path / "run").exists()
    values["distribution"]["tpu"] = "local"  # The attached chips of a TPU VM read local files.
    with pytest.raises(Stop):
        run_pretraining(run_config_from_dict(values), str(tmp_path / "run"))
    assert seen["name"] == "tpu" and seen["tpu_address"] == "local"


def test_pretrain_cli_tpu_flag_sets_distribution_tpu(monkeypatch, tmp_path):
    from xlnet_tf.cli import pretrain as pretrain_cli
    from xlnet_tf.pretraining import pretraining_run

    seen = {}

    class Stop(Exception):
        pass

    def run(config, workdir, **kwargs):
        seen.update(config=config)
        raise Stop

    monkeypatch.setattr(pretraining_run, "run_pretraining", run)
    with pytest.raises(Stop):
        pretrain_cli.main(["--config", "tiny", "--workdir", str(tmp_path / "run"),
                           "--set", "data.train_files=unused", "--tpu", "grpc://10.1.2.3:8470"])
    assert seen["config"].distribution.tpu == "grpc://10.1.2.3:8470"


def test_finetune_cli_takes_the_same_tpu_flag(capsys):
    from xlnet_tf.cli import finetune as finetune_cli

    assert finetune_cli.main(["--config", "glue_mrpc", "--print-config", "--tpu", "my-node"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["distribution"]["tpu"] == "my-node"


# ------------------------------------------------------------- optimizer update




def _run_updates(make_optimizer, strategy):
    """Three clipped, decayed updates under `strategy`; the variables and the traced op types."""
    with strategy.scope():
        variables = _variables()
        optimizer = make_optimizer(variables)
        optimizer.build(variables)
    apply = tf.function(lambda gradients: strategy.run(optimizer.apply, args=(gradients, variables)))
    for step in range(3):
        apply(_gradients(step))
    op_types = function_op_types(apply.get_concrete_function(_gradients(0)))
    with strategy.scope():  # The branch reads the strategy in force where the update runs.
        fused = optimizer._uses_fused_update()
    return [v.numpy() for v in variables], fused, op_types


def _adamw(variables):
    optimizer = AllReducedAdamW(learning_rate=0.05, weight_decay=0.1, epsilon=1e-6,
                                global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_list=[variables[1]])
    return optimizer


def _layerwise(variables):
    return LayerwiseAdamW(learning_rate_multipliers=[([variables[0]], 0.25)], learning_rate=0.05,
                          weight_decay=0.1, epsilon=1e-6, global_clipnorm=1.0)


@pytest.mark.parametrize("make_optimizer", [_adamw, _layerwise], ids=["adamw", "layerwise"])
def test_under_tpu_the_optimizer_uses_keras_update_with_the_same_numbers(fake_tpu, make_optimizer):
    on_tpu, uses_fused, tpu_ops = _run_updates(make_optimizer, fake_tpu)
    assert not uses_fused
    assert "ResourceApplyAdam" not in tpu_ops  # Keras' element-wise update, XLA fuses it.
    fused, uses_fused, fused_ops = _run_updates(make_optimizer, tf.distribute.get_strategy())
    assert uses_fused and "ResourceApplyAdam" in fused_ops
    # The kernel forms 1 - beta_2 from float32(0.999) (Keras from the Python float).
    for a, b in zip(on_tpu, fused):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The layer-wise multiplier acted: variable 0 moved 4x less than in plain AdamW.
    if make_optimizer is _layerwise:
        plain, _, _ = _run_updates(_adamw, fake_tpu)
        start = _variables()[0].numpy()
        assert np.abs(on_tpu[0] - start).max() < 0.5 * np.abs(plain[0] - start).max()


# ------------------------------------------------------------- static batch in the step


def _pinned_batch_ops(strategy, jit_compile):
    with strategy.scope():
        model = XLNetPretrainer(XLNetBackbone(tiny_config(memory_length=0)))
    model.jit_compile = jit_compile
    model.set_static_batch_size(4)

    @tf.function(input_signature=[tf.TensorSpec((None, 8), tf.int32)])
    def pin(token_ids):
        pinned = model._with_static_batch("token_ids", token_ids)
        assert pinned.shape == (4, 8), pinned.shape  # Static at trace time.
        return pinned

    with strategy.scope():  # As in fit, where the step is traced under the model's strategy.
        return function_op_types(pin.get_concrete_function())


def test_under_tpu_an_unknown_batch_dimension_is_annotated_not_checked_at_run_time(fake_tpu):
    assert "EnsureShape" not in _pinned_batch_ops(fake_tpu, jit_compile=False)
    # Contrast: the same model without TPU and without XLA checks the size with EnsureShape.
    assert "EnsureShape" in _pinned_batch_ops(tf.distribute.get_strategy(), jit_compile=False)


def test_under_tpu_a_batch_of_another_static_size_is_a_named_error(fake_tpu):
    with fake_tpu.scope():
        model = XLNetPretrainer(XLNetBackbone(tiny_config(memory_length=0)))
    model.set_static_batch_size(4)
    with pytest.raises(ValueError, match=r"'segment_ids' has per-replica batch size 2.*set up for 4"):
        model._with_static_batch("segment_ids", tf.zeros((2, 8), tf.int32))


def test_under_tpu_the_whole_pretraining_step_with_keras_update_is_one_xla_computation(fake_tpu):
    batch = {k: tf.constant(v) for k, v in synthetic_batches(1, 4)[0].items()}
    with fake_tpu.scope():
        keras.utils.set_random_seed(0)
        model = XLNetPretrainer(XLNetBackbone(tiny_config()))
        optimizer = build_optimizer(model, learning_rate=1e-2, warmup_steps=0, train_steps=10)
        model.compile(optimizer=optimizer, jit_compile=True, steps_per_execution=2)
        optimizer.build(model.trainable_variables)
        model.enable_recurrence_memory(4)
    model.make_train_function()
    [step] = jit_compiled_functions(model.train_function)
    report = xla_step_report(step, batch)
    assert report.problems() == []
    assert report.captures(model.recurrence_memory.variable)
    assert all(report.captures(v) for v in optimizer._momentums + model.trainable_variables)
    ops = function_op_types(step.get_concrete_function(batch))
    assert "ResourceApplyAdam" not in ops and "EnsureShape" not in ops
    before = [w.copy() for w in model.get_weights()]
    assert np.isfinite(float(step(batch)["loss"]))
    assert all(np.abs(a - b).max() > 0 for a, b in zip(model.get_weights(), before))
