"""One pretraining run over the training engine: checks, model, data, `fit` with resume.

`run_pretraining(config, workdir)` is what `xlnet-tf pretrain` calls. Every
check that can fail (config, record files, vocabulary, batch split, an
incompatible earlier run in the same work directory) runs before the model is
built. The work directory afterwards holds:

    config.yaml      the fully resolved run config
    metrics.jsonl    one JSON object per logged step (step, loss, accuracy, learning_rate, ...)
    logs/            TensorBoard event files
    loss.png         the loss curve against uniform guessing (and the context-free loss when the
                     caller gives it), redrawn at epoch ends and when the run ends
    checkpoints/     ckpt-{step}.weights.h5, the newest `keep_checkpoints`
    backup/          RunBackup state (resume after any interruption, even mid-write)
    RUN_LOCK         while a run is active: who holds the work directory (one run at a time)
    export/          preset/ and saved_model/, written after the run by `xlnet-tf pretrain`
                     (`xlnet_tf.serving.export_pretrained.export_pretrainer` of the summary's model)

The strategy, batch split, work directory checks, run lock, config.yaml and
backup choice are the engine's (`xlnet_tf.training.run_setup`), shared with
fine-tuning. Every file is written atomically (`xlnet_tf.storage.atomic_files`).

Resuming: run the same command again. RunBackup restores weights,
optimizer state and the epoch; the input pipeline is rebuilt deterministically
and opens every row at the resumed step (`first_step`), so training continues at the same data
position. Each replica's recurrence memory is saved next to every backup and restored
with it (`RecurrenceMemoryState`).

Backends: on TensorFlow the run trains under a `tf.distribute` strategy; on JAX under a
`keras.distribution` (`xlnet_tf.training.jax_distribution`: `DataParallel` over the local
accelerators, or `ModelParallel`), set for the whole run. The input pipeline is the same
`tf.data` pipeline, called per process as TensorFlow's strategies call it, and the
recurrence memory is one `[global batch, ...]` variable split along the batch like the data.
"""

import contextlib
import hashlib
import logging
import os

import keras
import sentencepiece as spm
import tensorflow as tf

from xlnet_tf.formats import preset_files
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.pretraining.pretraining_config import RunConfig
from xlnet_tf.training.run_setup import open_run_directory
from xlnet_tf.data.pretraining_records import PretrainingRecords, RecordsError
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.storage import preset_io
from xlnet_tf.data.pretraining import pretraining_dataset, pretraining_steps_per_epoch
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.optimizers.build_optimizer import build_optimizer
from xlnet_tf.training import callbacks as run_callbacks
from xlnet_tf.training.run_setup import start_run
from xlnet_tf.pretraining.learning_report import reference_losses
from xlnet_tf.pretraining.loss_curve import LOSS_CURVE_FILE, LossCurvePlot
from xlnet_tf.training.run_sections import optimizer_arguments

_log = logging.getLogger(__name__)


def check_records(config: RunConfig):
    """Validates the record files and their vocabulary against the model; returns the records."""
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
        pieces = spm.SentencePieceProcessor(model_proto=proto).get_piece_size()
        if pieces != config.model.vocabulary_size:
            raise ConfigError(f"Vocabulary mismatch: {path} has {pieces} pieces, but "
                              f"model.vocabulary_size is {config.model.vocabulary_size}.")
    return records


def _isfile(path):
    # Through gfile: vocabularies and presets may be on gs:// or ram://.
    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


def _read_bytes(path):
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
    if not tf.io.gfile.isdir(init):
        raise ConfigError(f"training.init_from: preset directory not found: {init}")
    config_path = os.path.join(init, preset_files.CONFIG_FILE)
    if not _isfile(config_path):
        raise ConfigError(f"training.init_from: {init} has no {preset_files.CONFIG_FILE} "
                          "(is it a preset directory?).")
    try:
        preset = XLNetConfig.from_dict(preset_io.read_backbone_config(init))
    except (ValueError, TypeError, OSError) as e:
        raise ConfigError(f"training.init_from: cannot read {config_path}: {e}") from e
    if preset.vocabulary_size != config.model.vocabulary_size:
        raise ConfigError(f"Vocabulary mismatch: training.init_from {init} has a vocabulary of "
                          f"{preset.vocabulary_size} pieces, but model.vocabulary_size is "
                          f"{config.model.vocabulary_size}.")
    # `spiece.model`, else the vocabulary asset of keras-hub's layout.
    vocabulary = (preset_io.vocabulary_path(init, required=False)
                  or os.path.join(init, preset_files.VOCABULARY_FILE))
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


def run_pretraining(config: RunConfig, workdir: str, *, strategy=None, extra_callbacks=(),
                    context_free_loss=None) -> dict:
    """Pretrains (or resumes) the run described by `config` in `workdir`.

    The chief holds `workdir/RUN_LOCK` (`xlnet_tf.storage.run_lock.RunLock`) from
    the first write to the end, also when the run fails: a second run on the same
    work directory gets a `RunLockedError` naming this one.

    Args:
        config: a validated `RunConfig`.
        workdir: work directory (created if needed).
        strategy: a strategy to use instead of resolving `config.distribution`.
        extra_callbacks: more Keras callbacks for `fit`.
        context_free_loss: the loss of a model that ignores context
            (`learning_report.context_free_entropy` of the records), drawn on
            `loss.png` next to uniform guessing; None draws uniform guessing only.

    Returns:
        A summary dict: final logs, steps, replicas, batch sizes; on the chief also
        `pretrainer` (the trained model) and `vocabulary` (its spiece.model or None),
        what `xlnet_tf.serving.export_pretrained.export_pretrainer` takes, and
        `loss_curve` (the path of `loss.png`; None before a loss is logged).

    Example:
    >>> # skip-example: a Base-size run on a bucket; tests/notebooks runs this call on the CPU
    >>> from xlnet_tf import export_pretrainer, run_config_from_dict, run_pretraining
    >>> config = run_config_from_dict({"data": {"train_files": "gs://bucket/records"},
    ...                                "training": {"global_batch_size": 256}})
    >>> summary = run_pretraining(config, "gs://bucket/runs/base")
    >>> export_pretrainer(summary["pretrainer"], "gs://bucket/runs/base/export",
    ...                   vocabulary=summary["vocabulary"])
    """
    with contextlib.ExitStack() as run_scope:
        return _run_pretraining(config, workdir, run_scope, strategy=strategy,
                                extra_callbacks=extra_callbacks, context_free_loss=context_free_loss)


