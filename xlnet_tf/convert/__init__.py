"""Checkpoint conversion: original TF1 releases and Hugging Face directories -> preset directories."""

from xlnet_tf.convert.conversion_error import ConversionError  # noqa: F401
from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint  # noqa: F401
from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint  # noqa: F401
