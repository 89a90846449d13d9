"""xlnet_tf: XLNet for TensorFlow 2 and Keras 3.

The public API: configuration, the backbone, the pretrainer, the fine-tuning task models,
the tokenizer and the in-graph packers. Data readers live in `xlnet_tf.data`, training in
`xlnet_tf.training`, serving in `xlnet_tf.serving`.
"""

import os as _os

# Keras 3 on TensorFlow; never tf_keras.
_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from xlnet_tf.config import ConfigError, XLNetConfig  # noqa: E402
from xlnet_tf.models import (  # noqa: E402
    XLNetBackbone,
    XLNetClassifier,
    XLNetMultipleChoice,
    XLNetPretrainer,
    XLNetSpanLabeler,
    XLNetTask,
    XLNetTokenClassifier,
    load_task_preset,
)
from xlnet_tf.preprocessing import XLNetPacker, XLNetSquadPreprocessor  # noqa: E402
from xlnet_tf.tokenizer import XLNetTokenizer  # noqa: E402

__version__ = "0.1.0"
