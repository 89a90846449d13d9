"""SavedModel export and serving of fine-tuned task models (see README.md)."""

from xlnet_tf.serving.export_task_model import export_task_model
from xlnet_tf.serving.signature_custom_ops import signature_custom_ops
from xlnet_tf.serving.span_answer_decoder import SpanAnswerDecoder
from xlnet_tf.serving.export_task_workdir import export_task_workdir
from xlnet_tf.serving.saved_model_predictor import SavedModelPredictor
from xlnet_tf.serving.task_serving_module import TaskServingModule
from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor

__all__ = [
    "SavedModelPredictor",
    "SpanAnswerDecoder",
    "TaskServingModule",
    "TextPreprocessor",
    "export_task_model",
    "export_task_workdir",
    "signature_custom_ops",
]
