"""In-graph preprocessing for fine-tuning: input packing and SQuAD windows/post-processing."""

from xlnet_tf.preprocessing.squad_postprocessing import squad_best_answer, squad_predictions
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor
