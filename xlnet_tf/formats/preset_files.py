"""File names of a preset directory, and of the checkpoint folders the converters read.

A preset directory is in keras-hub's layout (full description in
`xlnet_tf/formats/README.md` and `xlnet_tf/storage/preset_io.py`); every saver writes these
names and every loader reads them.

Example:
    >>> import os
    >>> from xlnet_tf.formats import preset_files
    >>> os.path.join("my_preset", preset_files.CONFIG_FILE)
    'my_preset/config.json'
"""

# ---- keras-hub's layout (written by every saver here, read by keras-hub too), under keras-hub's names
# The serialized `XLNetBackbone`.
CONFIG_FILE = "config.json"
# The backbone's weights.
MODEL_WEIGHTS_FILE = "model.weights.h5"
# Versions, parameter count, date, tasks.
METADATA_FILE = "metadata.json"
# The serialized `XLNetTokenizer`; its vocabulary is the asset below.
TOKENIZER_CONFIG_FILE = "tokenizer.json"
KERAS_HUB_VOCABULARY_FILE = "assets/tokenizer/vocabulary.spm"
# Tasks: the serialized task model, the head's weights, the serialized preprocessor.
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
PREPROCESSOR_CONFIG_FILE = "preprocessor.json"

# ---- extra files keras-hub ignores
# The pretrainer's LM output bias.
LM_HEAD_FILE = "lm_head.weights.h5"
# The same vocabulary bytes as the asset, for tools that take a vocabulary path; also the
# vocabulary's name in the original release and in Hugging Face checkpoints.
VOCABULARY_FILE = "spiece.model"
# In a fine-tuned task preset: how raw text was packed, and the serving metadata
# (task type, text fields, label names, SQuAD `null_score_threshold`, ...).
PREPROCESSING_FILE = "preprocessing.json"

# The names under which `config.json` and `tokenizer.json` register their classes.
BACKBONE_REGISTERED_NAME = "xlnet_tf>XLNetBackbone"
TOKENIZER_REGISTERED_NAME = "xlnet_tf>XLNetTokenizer"

# ---- checkpoint folders the converters read
# The original TF1 release: `xlnet_config.json`, `spiece.model`, `xlnet_model.ckpt.*`.
TF1_CONFIG_FILE = "xlnet_config.json"
TF1_RELEASE_FILES = (TF1_CONFIG_FILE, VOCABULARY_FILE)
# Hugging Face: `config.json`, `spiece.model`, and the weights in one file or in shards
# listed by an index.
TRANSFORMERS_CONFIG_FILE = "config.json"
TRANSFORMERS_WEIGHTS_FILE = "model.safetensors"
TRANSFORMERS_WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
TRANSFORMERS_FILES = (TRANSFORMERS_CONFIG_FILE, TRANSFORMERS_WEIGHTS_FILE, VOCABULARY_FILE)
