"""TPU readiness checked on CPU: each train step is one XLA computation with no host ops.

The pretraining step (forward, backward, AdamW update, recurrence-memory update)
at the sequence settings of configs/pretrain/base.yaml and large.yaml, and the
classifier and span-labeler fine-tuning steps with the layer-wise AdamW, are
taken from Keras' own `train_function` and lowered to HLO. Widths are tiny;
sequence length, reuse, memory, predictions, permutation blocks and bi_data are
the configs'.
"""

import dataclasses
import os
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tests.training.helpers import cyclic_tokens, write_records
from xlnet_tf import tasks
from xlnet_tf.data.pretraining import pretraining_dataset
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.optimizers.build_optimizer import build_optimizer
from xlnet_tf.training.run_sections import optimizer_arguments
from xlnet_tf.pretraining.pretraining_config import run_config_from_dict
from xlnet_tf.training.xla_check import (XlaCheckError, jit_compiled_functions,
                                         ops_without_xla_kernel, scan_hlo, xla_step_report)

CONFIGS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "configs")
TINY_WIDTHS = {"vocabulary_size": 64, "num_layers": 2, "num_heads": 2, "head_dim": 8,
               "hidden_dim": 16, "intermediate_dim": 32}
VOCAB = TINY_WIDTHS["vocabulary_size"]


def _tiny_run_config(name, **sections):
    """The shipped pretraining config `name` with tiny widths and everything else as shipped."""
    with open(os.path.join(CONFIGS, "pretrain", f"{name}.yaml")) as f:
        values = yaml.safe_load(f)
    values["model"].update(TINY_WIDTHS)
    for section, overrides in sections.items():
        values[section].update(overrides)
    return run_config_from_dict(values)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_records(str(tmp_path_factory.mktemp("records")), cyclic_tokens(12000, period=50),
                         vocabulary_size=VOCAB, chunk_length=128)


def _pretrainer_and_batch(config, records):
    """A compiled pretrainer set up as `run_pretraining` does, and one real batch of its reader."""
    m, d, t, o = config.model, config.data, config.training, config.optimizer
    per_replica = 2  # bi_data needs an even per-replica batch.
    batch = next(iter(pretraining_dataset(
        records, sequence_length=d.sequence_length, reuse_length=m.reuse_length, num_predict=d.num_predict,
        perm_size=d.perm_size, batch_size=per_replica, bi_data=m.bi_data, seed=0,
        sentencepiece_model=None)))
    keras.utils.set_random_seed(0)
    dtype = None if t.mixed_precision == "float32" else t.mixed_precision
    model = XLNetPretrainer(XLNetBackbone(m, dtype=dtype))
    optimizer = build_optimizer(model, **optimizer_arguments(o, t))
    model.compile(optimizer=optimizer, jit_compile=t.jit_compile,
                  steps_per_execution=t.steps_per_execution)
    optimizer.build(model.trainable_variables)
    model.enable_recurrence_memory(per_replica)
    model.make_train_function()
    return model, batch


def _the_one_xla_step(model):
    steps = jit_compiled_functions(model.train_function)
    assert len(steps) == 1, f"expected one XLA-compiled function in the train function, got {steps}"
    return steps[0]


def _assert_step_holds_the_whole_update(report, model, unused=()):
    """Every weight, optimizer slot and the step counter are inputs of the one XLA step.

    `unused`: name parts of variables without a gradient in this step (no update at all).
    """
    optimizer = getattr(model.optimizer, "inner_optimizer", model.optimizer)
    state = [optimizer.iterations, *optimizer._momentums, *optimizer._velocities]  # noqa: SLF001
    outside = [v.path for v in list(model.trainable_variables) + state
               if not report.captures(v) and not any(u in v.path for u in unused)]
    assert not outside, f"variables read or updated outside the XLA step: {outside}"
    assert not report.captures(tf.Variable(0.0)), "captures() must not match unrelated variables"


@pytest.mark.large
@pytest.mark.parametrize("name", ["base", "large"])
def test_pretraining_step_is_one_xla_computation_at_the_config_sequence_settings(name, records):
    config = _tiny_run_config(name)
    assert config.training.jit_compile and config.model.bi_data
    assert (config.data.sequence_length, config.model.reuse_length, config.model.memory_length,
            config.data.num_predict, config.data.perm_size) == (512, 256, 384, 85, 256)
    model, batch = _pretrainer_and_batch(config, records)
    assert batch["perm_mask"].shape == (2, 512, 512)
    report = xla_step_report(_the_one_xla_step(model), batch)

    assert report.problems() == []
    assert report.opcodes["dot"] > 0 and "rng-bit-generator" in report.opcodes  # matmuls, dropout
    _assert_step_holds_the_whole_update(report, model)
    assert report.captures(model.recurrence_memory.variable)
    # bfloat16 compute (the configs' mixed_bfloat16) reaches the HLO.
    assert "bf16[" in report.hlo


