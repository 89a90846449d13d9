"""In-graph preprocessing for fine-tuning: input packing and SQuAD windows/post-processing.

Names are imported on first use: the Beam workers import `digit_comma_split` from this package, and an
eager import of the packers here would load TensorFlow and Keras in every worker process (seconds of CPU).
"""

import importlib as _importlib

_EXPORTS = {
    "squad_best_answer": "xlnet_tf.preprocessing.squad_postprocessing",
    "squad_predictions": "xlnet_tf.preprocessing.squad_postprocessing",
    "XLNetPacker": "xlnet_tf.preprocessing.xlnet_packer",
    "XLNetSquadPreprocessor": "xlnet_tf.preprocessing.xlnet_squad_preprocessor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'xlnet_tf.preprocessing' has no attribute {name!r}")


def __dir__():
    return __all__
