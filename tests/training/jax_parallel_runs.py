"""Runs on 8 simulated CPU devices for `jax_parallel_runs_test.py`: one device vs DataParallel vs ModelParallel.

`python -m tests.training.jax_parallel_runs OUTPUT.json CHECK [CHECK ...]` runs under
`KERAS_BACKEND=jax` and `XLA_FLAGS=--xla_force_host_platform_device_count=8`
(JAX reads both when it starts, so the test starts this in a fresh process) and
writes `{check: {...losses...}}`. Every run of a check starts from the same
weights and reads the same global batches of 16; dropout is 0.

Checks:
- `keras`: a small Keras model (its layers named as the backbone's feed-forward ones, so
  `model_parallel` splits them) through `KerasDistributionStrategy` (the engine's
  placement and pipeline), one device / DataParallel(8) / ModelParallel(2x4).
- `pretrain`: `run_pretraining` of a tiny XLNet with `distribution.strategy` cpu /
  data_parallel / model_parallel; the per-step losses of metrics.jsonl.
- `finetune`: `run_finetuning` of a tiny classifier, the same three strategies.
"""

import json
import os
import sys
import tempfile

import numpy as np

GLOBAL_BATCH = 16
STRATEGIES = ("cpu", "data_parallel", "model_parallel")
# A tiny XLNet whose heads (4), width (32) and vocabulary (40) split over a model axis of 4.
TINY_MODEL = ["model.vocabulary_size=40", "model.num_layers=2", "model.num_heads=4", "model.head_dim=4",
              "model.hidden_dim=16", "model.intermediate_dim=32", "model.dropout=0.0",
              "model.attention_dropout=0.0"]


def _keras_check():
    import keras
    import tensorflow as tf

    from xlnet_tf.training.jax_distribution import resolve_jax_distribution
    from xlnet_tf.training.tpu_host import TpuHost

    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH * 4, 8)).astype("float32")
    y = (x @ rng.normal(size=(8, 1))).astype("float32")

    def dataset_fn(input_context):
        size = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(size, drop_remainder=True)
        return data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id).repeat()

    results, initial = {}, None
    for name in STRATEGIES:
        placement = resolve_jax_distribution(name, tpu_host=TpuHost())
        dataset = placement.distribute_datasets_from_function(dataset_fn)
        with placement.scope():
            keras.utils.set_random_seed(0)
            model = keras.Sequential([keras.Input((8,)),
                                      keras.layers.Dense(32, activation="tanh", name="feedforward_intermediate"),
                                      keras.layers.Dense(1, name="feedforward_output")])
            if initial is None:
                initial = model.get_weights()
            model.set_weights(initial)
            model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
            history = model.fit(dataset, epochs=4, steps_per_epoch=4, verbose=0)
        results[name] = {"losses": history.history["loss"], "replicas": placement.num_replicas_in_sync,
                         "strategy": placement.describe()["strategy"],
                         "kernel_sharding": str(model.layers[0].kernel.value.sharding)}
    return results


def _records(directory):
    from tests.training.helpers import cyclic_tokens, write_records

    return write_records(os.path.join(directory, "records"), cyclic_tokens(6000, period=11), vocabulary_size=40)


