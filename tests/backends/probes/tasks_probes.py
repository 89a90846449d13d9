"""Probes of the pretrainer and the task models on every backend (compared in `tests/backends/tasks_backend_test.py`).

The TensorFlow run saves the presets (`_saved_presets`): a task preset of each
task model (tiny backbone over `tests/testdata/tiny_spiece.model`, dropout 0)
and a pretrainer preset with recurrence memory. Every backend, TensorFlow
included, loads them with `from_preset` and predicts, fine-tunes and resumes
from the same weights.
"""

import os

import keras
import numpy as np
from keras import ops

from tests.harness import tiny_config, tiny_two_stream_inputs

SPIECE = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "tiny_spiece.model")  # 200 pieces
VOCABULARY = 200
BATCH, LENGTH, CHOICES = 4, 12, 2
TASKS = ("classifier", "multiple_choice", "span_labeler", "token_classifier")
# Raw inputs of each task's preprocessor.
TEXTS = ["The small robot builds the evening light.", "A quiet river repairs the second chapter.",
         "Our team writes a warm coat.", "The first train paints the broken clock."]
QUESTIONS = ["Who builds?", "What repairs?", "Who writes?", "What paints?"]
STRING_INPUTS = {
    "classifier": TEXTS,
    "multiple_choice": {"context": TEXTS, "question": QUESTIONS,
                        "choices": [["the robot", "a river"]] * BATCH},
    "span_labeler": {"context": TEXTS, "question": QUESTIONS},
    "token_classifier": [text.rstrip(".").split() for text in TEXTS],
}
# Learnable from the words: 1 where the sentence mentions light or a clock, 0 where water or a coat.
LEARN_TEXTS = TEXTS + ["The small robot moves the broken clock.", "A quiet river carries the winter market.",
                       "Her brother watches the evening light.", "Some farmers open a warm coat."]
LEARN_LABELS = np.array([1, 0, 0, 1, 1, 0, 1, 0], "int32")


def _task_class(name):
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier
    from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
    from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier

    return {"classifier": XLNetClassifier, "multiple_choice": XLNetMultipleChoice,
            "span_labeler": XLNetSpanLabeler, "token_classifier": XLNetTokenClassifier}[name]


def _preprocessor(name):
    from xlnet_tf import (XLNetClassifierPreprocessor, XLNetMultipleChoicePreprocessor,
                          XLNetSpanLabelerPreprocessor, XLNetTokenClassifierPreprocessor, XLNetTokenizer)

    tokenizer = XLNetTokenizer(SPIECE)
    if name == "multiple_choice":
        return XLNetMultipleChoicePreprocessor(tokenizer, sequence_length=LENGTH, second_max_length=6)
    if name == "span_labeler":
        return XLNetSpanLabelerPreprocessor(tokenizer, sequence_length=LENGTH + 4, max_query_length=4,
                                            doc_stride=4)
    preprocessor_class = (XLNetClassifierPreprocessor if name == "classifier"
                          else XLNetTokenClassifierPreprocessor)
    return preprocessor_class(tokenizer, sequence_length=LENGTH)


def _head_arguments(name):
    return {"classifier": {"num_classes": 3}, "token_classifier": {"num_classes": 3}}.get(name, {})


def _saved_presets(workdir, backend):
    """`{name: preset directory}`; the TensorFlow run writes them, the others read them."""
    root = os.path.join(workdir, "tasks_presets")
    presets = {name: os.path.join(root, name) for name in TASKS + ("backbone", "pretrainer")}
    saved = os.path.join(root, "saved")
    if os.path.exists(saved):  # by an earlier probe of this run
        return presets
    if backend != "tensorflow":
        missing = [path for path in presets.values() if not os.path.exists(os.path.join(path, "config.json"))]
        if missing:
            raise FileNotFoundError(f"the TensorFlow run saves the presets first; missing {missing}")
        return presets
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    config = tiny_config(vocabulary_size=VOCABULARY, initializer_range=0.3)
    for index, name in enumerate(TASKS):
        keras.utils.set_random_seed(10 + index)
        model = _task_class(name)(XLNetBackbone(config), preprocessor=_preprocessor(name), dropout=0.0,
                                  **_head_arguments(name))
        model.save_to_preset(presets[name])
    keras.utils.set_random_seed(20)
    XLNetBackbone(config).save_to_preset(presets["backbone"])
    keras.utils.set_random_seed(21)
    pretrainer = XLNetPretrainer(XLNetBackbone(tiny_config(memory_length=3, initializer_range=0.3)))
    pretrainer.lm_bias.assign(np.linspace(-1.0, 1.0, 40).astype("float32"))
    pretrainer.save_to_preset(presets["pretrainer"])
    with open(saved, "w") as stream:
        stream.write("every preset is written\n")
    return presets


