"""`export_task_workdir`: a fine-tuning work directory (or task preset) -> serving SavedModel."""

import json
import os

import tensorflow as tf

from xlnet_tf import tasks

from xlnet_tf.serving.export_task_model import export_task_model
from xlnet_tf.storage.output_directory import check_output_directory

from xlnet_tf.formats.preset_files import PREPROCESSING_FILE
from xlnet_tf.formats.preset_files import PREPROCESSOR_CONFIG_FILE
from xlnet_tf.formats.preset_files import TASK_CONFIG_FILE
from xlnet_tf.formats.preset_files import VOCABULARY_FILE
from xlnet_tf.storage import preset_io
from xlnet_tf.models.xlnet_task import load_task_preset
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.serving.span_answer_decoder import SpanAnswerDecoder
from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer


def _task_preset_dir(workdir):
    """`WORKDIR/final/` of `xlnet-tf finetune`, or the directory itself when it is a task preset."""
    for candidate in (os.path.join(workdir, "final"), workdir):
        if tf.io.gfile.exists(os.path.join(candidate, TASK_CONFIG_FILE)):
            return candidate
    raise FileNotFoundError(
        f"{workdir!r} is neither a fine-tuning work directory (no final/{TASK_CONFIG_FILE}) "
        f"nor a task preset (no {TASK_CONFIG_FILE})."
    )


def _read_json(path):
    try:
        with tf.io.gfile.GFile(path, "r") as f:
            return json.loads(f.read())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None


PACKING_KEYS = ("sequence_length", "truncate", "second_max_length", "max_query_length", "doc_stride",
                "max_segments")


def _layout_preprocessing(preset, task_config):
    """What keras-hub's layout says about the packing: `preprocessor.json` (+ its tokenizer) and the task class.

    `preprocessing.json`, when present, is written by `xlnet-tf finetune` (and by
    `XLNetTask.save_to_preset`) and wins over these values.
    """
    info = {}
    # Task model classes name their task type (keras-hub layout presets saved without preprocessing.json).
    num_classes = (task_config.get("config") or {}).get("num_classes")
    entry = tasks.of_model_class_name(task_config.get("class_name"), num_classes)
    if entry:
        info["task_type"] = entry.name
    path = os.path.join(preset, PREPROCESSOR_CONFIG_FILE)
    if tf.io.gfile.exists(path):
        config = _read_json(path).get("config") or {}
        info.update({k: config[k] for k in PACKING_KEYS if config.get(k) is not None})
        tokenizer = (config.get("tokenizer") or {}).get("config") or {}
        if "lowercase" in tokenizer:
            info["lowercase"] = bool(tokenizer["lowercase"])
    return info


def export_task_workdir(workdir, output, *, overwrite=False, text_signature=True, sequence_length=None,
                        dtype="float32", jit_compile=False, trim_padding=None):
    """Exports the fine-tuned model of `workdir` as a two-signature SavedModel.

    Reads the task preset (`WORKDIR/final/`, keras-hub's layout) and the task it records
    (`_recorded_task`: `preprocessing.json` as `xlnet-tf finetune` writes it, else what
    `preprocessor.json` and the task class say), rebuilds the task model in float32 with
    the same packing as fine-tuning, and writes `output` with `serving_default` (raw strings
    in) and `serve_token_ids` (ids in), checked against the in-memory model (1e-5). The
    task type reads its own recorded keys (`TaskType.export_arguments`: multiple choice
    needs `num_choices` or `num_classes`, and `has_question` false drops `question`);
    `max_segments` above 1, for a model with recurrence memory, exports signatures that
    take documents of any length.

    Args:
        workdir (str): a `xlnet-tf finetune` work directory or a task preset directory.
        output (str): SavedModel directory to create (new or empty; it may not be or hold `workdir`).
        overwrite: replace a non-empty `output` whole (built aside, then renamed into place).
        text_signature: False writes an ids-only SavedModel (core TensorFlow ops only: loads
            without tensorflow-text), whose `serving_default` is `serve_token_ids`.
        sequence_length (int | None): override of the packed length (default: fine-tuning's).
        dtype: `"float32"` or `"bfloat16"` (variables and compute; see `export_task_model`).
        jit_compile: XLA-compile the model call inside the signatures (see `TaskServingModule`).
        trim_padding (bool | None): cut the all-padding leading columns of a request before the model;
            None: on where it applies (see `TaskServingModule`).

    Returns:
        The `output` path.

    Raises:
        OutputExistsError: `output` is not empty and `overwrite` is False.
        FileNotFoundError: no task preset, or a file it needs is missing.
        ValueError: the task type is not exportable or `preprocessing.json` is malformed.

    Example:
    ```python
    from xlnet_tf.serving import export_task_workdir
    export_task_workdir("runs/mrpc", "exports/mrpc/1")
    ```
    """
    check_output_directory(output, overwrite=overwrite, what="Export directory", sources=(workdir,))
    preset = _task_preset_dir(os.fspath(workdir))
    entry, preprocessing, task_class = _recorded_task(preset)
    where = os.path.join(preset, PREPROCESSING_FILE)
    length, max_segments = _recorded_lengths(preprocessing, sequence_length, where)
    task_options = entry.export_arguments(preprocessing, where)
    # Serving runs in float32 whatever policy fine-tuning used, so outputs are
    # comparable to 1e-5 with the in-memory float32 model.
    model = load_task_preset(preset, load_weights=True, dtype="float32")
    tokenizer = _tokenizer(preset, preprocessing) if text_signature else None
    preprocessor = (entry.export_text_preprocessor(_TextPreprocessors(tokenizer, preprocessing, length))
                    if text_signature else None)
    return export_task_model(
        model, output, task=entry.name, sequence_length=length, preprocessor=preprocessor,
        vocabulary=tokenizer.get_vocabulary() if text_signature else None,
        has_text_pair=entry.pairs and len(preprocessing.get("text_fields") or ["text"]) > 1,
        label_names=preprocessing.get("label_names"), max_segments=max_segments,
        metadata={"source": os.path.abspath(preset) if "://" not in preset else preset, "task_class": task_class,
                  "preprocessing": preprocessing},
        overwrite=overwrite, dtype=dtype, jit_compile=jit_compile, trim_padding=trim_padding, **task_options)


