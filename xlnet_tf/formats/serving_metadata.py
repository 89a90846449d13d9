"""The metadata file next to an exported serving SavedModel.

`xlnet-tf export` (`xlnet_tf.serving.export_task_model`) writes it; `xlnet-tf predict`
reads it to know the task, the signatures and the label names.

Example:
    >>> import os
    >>> from xlnet_tf.formats import serving_metadata
    >>> os.path.join("exported", serving_metadata.METADATA_FILE)
    'exported/xlnet_tf_serving.json'
"""

METADATA_FILE = "xlnet_tf_serving.json"
METADATA_FORMAT = "xlnet_tf.serving.v1"

# Top-level keys (written with sorted keys):
# - format: METADATA_FORMAT;
# - task_type: "classification", "regression", "token_classification", "span" or
#   "multiple_choice";
# - sequence_length: the packed length the model was exported for;
# - has_text_pair: whether the text signature takes a second text;
# - num_choices: choices per example (multiple choice), else null;
# - max_segments: segments of `sequence_length` per document at fine-tuning (1: one window);
# - long_documents: whether both signatures take documents of any length (packed without
#   truncation, run segment by segment with recurrence memory): max_segments > 1 and a
#   classification / regression / multiple-choice model with memory_length > 0;
# - text_signature: whether a raw-text signature was exported;
# - label_names: class names, or null;
# - signatures: {name: {"inputs": [...], "outputs": [...]}};
# - token_inputs: the token-id signature's inputs, in order;
# - dtype: "float32" or "bfloat16";
# - jit_compile: whether the model call is one XLA-compiled function;
# - trim_padding: whether a request's all-padding leading columns are cut before the model;
# - extra: what the caller added (e.g. preprocessing.json's settings);
# - custom_ops: per signature, what a TensorFlow Serving binary must register.
METADATA_KEYS = (
    "format", "task_type", "sequence_length", "has_text_pair", "num_choices", "max_segments",
    "long_documents", "text_signature", "label_names", "signatures", "token_inputs", "dtype", "extra",
    "custom_ops", "jit_compile", "trim_padding",
)