def _run_pretraining(config, workdir, run_scope, *, strategy, extra_callbacks, context_free_loss):
    """`run_pretraining`; `run_scope` (an ExitStack) releases the run lock when the run ends."""
    records = check_records(config)
    check_init_from(config, records)
    t, d, m = config.training, config.data, config.model
    setup = start_run(config, workdir, run_scope, strategy,
                      paths={"data.train_files": d.train_files, "workdir": workdir}, model_config=m)
    strategy, replicas = setup.strategy, setup.replicas
    on_tensorflow = setup.backend == "tensorflow"
    global_batch, per_replica = setup.global_batch_size, setup.per_replica_batch_size
    if m.bi_data and per_replica % 2:
        raise ConfigError(f"model.bi_data needs an even per-replica batch; got {per_replica} "
                          f"({global_batch} over {replicas} replicas).")
    data_steps = pretraining_steps_per_epoch(
        d.train_files, sequence_length=d.sequence_length, reuse_length=m.reuse_length,
        batch_size=global_batch, bi_data=m.bi_data,
        input_context=tf.distribute.InputContext(1, 0, replicas))
    task_id, is_chief = setup.task_id, setup.is_chief

    # Before the first write: a second run on this work directory stops here, naming this one.
    directory = open_run_directory(workdir, config.to_yaml() + setup.devices_yaml(), run_scope,
                                   is_chief=is_chief, task_id=task_id, steps=(t.steps_per_epoch, t.train_steps))
    backup_dir, first_epoch = directory.backup_dir, directory.first_epoch
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
        optimizer = build_optimizer(pretrainer, **optimizer_arguments(config.optimizer, t))
        pretrainer.compile(optimizer=optimizer, jit_compile=t.jit_compile,
                           steps_per_execution=t.steps_per_execution)
        optimizer.build(pretrainer.trainable_variables)
        pretrainer.set_static_batch_size(per_replica)
        if m.memory_length > 0:
            # TensorFlow keeps one memory per replica; Keras' JAX step sees the whole global batch, whose
            # memory rows the distribution splits over the devices as it splits the data.
            pretrainer.enable_recurrence_memory(per_replica if on_tensorflow else global_batch,
                                                strategy=strategy if on_tensorflow else None,
                                                reset_every_steps=data_steps)

    # ---------------------------------------------------------------- data
    # Micro-batches consumed so far: optimizer steps x accumulation.
    consumed = first_step * t.gradient_accumulation_steps

    def dataset_fn(input_context):
        return pretraining_dataset(
            d.train_files, sequence_length=d.sequence_length, reuse_length=m.reuse_length,
            num_predict=d.num_predict, perm_size=d.perm_size, batch_size=global_batch,
            bi_data=m.bi_data, seed=d.seed, input_context=input_context,
            sentencepiece_model=d.vocabulary or "auto",
            mask_alpha=d.mask_alpha, max_span=d.max_span, whole_word_targets=d.whole_word_targets,
            spans_in_reading_order=d.spans_in_reading_order,
            # Opens every row at the resumed step's position: O(1), nothing re-sampled.
            first_step=consumed)

    if on_tensorflow:
        dataset = strategy.distribute_datasets_from_function(dataset_fn)
    else:
        # This process's rows, replica after replica; bi_data halves laid out as the backbone reads a batch.
        dataset = strategy.distribute_datasets_from_function(dataset_fn, bi_data=m.bi_data)

    # ---------------------------------------------------------------- callbacks
    callbacks = [
        # Before RunBackup, so every backed-up epoch has its memory file.
        run_callbacks.RecurrenceMemoryState(backup_dir, first_epoch=first_epoch,
                                            first_step=consumed,
                                            each_epoch=t.reset_memory_each_epoch,
                                            worker=task_id or 0),
        directory.backup_callback(),
    ]
    if is_chief:
        metrics_path, loss_curve = os.path.join(workdir, "metrics.jsonl"), os.path.join(workdir, LOSS_CURVE_FILE)
        callbacks += [
            run_callbacks.JsonlMetricsLogger(
                metrics_path, steps_per_epoch=t.steps_per_epoch,
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
            # After the metrics logger: an epoch's last line is in the file when the curve is drawn.
            LossCurvePlot(metrics_path, loss_curve, reference_losses(m.vocabulary_size, context_free_loss)),
        ]
    callbacks += list(extra_callbacks)
    # train_steps/steps_per_epoch count optimizer updates; fit counts micro-batches.
    history = pretrainer.fit(dataset, epochs=epochs,
                             steps_per_epoch=t.steps_per_epoch * t.gradient_accumulation_steps,
                             callbacks=callbacks, verbose=t.verbose if is_chief else 0,
                             shuffle=False)
    summary = setup.summary(history, first_step=first_step, train_steps=t.train_steps)
    if is_chief:
        summary.update(pretrainer=pretrainer, vocabulary=_vocabulary_file(config, records),
                       loss_curve=loss_curve if tf.io.gfile.exists(loss_curve) else None)
    return summary
