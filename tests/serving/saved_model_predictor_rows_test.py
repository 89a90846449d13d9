"""`SavedModelPredictor.predict`'s rows: a bare string is a text alone, and a row the signature cannot take
is an error naming the row, never a silently dropped field."""

import pytest

from xlnet_tf.serving.saved_model_predictor import SavedModelPredictor


def _single_text_predictor():
    # The row checks read only what the constructor derives from the signature; no model is needed.
    predictor = object.__new__(SavedModelPredictor)
    predictor.task, predictor.input_names = "classification", ("text", "text_pair")
    predictor.takes_choices, predictor.has_pair = False, False
    return predictor


def test_a_second_text_for_a_single_text_model_is_refused_naming_the_row():
    predictor = _single_text_predictor()
    with pytest.raises(ValueError, match=r"row 1: this classification model takes one text \(its signature has "
                                         r"no 'text_pair' input\), but the row has a second text 'B'"):
        list(predictor.predict([("a", None), ("A", "B")]))


def test_a_row_of_the_wrong_size_is_refused_naming_the_row():
    predictor = _single_text_predictor()
    with pytest.raises(ValueError, match=r"row 0: expected 2 fields \(text, \.\.\.\), got \('a', 'b', 'c'\)"):
        list(predictor.predict([("a", "b", "c")]))


def test_a_bare_string_is_a_text_alone(real_classifier_export):
    _, export, _ = real_classifier_export
    predictor = SavedModelPredictor(str(export))
    (bare,), (paired,) = predictor.predict(["a lovely film"]), predictor.predict([("a lovely film", "")])
    assert bare["probabilities"] == paired["probabilities"]
    assert bare["text"] == "a lovely film"
