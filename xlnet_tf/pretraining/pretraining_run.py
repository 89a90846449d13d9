"""One pretraining run: checks, strategy, model, data, `fit`, resume and export.

`run_pretraining(config, workdir)` is what `xlnet-tf pretrain` calls. Every
check that can fail (config, record files, vocabulary, batch split, an
incompatible earlier run in the same work directory) runs before the model is
built. The work directory afterwards holds:

    config.yaml      the fully resolved run config
    metrics.jsonl    one JSON object per logged step (step, loss, accuracy, learning_rate, ...)
    logs/            TensorBoard event files
    checkpoints/     ckpt-{step}.weights.h5, the newest `keep_checkpoints`
    backup/          RunBackup state (resume after any interruption, even mid-write)
    RUN_LOCK         while a run is active: who holds the work directory (one run at a time)
    export/          preset/ and saved_model/ (see `xlnet_tf.serving.export_pretrained`)

Every file is written atomically (`xlnet_tf.storage.atomic_files`).

Resuming: run the same command again. RunBackup restores weights,
optimizer state and the epoch; the input pipeline is rebuilt deterministically
and opens every row at the resumed step (`first_step`), so training continues at the same data
position. Each replica's recurrence memory is saved next to every backup and restored
with it (`RecurrenceMemoryState`).
"""

import contextlib
import hashlib
import logging
import os

from xlnet_tf.models.xlnet_config import ConfigError
from xlnet_tf.storage.run_config_file import read_run_config, write_run_config
from xlnet_tf.storage.run_lock import RunLock
from xlnet_tf.pretraining.pretraining_config import RunConfig, run_config_from_dict

_log = logging.getLogger(__name__)

BACKUP_DIR = "backup"


def check_records(config: RunConfig):
    """Validates the record files and their vocabulary against the model; returns the records."""
    from xlnet_tf.data.pretraining_records import PretrainingRecords, RecordsError

    pattern = config.data.train_files
    if not pattern:
        raise ConfigError("data.train_files is empty: point it at the shards (or directory) "
                          "written by `xlnet-tf prepare-pretraining`.")
    try:
        records = PretrainingRecords(pattern)
    except RecordsError as e:
        raise ConfigError(f"data.train_files: {e}") from e
    size = records.vocabulary_size
    if size is not None and size != config.model.vocabulary_size:
        raise ConfigError(
            f"Vocabulary mismatch: the records of {pattern!r} were made with a vocabulary of "
            f"{size} pieces, but model.vocabulary_size is {config.model.vocabulary_size}.")
    if config.data.vocabulary:
        path = config.data.vocabulary
        if not _isfile(path):
            raise ConfigError(f"data.vocabulary: file not found: {path}")
        proto = _read_bytes(path)
        digest = hashlib.sha256(proto).hexdigest()
        expected = records.vocabulary.get("sha256")
        if expected and digest != expected:
            raise ConfigError(f"Vocabulary mismatch: {path} (sha256 {digest[:12]}...) is not the "
                              f"vocabulary the records of {pattern!r} were made with "
                              f"(sha256 {expected[:12]}...).")
        import sentencepiece as spm

        pieces = spm.SentencePieceProcessor(model_proto=proto).get_piece_size()
        if pieces != config.model.vocabulary_size:
            raise ConfigError(f"Vocabulary mismatch: {path} has {pieces} pieces, but "
                              f"model.vocabulary_size is {config.model.vocabulary_size}.")
    return records


def _isfile(path):
    # Through gfile: vocabularies and presets may be on gs:// or ram://.
    import tensorflow as tf

    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


def _read_bytes(path):
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _sha256(path):
    return hashlib.sha256(_read_bytes(path)).hexdigest()