def _step_losses(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    return {"steps": [line["step"] for line in lines if "loss" in line],
            "losses": [line["loss"] for line in lines if "loss" in line]}


def _pretrain_check(memory_length=8):
    import keras

    from xlnet_tf.pretraining.pretraining_config import load_run_config
    from xlnet_tf.pretraining.pretraining_run import run_pretraining

    directory = tempfile.mkdtemp()
    records = _records(directory)
    results, init_from = {}, os.path.join(directory, "init")
    for name in STRATEGIES:
        config = load_run_config([], overrides=TINY_MODEL + [
            f"model.memory_length={memory_length}", "model.reuse_length=8", "model.bi_data=false",
            "data.sequence_length=16", "data.num_predict=4", "data.perm_size=8", f"data.train_files={records}",
            "optimizer.learning_rate=0.003", "optimizer.warmup_steps=2", f"training.global_batch_size={GLOBAL_BATCH}",
            "training.train_steps=6", "training.steps_per_epoch=3", "training.log_every_steps=1",
            "training.verbose=0", f"distribution.strategy={name}"]
            + ([f"training.init_from={init_from}"] if name != STRATEGIES[0] else []))
        workdir = os.path.join(directory, name)
        summary = run_pretraining(config, workdir)
        if name == STRATEGIES[0]:
            # The other runs start from the first run's initial weights: its first checkpoint is not
            # the initial state, so the initial weights are saved from a fresh model of the same seed.
            from xlnet_tf.models.xlnet_backbone import XLNetBackbone
            from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

            keras.utils.set_random_seed(config.training.seed)
            XLNetPretrainer(XLNetBackbone(config.model)).save_to_preset(init_from)
        memory = summary["pretrainer"].recurrence_memory
        sharding = memory.variable.value.sharding if memory is not None else None
        results[name] = dict(_step_losses(workdir), replicas=summary["replicas"],
                             memory_spec=str(getattr(sharding, "spec", None)))
    return results


def _bi_data_check(shared):
    """`bi_data` pretraining over 8 replicas, on this process's backend (TensorFlow: MirroredStrategy over 8
    virtual CPU devices; JAX: DataParallel over 8 devices), from a preset and records in `shared` that
    the first backend to run writes: the per-step losses, compared across the two processes."""
    import keras

    from xlnet_tf.pretraining.pretraining_config import load_run_config
    from xlnet_tf.pretraining.pretraining_run import run_pretraining

    if keras.config.backend() == "tensorflow":
        from xlnet_tf.training.strategy import configure_virtual_cpu_devices

        configure_virtual_cpu_devices(8)  # Before the preset and records below build any tensor.
    init_from = os.path.join(shared, "init")
    overrides = TINY_MODEL + [
        "model.memory_length=8", "model.reuse_length=8", "model.bi_data=true", "data.sequence_length=16",
        "data.num_predict=4", "data.perm_size=8", "optimizer.learning_rate=0.003", "optimizer.warmup_steps=2",
        f"training.global_batch_size={GLOBAL_BATCH}", "training.train_steps=4", "training.steps_per_epoch=2",
        "training.log_every_steps=1", "training.verbose=0", "distribution.strategy=data_parallel",
        "distribution.virtual_cpu_devices=8"]
    if not os.path.isdir(init_from):
        from xlnet_tf.models.xlnet_backbone import XLNetBackbone
        from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

        _records(shared)
        keras.utils.set_random_seed(0)
        XLNetPretrainer(XLNetBackbone(load_run_config([], overrides).model)).save_to_preset(init_from)
    config = load_run_config([], overrides=overrides + [f"data.train_files={os.path.join(shared, 'records')}",
                                                       f"training.init_from={init_from}"])
    workdir = os.path.join(shared, keras.config.backend())
    summary = run_pretraining(config, workdir)
    return dict(_step_losses(workdir), replicas=summary["replicas"])


def _resume_check(strategy="data_parallel"):
    """An uninterrupted run vs one killed after its first backup and run again: the same final weights.

    With dropout on and the recurrence memory: the resumed run must restore weights, optimizer,
    step, memory, data position and the dropout masks' seeds.
    """
    from xlnet_tf.pretraining.pretraining_config import load_run_config
    from xlnet_tf.pretraining.pretraining_run import run_pretraining
    from xlnet_tf.training.run_backup import RunBackup

    directory = tempfile.mkdtemp()
    records = _records(directory)
    config = load_run_config([], overrides=TINY_MODEL + [
        "model.memory_length=8", "model.reuse_length=8", "model.dropout=0.1", "model.attention_dropout=0.1",
        "data.sequence_length=16", "data.num_predict=4", "data.perm_size=8", f"data.train_files={records}",
        "optimizer.learning_rate=0.003", "optimizer.warmup_steps=2", f"training.global_batch_size={GLOBAL_BATCH}",
        "training.train_steps=6", "training.steps_per_epoch=3", "training.log_every_steps=1",
        "training.verbose=0", f"distribution.strategy={strategy}"])
    reference = run_pretraining(config, os.path.join(directory, "reference"))["pretrainer"].get_weights()

    class Killed(Exception):
        pass

    save = RunBackup.on_epoch_end

    def killed_after_first_backup(self, epoch, logs=None):
        save(self, epoch, logs)
        if epoch == 0:
            raise Killed()

    workdir = os.path.join(directory, "resumed")
    RunBackup.on_epoch_end = killed_after_first_backup
    try:
        run_pretraining(config, workdir)
        killed = False
    except Killed:
        killed = True
    finally:
        RunBackup.on_epoch_end = save
    resumed = run_pretraining(config, workdir)["pretrainer"].get_weights()
    differences = [float(np.max(np.abs(a - b))) for a, b in zip(reference, resumed)]
    events = [name for _, _, files in os.walk(os.path.join(workdir, "logs")) for name in files]
    return dict(_step_losses(workdir), killed=killed, max_weight_difference=max(differences),
                reference_losses=_step_losses(os.path.join(directory, "reference"))["losses"],
                checkpoints=sorted(os.listdir(os.path.join(workdir, "checkpoints"))),
                tensorboard_files=len([name for name in events if "tfevents" in name]))


def _finetune_check():
    import keras

    from tests.training.helpers import sentiment_jsonl
    from xlnet_tf.finetuning.finetuning_config import finetune_config_from_dict
    from xlnet_tf.finetuning.finetuning_run import run_finetuning
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_config import XLNetConfig

    directory = tempfile.mkdtemp()
    for split, (n, seed) in {"train": (96, 0)}.items():
        with open(os.path.join(directory, f"{split}.jsonl"), "w") as f:
            f.write(sentiment_jsonl(n, seed))
    preset = os.path.join(directory, "preset")
    keras.utils.set_random_seed(0)
    backbone = XLNetBackbone(XLNetConfig(vocabulary_size=200, num_layers=2, num_heads=4, head_dim=4, hidden_dim=16,
                                         intermediate_dim=32))
    backbone.save_to_preset(preset, vocabulary_file="tests/testdata/tiny_spiece.model")
    results = {}
    for name in STRATEGIES:
        config = finetune_config_from_dict({
            "task": {"train_file": os.path.join(directory, "train.jsonl"), "sequence_length": 16,
                     "head_dropout": 0.0, "label_names": ["neg", "pos"]},
            "model": {"dropout": 0.0, "attention_dropout": 0.0},
            "optimizer": {"learning_rate": 0.002, "warmup_steps": 2},
            "training": {"init_from": preset, "global_batch_size": GLOBAL_BATCH, "train_steps": 6,
                         "steps_per_epoch": 3, "log_every_steps": 1, "verbose": 0, "seed": 0},
            "distribution": {"strategy": name}})
        workdir = os.path.join(directory, name)
        summary = run_finetuning(config, workdir)
        results[name] = dict(_step_losses(workdir), replicas=summary["replicas"])
    return results


def main(argv):
    output, checks = argv[0], argv[1:]
    functions = {"keras": _keras_check, "pretrain": _pretrain_check, "finetune": _finetune_check,
                 "resume": _resume_check, "bi_data": lambda: _bi_data_check(os.path.dirname(output)),
}
    results = {}
    for check in checks:
        try:
            results[check] = functions[check]()
        except Exception as e:  # noqa: BLE001 - reported to the test, which fails naming it
            import traceback

            results[check] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
    with open(output, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1:])
