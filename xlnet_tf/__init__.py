"""xlnet_tf: XLNet for TensorFlow 2 and Keras 3."""

import os as _os

# Keras 3 on TensorFlow; never tf_keras.
_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from xlnet_tf.config import ConfigError, XLNetConfig  # noqa: E402
from xlnet_tf.models.xlnet_backbone import XLNetBackbone  # noqa: E402
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer  # noqa: E402

__version__ = "0.1.0"