@pytest.mark.large
def test_pretraining_xla_step_runs_and_updates_weights_optimizer_and_memory(records):
    # Executing means LLVM-compiling the whole step, about a minute at seq 512 on a busy
    # 2-core CPU; the lowering above is checked at 512, the run here at the configs'
    # ratios scaled down 8x (seq 64, reuse 32, memory 48, 11 predictions, blocks of 32).
    config = _tiny_run_config(
        "base", model={"reuse_length": 32, "memory_length": 48},
        data={"sequence_length": 64, "num_predict": 11, "perm_size": 32},
        optimizer={"warmup_steps": 0})  # Warmup would make the first update zero.
    model, batch = _pretrainer_and_batch(config, records)
    step = _the_one_xla_step(model)
    before = [w.copy() for w in model.get_weights()]
    losses = [float(step(batch)["loss"]) for _ in range(2)]
    assert np.all(np.isfinite(losses))
    assert int(model.optimizer.iterations.numpy()) == 2
    changed = sum(np.abs(a - b).max() > 0 for a, b in zip(model.get_weights(), before))
    assert changed == len(before)
    memory = model.recurrence_memory.local_values()[0]  # [B, layers, M, H]
    assert memory.shape == (2, 2, 48, 16) and np.abs(memory.astype("float32")).max() > 0


def _finetuning_model(task_type, sequence_length, batch_size):
    """A task model compiled and built as `run_finetuning` does, and one batch (x, y)."""
    keras.utils.set_random_seed(0)
    # Fine-tuning reads no memory and no backward copies (as the original run_classifier/run_squad).
    config = dataclasses.replace(_tiny_run_config("base").model, bi_data=False, memory_length=0)
    backbone = XLNetBackbone(config, dtype="mixed_bfloat16")
    task = types.SimpleNamespace(task_type=task_type, num_classes=3, start_n_top=5, end_n_top=5,
                                 head_dropout=0.1)
    model = tasks.task_type(task_type).build_model(task, backbone)
    model.build_with_dummy_inputs()
    model.compile(jit_compile=True, steps_per_execution=10, learning_rate=3e-5, warmup_steps=10, train_steps=100,
                  layer_decay=0.75)
    rng = np.random.default_rng(0)
    token_ids = rng.integers(9, VOCAB, (batch_size, sequence_length)).astype("int32")
    token_ids[:, -1] = 3  # <cls> last
    x = {"token_ids": token_ids,
         "segment_ids": np.zeros((batch_size, sequence_length), "int32"),
         "padding_mask": np.ones((batch_size, sequence_length), "int32")}
    if task_type == "span":
        starts = rng.integers(0, sequence_length // 2, batch_size).astype("int32")
        x["start_positions"] = starts
        y = {"start_logits": starts, "end_logits": starts + 2,
             "cls_logits": np.zeros((batch_size,), "float32")}
    else:
        y = rng.integers(0, 3, (batch_size,)).astype("int32")
    x, y = tf.nest.map_structure(tf.constant, (x, y))
    prediction = model(x, training=False)
    model.compute_loss(x=x, y=y, y_pred=prediction)
    model.compute_metrics(x, y, prediction, sample_weight=None)
    model.reset_metrics()
    model.optimizer.build(model.trainable_variables)
    model.make_train_function()
    return model, (x, y)


@pytest.mark.parametrize("task_type,sequence_length", [("classification", 128), ("span", 512)])
def test_finetuning_step_is_one_xla_computation(task_type, sequence_length):
    model, batch = _finetuning_model(task_type, sequence_length, batch_size=2)
    report = xla_step_report(_the_one_xla_step(model), batch)
    assert report.problems() == []
    # The query stream's mask embedding gets no gradient without target_mapping.
    _assert_step_holds_the_whole_update(report, model, unused=("mask_embedding",))


def test_a_host_op_in_the_step_is_named():
    @tf.function(jit_compile=True)
    def step(x):
        return tf.py_function(lambda v: v * 2.0, [x], tf.float32) + 1.0

    x = tf.constant([1.0, 2.0])
    assert "EagerPyFunc" in ops_without_xla_kernel(step.get_concrete_function(x))
    with pytest.raises(XlaCheckError, match=r"cannot compile 'step'.*EagerPyFunc"):
        xla_step_report(step, x)
    with pytest.raises(XlaCheckError, match="not a tf.function with jit_compile=True"):
        xla_step_report(tf.function(lambda v: v), x)


def test_scan_hlo_finds_host_transfers_and_dynamic_shapes():
    hlo = """HloModule m
ENTRY %main (p: f32[4,3]) -> f32[4,3] {
  %p = f32[4,3]{1,0} parameter(0)
  %token = token[] after-all()
  %send = (f32[4,3]{1,0}, u32[], token[]) send(f32[4,3]{1,0} %p, token[] %token), channel_id=1, is_host_transfer=true
  %d = f32[<=4,3]{1,0} set-dimension-size(f32[4,3]{1,0} %p, s32[] %n), dimensions={0}
  ROOT %add = f32[4,3]{1,0} add(f32[4,3]{1,0} %p, f32[4,3]{1,0} %p)
}
"""
    opcodes, host, dynamic = scan_hlo(hlo)
    assert opcodes == {"parameter": 1, "after-all": 1, "send": 1, "set-dimension-size": 1, "add": 1}
    assert len(host) == 1 and "send(" in host[0]
    assert len(dynamic) == 1 and "set-dimension-size" in dynamic[0]
