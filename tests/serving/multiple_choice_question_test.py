"""The multiple-choice question reaches the model on every serving path, and a row without one is refused.

A tiny `XLNetMultipleChoice` is trained (module fixture) on examples whose answer depends on the
question alone: the same context and options, `morning?` -> `light`, `night?` -> `clock`. Its task
preset is saved as `xlnet-tf finetune` saves `final/` and exported with `xlnet-tf export --workdir`
once per module. The same rows then go through `xlnet-tf predict` (JSONL and TEXT arguments), the
SavedModel's `serving_default` and the Python task (`XLNetMultipleChoice.from_preset` with its
preprocessor): same choice, probabilities within 1e-5. Dropping the question makes the model answer
both questions alike, so half the answers are wrong: the parity cannot hold vacuously.
"""

import json
import types

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import CONFIG, SPIECE
from xlnet_tf.cli.predict import main

pytestmark = pytest.mark.slow

LENGTH = 16
SECOND_MAX_LENGTH = 8
CONTEXTS = ["the house on the road", "a table by the door"]
ANSWERS = {"morning?": "light", "night?": "clock"}
ORDERS = (["light", "clock"], ["clock", "light"])
# (context, question, choices, index of the right choice): every context with every question and order.
EXAMPLES = [(c, q, order, order.index(a)) for c in CONTEXTS for q, a in ANSWERS.items() for order in ORDERS]
GOLD = [label for *_, label in EXAMPLES]
# A cloze question: the option fills its blank.
CLOZE = ("the house on the road", "a _ at night", ["light", "clock"])


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _train(model, steps=1500):
    """Adam on the packed examples until every answer is right with a margin (loss < 0.01)."""
    import keras

    features = model.preprocessor({"context": [e[0] for e in EXAMPLES], "question": [e[1] for e in EXAMPLES],
                                   "choices": [e[2] for e in EXAMPLES]})
    labels = tf.constant(GOLD)
    optimizer = keras.optimizers.Adam(3e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        # The mask embedding is for pretraining: it gets no gradient here.
        optimizer.apply_gradients([(g, v) for g, v in zip(gradients, model.trainable_variables, strict=True)
                                   if g is not None])
        return loss

    for _ in range(steps):
        if float(step()) < 0.01:
            return
    raise AssertionError("the tiny multiple-choice model did not learn the examples")


def _save_and_export(root, model, training_rows):
    """`final/` as `xlnet-tf finetune` writes it for `training_rows`, exported with `xlnet-tf export --workdir`.

    Only the task preset is written (no `config.yaml`), so `--workdir` names `final/` itself.
    """
    from xlnet_tf.cli.main import main as xlnet_tf
    from xlnet_tf.tasks.task_spec import TaskSpec
    from xlnet_tf.finetuning.finetuning_run import preprocessing_info

    task = TaskSpec(task_type="multiple_choice", train_file=_jsonl(root / "train.jsonl", training_rows),
                       sequence_length=LENGTH, max_qa_length=SECOND_MAX_LENGTH, num_classes=2)
    info = preprocessing_info(task)
    model.save_to_preset(str(root / "run" / "final"), vocabulary_file=SPIECE, preprocessing=info)
    assert xlnet_tf(["export", "--workdir", str(root / "run" / "final"), "--output", str(root / "export")]) == 0
    return types.SimpleNamespace(final=str(root / "run" / "final"), export=str(root / "export"), info=info,
                                 serve=tf.saved_model.load(str(root / "export")).signatures["serving_default"])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from tests.harness import tiny_config
    from xlnet_tf import XLNetBackbone, XLNetMultipleChoice, XLNetMultipleChoicePreprocessor, XLNetTokenizer

    preprocessor = XLNetMultipleChoicePreprocessor(XLNetTokenizer(SPIECE), sequence_length=LENGTH,
                                                   second_max_length=SECOND_MAX_LENGTH)
    # Weights drawn at 0.1 (not 0.02): the scores differ from the start, so training leaves the
    # flat start within about 60 steps instead of after a few hundred.
    backbone = XLNetBackbone(tiny_config(**CONFIG, initializer_range=0.1))
    model = XLNetMultipleChoice(backbone, dropout=0.0, preprocessor=preprocessor)
    _train(model)
    rows = [{"context": c, "question": q, "options": o, "label": y} for c, q, o, y in EXAMPLES]
    return _save_and_export(tmp_path_factory.mktemp("question"), model, rows)


@pytest.fixture(scope="module")
def without_questions(trained, tmp_path_factory):
    """The same weights, saved by a run whose training file had no questions."""
    from xlnet_tf import XLNetMultipleChoice

    model = XLNetMultipleChoice.from_preset(trained.final)
    rows = [{"context": c, "options": o, "label": y} for c, _, o, y in EXAMPLES]
    return _save_and_export(tmp_path_factory.mktemp("no_question"), model, rows)


def _predict(capsys, *argv):
    """`xlnet-tf predict` records of `argv`; the exit code must be 0."""
    capsys.readouterr()
    assert main(list(argv)) == 0, capsys.readouterr().err
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _refused(capsys, *argv):
    """The one stderr line of `xlnet-tf predict` refusing `argv` (exit 2)."""
    capsys.readouterr()
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    return lines[0]


def _signature(serve, rows, question=True):
    outputs = serve(context=tf.constant([r[0] for r in rows]), choices=tf.constant([r[2] for r in rows]),
                    **({"question": tf.constant([r[1] for r in rows])} if question else {}))
    return outputs["label"].numpy(), outputs["probabilities"].numpy()


def test_question_reaches_the_model_on_every_path(trained, tmp_path, capsys):
    from xlnet_tf import XLNetMultipleChoice

    rows = [e[:3] for e in EXAMPLES] + [CLOZE]
    lines = _jsonl(tmp_path / "rows.jsonl", [{"context": c, "question": q, "choices": o} for c, q, o in rows])
    records = _predict(capsys, "--model", trained.export, "--jsonl", lines)
    assert [(r["context"], r["question"], r["choices"]) for r in records] == rows
    cli_labels = np.array([r["label"] for r in records])
    cli_probabilities = np.array([r["probabilities"] for r in records])

    signature_labels, signature_probabilities = _signature(trained.serve, rows)
    task = XLNetMultipleChoice.from_preset(trained.final)
    logits = task.predict({"context": [r[0] for r in rows], "question": [r[1] for r in rows],
                           "choices": [r[2] for r in rows]}, verbose=0)
    task_probabilities = tf.nn.softmax(logits).numpy()

    np.testing.assert_array_equal(cli_labels[:len(GOLD)], GOLD)
    np.testing.assert_array_equal(signature_labels, cli_labels)
    np.testing.assert_array_equal(task_probabilities.argmax(-1), cli_labels)
    np.testing.assert_allclose(signature_probabilities, cli_probabilities, atol=1e-5, rtol=0)
    np.testing.assert_allclose(task_probabilities, cli_probabilities, atol=1e-5, rtol=0)


def test_dropping_the_question_changes_the_answer(trained, tmp_path, capsys):
    rows = [e[:3] for e in EXAMPLES]
    asked, _ = _signature(trained.serve, rows)
    dropped, dropped_probabilities = _signature(trained.serve, [(c, "", o) for c, _, o in rows])
    np.testing.assert_array_equal(asked, GOLD)
    # Without its question a row is the same input whatever was asked: the two questions of one
    # context and order get one answer, so one of them is wrong.
    np.testing.assert_allclose(dropped_probabilities[0::4], dropped_probabilities[2::4], atol=1e-6)
    np.testing.assert_allclose(dropped_probabilities[1::4], dropped_probabilities[3::4], atol=1e-6)
    assert int(np.sum(dropped != np.array(GOLD))) == len(GOLD) // 2
    # `xlnet-tf predict` gives the model each row's question, so it answers every one right.
    lines = _jsonl(tmp_path / "rows.jsonl", [{"context": c, "question": q, "choices": o} for c, q, o in rows])
    assert [r["label"] for r in _predict(capsys, "--model", trained.export, "--jsonl", lines)] == GOLD


def test_question_once_per_text(trained, capsys):
    # The options in the other order: the answer follows the question, not the position.
    records = _predict(capsys, "--model", trained.export, CONTEXTS[0], CONTEXTS[1], "--question", "morning?",
                       "--question", "night?", "--choice", "clock", "--choice", "light")
    assert [(r["question"], r["choices"][r["label"]]) for r in records] == [("morning?", "light"),
                                                                            ("night?", "clock")]
    line = _refused(capsys, "--model", trained.export, CONTEXTS[0], CONTEXTS[1], "--question", "a",
                    "--question", "b", "--question", "c", "--choice", "light", "--choice", "clock")
    assert line == ("xlnet-tf predict: --question was given 3 times for 2 texts; give it once or once per "
                    "text.")


def test_rows_without_a_question_are_refused(trained, tmp_path, capsys):
    from xlnet_tf.serving.saved_model_predictor import SavedModelPredictor

    line = _refused(capsys, "--model", trained.export, CONTEXTS[0], "--choice", "light", "--choice", "clock")
    assert line == ("xlnet-tf predict: this multiple-choice model was fine-tuned with a question before each "
                    "choice: give --question TEXT (once for every TEXT, or once per TEXT; --question '' for "
                    "none).")
    lines = _jsonl(tmp_path / "rows.jsonl", [{"context": "a", "question": "night?", "choices": ORDERS[0]},
                                             {"context": "b", "choices": ORDERS[0]}])
    line = _refused(capsys, "--model", trained.export, "--jsonl", lines)
    assert line == (f"xlnet-tf predict: {lines}:2: no `question`: this multiple-choice model was fine-tuned "
                    "with a question before each choice (its signature takes `question`); give the row its "
                    "question (a string, \"\" when it has none).")
    predictor = SavedModelPredictor(trained.export)
    assert predictor.takes_question and predictor.num_choices == 2
    with pytest.raises(ValueError, match=r"^row 1: no `question`"):
        list(predictor.predict([(CONTEXTS[0], "night?", ORDERS[0]), (CONTEXTS[0], ORDERS[0])]))
    # Dict rows (a JSONL line) and the training files' `options` are read too.
    rows = [{"context": c, "question": q, "options": o} for c, q, o, _ in EXAMPLES[:2]] + [EXAMPLES[2][:3]]
    records = list(predictor.predict(rows))
    assert [r["label"] for r in records] == GOLD[:3]
    assert [(r["context"], r["question"], r["choices"]) for r in records] == [e[:3] for e in EXAMPLES[:3]]
    # An explicit empty question is the row's own choice: packed as fine-tuning packs one.
    record, = _predict(capsys, "--model", trained.export, CONTEXTS[0], "--question", "",
                       "--choice", "light", "--choice", "clock")
    _, expected = _signature(trained.serve, [(CONTEXTS[0], "", ORDERS[0])])
    assert record["question"] == ""
    np.testing.assert_allclose(record["probabilities"], expected[0], atol=1e-5, rtol=0)


CARELESS = {
    "empty choices": ({"context": "a", "question": "q", "choices": []},
                      "this model takes exactly 2 choices per question, got none (an empty list)."),
    "one choice": ({"context": "a", "question": "q", "choices": ["light"]},
                   "this model takes exactly 2 choices per question, got 1."),
    "choices not a list": ({"context": "a", "question": "q", "choices": "light clock"},
                           "`choices` must be a list of 2 strings, one per option, got str 'light clock'."),
    "no choices": ({"context": "a", "question": "q"}, "no `choices`; give a list of 2 strings, one per option."),
    "choice not a string": ({"context": "a", "question": "q", "choices": ["light", 7]},
                            "`choice 1` must be a string, got int 7."),
    "question not a string": ({"context": "a", "question": ["q"], "choices": ["light", "clock"]},
                              "`question` must be a string, got list ['q']."),
    "question a number": ({"context": "a", "question": 3, "choices": ["light", "clock"]},
                          "`question` must be a string, got int 3."),
    "missing context": ({"question": "q", "choices": ["light", "clock"]},
                        "no `context` (the passage each choice is read with); give it as a string."),
    "context not a string": ({"context": {"text": "a"}, "question": "q", "choices": ["light", "clock"]},
                             "`context` must be a string, got dict {'text': 'a'}."),
    "not an object": (["a", "q", ["light", "clock"]],
                      "expected an object with `context`, `question` and a `choices` list, got list."),
}


@pytest.mark.parametrize("case", sorted(CARELESS))
def test_careless_jsonl_rows_are_one_line_errors(trained, tmp_path, capsys, case):
    row, message = CARELESS[case]
    lines = _jsonl(tmp_path / "rows.jsonl", [row])
    assert _refused(capsys, "--model", trained.export, "--jsonl", lines) == f"xlnet-tf predict: {lines}:1: {message}"


@pytest.mark.parametrize("argv, message", [
    (["ctx", "--question", "q", "--choice", "light"], "TEXT argument 1: this model takes exactly 2 choices per "
                                                      "question, got 1."),
    (["ctx", "--question", "q"], "give each option with --choice (this model takes exactly 2)."),
    (["--question", "q", "--choice", "a", "--choice", "b"], "--choice and --question go with TEXT arguments (the "
                                                            "contexts); --jsonl rows carry their own `question` "
                                                            "and `choices`."),
    (["ctx", "--pair", "q", "--choice", "a", "--choice", "b"], "--pair is not used by multiple-choice models; give "
                                                               "the question with --question and each option with "
                                                               "--choice."),
    ([], "no input: give TEXT arguments with --question and --choice, or --jsonl FILE."),
], ids=["one choice", "no choice", "no text", "pair", "no input"])
def test_careless_command_lines_are_one_line_errors(trained, capsys, argv, message):
    assert _refused(capsys, "--model", trained.export, *argv) == f"xlnet-tf predict: {message}"


def test_model_fine_tuned_without_questions(trained, without_questions, tmp_path, capsys):
    assert trained.info["has_question"] is True and without_questions.info["has_question"] is False
    with open(f"{without_questions.export}/xlnet_tf_serving.json") as f:
        assert json.load(f)["signatures"]["serving_default"]["inputs"] == ["choices", "context"]
    # It answers as the same weights do with an empty question: what its fine-tuning packed.
    # The same weights with an empty question (what the signature with `question` and the Python task,
    # equal to it, answer): the packing of its fine-tuning.
    rows = [(c, "", o) for c, _, o, _ in EXAMPLES]
    _, expected = _signature(trained.serve, rows)
    _, served = _signature(without_questions.serve, rows, question=False)
    np.testing.assert_allclose(served, expected, atol=1e-5, rtol=0)
    records = _predict(capsys, "--model", without_questions.export, *CONTEXTS, "--choice", "light",
                       "--choice", "clock")
    assert all("question" not in r for r in records)
    np.testing.assert_allclose([r["probabilities"] for r in records], expected[0::4], atol=1e-5, rtol=0)
    # A question it never saw is refused, on the command line and in JSONL rows; "" is no question.
    assert _refused(capsys, "--model", without_questions.export, CONTEXTS[0], "--question", "night?",
                    "--choice", "light", "--choice", "clock") == (
        "xlnet-tf predict: --question: this multiple-choice model was fine-tuned without questions (its "
        "signature takes `context` and `choices` only); leave --question out.")
    lines = _jsonl(tmp_path / "rows.jsonl", [{"context": "a", "question": "night?", "choices": ORDERS[0]}])
    assert _refused(capsys, "--model", without_questions.export, "--jsonl", lines) == (
        f"xlnet-tf predict: {lines}:1: this multiple-choice model was fine-tuned without questions (its "
        "signature takes `context` and `choices` only), but the row has the question 'night?'; leave the "
        "question out.")