def check_init_from(config: RunConfig, records):
    """Refuses a `training.init_from` preset whose model or vocabulary differs from the run's.

    Same-size vocabularies with different pieces would train without complaint
    (every id silently meaning another piece), so the preset's vocabulary
    (`spiece.model` or `assets/tokenizer/vocabulary.spm`; `config.json` in either
    preset layout) is compared with the vocabulary recorded in the records' manifest (sha256).
    """
    init = config.training.init_from
    if not init:
        return
    import tensorflow as tf

    if not tf.io.gfile.isdir(init):
        raise ConfigError(f"training.init_from: preset directory not found: {init}")
    config_path = os.path.join(init, "config.json")
    if not _isfile(config_path):
        raise ConfigError(f"training.init_from: {init} has no config.json (is it a preset directory?).")
    from xlnet_tf.models.xlnet_config import XLNetConfig

    try:
        preset = XLNetConfig.from_json(config_path)
    except (ValueError, TypeError, OSError) as e:
        raise ConfigError(f"training.init_from: cannot read {config_path}: {e}") from e
    if preset.vocabulary_size != config.model.vocabulary_size:
        raise ConfigError(f"Vocabulary mismatch: training.init_from {init} has a vocabulary of "
                          f"{preset.vocabulary_size} pieces, but model.vocabulary_size is "
                          f"{config.model.vocabulary_size}.")
    from xlnet_tf.models import preset_io

    # `spiece.model`, else the vocabulary asset of keras-hub's layout.
    vocabulary = (preset_io.vocabulary_path(init, required=False)
                  or os.path.join(init, "spiece.model"))
    expected = records.vocabulary.get("sha256")
    if expected and _isfile(vocabulary):
        digest = _sha256(vocabulary)
        if digest != expected:
            raise ConfigError(
                f"Vocabulary mismatch: training.init_from {init} was trained with {vocabulary} "
                f"(sha256 {digest[:12]}...), but the records of {config.data.train_files!r} were "
                f"made with another vocabulary (sha256 {expected[:12]}...) of the same size; its "
                "ids would mean other pieces. Prepare the records with the preset's spiece.model.")
    elif expected:
        _log.warning("training.init_from %s has no spiece.model; cannot check that it matches the "
                     "records' vocabulary.", init)


def _vocabulary_file(config, records):
    if config.data.vocabulary:
        return config.data.vocabulary
    recorded = records.vocabulary.get("file")
    if recorded and _isfile(recorded):
        return recorded
    return None


def check_workdir(config: RunConfig, workdir: str):
    """Refuses to resume a work directory whose earlier run had a different config."""
    previous = read_run_config(workdir)  # None: no earlier run, or a damaged file (warned).
    if previous is None:
        return
    current = config.to_dict()
    # Verbosity and where the data lives may change between attempts; the rest may not.
    ignore = {("training", "verbose"), ("data", "train_files"), ("data", "vocabulary"),
              ("distribution", "strategy"), ("distribution", "tpu")}
    changed = []
    for section, values in current.items():
        old = previous.get(section, {}) or {}
        for key, value in values.items():
            if (section, key) not in ignore and key in old and old[key] != value:
                changed.append(f"{section}.{key}: {old[key]!r} -> {value!r}")
    if changed:
        raise ConfigError(f"{workdir} holds a run with a different config ({'; '.join(changed)}). "
                          "Use a new --workdir, or the original settings to resume.")


def backup_epoch(backup_dir: str) -> int:
    """The epoch the run's `RunBackup` will restore from `backup_dir` (0 when none).

    The same choice as the callback's (`xlnet_tf.training.run_backup.select_backup`),
    so the data position always matches the restored weights.
    """
    from xlnet_tf.training.run_backup import backup_epoch as restored_epoch

    return restored_epoch(backup_dir)


