"""The names of the task types, input layouts and evaluations: plain strings, no imports.

The names are what configs, manifests, `preprocessing.json` and serving metadata spell.
"""

# Task type names (the registry's keys).
CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTIPLE_CHOICE = "multiple_choice"
TOKEN_CLASSIFICATION = "token_classification"
SPAN = "span"

# Input layouts: how a raw example becomes packed ids (`xlnet_tf.preprocessing.task_encoding`).
TEXT = "text"  # a text or a pair -> [B, L] (long documents: [B, S, L])
CHOICES = "choices"  # context, question, C options -> [B, C, L]
WORDS = "words"  # word lists + word tags -> [B, L] + per-position labels
WINDOWS = "windows"  # SQuAD passage + question -> document-stride windows

# Evaluations (`xlnet_tf.finetuning.evaluation`).
CLASSES = "classes"  # argmax over logits vs class ids
SCORE = "score"  # one float per example vs a float target
TAGS = "tags"  # argmax per position, ignored positions left out
SQUAD = "squad"  # answer text vs gold answers (EM / F1)