def _numpy(outputs):
    return keras.tree.map_structure(lambda value: np.asarray(ops.convert_to_numpy(value)), outputs)


def _flat(prefix, outputs):
    if isinstance(outputs, dict):
        return {f"{prefix}.{key}": value for key, value in _numpy(outputs).items()}
    return {prefix: _numpy(outputs)}


def _id_inputs(name, seed=0):
    """Packed ids of `name`'s model: `[B, L]` (`[B, C, L]` for multiple choice), `<cls>` last."""
    rng = np.random.default_rng(seed)
    shape = (BATCH, CHOICES, LENGTH) if name == "multiple_choice" else (BATCH, LENGTH)
    token_ids = rng.integers(9, VOCABULARY, shape).astype("int32")
    token_ids[..., -1] = 3  # <cls>
    segment_ids = np.zeros(shape, "int32")
    segment_ids[..., LENGTH // 2:] = 1
    segment_ids[..., -1] = 2
    padding_mask = np.ones(shape, "int32")
    padding_mask[0, ..., :2] = 0  # one left-padded row
    token_ids[0, ..., :2] = 5
    segment_ids[0, ..., :2] = 4
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def _labels(name, seed=0):
    """`(extra inputs, labels)` of a fine-tuning batch of `name`."""
    rng = np.random.default_rng(seed + 100)
    if name == "classifier":
        return {}, rng.integers(0, 3, (BATCH,)).astype("int32")
    if name == "multiple_choice":
        return {}, rng.integers(0, CHOICES, (BATCH,)).astype("int32")
    if name == "token_classifier":
        labels = rng.integers(0, 3, (BATCH, LENGTH)).astype("int32")
        labels[:, -1] = -100  # <cls> is not labelled
        return {}, labels
    starts = rng.integers(2, LENGTH // 2 - 1, (BATCH,))  # end = start + 1 in the passage.astype("int32")
    return {"start_positions": starts}, {"start_logits": starts, "end_logits": starts + 1,
                                         "cls_logits": np.array([0, 1, 0, 0], "float32")}


def probe_tasks_predict(workdir, backend):
    """Every task model from its preset: `predict` on packed ids and on raw text."""
    presets = _saved_presets(workdir, backend)
    results = {}
    for name in TASKS:
        model = _task_class(name).from_preset(presets[name])
        results.update(_flat(f"{name}.ids", model.predict(_id_inputs(name), batch_size=BATCH, verbose=0)))
        results.update(_flat(f"{name}.strings", model.predict(STRING_INPUTS[name], batch_size=BATCH,
                                                              verbose=0)))
        # The same packed ids through the model's own call.
        results.update(_flat(f"{name}.call", model(_id_inputs(name), training=False)))
    return results


def probe_tasks_pretrainer_outputs(workdir, backend):
    """The pretrainer from its preset with `perm_mask`, `target_mapping` and `mems`."""
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    presets = _saved_presets(workdir, backend)
    pretrainer = XLNetPretrainer.from_preset(presets["pretrainer"])
    inputs = tiny_two_stream_inputs(pretrainer.backbone.config, batch_size=BATCH, sequence_length=8,
                                    num_predict=3, seed=3)
    results = _flat("call", {key: value for key, value in pretrainer(inputs).items()
                             if key in ("logits", "query_output", "sequence_output", "new_mems")})
    predicted = pretrainer.predict(inputs, batch_size=BATCH, verbose=0)
    results.update(_flat("predict", {key: predicted[key] for key in ("logits", "new_mems")}))
    return results


def _compile_options():
    """XLA on JAX (its train step is jitted); TensorFlow's XLA compile of each tiny step costs more than it runs."""
    return {"jit_compile": "auto" if keras.config.backend() == "jax" else False}


def _fine_tuning_model(name, presets, dropout=0.0, seed=0):
    """`name`'s model from its task preset (dropout 0) or, with dropout, on the backbone preset with dropout."""
    keras.utils.set_random_seed(seed)
    if dropout == 0.0:
        model = _task_class(name).from_preset(presets[name])
    else:
        from xlnet_tf.models.xlnet_backbone import XLNetBackbone

        backbone = XLNetBackbone.from_preset(presets["backbone"], dropout=dropout, attention_dropout=dropout)
        model = _task_class(name)(backbone, preprocessor=_preprocessor(name), dropout=dropout,
                                  **_head_arguments(name))
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-2, weight_decay=0.01), **_compile_options())
    return model


