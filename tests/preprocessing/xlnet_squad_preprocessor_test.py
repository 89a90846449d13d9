import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.preprocessing.squad_postprocessing import squad_best_answer, squad_predictions
from xlnet_tf.preprocessing.xlnet_squad_preprocessor import XLNetSquadPreprocessor
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

CONTEXT = "The river Zürich flows quickly past the old mill, said Anna."
QUESTION = "Where is the river?"


@pytest.fixture(scope="module")
def tokenizer(testdata_dir="tests/testdata"):
    return XLNetTokenizer("tests/testdata/tiny_spiece.model")


def _np(d):
    return {k: v.numpy() for k, v in d.items()}


def _outputs_pointing_at(windows, start, end, cls_logit=-5.0, window=None):
    """Fake beam outputs whose best (start, end) is the given positions of `window` (default: all)."""
    w, length = windows["token_ids"].shape
    cls = length - 1  # never a valid span end, so the other beam entries lose
    start_index = np.tile([[start, cls]], (w, 1))
    end_index = np.tile([[[end, cls], [cls, cls]]], (w, 1, 1))
    if window is not None:
        others = np.arange(w) != window
        start_index[others] = cls
        end_index[others] = cls
    return {
        "start_top_log_probs": np.tile([[-0.1, -2.0]], (w, 1)),
        "start_top_index": start_index,
        "end_top_log_probs": np.tile([[[-0.2, -3.0], [-0.1, -0.1]]], (w, 1, 1)),
        "end_top_index": end_index,
        "cls_logits": np.full((w,), cls_logit),
    }


def test_every_word_span_label_maps_back_to_the_exact_characters(tokenizer):
    pre = XLNetSquadPreprocessor(tokenizer, sequence_length=40, max_query_length=8, doc_stride=8)
    words = CONTEXT.split(" ")
    offsets = np.cumsum([0] + [len(w) + 1 for w in words])
    windows_of = tf.function(lambda start, text: pre(CONTEXT, QUESTION, start, text))
    for i in range(len(words)):
        for j in range(i, min(i + 3, len(words))):
            answer = CONTEXT[offsets[i]:offsets[j] + len(words[j])]
            windows = _np(windows_of(tf.constant(int(offsets[i])), tf.constant(answer)))
            found = np.flatnonzero(windows["is_impossible"] == 0)
            assert found.size >= 1, answer
            found = [w for w in found if windows["token_is_max_context"][w, windows["start_positions"][w]]]
            w = found[0]
            s, e = windows["start_positions"][w], windows["end_positions"][w]
            assert windows["answer_mask"][w, s] == 1 and windows["answer_mask"][w, e] == 1
            got = squad_best_answer(CONTEXT, windows, _outputs_pointing_at(windows, s, e, window=w))
            assert got.text == answer, (answer, got)
            assert CONTEXT[got.char_start:got.char_end] == answer


def test_multi_piece_answer_over_several_windows_and_unanswerable(tokenizer):
    pre = XLNetSquadPreprocessor(tokenizer, sequence_length=24, max_query_length=6, doc_stride=4)
    answer = "Zürich flows"
    windows = _np(pre(CONTEXT, QUESTION, CONTEXT.index(answer), answer))
    assert windows["token_ids"].shape[0] > 2  # the passage needed several windows
    w = int(np.flatnonzero(windows["is_impossible"] == 0)[0])
    s, e = int(windows["start_positions"][w]), int(windows["end_positions"][w])
    assert e - s >= 2  # "Zürich flows" spans several pieces
    assert (windows["start_positions"][windows["is_impossible"] == 1] == 23).all()  # <cls>
    assert windows["token_is_max_context"][w, s] == 1
    got = squad_best_answer(CONTEXT, windows, _outputs_pointing_at(windows, s, e, window=w))
    assert (got.text, got.char_start) == (answer, CONTEXT.index(answer))

    # SQuAD 2.0: a high answer-class logit with a threshold gives the empty answer.
    null = squad_best_answer(CONTEXT, windows, _outputs_pointing_at(windows, s, e, 3.0, w),
                             null_score_threshold=0.0)
    assert null.text == "" and null.char_start == -1 and null.null_score == 3.0
    # SQuAD 1.1 (no threshold) still answers.
    assert squad_best_answer(CONTEXT, windows, _outputs_pointing_at(windows, s, e, 3.0, w)).text == answer

    unanswerable = _np(pre(CONTEXT, QUESTION, 0, "", is_impossible=True))
    assert (unanswerable["is_impossible"] == 1).all()


