"""XLNet models: the backbone, the pretrainer and the fine-tuning task models."""

from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