def run_pretraining(config: RunConfig, workdir: str, *, strategy=None, export=True,
                    extra_callbacks=()) -> dict:
    """Pretrains (or resumes) the run described by `config` in `workdir`.

    The chief holds `workdir/RUN_LOCK` (`xlnet_tf.storage.run_lock.RunLock`) from
    the first write to the end, also when the run fails: a second run on the same
    work directory gets a `RunLockedError` naming this one.

    Args:
        config: a validated `RunConfig`.
        workdir: work directory (created if needed).
        strategy: a strategy to use instead of resolving `config.distribution`.
        export: write `workdir/export` at the end (chief only).
        extra_callbacks: more Keras callbacks for `fit`.

    Returns:
        A summary dict: final logs, steps, replicas, export paths.
    """
    with contextlib.ExitStack() as run_scope:
        return _run_pretraining(config, workdir, run_scope, strategy=strategy, export=export,
                                extra_callbacks=extra_callbacks)


def _run_pretraining(config, workdir, run_scope, *, strategy, export, extra_callbacks):
    """`run_pretraining`; `run_scope` (an ExitStack) releases the run lock when the run ends."""
    import keras
    import tensorflow as tf

    from xlnet_tf.data.pretraining import pretraining_dataset, pretraining_steps_per_epoch
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
    from xlnet_tf.training import callbacks as run_callbacks
    from xlnet_tf.optimizers.all_reduced_adamw import create_optimizer
    from xlnet_tf.training.run_backup import RunBackup
    from xlnet_tf.training.strategy import resolve_batch_sizes, resolve_strategy, task_info

    config = run_config_from_dict(config.to_dict())  # Re-validate whatever the caller built.
    records = check_records(config)
    check_init_from(config, records)
    check_workdir(config, workdir)
    t, d, m = config.training, config.data, config.model
    if strategy is None:
        strategy = resolve_strategy(config.distribution.strategy,
                                    virtual_cpu_devices=config.distribution.virtual_cpu_devices,
                                    tpu_address=config.distribution.tpu)
    replicas = strategy.num_replicas_in_sync
    global_batch, per_replica = resolve_batch_sizes(
        global_batch_size=t.global_batch_size, per_replica_batch_size_value=t.per_replica_batch_size,
        num_replicas=replicas)
    if m.bi_data and per_replica % 2:
        raise ConfigError(f"model.bi_data needs an even per-replica batch; got {per_replica} "
                          f"({global_batch} over {replicas} replicas).")
    data_steps = pretraining_steps_per_epoch(
        d.train_files, seq_length=d.seq_length, reuse_length=m.reuse_length,
        batch_size=global_batch, bi_data=m.bi_data,
        input_context=tf.distribute.InputContext(1, 0, replicas))
    _, task_id, is_chief = task_info()

    # Before the first write: a second run on this work directory stops here, naming this one.
    run_scope.enter_context(RunLock(workdir, enabled=is_chief))
    if is_chief:
        write_run_config(workdir, config.to_yaml())
    backup_dir = os.path.join(workdir, BACKUP_DIR)
    if not is_chief:
        backup_dir = os.path.join(backup_dir, f"worker-{task_id}")
    first_epoch = backup_epoch(backup_dir)
    first_step = first_epoch * t.steps_per_epoch
    epochs = t.train_steps // t.steps_per_epoch

    # ---------------------------------------------------------------- model
    dtype = None if t.mixed_precision == "float32" else t.mixed_precision
    with strategy.scope():
        keras.utils.set_random_seed(t.seed)
        backbone = XLNetBackbone(m, dtype=dtype, rematerialize=t.rematerialize)
        pretrainer = XLNetPretrainer(backbone)
        if t.init_from and first_epoch == 0:
            warm = XLNetPretrainer.from_preset(t.init_from)
            pretrainer.set_weights(warm.get_weights())
        optimizer = create_optimizer(
            pretrainer, learning_rate=config.optimizer.learning_rate,
            warmup_steps=config.optimizer.warmup_steps, train_steps=t.train_steps,
            end_learning_rate=config.optimizer.end_learning_rate,
            decay_power=config.optimizer.decay_power, weight_decay=config.optimizer.weight_decay,
            epsilon=config.optimizer.adam_epsilon, beta_1=config.optimizer.beta_1,
            beta_2=config.optimizer.beta_2, clip_norm=config.optimizer.clip_norm,
            accumulation_steps=t.gradient_accumulation_steps,
            loss_scaling=t.mixed_precision == "mixed_float16")
        pretrainer.compile(optimizer=optimizer, jit_compile=t.jit_compile,
                           steps_per_execution=t.steps_per_execution)
        optimizer.build(pretrainer.trainable_variables)
        pretrainer.set_static_batch_size(per_replica)
        if m.memory_length > 0:
            pretrainer.enable_recurrence_memory(per_replica, strategy=strategy,
                                                reset_every_steps=data_steps)

    # ---------------------------------------------------------------- data
    # Micro-batches consumed so far: optimizer steps x accumulation.
    consumed = first_step * t.gradient_accumulation_steps

    def dataset_fn(input_context):
        return pretraining_dataset(
            d.train_files, seq_length=d.seq_length, reuse_length=m.reuse_length,
            num_predict=d.num_predict, perm_size=d.perm_size, batch_size=global_batch,
            bi_data=m.bi_data, seed=d.seed, input_context=input_context,
            sentencepiece_model=d.vocabulary or "auto",
            # Opens every row at the resumed step's position: O(1), nothing re-sampled.
            first_step=consumed)

    dataset = strategy.distribute_datasets_from_function(dataset_fn)

    # ---------------------------------------------------------------- callbacks
    callbacks = [
        # Before RunBackup, so every backed-up epoch has its memory file.
        run_callbacks.RecurrenceMemoryState(backup_dir, first_epoch=first_epoch,
                                            first_step=consumed,
                                            each_epoch=t.reset_memory_each_epoch,
                                            worker=task_id or 0),
        RunBackup(backup_dir, save_freq="epoch", delete_checkpoint=False, double_checkpoint=True),
    ]
    if is_chief:
        callbacks += [
            run_callbacks.JsonlMetricsLogger(
                os.path.join(workdir, "metrics.jsonl"), steps_per_epoch=t.steps_per_epoch,
                every_steps=t.log_every_steps,
                global_batch_size=global_batch * t.gradient_accumulation_steps,
                micro_batches_per_step=t.gradient_accumulation_steps),
            run_callbacks.WeightsCheckpoint(os.path.join(workdir, "checkpoints"),
                                            steps_per_epoch=t.steps_per_epoch,
                                            keep=t.keep_checkpoints),
            run_callbacks.TensorBoardScalars(os.path.join(workdir, "logs"),
                                             steps_per_epoch=t.steps_per_epoch,
                                             every_steps=t.log_every_steps,
                                             micro_batches_per_step=t.gradient_accumulation_steps),
        ]
    callbacks += list(extra_callbacks)
    if first_epoch:
        _log.info("Resuming %s at step %d (epoch %d).", workdir, first_step, first_epoch)
        if is_chief:
            print(f"Resuming at step {first_step} of {t.train_steps} (backup in {backup_dir}).")
    # train_steps/steps_per_epoch count optimizer updates; fit counts micro-batches.
    history = pretrainer.fit(dataset, epochs=epochs,
                             steps_per_epoch=t.steps_per_epoch * t.gradient_accumulation_steps,
                             callbacks=callbacks, verbose=t.verbose if is_chief else 0,
                             shuffle=False)
    summary = {"replicas": replicas, "global_batch_size": global_batch,
               "per_replica_batch_size": per_replica, "first_step": first_step,
               "train_steps": t.train_steps,
               "final": {k: float(v[-1]) for k, v in history.history.items() if v}}
    if export and is_chief:
        from xlnet_tf.serving.export_pretrained import export_pretrainer

        summary["export"] = export_pretrainer(pretrainer, os.path.join(workdir, "export"),
                                              vocabulary=_vocabulary_file(config, records))
    return summary
