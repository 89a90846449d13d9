"""XLNetTokenizer: special ids, normalization, eager == tf.data == SavedModel, config round trip."""

import io
import os

import keras
import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from xlnet_tf.text_normalization import normalize_text
from xlnet_tf.preprocessing.xlnet_tokenizer import SPECIAL_PIECES
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

TINY_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "tiny_spiece.model")

SAMPLES = [
    "A quiet river repairs the second chapter.",
    "  The small\trobot\u00a0builds   a table (12 times)!  ",
    "Caf\u00e9 na\u00efve ``quoted'' text\u2003here",
    "\u00c9COLE \uff21\uff22 \u212b unknown \u4e2d\u6587 glyphs",
    "",
]


@pytest.fixture(scope="module")
def tokenizer():
    return XLNetTokenizer(TINY_MODEL)


def _train_plain_model(**kwargs):
    words = "alpha beta gamma delta stone river light water tree green small big".split()
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(words, size=6)) for _ in range(300)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=30, minloglevel=2, num_threads=1, **kwargs
    )
    return model.getvalue()


def test_special_ids_and_pieces(tokenizer):
    ids = (tokenizer.unk_token_id, tokenizer.start_token_id, tokenizer.end_token_id, tokenizer.cls_token_id,
           tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id, tokenizer.eod_token_id,
           tokenizer.eop_token_id)
    assert ids == tuple(range(9))
    assert [tokenizer.id_to_token(i) for i in range(9)] == list(SPECIAL_PIECES)
    assert tokenizer.special_ids == {"unk": 0, "bos": 1, "eos": 2, "cls": 3, "sep": 4, "pad": 5, "mask": 6,
                                     "eod": 7, "eop": 8}
    assert tokenizer.vocabulary_size() == 200


def test_eop_text_is_one_piece_and_control_symbols_are_not_produced(tokenizer):
    ids = list(tokenizer("the garden <eop> the museum"))
    assert ids.count(8) == 1
    # <cls>/<sep>/<eod> are control symbols: their text never maps to ids 3, 4, 7.
    ids = list(tokenizer("<cls> <sep> <eod> <mask>"))
    assert not {3, 4, 6, 7} & set(ids)


def test_matches_sentencepiece_on_normalized_text(tokenizer):
    processor = spm.SentencePieceProcessor(model_file=TINY_MODEL)
    for text in SAMPLES:
        assert list(tokenizer(text)) == processor.encode(normalize_text(text))


def test_detokenize_round_trip_on_corpus(tokenizer):
    with open(os.path.join(os.path.dirname(TINY_MODEL), "tiny_corpus.txt"), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line][:50]
    ids = tokenizer(lines)
    assert tokenizer.detokenize(ids) == lines
    assert 0 not in {i for row in ids for i in row}  # the corpus is fully covered: no <unk>


def test_normalization_options():
    cased = XLNetTokenizer(TINY_MODEL)
    uncased = XLNetTokenizer(TINY_MODEL, lowercase=True)
    assert uncased.detokenize(uncased("The Garden")) == "the garden"
    assert cased.detokenize(cased("The  garden\u00e9")) == "The gardene"
    accents = XLNetTokenizer(TINY_MODEL, keep_accents=True)
    assert list(accents("gardene\u0301")) != list(cased("gardene\u0301"))


def test_eager_tf_data_and_tf_function_agree(tokenizer):
    eager = [list(tokenizer(text)) for text in SAMPLES]
    ds = tf.data.Dataset.from_tensor_slices(SAMPLES).map(tokenizer)
    assert [list(x) for x in ds.as_numpy_iterator()] == eager
    batched = tf.data.Dataset.from_tensor_slices(SAMPLES).batch(5).map(tokenizer)
    ragged = next(iter(batched))
    assert isinstance(ragged, tf.RaggedTensor)
    assert ragged.to_list() == eager


def test_dense_outputs_pad_with_pad_id():
    tokenizer = XLNetTokenizer(TINY_MODEL, sequence_length=12)
    expected = list(XLNetTokenizer(TINY_MODEL)("the garden"))
    out = tokenizer(["the garden"])
    assert out.shape == (1, 12)
    assert list(out[0]) == expected + [5] * (12 - len(expected))
    graph_out = tf.function(tokenizer)(tf.constant(["the garden"]))
    np.testing.assert_array_equal(graph_out.numpy(), out)


def test_saved_model_round_trip(tokenizer, tmp_path):
    module = tf.Module()
    module.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(text):
        return tokenizer(text).to_tensor(default_value=tokenizer.pad_token_id)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def decode(ids):
        return tokenizer.detokenize(tf.RaggedTensor.from_tensor(ids, padding=tokenizer.pad_token_id))

    module.encode = encode
    module.decode = decode
    tf.saved_model.save(module, str(tmp_path / "saved"))
    del module
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    texts = SAMPLES[:3]
    ids = loaded.encode(tf.constant(texts))
    expected = tf.ragged.constant([list(tokenizer(t)) for t in texts]).to_tensor(default_value=5)
    np.testing.assert_array_equal(ids.numpy(), expected.numpy())
    decoded = [x.decode("utf-8") for x in loaded.decode(ids).numpy()]
    processor = spm.SentencePieceProcessor(model_file=TINY_MODEL)
    assert decoded == [processor.decode(processor.encode(normalize_text(t))) for t in texts]
    assert decoded[0] == texts[0]


def test_get_config_round_trip(tokenizer):
    config = tokenizer.get_config()
    restored = XLNetTokenizer.from_config(config)
    assert restored.get_config() == config
    assert list(restored(SAMPLES[0])) == list(tokenizer(SAMPLES[0]))
    # Full Keras serialization, in safe mode: the vocabulary travels inline, not as a path.
    uncased = XLNetTokenizer(TINY_MODEL, lowercase=True, sequence_length=7)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(uncased))
    assert isinstance(clone, XLNetTokenizer)
    assert (clone.lowercase, clone.sequence_length) == (True, 7)
    np.testing.assert_array_equal(clone(["The Garden"]), uncased(["The Garden"]))


def test_bytes_and_path_inputs_agree(tokenizer):
    with open(TINY_MODEL, "rb") as f:
        from_bytes = XLNetTokenizer(f.read())
    assert list(from_bytes(SAMPLES[1])) == list(tokenizer(SAMPLES[1]))


def test_rejects_vocabulary_without_xlnet_special_ids():
    with pytest.raises(ValueError, match=r"id 3 .* is '.*', expected '<cls>'"):
        XLNetTokenizer(_train_plain_model())
    swapped = _train_plain_model(control_symbols=["<sep>", "<cls>", "<pad>", "<mask>", "<eod>"],
                                 user_defined_symbols=["<eop>"])
    with pytest.raises(ValueError, match=r"id 3 of the SentencePiece model is '<sep>', expected '<cls>'"):
        XLNetTokenizer(swapped)


def test_missing_model_file_is_named(tmp_path):
    missing = str(tmp_path / "nope" / "spiece.model")
    with pytest.raises(ValueError, match="spiece.model' does not exist"):
        XLNetTokenizer(missing)
