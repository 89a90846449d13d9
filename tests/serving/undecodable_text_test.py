"""Text that is not valid Unicode gets one policy on every path: the preprocessor called directly,
`tf.data` (what `fit` / `predict` use) and the exported SavedModel replace each undecodable part with
U+FFFD and give the same ids; the Python paths warn with the row and the position."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import LENGTH, SPIECE
from xlnet_tf.preprocessing.xlnet_classifier_preprocessor import XLNetClassifierPreprocessor
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.text_normalization import replace_undecodable, replace_undecodable_tf

TEXTS = [b"caf\xe9 au lait", b"ok \xff\xfe x", b"\xed\xa0\x80 plain", b"all fine"]
PAIRS = [b"a drink", b"\xc3", b"the river \xf0\x9f\x98", b"quiet"]


@pytest.fixture(scope="module")
def preprocessor():
    return XLNetClassifierPreprocessor(XLNetTokenizer(SPIECE), sequence_length=LENGTH)


def _replaced(rows):
    return [row.decode("utf-8", "replace") for row in rows]


def test_direct_call_tf_data_and_saved_model_agree(preprocessor, real_classifier_export):
    model, _, loaded = real_classifier_export
    with pytest.warns(UnicodeWarning) as caught:
        direct = preprocessor(x=(tf.constant(TEXTS), tf.constant(PAIRS)))
    texts, pairs = [str(w.message) for w in caught]  # the texts, then the pairs
    assert texts.endswith("3 of 4 input string(s) were not valid UTF-8; each undecodable part was replaced "
                          "with U+FFFD, as in graphs and the exported SavedModel: row 0 (1 at byte 3); "
                          "row 1 (2 at byte 3, 4); row 2 (3 at byte 0, 1, 2).")
    assert pairs.endswith("2 of 4 input string(s) were not valid UTF-8; each undecodable part was replaced "
                          "with U+FFFD, as in graphs and the exported SavedModel: row 1 (1 at byte 0); "
                          "row 2 (1 at byte 10).")

    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, PAIRS)).batch(4).map(lambda a, b: preprocessor(x=(a, b)))
    through_data = next(iter(dataset))
    repaired = preprocessor(x=(_replaced(TEXTS), _replaced(PAIRS)))
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(direct[key], through_data[key])
        np.testing.assert_array_equal(direct[key], repaired[key])

    served = loaded.signatures["serving_default"](text=tf.constant(TEXTS), text_pair=tf.constant(PAIRS))
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(direct), axis=-1))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)


def test_lone_surrogates_are_replaced_and_named(preprocessor):
    # "caf\udce9" is how Python hands over the byte 0xE9 it could not decode (PEP 383).
    with pytest.warns(UnicodeWarning, match=r"x\[0\]\[0\] \(character 3\); x\[1\]\[1\] \(character 0, 1\)"):
        from_str = preprocessor(x=(["caf\udce9 au lait", "fine"], ["a drink", "\ud800\udfff"]))
    expected = preprocessor(x=(["caf\ufffd au lait", "fine"], ["a drink", "\ufffd\ufffd"]))
    np.testing.assert_array_equal(from_str["token_ids"], expected["token_ids"])


def test_python_and_graph_replacement_agree_byte_for_byte():
    cases = [b"\xe2\x82", b"a\xe2\x82b", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80",
             b"\xf0\x9f\x98x", b"\xe0\x80\x80", b"\xf8\x88\x80\x80\x80", b"ok \xef\xbf\xbd", b""]
    graph = replace_undecodable_tf(tf.constant(cases)).numpy().tolist()
    assert [replace_undecodable(case)[0].encode("utf-8") for case in cases] == graph
    assert replace_undecodable(b"a\xe2\x82b\xff") == ("a\ufffdb\ufffd", [1, 4])
    assert replace_undecodable(b"ok \xef\xbf\xbd") == ("ok \ufffd", [])  # a real U+FFFD is not a repair
