"""Export a backbone preset directory plus a SavedModel with a token-id serving signature.

The library behind `xlnet-tf export` (`xlnet_tf.cli.export`).

Sources, in order of precedence: `--preset DIR`, `--checkpoint FILE` (a
`ckpt-*.weights.h5` written by `xlnet-tf pretrain`, with `--config` or the
`config.yaml` next to its work directory), or `--workdir DIR` (its final
export's preset if present, else its newest checkpoint). Fine-tuning work
directories (a `task` section in `config.yaml`) go to
`xlnet_tf.serving.export_task_workdir.export_task_workdir`.

Output layout:
    OUTPUT/preset/        a preset in keras-hub's layout (`xlnet_tf.storage.preset_io`): config.json,
                          model.weights.h5, metadata.json, lm_head.weights.h5 and, with a
                          vocabulary, tokenizer.json, assets/tokenizer/vocabulary.spm, spiece.model
    OUTPUT/saved_model/   signatures `serving_default(token_ids)` and
                          `encode(token_ids, segment_ids, padding_mask)`, both returning
                          `sequence_output` float32 [B, L, hidden]; with a vocabulary also
                          `generate(prompt, max_new_tokens)` -> `continuation` (strings)

Example:
    xlnet-tf export --workdir runs/tiny --output runs/tiny/export
"""

import json
import os
import subprocess
import sys
import tempfile
import warnings

import keras
import tensorflow as tf
import yaml

from xlnet_tf.formats.special_tokens import PAD_TOKEN_ID
from xlnet_tf.storage import atomic_files
from xlnet_tf.storage.output_directory import check_output_directory, normalized_path
from xlnet_tf.serving.token_input_checks import check_token_inputs
from xlnet_tf.serving.generation_signature import SIGNATURE_NAME
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.formats.preset_files import PREPROCESSING_FILE
from xlnet_tf.storage import preset_io
from xlnet_tf.models.xlnet_causal_lm import GENERATION_TASK_TYPE
from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.serving.generation_signature import DEFAULT_MAX_NEW_TOKENS, DEFAULT_PROMPT_LENGTH, GenerationModule
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.pretraining.pretraining_config import load_run_config
from xlnet_tf.training.callbacks import latest_readable_checkpoint, list_checkpoints
from xlnet_tf.serving.export_task_workdir import export_task_workdir
from xlnet_tf.formats.preset_files import TASK_CONFIG_FILE
from xlnet_tf.models.xlnet_causal_lm import generation_settings

PRESET_SUBDIR = "preset"
SAVED_MODEL_SUBDIR = "saved_model"


class ExportError(ValueError):
    """The export source is missing or inconsistent."""


