import keras
import numpy as np

from tests.harness import run_layer_test, tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler

CONFIG = tiny_config()
# [pad] P P P P <sep> Q Q <sep> <cls>, twice (second row with one more pad).
FEATURES = {
    "token_ids": np.array([[5, 11, 12, 13, 14, 4, 21, 22, 4, 3],
                           [5, 5, 11, 12, 13, 4, 21, 22, 4, 3]], "int32"),
    "segment_ids": np.array([[4, 0, 0, 0, 0, 0, 1, 1, 1, 2],
                             [4, 4, 0, 0, 0, 0, 1, 1, 1, 2]], "int32"),
    "padding_mask": np.array([[0, 1, 1, 1, 1, 1, 1, 1, 1, 1],
                              [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]], "int32"),
}
ALLOWED = [[1, 2, 3, 4, 9], [2, 3, 4, 9]]


def _model():
    keras.utils.set_random_seed(3)
    return XLNetSpanLabeler(XLNetBackbone(CONFIG), start_n_top=3, end_n_top=2)


def test_training_outputs_mask_everything_but_passage_and_cls():
    model = _model()
    out = model({**FEATURES, "start_positions": np.array([2, 3])})
    assert set(out) == {"start_logits", "end_logits", "cls_logits"}
    assert tuple(out["cls_logits"].shape) == (2,)
    for key in ("start_logits", "end_logits"):
        logits = out[key].numpy()
        for row, allowed in enumerate(ALLOWED):
            open_ = np.flatnonzero(logits[row] > -1e29).tolist()
            assert open_ == allowed, (key, row, open_)


def test_explicit_answer_mask_overrides_the_derived_one():
    model = _model()
    mask = np.zeros((2, 10), "int32")
    mask[:, 3] = 1
    out = model({**FEATURES, "answer_mask": mask})
    assert (out["start_top_index"].numpy()[:, 0] == 3).all()
    assert (out["end_top_index"].numpy()[:, :, 0] == 3).all()


def test_beam_matches_the_teacher_forced_end_logits():
    model = _model()
    out = {k: v.numpy() for k, v in model(FEATURES).items()}
    assert out["start_top_index"].shape == (2, 3) and out["end_top_index"].shape == (2, 3, 2)
    start = model({**FEATURES, "start_positions": np.zeros(2, "int32")})["start_logits"].numpy()
    start_log_probs = start - np.log(np.sum(np.exp(start - start.max(-1, keepdims=True)), -1,
                                            keepdims=True)) - start.max(-1, keepdims=True)
    np.testing.assert_array_equal(out["start_top_index"], np.argsort(-start_log_probs, -1)[:, :3])
    np.testing.assert_allclose(out["start_top_log_probs"],
                               np.take_along_axis(start_log_probs, out["start_top_index"], 1), atol=1e-5)
    for k in range(3):
        forced = model({**FEATURES, "start_positions": out["start_top_index"][:, k]})
        end = forced["end_logits"].numpy()
        np.testing.assert_array_equal(out["end_top_index"][:, k], np.argsort(-end, -1)[:, :2])
        # The answer-class logit does not depend on the chosen start.
        np.testing.assert_allclose(forced["cls_logits"].numpy(), out["cls_logits"], atol=1e-6)


def test_config_round_trip():
    keras.utils.set_random_seed(3)
    run_layer_test(XLNetSpanLabeler, dict(backbone=XLNetBackbone(CONFIG), start_n_top=3, end_n_top=2), FEATURES,
                   {"start_top_log_probs": (2, 3), "start_top_index": (2, 3), "end_top_log_probs": (2, 3, 2),
                    "end_top_index": (2, 3, 2), "cls_logits": (2,)}, output_dtype="float32")


def test_more_left_padding_shifts_the_beam_and_changes_no_score():
    model = _model()
    row = {k: v[:1] for k, v in FEATURES.items()}
    padded = {k: np.concatenate([np.full((1, 3), fill, "int32"), v], axis=1)
              for (k, v), fill in zip(row.items(), (5, 4, 0))}
    a = {k: v.numpy() for k, v in model(row).items()}
    b = {k: v.numpy() for k, v in model(padded).items()}
    np.testing.assert_array_equal(b["start_top_index"], a["start_top_index"] + 3)
    np.testing.assert_array_equal(b["end_top_index"], a["end_top_index"] + 3)
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        np.testing.assert_allclose(b[key], a[key], atol=1e-5)
