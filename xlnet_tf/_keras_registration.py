"""Makes `import xlnet_tf` enough for `keras.saving.load_model`, without importing Keras eagerly.

Every Keras class of the package is registered by its
`@keras.saving.register_keras_serializable(package="xlnet_tf")` decorator, which
only runs when its module is imported; Keras itself auto-imports modules of its
own packages only. Importing those modules from `xlnet_tf/__init__.py` would
make every `xlnet_tf.*` import load TensorFlow, Keras and keras-hub (seconds of
start-up and a large share of a process's memory), also
`xlnet_tf.text_normalization`, which Beam workers import and which is light on its own.

Instead, as soon as Keras is loaded (right away when it already is, otherwise
at the end of its own import), Keras' registry gets one stand-in per class
under its registered name (`xlnet_tf>XLNetClassifier`). A stand-in imports the
real module on first use and hands over to the real `from_config`; importing
the module runs its decorator, which replaces the stand-in with the class.
Registering a stand-in imports nothing, so it is safe at any point of an
import, also when Keras is first imported by an `xlnet_tf` module itself.
"""

import importlib
import importlib.util
import sys
import warnings

# Registered name (without the "xlnet_tf>" package prefix) -> module defining the class.
# tests/models/keras_saving_test.py checks this against the decorated classes.
KERAS_CLASSES = {
    "RelativeAttention": "xlnet_tf.layers.relative_attention",
    "RelativePositionEncoding": "xlnet_tf.layers.relative_position_encoding",
    "XLNetBlock": "xlnet_tf.layers.xlnet_block",
    "Embedding": "xlnet_tf.layers.embedding",
    "XLNetBackbone": "xlnet_tf.models.xlnet_backbone",
    "XLNetPretrainer": "xlnet_tf.models.xlnet_pretrainer",
    "XLNetTask": "xlnet_tf.models.xlnet_task",
    "XLNetClassifier": "xlnet_tf.models.xlnet_classifier",
    "XLNetSpanLabeler": "xlnet_tf.models.xlnet_span_labeler",
    "XLNetMultipleChoice": "xlnet_tf.models.xlnet_multiple_choice",
    "XLNetTokenClassifier": "xlnet_tf.models.xlnet_token_classifier",
    "XLNetCausalLM": "xlnet_tf.models.xlnet_causal_lm",
    "XLNetPacker": "xlnet_tf.preprocessing.xlnet_packer",
    "XLNetTokenizer": "xlnet_tf.preprocessing.xlnet_tokenizer",
    "XLNetPreprocessor": "xlnet_tf.preprocessing.xlnet_preprocessor",
    "XLNetClassifierPreprocessor": "xlnet_tf.preprocessing.xlnet_classifier_preprocessor",
    "XLNetSpanLabelerPreprocessor": "xlnet_tf.preprocessing.xlnet_span_labeler_preprocessor",
    "XLNetMultipleChoicePreprocessor": "xlnet_tf.preprocessing.xlnet_multiple_choice_preprocessor",
    "XLNetTokenClassifierPreprocessor": "xlnet_tf.preprocessing.xlnet_token_classifier_preprocessor",
    "XLNetCausalLMPreprocessor": "xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor",
    # Optimizer and schedule, met in the compile config of a compiled model.
    "FusedAdamWMuon": "xlnet_tf.optimizers.fused_adamw_muon",
    "AllReducedAdamW": "xlnet_tf.optimizers.all_reduced_adamw",
    "WarmupDecaySchedule": "xlnet_tf.optimizers.warmup_decay_schedule",
    "LayerwiseAdamW": "xlnet_tf.optimizers.layerwise_adamw",
}
PACKAGE = "xlnet_tf"


class DeferredClass:
    """Stands in Keras' registry for an `xlnet_tf` class whose module is not imported yet.

    Args:
        name: the class name.
        module: the module that defines (and registers) it.
    """

    def __init__(self, name, module):
        self.__name__ = name
        self.module = module

    def resolve(self):
        """Imports the defining module (which registers the class) and returns the class."""
        return getattr(importlib.import_module(self.module), self.__name__)

    def from_config(self, config):
        return self.resolve().from_config(config)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __repr__(self):
        return f"<deferred {self.module}.{self.__name__}>"


def register_deferred_classes(keras_module):
    """Puts a `DeferredClass` under every `xlnet_tf>Name` that has no class registered yet."""
    registry = keras_module.saving.get_custom_objects()
    for name, module in KERAS_CLASSES.items():
        registry.setdefault(f"{PACKAGE}>{name}", DeferredClass(name, module))


def _register_or_warn(keras_module):
    try:
        register_deferred_classes(keras_module)
    except Exception as error:  # Never break `import keras` over this convenience.
        warnings.warn(f"xlnet_tf could not register its Keras classes ({error!r}); pass "
                      "custom_objects to keras.saving.load_model, or import xlnet_tf.models first.", stacklevel=2)


class _KerasImportHook:
    """One-shot meta path finder: registers the stand-ins right after `keras` executes."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("keras")  # the other finders, this one removed
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register_or_warn(module)

        # The loader object belongs to this one spec, so the override touches nothing else.
        loader.exec_module = exec_then_register
        return spec


def install():
    """Registers the stand-ins now if Keras is loaded, otherwise when it gets imported."""
    keras_module = sys.modules.get("keras")
    if keras_module is not None and hasattr(keras_module, "saving"):
        _register_or_warn(keras_module)
        return
    if not any(isinstance(finder, _KerasImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasImportHook())