def export_saved_model(backbone, path, pad_token_id=PAD_TOKEN_ID, generation=None):
    """Writes `backbone` (float32, inference mode) as a SavedModel.

    Args:
        backbone: an `XLNetBackbone`.
        path: output directory.
        pad_token_id: `serving_default` treats this id as padding (mask 0).
        generation: optional `xlnet_tf.serving.generation_signature.GenerationModule`
            (on the same backbone): adds its `generate` signature.

    Both signatures check their inputs in the graph first (rank 2, equal shapes,
    `token_ids` in `[0, vocabulary_size)`, `segment_ids` in `[0, 4]`,
    `padding_mask` 0/1; see `xlnet_tf.serving.token_input_checks`): a bad request
    is an `InvalidArgumentError` naming the input, on every device.

    Returns:
        `path`.
    """
    archive = keras.export.ExportArchive()
    archive.track(backbone)

    def encode(token_ids, segment_ids, padding_mask):
        # Rank 2, equal shapes, ids in [0, vocabulary_size): a request error naming the
        # input instead of a wrong row (negative ids) or zeros (GPU gather) or an op error.
        features = check_token_inputs(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            shape=[None, None], vocabulary_size=backbone.config.vocabulary_size)
        outputs = backbone(features, training=False)
        return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32)}

    def serve(token_ids):
        return encode(token_ids, tf.zeros_like(token_ids),
                      tf.cast(tf.not_equal(token_ids, pad_token_id), tf.int32))

    spec = tf.TensorSpec([None, None], tf.int32)
    archive.add_endpoint("serving_default", serve,
                         input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")])
    archive.add_endpoint("encode", encode, input_signature=[
        tf.TensorSpec.from_spec(spec, name="token_ids"),
        tf.TensorSpec.from_spec(spec, name="segment_ids"),
        tf.TensorSpec.from_spec(spec, name="padding_mask")])
    if generation is not None:
        archive.track(generation)
        archive.add_endpoint(SIGNATURE_NAME, generation.generate)
    # Written under a temporary sibling name, then renamed: never a partial SavedModel at `path`.
    return atomic_files.replace_directory(lambda directory: archive.write_out(directory, verbose=False),
                                          path)


def export_pretrainer(pretrainer, output_dir, vocabulary=None, generation=None, overwrite=False):
    """Writes `output_dir/preset` and `output_dir/saved_model` from a trained pretrainer.

    The SavedModel is built from the saved preset in float32, without memory and
    with forward positions only (no bi_data), so it does not depend on the
    training dtype policy or batch size. With a vocabulary it also gets the
    `generate` signature (`xlnet_tf.serving.generation_signature`), in the
    mode and limits of `generation`. Both are written under a temporary
    sibling of `output_dir`, renamed into place once complete: an existing
    directory is replaced whole (never a new preset beside old files). A model
    on JAX or PyTorch is saved as a preset and exported from it by a
    TensorFlow-backend process (TensorFlow must be installed), with the same
    files and signatures.

    Args:
        pretrainer (XLNetPretrainer): the trained `XLNetPretrainer` (the `pretrainer` of `run_pretraining`'s summary).
        output_dir (str): the export directory (local or gs://): new or empty, or replaced with `overwrite`.
        vocabulary (bytes | str | None): the SentencePiece model (bytes or a path) copied into the preset, or None.
        generation (dict | None): a generation preset's settings (`mode`, `recompute_window`,
            `sequence_length` = the longest prompt, `max_new_tokens` = the
            largest request); also written to the exported preset.
        overwrite: replace a non-empty `output_dir`.

    Returns:
        A dict with the two paths.

    Raises:
        OutputExistsError: `output_dir` is not empty and `overwrite` is False.

    Example:
    >>> from xlnet_tf import XLNetPretrainer, export_pretrainer
    >>> pretrainer = XLNetPretrainer.from_preset("xlnet_base_cased")  # or run_pretraining's summary["pretrainer"]
    >>> export_pretrainer(pretrainer, "runs/base/export", vocabulary="spiece.model")
    {'preset': 'runs/base/export/preset', 'saved_model': 'runs/base/export/saved_model'}
    """
    check_output_directory(output_dir, overwrite=overwrite, what="Export directory")
    if keras.config.backend() != "tensorflow":
        return _export_in_tensorflow_process(pretrainer, output_dir, vocabulary, generation)

    def build(directory):
        preset_dir = os.path.join(directory, PRESET_SUBDIR)
        pretrainer.save_to_preset(preset_dir, vocabulary_file=vocabulary)
        if generation:
            atomic_files.write_json(os.path.join(preset_dir, PREPROCESSING_FILE),
                                 {"task_type": GENERATION_TASK_TYPE, **generation})
        # bi_data (backward position streams for half of each batch) is a pretraining
        # augmentation; serving encodes every row with forward positions.
        backbone = XLNetBackbone.from_preset(preset_dir, dtype="float32", memory_length=0,
                                             reuse_length=0, bi_data=False, dropout=0.0,
                                             attention_dropout=0.0)
        module = None
        if vocabulary is not None:
            module = _generation_module(backbone, pretrainer, preset_dir, generation or {})
        export_saved_model(backbone, os.path.join(directory, SAVED_MODEL_SUBDIR), generation=module)

    atomic_files.replace_directory(build, output_dir)
    return {"preset": os.path.join(output_dir, PRESET_SUBDIR),
            "saved_model": os.path.join(output_dir, SAVED_MODEL_SUBDIR)}


# Runs `export_pretrained.<function>(*arguments, **keywords)` from a JSON argument in a fresh process and prints
# its JSON result on the last line.
_TENSORFLOW_PROGRAM = """
import json, sys
from xlnet_tf.serving import export_pretrained
call = json.loads(sys.argv[1])
try:
    result = getattr(export_pretrained, call["function"])(*call["arguments"], **call["keywords"])
except (export_pretrained.ExportError, OSError, ValueError) as error:
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(2)
print(json.dumps(result))
"""


def _in_tensorflow_process(function, *arguments, **keywords):
    """`function(*arguments, **keywords)` of this module, run by a TensorFlow-backend process.

    A SavedModel is a TensorFlow graph built from Keras layers on the TensorFlow
    backend, and a process has one backend: a process on JAX or PyTorch hands
    the export, through files (presets, checkpoints, run directories, which
    every backend reads with equal outputs), to one on TensorFlow, so the
    SavedModel is the one a run on TensorFlow gets.
    """
    call = json.dumps({"function": function, "arguments": arguments, "keywords": keywords})
    environment = dict(os.environ, KERAS_BACKEND="tensorflow")
    result = subprocess.run([sys.executable, "-c", _TENSORFLOW_PROGRAM, call], env=environment,
                            capture_output=True, text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        detail = lines[-1] if result.returncode == 2 and lines else "\n".join(lines[-8:])
        raise ExportError(f"The SavedModel of a {keras.config.backend()}-backend model is written by a "
                          f"TensorFlow-backend process, which failed: {detail}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _export_in_tensorflow_process(pretrainer, output_dir, vocabulary, generation):
    """`export_pretrainer` of a model on JAX or PyTorch: its preset is saved here and exported on TensorFlow."""
    with tempfile.TemporaryDirectory(prefix="xlnet-tf-export-") as scratch:
        preset_dir = os.path.join(scratch, PRESET_SUBDIR)
        pretrainer.save_to_preset(preset_dir, vocabulary_file=vocabulary)
        if generation:
            atomic_files.write_json(os.path.join(preset_dir, PREPROCESSING_FILE),
                                    {"task_type": GENERATION_TASK_TYPE, **generation})
        return _in_tensorflow_process("export_preset", preset_dir, output_dir, overwrite=True)


def _generation_module(backbone, pretrainer, preset_dir, settings):
    """The `generate` signature's module on `backbone`, with the pretrainer's LM bias."""
    causal_lm = XLNetCausalLM(backbone, mode=settings.get("mode", "exact"),
                              recompute_window=settings.get("recompute_window", 2))
    causal_lm.lm_bias.assign(pretrainer.lm_bias)
    return GenerationModule(causal_lm, XLNetTokenizer.from_preset(preset_dir),
                            prompt_length=settings.get("sequence_length", DEFAULT_PROMPT_LENGTH),
                            max_new_tokens_limit=settings.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))


def _read_workdir_config(workdir):
    path = os.path.join(workdir, "config.yaml")
    if not tf.io.gfile.exists(workdir):
        raise ExportError(f"Work directory {workdir} does not exist.")
    if not tf.io.gfile.isdir(workdir):
        raise ExportError(f"{workdir} is a file; --workdir takes the directory of an `xlnet-tf pretrain` or "
                          "`xlnet-tf finetune` run.")
    if not tf.io.gfile.exists(path):
        raise ExportError(f"{workdir} has no config.yaml: it is not the work directory of an `xlnet-tf pretrain` "
                          "or `xlnet-tf finetune` run (nor a fine-tuned task preset).")
    try:
        values = yaml.safe_load(atomic_files.read_text(path)) or {}
    except yaml.YAMLError as e:
        raise ExportError(f"{path} is not valid YAML: {str(e).splitlines()[0]}") from e
    if not isinstance(values, dict):
        raise ExportError(f"{path} is not a run config (a YAML mapping).")
    return path, values


def export_from_checkpoint(checkpoint, run_config_path, output_dir, overwrite=False):
    """Rebuilds the pretrainer of a run config, loads `checkpoint`, exports it (`export_pretrainer`)."""
    check_output_directory(output_dir, overwrite=overwrite, what="Export directory",
                           sources=(checkpoint, run_config_path))
    if not tf.io.gfile.exists(checkpoint) or tf.io.gfile.isdir(checkpoint):
        raise ExportError(f"Checkpoint not found: {checkpoint}")
    problem = atomic_files.weights_file_problem(checkpoint)
    if problem:
        raise ExportError(f"Checkpoint {checkpoint} is unreadable ({problem}).")
    config = load_run_config([run_config_path])  # local, gs:// or ram://
    pretrainer = pretrainer_from_checkpoint(checkpoint, config, config_name=run_config_path)
    return export_pretrainer(pretrainer, output_dir, vocabulary=config.data.vocabulary or None,
                             overwrite=overwrite)


def pretrainer_from_checkpoint(checkpoint, config, *, config_name="the run config"):
    """The `XLNetPretrainer` of run config `config` with the weights of a run's `checkpoint`.

    A run's checkpoints (`ckpt-*.weights.h5`) also hold the optimizer's state, which is not
    loaded. A checkpoint of another model is an `ExportError` naming both files.

    Example:
    >>> from xlnet_tf.serving.export_pretrained import load_run_config, pretrainer_from_checkpoint
    >>> config = load_run_config(["runs/tiny/config.yaml"])
    >>> pretrainer = pretrainer_from_checkpoint("runs/tiny/checkpoints/ckpt-00001800.weights.h5", config)
    """
    pretrainer = XLNetPretrainer(XLNetBackbone(config.model))
    try:
        pretrainer.load_weights(checkpoint, skip_mismatch=False)
    except ValueError as e:
        # Checkpoints also hold optimizer state; a model-only load of those is fine.
        if "optimizer" not in str(e).lower():
            raise ExportError(f"{checkpoint} does not match the model of {config_name}: {e}") from e
    return pretrainer


def export_workdir(workdir, output_dir, dtype="float32", jit_compile=False, trim_padding=None,
                   overwrite=False):
    """Exports a pretraining (or, delegated, a fine-tuning) work directory.

    Uses the run's final preset when it has one, else its newest checkpoint that
    reads back completely: an unreadable newer one is skipped with a warning naming it.
    `dtype`, `jit_compile` and `trim_padding` are options of a task SavedModel
    (`xlnet_tf.serving.export_task_workdir.export_task_workdir`), which also takes a fine-tuned
    task preset in place of a work directory (a run's `final/`). `output_dir` must be
    new or empty, or `overwrite` replaces it whole; it may not be or hold `workdir`.
    On JAX or PyTorch a TensorFlow-backend process does the export (TensorFlow
    must be installed): the SavedModel is the same whichever backend trained.

    Example:
    >>> from xlnet_tf import export_workdir
    >>> export_workdir("runs/mrpc", "exports/mrpc/1")
    'exports/mrpc/1'
    """
    check_output_directory(output_dir, overwrite=overwrite, what="Export directory", sources=(workdir,))
    if keras.config.backend() != "tensorflow":
        return _in_tensorflow_process("export_workdir", workdir, output_dir, dtype=dtype, jit_compile=jit_compile,
                                      trim_padding=trim_padding, overwrite=overwrite)
    if _is_task_preset(workdir) and not tf.io.gfile.exists(os.path.join(workdir, "config.yaml")):
        config_path, values = None, {"task": {}}  # a task preset itself (a run's final/)
    else:
        config_path, values = _read_workdir_config(workdir)
    if "task" in values:
        return export_task_workdir(workdir, output_dir, dtype=dtype, jit_compile=jit_compile,
                                   trim_padding=trim_padding, overwrite=overwrite)
    if dtype != "float32":
        raise ExportError(f"--dtype {dtype}: only a fine-tuning work directory (a task SavedModel) "
                          "can be exported in another dtype than float32.")
    if jit_compile or trim_padding is not None:
        raise ExportError("--jit-compile and --no-trim-padding are options of a task SavedModel: "
                          f"{workdir} is a pretraining work directory.")
    final = os.path.join(workdir, "export", PRESET_SUBDIR)
    if tf.io.gfile.isdir(final) and normalized_path(final) != normalized_path(
            os.path.join(output_dir, PRESET_SUBDIR)):
        return export_preset(final, output_dir, overwrite=overwrite)
    directory = os.path.join(workdir, "checkpoints")
    checkpoints = list_checkpoints(directory)
    if not checkpoints:
        raise ExportError(f"{workdir} has no final preset (export/preset) and no checkpoints "
                          f"(checkpoints/ckpt-*.weights.h5) yet.")
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        checkpoint = latest_readable_checkpoint(directory)
    for warning in skipped:  # One line each on stderr, whatever the warning filters say.
        print(f"xlnet-tf export: warning: {warning.message}", file=sys.stderr)
    if checkpoint is None:
        raise ExportError(f"No readable checkpoint in {directory}: "
                          f"{', '.join(os.path.basename(c) for c in checkpoints)} all fail the "
                          "HDF5 integrity check.")
    return export_from_checkpoint(checkpoint, config_path, output_dir, overwrite=overwrite)


def _is_task_preset(directory):
    """Whether `directory` holds a fine-tuned task preset (`task.json`), e.g. a fine-tuning run's `final/`."""
    return tf.io.gfile.exists(os.path.join(directory, TASK_CONFIG_FILE))


def export_preset(preset_dir, output_dir, overwrite=False):
    """Re-exports a preset directory (copies it and writes the SavedModel; see `export_pretrainer`)."""
    check_output_directory(output_dir, overwrite=overwrite, what="Export directory", sources=(preset_dir,))
    if _is_task_preset(preset_dir):
        # Its backbone alone would be exported, without the fine-tuned head: not what was meant.
        raise ExportError(f"{preset_dir} is a fine-tuned task preset; --preset exports a pretrained backbone. "
                          f"Export the task with `xlnet-tf export --workdir {preset_dir} --output DIR`.")
    pretrainer = XLNetPretrainer.from_preset(preset_dir)
    # Either layout: `spiece.model` or keras-hub's `assets/tokenizer/vocabulary.spm`.
    vocabulary = preset_io.vocabulary_path(preset_dir, required=False)
    return export_pretrainer(pretrainer, output_dir,
                             vocabulary=preset_io.read_bytes(vocabulary) if vocabulary else None,
                             generation=generation_settings(preset_dir), overwrite=overwrite)