def probe_tasks_finetune_losses(workdir, backend):
    """Dropout 0, fixed data and optimizer: the first 3 steps' losses, then `evaluate`, of every task."""
    presets = _saved_presets(workdir, backend)
    results = {}
    for name in TASKS:
        model = _fine_tuning_model(name, presets)
        extra, labels = _labels(name)
        x = {**_id_inputs(name), **extra}
        history = model.fit(x, labels, batch_size=BATCH, epochs=3, shuffle=False, verbose=0)
        results[f"{name}.losses"] = np.array(history.history["loss"], "float64")
        results[f"{name}.evaluate"] = np.array(model.evaluate(x, labels, batch_size=BATCH, verbose=0), "float64")
    # From raw strings: the preprocessor runs in tf.data and hands the model backend tensors.
    model = _fine_tuning_model("classifier", presets)
    labels = _labels("classifier")[1]
    history = model.fit(TEXTS, labels, batch_size=BATCH, epochs=3, shuffle=False, verbose=0)
    results["strings.losses"] = np.array(history.history["loss"], "float64")
    results["strings.evaluate"] = np.array(model.evaluate(TEXTS, labels, batch_size=BATCH, verbose=0), "float64")
    results["strings.predict"] = _numpy(model.predict(TEXTS, batch_size=BATCH, verbose=0))
    return results


def _pretraining_batch(config, seed=0):
    inputs = tiny_two_stream_inputs(config, batch_size=BATCH, sequence_length=8, num_predict=3, seed=seed,
                                    memory_length=0)
    rng = np.random.default_rng(seed + 7)
    inputs["target_ids"] = rng.integers(9, config.vocabulary_size, (BATCH, 3)).astype("int32")
    inputs["target_mask"] = np.array([[1, 1, 1]] * (BATCH - 1) + [[1, 1, 0]], "float32")
    return inputs


def _pretrainer(presets, memory, dropout=0.0, seed=0):
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    keras.utils.set_random_seed(seed)
    overrides = {"dropout": dropout, "attention_dropout": dropout}
    if not memory:
        overrides["memory_length"] = 0
    pretrainer = XLNetPretrainer.from_preset(presets["pretrainer"], **overrides)
    pretrainer.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-2, weight_decay=0.01),
                       **_compile_options())
    if memory:
        pretrainer.enable_recurrence_memory(BATCH)
    return pretrainer


def _pretraining_losses(workdir, backend, memory):
    presets = _saved_presets(workdir, backend)
    pretrainer = _pretrainer(presets, memory)
    batch = _pretraining_batch(pretrainer.backbone.config)
    history = pretrainer.fit(batch, batch_size=BATCH, epochs=3, shuffle=False, verbose=0)
    results = {"losses": np.array(history.history["loss"], "float64"),
               "accuracy": np.array(history.history["accuracy"], "float64"),
               "lm_bias": _numpy(pretrainer.lm_bias)}
    if memory:
        results["memory"] = _numpy(pretrainer.recurrence_memory.variable)
    return results


def probe_tasks_pretrainer_losses(workdir, backend):
    """Dropout 0, fixed batch: the pretrainer's first 3 steps (masked mean loss, accuracy), no memory."""
    return _pretraining_losses(workdir, backend, memory=False)


def probe_tasks_pretrainer_memory_losses(workdir, backend):
    """As `probe_tasks_pretrainer_losses` with recurrence memory carried from step to step."""
    return _pretraining_losses(workdir, backend, memory=True)


def _weights_diff(a, b):
    return max(float(np.abs(np.asarray(x, "float64") - np.asarray(y, "float64")).max())
               for x, y in zip(a.get_weights(), b.get_weights()))


def _resume(workdir, build, fit):
    """Max weight difference of 4 steps uninterrupted vs 2, save, rebuild, load, 2; and vs another run seed.

    The uninterrupted run is the saved one going on in memory: what a restarted
    process rebuilds from the file must continue as it does (and each model
    built costs a compiled step).
    """
    reference = build()
    fit(reference, 0, 2)
    path = os.path.join(workdir, f"tasks_resume_{keras.config.backend()}.weights.h5")
    reference.save_weights(path)  # weights and optimizer state
    fit(reference, 2, 4)
    resumed = build()
    resumed.optimizer.build(resumed.trainable_variables)
    resumed.load_weights(path)
    step = int(ops.convert_to_numpy(resumed.optimizer.iterations))
    fit(resumed, 2, 4)
    other = build()
    other.backbone.dropout_run_seed = 99  # other masks from the same midway state
    other.optimizer.build(other.trainable_variables)
    other.load_weights(path)
    fit(other, 2, 4)
    return {"restored_step": np.array(step), "resumed_diff": np.array(_weights_diff(reference, resumed)),
            "other_seed_diff": np.array(_weights_diff(reference, other))}


def probe_tasks_resume(workdir, backend):
    """Dropout on: a classifier and a pretrainer resumed midway end exactly like the uninterrupted run."""
    presets = _saved_presets(workdir, backend)
    features = {k: np.concatenate([v, v[::-1]]) for k, v in _id_inputs("classifier").items()}  # 8 rows
    labels = np.concatenate([_labels("classifier")[1]] * 2)

    def fit_classifier(model, start, end):
        rows = slice(start * 2, end * 2)
        model.fit({k: v[rows] for k, v in features.items()}, labels[rows], batch_size=2, epochs=1,
                  shuffle=False, verbose=0)

    results = {f"classifier.{k}": v for k, v in _resume(
        workdir, lambda: _fine_tuning_model("classifier", presets, dropout=0.3), fit_classifier).items()}
    batch = _pretraining_batch(tiny_config(), seed=1)
    batch = {k: np.concatenate([v, v[::-1]]) for k, v in batch.items()}

    def fit_pretrainer(model, start, end):
        rows = slice(start * 2, end * 2)
        model.fit({k: v[rows] for k, v in batch.items()}, batch_size=2, epochs=1, shuffle=False, verbose=0)

    results.update({f"pretrainer.{k}": v for k, v in _resume(
        workdir, lambda: _pretrainer(presets, memory=False, dropout=0.3), fit_pretrainer).items()})
    return results


def probe_tasks_strings_learn(workdir, backend):
    """A tiny classifier fine-tuned from raw strings (dropout on) learns them: loss and accuracy by epoch."""
    presets = _saved_presets(workdir, backend)
    model = _fine_tuning_model("classifier", presets, dropout=0.1)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-2), metrics=["accuracy"], **_compile_options())
    before = model.evaluate(LEARN_TEXTS, LEARN_LABELS, batch_size=4, verbose=0, return_dict=True)
    history = model.fit(LEARN_TEXTS, LEARN_LABELS, batch_size=4, epochs=12, shuffle=False, verbose=0)
    after = model.evaluate(LEARN_TEXTS, LEARN_LABELS, batch_size=4, verbose=0, return_dict=True)
    predicted = np.argmax(_numpy(model.predict(LEARN_TEXTS, batch_size=4, verbose=0)), axis=-1)
    return {"losses": np.array(history.history["loss"]), "loss_before": np.array(before["loss"]),
            "loss_after": np.array(after["loss"]), "accuracy_before": np.array(before["accuracy"]),
            "accuracy_after": np.array(after["accuracy"]),
            "predicted_accuracy": np.array(float(np.mean(predicted == LEARN_LABELS)))}
