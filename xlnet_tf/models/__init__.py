"""XLNet models: the backbone, the pretrainer and the fine-tuning task models."""

from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
from xlnet_tf.models.xlnet_task import XLNetTask, load_task_preset
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier
