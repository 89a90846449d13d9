"""In-graph preprocessing for fine-tuning: input packing and SQuAD windows/post-processing."""

from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