def _recorded_lengths(preprocessing, sequence_length, where):
    """`(sequence_length, max_segments)`: the packed length (`sequence_length` overrides the
    recorded one) and the segments per document at fine-tuning, both checked.

    With recurrence memory in the model, `max_segments` above 1 makes both signatures
    take documents of any length.
    """
    length = int(sequence_length or preprocessing.get("sequence_length") or 0)
    if length < 4:
        raise ValueError(f"{where}: sequence_length must be an int >= 4, got {length}.")
    max_segments = preprocessing.get("max_segments", 1)
    if max_segments is None:
        max_segments = 1
    if not isinstance(max_segments, int) or isinstance(max_segments, bool) or max_segments < 1:
        raise ValueError(f"{where}: max_segments must be an int >= 1, got {max_segments!r}.")
    return length, max_segments


def _recorded_task(preset):
    """`(task type, packing, task class name)` as the task preset records them.

    The packing is `preprocessing.json` as `xlnet-tf finetune` writes it, over what
    keras-hub's layout says (`_layout_preprocessing`).

    Raises:
        FileNotFoundError: neither `preprocessing.json` nor `preprocessor.json`.
        ValueError: the recorded task type is not one that exports.
    """
    preprocessing_file = os.path.join(preset, PREPROCESSING_FILE)
    task_config = _read_json(os.path.join(preset, TASK_CONFIG_FILE))
    task_class = task_config.get("class_name")
    has_preprocessor = tf.io.gfile.exists(os.path.join(preset, PREPROCESSOR_CONFIG_FILE))
    if not tf.io.gfile.exists(preprocessing_file) and not has_preprocessor:
        raise FileNotFoundError(f"{preprocessing_file} is missing: the export needs the fine-tuning packing.")
    preprocessing = _layout_preprocessing(preset, task_config)
    if tf.io.gfile.exists(preprocessing_file):
        preprocessing.update(_read_json(preprocessing_file))
    task_type = preprocessing.get("task_type")
    if task_type not in tasks.TASKS:
        raise ValueError(
            f"{preprocessing_file}: task_type {task_type!r} cannot be exported for serving; "
            f"exportable: {sorted(tasks.TASK_TYPES)}."
        )
    entry = tasks.task_type(task_type)
    # One class for classification and regression: a one-output classifier is a regression model.
    by_class = tasks.of_model_class_name(task_class, (task_config.get("config") or {}).get("num_classes", 2))
    if by_class is not None and by_class.model_class() is entry.model_class():
        entry = by_class
    return entry, preprocessing, task_class


def _tokenizer(preset, preprocessing):
    """The preset's tokenizer, for the strings-in signature.

    Raises:
        FileNotFoundError: the preset has no vocabulary.
    """
    # `spiece.model`, else keras-hub's `assets/tokenizer/vocabulary.spm`.
    vocabulary_file = (preset_io.vocabulary_path(preset, required=False)
                       or os.path.join(preset, VOCABULARY_FILE))
    if not tf.io.gfile.exists(vocabulary_file):
        raise FileNotFoundError(
            f"{vocabulary_file} is missing: the strings-in signature needs the vocabulary "
            "(or export with text_signature=False)."
        )
    return XLNetTokenizer(vocabulary_file, lowercase=bool(preprocessing.get("lowercase", False)))


class _TextPreprocessors:
    """The in-graph preprocessors of a strings-in signature, with the recorded packing.

    The task type picks one (`TaskType.export_text_preprocessor`).
    """

    def __init__(self, tokenizer, preprocessing, sequence_length):
        self.tokenizer, self.preprocessing, self.sequence_length = tokenizer, preprocessing, sequence_length

    def packed_text(self):
        """Texts (or pairs) packed as fine-tuning packed them.

        Multiple choice packs each (context, choice) pair with the RACE recipe
        (`keep_second`, `second_max_length`) recorded at fine-tuning.
        """
        packer = XLNetPacker(self.sequence_length, truncate=self.preprocessing.get("truncate", "longest_first"),
                             second_max_length=self.preprocessing.get("second_max_length"))
        return TextPreprocessor(self.tokenizer, packer)

    def span_answers(self):
        """Document-stride windows in, answer texts out (`SpanAnswerDecoder`)."""
        return SpanAnswerDecoder(
            self.tokenizer,
            sequence_length=self.sequence_length,
            max_query_length=int(self.preprocessing.get("max_query_length", 64)),
            doc_stride=int(self.preprocessing.get("doc_stride", 128)),
            max_answer_length=int(self.preprocessing.get("max_answer_length", 64)),
            null_score_threshold=self.preprocessing.get("null_score_threshold"),
        )