def test_spans_outside_the_passage_or_too_long_are_skipped(tokenizer):
    pre = XLNetSquadPreprocessor(tokenizer, sequence_length=64, max_query_length=8, doc_stride=16)
    windows = _np(pre(CONTEXT, QUESTION))
    assert windows["token_ids"].shape == (1, 64)
    first = int(np.flatnonzero(windows["piece_start_bytes"][0] >= 0)[0])
    cls_only = _outputs_pointing_at(windows, 63, 63)  # <cls> is not a passage piece
    assert squad_best_answer(CONTEXT, windows, cls_only).text == ""
    long_span = _outputs_pointing_at(windows, first, first + 5)
    assert squad_best_answer(CONTEXT, windows, long_span, max_answer_length=3).text == ""

    features = {**windows, "example_id": np.array([b"q1"])}
    answers = squad_predictions({"q1": CONTEXT}, features, _outputs_pointing_at(windows, first, first))
    assert answers["q1"].text == "Th"  # the first piece, "▁Th", without its space


def test_windows_through_tf_data(tokenizer):
    pre = XLNetSquadPreprocessor(tokenizer, sequence_length=24, max_query_length=6, doc_stride=4)
    ds = tf.data.Dataset.from_tensor_slices({"c": [CONTEXT, "Short."], "q": ["Who?", "What?"]})
    ds = ds.flat_map(lambda x: tf.data.Dataset.from_tensor_slices(pre(x["c"], x["q"])))
    rows = list(ds.as_numpy_iterator())
    assert len(rows) == pre(CONTEXT, "Who?")["token_ids"].shape[0] + 1
    assert rows[-1]["token_ids"].shape == (24,)


def test_bad_settings_are_named(tokenizer):
    with pytest.raises(ValueError, match="max_query_length"):
        XLNetSquadPreprocessor(tokenizer, sequence_length=10, max_query_length=8)


def test_an_empty_passage_packs_the_question_alone(tokenizer):
    # A passage of no pieces used to fail in a gather ("indices[0,0] = 0 is not in [0, 0)").
    from xlnet_tf import XLNetSpanLabelerPreprocessor

    squad = XLNetSquadPreprocessor(tokenizer, sequence_length=16, max_query_length=4, doc_stride=8)
    question = [int(i) for i in np.asarray(tokenizer.tokenize(tf.constant("Who?")))][:4]
    for windows in (_np(squad("", "Who?", answer_start=0, answer_text="")),
                    _np(tf.function(squad)(tf.constant(""), tf.constant("Who?")))):
        assert windows["token_ids"].tolist() == [[5] * (13 - len(question)) + [4] + question + [4, 3]]
        assert windows["answer_mask"].tolist() == [[0] * 15 + [1]]  # only <cls>: "no answer"
        assert (windows["piece_start_bytes"] == -1).all() and (windows["token_is_max_context"] == 0).all()
    labeled = _np(squad("", "Who?", answer_start=0, answer_text=""))
    assert labeled["start_positions"].tolist() == labeled["end_positions"].tolist() == [15]
    preprocessor = XLNetSpanLabelerPreprocessor(tokenizer, sequence_length=16, max_query_length=4, doc_stride=8)
    packed = preprocessor({"context": ["", "The river."], "question": ["Who?", "Who?"]})
    assert np.asarray(packed["token_ids"])[0].tolist() == windows["token_ids"][0].tolist()
