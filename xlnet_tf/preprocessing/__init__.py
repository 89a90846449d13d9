"""In-graph preprocessing for fine-tuning: input packing and SQuAD windows/post-processing.

Names are imported on first use: the Beam workers import `digit_comma_split` from this package, and an
eager import of the packers here would load TensorFlow and Keras in every worker process (seconds of CPU).
"""

from xlnet_tf._lazy_exports import lazy_exports as _lazy_exports

__all__, __getattr__, __dir__ = _lazy_exports(__name__, {
    "squad_best_answer": "xlnet_tf.preprocessing.squad_postprocessing",
    "squad_predictions": "xlnet_tf.preprocessing.squad_postprocessing",
    "XLNetPacker": "xlnet_tf.preprocessing.xlnet_packer",
    "XLNetSquadPreprocessor": "xlnet_tf.preprocessing.xlnet_squad_preprocessor",
})
