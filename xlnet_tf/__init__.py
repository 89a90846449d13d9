"""xlnet_tf: XLNet for TensorFlow 2 and Keras 3.

The public API: configuration, the backbone, the pretrainer, the fine-tuning task models,
the tokenizer and the in-graph packers; and the main path as library calls, what the Colab
notebook runs: `resolve_strategy` (the TPU, else GPUs, else the CPU), `train_vocabulary`,
`resolve_config` (a shipped run config by name), `run_config_from_dict` + `run_pretraining`,
`finetune_config_from_dict` + `run_finetuning`, `export_pretrainer` and `export_workdir`.
Data readers live in `xlnet_tf.data`, serving in `xlnet_tf.serving`.

Example:
>>> import xlnet_tf
>>> strategy = xlnet_tf.resolve_strategy("auto")  # the TPU, else the GPUs, else the CPU
>>> per_replica = xlnet_tf.per_replica_batch_size(256, strategy.num_replicas_in_sync)

The model side (configuration, backbone, pretrainer, task models, `XLNetCausalLM` on token
ids) also runs on JAX and PyTorch without TensorFlow installed (`KERAS_BACKEND=jax`; without
TensorFlow the default is the first of JAX and PyTorch installed); the parts that need
TensorFlow then raise one line naming it (`xlnet_tf.tensorflow_required`).

Names are imported on first use, so that light modules (for example the text normalization
that Beam workers import) do not pay for loading Keras and the models. Importing the package
still makes `keras.saving.load_model` find every XLNet class with no `custom_objects` (see
`xlnet_tf/_keras_registration.py`), and hands the preset reader below the models
(`xlnet_tf.storage.preset_io`) the resolver of the named presets, which sit above them.
"""

import importlib.util as _importlib_util
import os as _os

from xlnet_tf import _keras_registration
from xlnet_tf import tensorflow_required as _tensorflow_required
from xlnet_tf._lazy_exports import lazy_exports as _lazy_exports
from xlnet_tf._version import __version__
from xlnet_tf.storage import preset_names as _preset_names


def _default_backend():
    """Keras 3 on TensorFlow (never tf_keras); without TensorFlow, the first of JAX and PyTorch installed."""
    if _tensorflow_required.tensorflow_available():
        return "tensorflow"
    for backend in ("jax", "torch"):
        if _importlib_util.find_spec(backend) is not None:
            return backend
    return "tensorflow"  # none installed: Keras' own error names the backend it wants


_os.environ.setdefault("KERAS_BACKEND", _default_backend())
if not _tensorflow_required.tensorflow_available():
    # The data side (tf.data, tokenizers, Beam, export) then fails with one line naming TensorFlow.
    _tensorflow_required.install_import_errors()

# Public name -> defining module. The Keras classes are those of the registration
# table, less the building blocks (layers) and the optimizers, which are
# imported from their own modules.
_EXPORTS = {
    "ConfigError": "xlnet_tf.models.xlnet_config",
    "XLNetConfig": "xlnet_tf.models.xlnet_config",
    "load_task_preset": "xlnet_tf.models.xlnet_task",
    "XLNetSquadPreprocessor": "xlnet_tf.preprocessing.xlnet_squad_preprocessor",
    # The main path as library calls (the notebook's API).
    "StrategyError": "xlnet_tf.training.strategy",
    "resolve_strategy": "xlnet_tf.training.strategy",
    "per_replica_batch_size": "xlnet_tf.training.strategy",
    "train_vocabulary": "xlnet_tf.tokenizer_training",
    "write_builtin_corpus": "xlnet_tf.builtin_corpus",
    "resolve_config": "xlnet_tf.training.shipped_configs",
    "run_config_from_dict": "xlnet_tf.pretraining.pretraining_config",
    "run_pretraining": "xlnet_tf.pretraining.pretraining_run",
    "finetune_config_from_dict": "xlnet_tf.finetuning.finetuning_config",
    "run_finetuning": "xlnet_tf.finetuning.finetuning_run",
    "export_pretrainer": "xlnet_tf.serving.export_pretrained",
    "export_workdir": "xlnet_tf.serving.export_pretrained",
    **{name: module for name, module in _keras_registration.KERAS_CLASSES.items()
       if not module.startswith(("xlnet_tf.layers.", "xlnet_tf.optimizers."))},
}

__all__, __getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, extra=["__version__"])


def _resolve_preset(name_or_path):
    """The named presets' resolver, for the preset reader below the models (which never imports them)."""
    # import time: the named presets load on the first `from_preset`, not with every `import xlnet_tf`
    from xlnet_tf.presets.preset_resolver import resolve_preset

    return resolve_preset(name_or_path)


_preset_names.set_named_preset_resolver(_resolve_preset)
_keras_registration.install()
